"""MuZero (registered as ``muzero``): AlphaZero's search in a model the agent learns itself.

The loop (self-play, the replay buffer, the arena, checkpoints, workers) is
:mod:`rlx.games.selfplay`'s; this module is what MuZero puts into it. Three functions, one
network each (Schrittwieser et al., 2020):

    s^0 = h(o_t)                      representation: the position's planes -> latent state
    s^k, r^k = g(s^(k-1), a^k)        dynamics: latent state and action -> next state, reward
    p^k, v^k = f(s^k)                 prediction: policy logits and value of a latent state

Every latent state is scaled to [0, 1] per sample, ``s <- (s - min s) / (max s - min s)``.
The three are MLPs with LayerNorm (any board size: they read ``num_planes``, ``board_shape``
and ``num_actions`` of the game). The rules are used only at the root (which moves are legal)
and to play the chosen move; the search below the root runs in the learned model and allows
every action.

**Search.** AlphaZero's search (:func:`rlx.games.search.search`) in the model
(:class:`rlx.games.leaf_evaluators.LatentModel`): PUCT on ``Qn = (Q - min Q) / (max Q - min Q)``
over the values seen in the tree (the range starting from a board game's bounds [-1, 1]),
``Q = fpu`` for an action not tried yet, each leaf expanded by one call of ``g`` and ``f``,
and the backup ``G <- r(s, a) + gamma * (-G)`` (``gamma = 1`` for board games).

**Training.** A position ``t`` of a stored game and the ``K`` actions played after it are
unrolled through the model, and (Schrittwieser et al., 2020, eq. 1)

    L = sum_{k=0..K}  w_k [ -pi_{t+k}^T log p^k  +  c_v (z_{t+k} - v^k)^2 ]
      + sum_{k=1..K}  w_k (u_{t+k-1} - r^k)^2      +  c ||theta||^2

with ``w_0 = 1``, ``w_k = 1 / K`` for ``k >= 1``, ``c_v = vf_coef``, ``pi`` the root visit
distribution of the search, ``z`` the final outcome from the point of view of the player to
move (the n-step return of a board game, whose only reward is the last one), ``u`` the
observed reward: the outcome for the player who made the last move, 0 for every other move.
Past the end of the game the states are absorbing: value and reward targets 0, no policy
target, and random actions. The gradient that flows from step ``k + 1`` back into ``s^k`` is
halved (``s <- s / 2 + stop_gradient(s) / 2``). The L2 term is the optimiser's weight decay.
With ``augment``, each sample is seen under a random board symmetry (observation, actions and
policies transformed alike).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rlx import metrics as M
from rlx import registry
from rlx.core.checks import at_least, in_range, positive
from rlx.core.optim import gradient_step
from rlx.errors import ConfigError
from rlx.games import make, selfplay
from rlx.games.agent import SearchAgent
from rlx.games.base import Game, symmetry_permutations
from rlx.games.leaf_evaluators import LatentModel
from rlx.games.search import SearchConfig
from rlx.games.selfplay import PlayedGame, ReplayRing, SelfPlayFields, SelfPlayMethod
from rlx.runs.handle import RunHandle


# ============================================================================ config
@dataclass(frozen=True)
class MuZeroConfig(SelfPlayFields):
    """MuZero's settings: the self-play loop's (:class:`rlx.games.selfplay.SelfPlayFields`,
    with MuZero's defaults), then its own; the defaults are tuned for tic-tac-toe."""

    iterations: int = 100
    simulations: int = 30
    eval_simulations: int = 50
    c_puct: float = 1.25
    dirichlet_alpha: float = 0.3
    temperature_moves: int = 9
    buffer_size: int = 20_000
    eval_every: int = 25
    unroll_steps: int = 5
    """K, the moves unrolled through the dynamics per training sample"""
    latent_size: int = 64
    """width of the latent state s"""
    vf_coef: float = 1.0
    """c_v, the weight of the value loss"""
    gamma: float = 1.0
    """discount of the search's backup, in (0, 1] (1 for board games)"""
    fpu: float = 0.0
    """Q of an action not searched yet ("first-play urgency"), in value units (0: a draw),
    normalised like every Q"""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("unroll_steps", "latent_size"):
            at_least(self, name, 1)
        at_least(self, "vf_coef", 0)
        positive(self, "gamma")
        in_range(self, "gamma", 0.0, 1.0)  # 1 for board games
        in_range(self, "fpu", -1.0, 1.0)  # 0: a draw
        if self.buffer_size < self.batch_size:
            raise ConfigError(
                f"buffer_size={self.buffer_size} is smaller than batch_size={self.batch_size}; "
                f"use buffer_size >= {self.batch_size}."
            )
        if not self.hidden_sizes:
            raise ConfigError("hidden_sizes=() needs at least one layer (the heads read it).")

    def search(self, *, selfplay: bool) -> SearchConfig:
        """How a move is searched: in self-play with root noise, else without; Q scaled by the
        tree's range of values, from a board game's known bounds [-1, 1]."""
        return SearchConfig(
            self.simulations if selfplay else self.eval_simulations,
            self.c_puct,
            self.dirichlet_alpha if selfplay else 1.0,
            self.noise_fraction if selfplay else 0.0,
            self.fpu,
            gamma=self.gamma,
            value_bounds=BOARD_GAME_VALUES,
        )


#: the range of a board game's values and rewards, from a loss (-1) to a win (+1)
BOARD_GAME_VALUES = (-1.0, 1.0)


# Connect Four: a starting point, not tuned (the solver exists for tic-tac-toe only).
PRESETS = {
    "connect4": {
        "games_per_iteration": 64,
        "simulations": 50,
        "eval_simulations": 100,
        "temperature_moves": 10,
        "latent_size": 128,
        "hidden_sizes": (256, 256),
        "buffer_size": 100_000,
        "eval_games": 50,
        "eval_opponents": ("random", "mcts-200"),
    },
}


def make_game(env: Any, config: MuZeroConfig) -> Game:
    """The game ``env`` names (MuZero reads its planes as they are)."""
    return make(env)


# ============================================================================ networks
def _mlp(sizes: list[int]) -> nn.Sequential:
    """Linear layers, each but the last followed by LayerNorm and ReLU (with LayerNorm, the
    model of tic-tac-toe learns its rewards and values markedly faster)."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers += [nn.LayerNorm(b), nn.ReLU()]
    return nn.Sequential(*layers)


def _trunk(sizes: list[int]) -> nn.Sequential:
    """:func:`_mlp` with LayerNorm and ReLU after its last layer too, for heads to read."""
    return nn.Sequential(_mlp(sizes), nn.LayerNorm(sizes[-1]), nn.ReLU())


def scale_latent(s: Tensor) -> Tensor:
    """``(s - min s) / (max s - min s)`` per sample, so every latent state lies in [0, 1]."""
    low = s.min(dim=-1, keepdim=True).values
    high = s.max(dim=-1, keepdim=True).values
    return (s - low) / (high - low).clamp_min(1e-5)


def scale_gradient(x: Tensor, scale: float) -> Tensor:
    """``x`` in the forward pass; its gradient multiplied by ``scale`` in the backward pass."""
    return x * scale + x.detach() * (1.0 - scale)


class MuZeroNet(nn.Module):
    """The representation ``h``, dynamics ``g`` and prediction ``f`` of a game, as MLPs.

    Values and rewards are ``tanh`` outputs in [-1, 1], for the player to move (value) and for
    the player who moved (reward).
    """

    def __init__(self, game: Game, latent_size: int, hidden_sizes: tuple[int, ...]) -> None:
        super().__init__()
        rows, cols = game.board_shape
        self.num_actions = game.num_actions
        width = hidden_sizes[-1]
        self.representation = _mlp([game.num_planes * rows * cols, *hidden_sizes, latent_size])
        self.dynamics_trunk = _trunk([latent_size + game.num_actions, *hidden_sizes])
        self.dynamics_state = nn.Linear(width, latent_size)
        self.dynamics_reward = nn.Linear(width, 1)
        self.prediction_trunk = _trunk([latent_size, *hidden_sizes])
        self.policy_head = nn.Linear(width, game.num_actions)
        self.value_head = nn.Linear(width, 1)

    def represent(self, planes: Tensor) -> Tensor:
        """``s^0 = h(o)`` for planes ``[B, C, H, W]`` -> ``[B, latent]``."""
        return scale_latent(self.representation(planes.flatten(1)))

    def dynamics(self, s: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        """``(s', r) = g(s, a)`` for ``s [B, latent]`` and integer ``actions [B]``."""
        one_hot = F.one_hot(actions, self.num_actions).to(s.dtype)
        x = self.dynamics_trunk(torch.cat([s, one_hot], dim=-1))
        return scale_latent(self.dynamics_state(x)), torch.tanh(self.dynamics_reward(x))[:, 0]

    def predict(self, s: Tensor) -> tuple[Tensor, Tensor]:
        """``(policy logits [B, A], value [B]) = f(s)``."""
        x = self.prediction_trunk(s)
        return self.policy_head(x), torch.tanh(self.value_head(x))[:, 0]

    def initial_inference(self, planes: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``s^0, p^0, v^0`` of observed positions."""
        s = self.represent(planes)
        logits, value = self.predict(s)
        return s, logits, value

    def recurrent_inference(
        self, s: Tensor, actions: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``s', r, p', v'`` one move further in the model."""
        s_next, reward = self.dynamics(s, actions)
        logits, value = self.predict(s_next)
        return s_next, reward, logits, value


def make_net(game: Game, config: MuZeroConfig) -> MuZeroNet:
    return MuZeroNet(game, config.latent_size, config.hidden_sizes)


# ============================================================================ targets
@dataclass
class UnrollTargets:
    """Training targets of positions, each with ``K`` moves unrolled after it."""

    observations: np.ndarray  # [N, C, H, W]
    actions: np.ndarray  # [N, K]: a_{t+k}, random past the end
    rewards: np.ndarray  # [N, K]: u_{t+k}, 0 past the end
    values: np.ndarray  # [N, K + 1]: z_{t+k}, 0 from the end on
    policies: np.ndarray  # [N, K + 1, A]: pi_{t+k}, zeros from the end on
    policy_mask: np.ndarray  # [N, K + 1]: 1 where pi_{t+k} exists

    FIELDS = ("observations", "actions", "rewards", "values", "policies", "policy_mask")

    def rows(self) -> dict[str, np.ndarray]:
        return {f: getattr(self, f) for f in self.FIELDS}


def rewards_and_values(played: PlayedGame) -> tuple[np.ndarray, np.ndarray]:
    """``u_t``, the reward of move ``t`` for the player who made it (the result for the last
    mover, 0 before), and ``z_t = result * to_play_t``, the outcome for the player to move."""
    sign = played.to_play.astype(np.float32)
    rewards = np.zeros(len(played.actions), dtype=np.float32)
    rewards[-1] = played.result * sign[-1]
    return rewards, (played.result * sign).astype(np.float32)


def unroll_targets(
    played: PlayedGame, unroll_steps: int, rng: np.random.Generator
) -> UnrollTargets:
    """The targets of every position ``t`` of a game, ``K = unroll_steps`` moves ahead.

    Past the game's end (``t + k >= T``) the state is absorbing: value, reward and policy
    targets are 0 (the policy is masked out of the loss) and the actions are random.
    """
    t_len, k = len(played.actions), unroll_steps
    num_actions = played.policies.shape[1]
    rewards, values = rewards_and_values(played)
    actions = np.concatenate([played.actions, rng.integers(0, num_actions, size=k)])
    rewards = np.concatenate([rewards, np.zeros(k, dtype=np.float32)])
    values = np.concatenate([values, np.zeros(k + 1, dtype=np.float32)])
    policies = np.concatenate([played.policies, np.zeros((k + 1, num_actions), dtype=np.float32)])
    mask = np.concatenate([np.ones(t_len), np.zeros(k + 1)]).astype(np.float32)
    starts = np.arange(t_len)[:, None]
    steps, steps_1 = starts + np.arange(k), starts + np.arange(k + 1)
    return UnrollTargets(
        played.planes.copy(),
        actions[steps],
        rewards[steps],
        values[steps_1],
        policies[steps_1],
        mask[steps_1],
    )


def augment(
    batch: UnrollTargets, cell_perms: np.ndarray, action_perms: np.ndarray, which: np.ndarray
) -> UnrollTargets:
    """Each sample ``i`` under symmetry ``which[i]`` (:func:`rlx.games.base.symmetry_permutations`):
    the observation's cells and the policies permuted, each action mapped to its image."""
    n, planes = batch.observations.shape[:2]
    flat = batch.observations.reshape(n, planes, -1)
    cells = np.broadcast_to(cell_perms[which][:, None, :], flat.shape)
    observations = np.take_along_axis(flat, cells, axis=2).reshape(batch.observations.shape)
    perm = action_perms[which]  # [N, A]
    policies = np.take_along_axis(batch.policies, perm[:, None, :], axis=2)
    image = np.argsort(perm, axis=1)  # image[a] = i with perm[i] = a
    actions = np.take_along_axis(image, batch.actions, axis=1)
    return UnrollTargets(
        observations, actions, batch.rewards, batch.values, policies, batch.policy_mask
    )


def make_buffer(game: Game, config: MuZeroConfig) -> ReplayRing:
    """A ring of ``buffer_size`` positions with their :class:`UnrollTargets`."""
    k, a = config.unroll_steps, game.num_actions
    return ReplayRing(config.buffer_size, {
        "observations": ((game.num_planes, *game.board_shape), np.float32),
        "actions": ((k,), np.int64), "rewards": ((k,), np.float32),
        "values": ((k + 1,), np.float32), "policies": ((k + 1, a), np.float32),
        "policy_mask": ((k + 1,), np.float32),
    })  # fmt: skip


def store(
    buffer: ReplayRing,
    game: Game,
    games: list[PlayedGame],
    config: MuZeroConfig,
    rng: np.random.Generator,
) -> None:
    """The :func:`unroll_targets` of each played game into the buffer, game after game."""
    for played in games:
        buffer.add(**unroll_targets(played, config.unroll_steps, rng).rows())


# ============================================================================ loss, update
def unroll(net: MuZeroNet, observations: Tensor, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Policy logits ``[B, K+1, A]``, values ``[B, K+1]`` and rewards ``[B, K]`` along the
    actions ``[B, K]``; the gradient into each latent state from the next step is halved."""
    batch, k = actions.shape
    s = net.represent(observations)
    latents, rewards = [s], []
    for step in range(k):
        s, reward = net.dynamics(s, actions[:, step])
        latents.append(s)
        rewards.append(reward)
        s = scale_gradient(s, 0.5)
    logits, values = net.predict(torch.cat(latents))  # f on every step at once
    logits = logits.view(k + 1, batch, -1).transpose(0, 1)
    return logits, values.view(k + 1, batch).T, torch.stack(rewards, 1)


def muzero_loss(
    logits: Tensor,
    values: Tensor,
    rewards: Tensor,
    target_policies: Tensor,
    policy_mask: Tensor,
    target_values: Tensor,
    target_rewards: Tensor,
    vf_coef: float = 1.0,
) -> tuple[Tensor, dict[str, Tensor]]:
    """The unrolled loss (module docstring), averaged over the batch; step 0 weighs 1 and each
    of the ``K`` later steps ``1 / K``.

    Shapes: ``logits``, ``target_policies`` ``[B, K+1, A]``; ``values``, ``target_values``,
    ``policy_mask`` ``[B, K+1]``; ``rewards``, ``target_rewards`` ``[B, K]``.
    """
    k = rewards.shape[1]
    weights = torch.full((k + 1,), 1.0 / max(k, 1), dtype=values.dtype)
    weights[0] = 1.0
    cross_entropy = -(target_policies * F.log_softmax(logits, -1)).sum(-1) * policy_mask
    policy_loss = (cross_entropy.mean(0) * weights).sum()
    value_loss = ((target_values - values) ** 2).mean(0).mul(weights).sum()
    reward_loss = ((target_rewards - rewards) ** 2).mean(0).mul(weights[1:]).sum()
    loss = policy_loss + vf_coef * value_loss + reward_loss
    return loss, {M.POLICY_LOSS: policy_loss, M.VALUE_LOSS: value_loss, M.REWARD_LOSS: reward_loss}


def as_tensors(batch: UnrollTargets, device: torch.device | None = None) -> dict[str, Tensor]:
    return {
        f: torch.from_numpy(np.ascontiguousarray(getattr(batch, f))).to(device)
        for f in batch.FIELDS
    }


def train_network(
    net: MuZeroNet,
    optimizer: torch.optim.Optimizer,
    buffer: ReplayRing,
    game: Game,
    config: MuZeroConfig,
    rng: np.random.Generator,
) -> dict[str, float]:
    """``train_steps_per_iteration`` gradient steps on replayed positions; the mean losses."""
    device = next(net.parameters()).device
    totals = torch.zeros(4, device=device)  # read once, after the steps
    cell_perms, action_perms = symmetry_permutations(game)
    for _ in range(config.train_steps_per_iteration):
        batch = UnrollTargets(**buffer.sample(config.batch_size, rng))
        if config.augment and len(cell_perms) > 1:
            which = rng.integers(0, len(cell_perms), size=config.batch_size)
            batch = augment(batch, cell_perms, action_perms, which)
        t = as_tensors(batch, device)
        logits, values, rewards = unroll(net, t["observations"], t["actions"])
        loss, parts = muzero_loss(
            logits, values, rewards, t["policies"], t["policy_mask"], t["values"],
            t["rewards"], config.vf_coef,
        )  # fmt: skip
        gradient_step(optimizer, loss)
        totals += torch.stack([loss.detach(), *(parts[m].detach() for m in LOSSES)])
    means = (totals / max(config.train_steps_per_iteration, 1)).tolist()
    return dict(zip((M.LOSS, *LOSSES), means, strict=True))


LOSSES = (M.POLICY_LOSS, M.VALUE_LOSS, M.REWARD_LOSS)


# ============================================================================ registration
METHOD = SelfPlayMethod(
    name="muzero",
    title="MuZero",
    make_game=make_game,
    make_net=make_net,
    evaluator=LatentModel,
    make_buffer=make_buffer,
    store=store,
    update=train_network,
)


def train(
    config: MuZeroConfig,
    env: Any,
    run: RunHandle,
    remote: selfplay.RemoteSelfPlayFactory | None = None,
) -> SearchAgent:
    """Train MuZero on the game ``env`` names inside an open :class:`rlx.runs.Run`: the
    self-play loop (:func:`rlx.games.selfplay.train`) with this module's networks, targets and
    loss; with ``runners``, self-play runs on the workers that ``remote`` starts."""
    return selfplay.train(METHOD, config, env, run, remote)


def load(config: MuZeroConfig, env_id: str, state: dict[str, Any]) -> SearchAgent:
    """The agent of a checkpoint's state (``rlx.load(run_dir)``)."""
    return selfplay.load(METHOD, config, env_id, state)


registry.register(
    registry.Algorithm(
        name="muzero",
        config=MuZeroConfig,
        train=train,
        load=load,
        budget_field="iterations",
        unit="iterations",
        presets=PRESETS,
        renamed={
            "lr": "learning_rate",
            "hidden": "hidden_sizes",
            "discount": "gamma",
            "value_loss_weight": "vf_coef",
        },
        remote="self-play",
    )
)
