"""MuZero (registered as ``muzero``): AlphaZero's search in a model the agent learns itself.

Three functions, one network each (Schrittwieser et al., 2020):

    s^0 = h(o_t)                      representation: the position's planes -> latent state
    s^k, r^k = g(s^(k-1), a^k)        dynamics: latent state and action -> next state, reward
    p^k, v^k = f(s^k)                 prediction: policy logits and value of a latent state

Every latent state is scaled to [0, 1] per sample, ``s <- (s - min s) / (max s - min s)``.
The three are MLPs with LayerNorm (any board size: they read ``num_planes``, ``board_shape``
and ``num_actions`` of the game). The rules are used only at the root (which moves are legal)
and to play the chosen move; the search below the root runs in the learned model and allows
every action.

**Search.** AlphaZero's search (:func:`rlx.games.search.search`) with the model as its
evaluator (:class:`LatentModel`). Each simulation walks from the root by PUCT

    a* = argmax_a  Qn(s, a) + c_puct * P(s, a) * sqrt(sum_b N(s, b)) / (1 + N(s, a))

with ``Qn = (Q - min Q) / (max Q - min Q)`` over the values seen in this tree, the range
starting from the known bounds [-1, 1] of a board game's values, and ``Q = fpu`` (0, a draw)
for an action not tried yet. The leaf is expanded with one call of ``g`` and ``f`` and its
value backed up. Each node's statistics are from the point of view of its player to move, and
``r`` is the reward of the player who moved, so along the path, from the leaf up (discount
``gamma = 1`` for board games):

    G <- r(s, a) + gamma * (-G),     N(s, a) <- N(s, a) + 1,     W(s, a) <- W(s, a) + G,
    Q(s, a) = W(s, a) / N(s, a)

Self-play adds Dirichlet noise to the root prior and draws its first ``temperature_moves``
moves from ``pi ∝ N`` (the most visited move after them); the trees of all the games of an
iteration grow in lockstep, so every simulation step is one batched call of the networks.

**Training.** A position ``t`` of a stored game and the ``K`` actions played after it are
unrolled through the model, and (Schrittwieser et al., 2020, eq. 1)

    L = sum_{k=0..K}  w_k [ -pi_{t+k}^T log p^k  +  c_v (z_{t+k} - v^k)^2 ]
      + sum_{k=1..K}  w_k (u_{t+k-1} - r^k)^2      +  c ||theta||^2

with ``w_0 = 1``, ``w_k = 1 / K`` for ``k >= 1``, ``pi`` the root visit distribution of the
search, ``z`` the final outcome from the point of view of the player to move (the n-step
return of a board game, whose only reward is the last one), ``u`` the observed reward: 1 for
the move that wins, 0 otherwise. Past the end of the game the states are absorbing: value and
reward targets 0, no policy target, and random actions. The gradient that flows from step
``k + 1`` back into ``s^k`` is halved (``s <- s / 2 + stop_gradient(s) / 2``). The L2 term
is the optimiser's weight decay. With ``augment``, each sample is seen under a random board
symmetry (observation, actions and policies transformed alike).

A checkpoint holds the networks, the optimiser, the replay buffer, the random generators and
the iteration; a resumed run continues as the uninterrupted one would have.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rlx import metrics as M
from rlx import registry
from rlx.core.checks import at_least, in_range, positive
from rlx.core.devices import check_device, resolve_device
from rlx.core.seeding import rng_state, seed_everything, set_rng_state
from rlx.errors import CheckpointError, ConfigError
from rlx.games import make
from rlx.games.base import Game, GameState, check_same_game
from rlx.games.evaluation import arena, arena_metrics, check_opponents
from rlx.games.evaluators import Leaf
from rlx.games.search import SearchConfig, choose, search, visit_policy


# ============================================================================ config
@dataclass(frozen=True)
class MuZeroConfig:
    """MuZero's settings; the defaults are tuned for tic-tac-toe.

    Attributes:
        iterations: self-play + training rounds (the budget).
        games_per_iteration: self-play games per iteration, searched together in one batch.
        simulations: latent-space MCTS simulations per self-play move.
        eval_simulations: simulations per move when the agent plays (arena, ``act``).
        unroll_steps: ``K``, the moves unrolled through the dynamics per training sample.
        batch_size: positions per gradient step.
        train_steps_per_iteration: gradient steps per iteration.
        learning_rate: Adam's step size.
        weight_decay: ``c`` of the L2 term (coupled, as Adam's ``weight_decay``).
        value_loss_weight: ``c_v``, the weight of the value loss.
        buffer_size: positions kept in the replay buffer (the oldest leave first).
        discount: ``gamma`` of the backup and the targets (1 for board games).
        c_puct: exploration weight of the prior in PUCT.
        fpu: Q of an action not searched yet ("first-play urgency"), in value units (0: a
            draw), normalised like every Q.
        dirichlet_alpha: root noise concentration (about 10 / typical number of legal moves).
        noise_fraction: share of the root prior replaced by noise in self-play.
        temperature_moves: plies played by sampling ``pi ∝ N``; later plies take the most
            visited move.
        augment: train on a random board symmetry of each sample (observation, actions and
            policies transformed alike).
        latent_size: width of the latent state ``s``.
        hidden: hidden layer sizes of each of the three MLPs ``h``, ``g`` and ``f``.
        eval_every: iterations between arena evaluations (the last iteration always has one).
        eval_games: games against each opponent per evaluation (seats alternate).
        eval_opponents: ``random``, ``mcts-K`` (pure MCTS with K rollout simulations) or
            ``solver`` (perfect play, tic-tac-toe only).
        seed: seeds the networks, self-play, the replay sampling and the arena.
        device: where the networks learn and evaluate positions: auto (CUDA, then MPS, then
            the CPU), cpu, cuda, cuda:N or mps (:mod:`rlx.core.devices`).
    """

    iterations: int = 100
    games_per_iteration: int = 64
    simulations: int = 30
    eval_simulations: int = 50
    unroll_steps: int = 5
    batch_size: int = 256
    train_steps_per_iteration: int = 100
    learning_rate: float = 2e-3
    weight_decay: float = 1e-4
    value_loss_weight: float = 1.0
    buffer_size: int = 20_000
    discount: float = 1.0
    c_puct: float = 1.25
    fpu: float = 0.0
    dirichlet_alpha: float = 0.3
    noise_fraction: float = 0.25
    temperature_moves: int = 9
    augment: bool = True
    latent_size: int = 64
    hidden: tuple[int, ...] = (128, 128)
    eval_every: int = 25
    eval_games: int = 100
    eval_opponents: tuple[str, ...] = ("random", "solver")
    seed: int = 0
    device: str = "auto"

    def __post_init__(self) -> None:
        check_device(self)
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        object.__setattr__(self, "eval_opponents", tuple(self.eval_opponents))
        for name in ("iterations", "games_per_iteration", "simulations", "unroll_steps",
                     "eval_simulations", "batch_size", "eval_every", "latent_size"):  # fmt: skip
            at_least(self, name, 1)
        for name in ("train_steps_per_iteration", "temperature_moves", "eval_games",
                     "weight_decay", "value_loss_weight"):  # fmt: skip
            at_least(self, name, 0)
        for name in ("learning_rate", "c_puct", "dirichlet_alpha", "discount"):
            positive(self, name)
        if self.buffer_size < self.batch_size:
            raise ConfigError(
                f"buffer_size={self.buffer_size} is smaller than batch_size={self.batch_size}; "
                f"use buffer_size >= {self.batch_size}."
            )
        in_range(self, "noise_fraction", 0.0, 1.0)
        in_range(self, "discount", 0.0, 1.0)  # 1 for board games
        in_range(self, "fpu", -1.0, 1.0)  # 0: a draw
        if not self.hidden or min(self.hidden) < 1:
            raise ConfigError(f"hidden={self.hidden} needs at least one layer, each of width >= 1.")

    def search(self, *, selfplay: bool) -> SearchConfig:
        """How a move is searched: in self-play with root noise, else without; Q scaled by the
        tree's range of values, from a board game's known bounds [-1, 1]."""
        return SearchConfig(
            self.simulations if selfplay else self.eval_simulations,
            self.c_puct,
            self.dirichlet_alpha if selfplay else 1.0,
            self.noise_fraction if selfplay else 0.0,
            self.fpu,
            discount=self.discount,
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
        "hidden": (256, 256),
        "buffer_size": 100_000,
        "eval_games": 50,
        "eval_opponents": ("random", "mcts-200"),
    },
}


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

    def __init__(self, game: Game, latent_size: int, hidden: tuple[int, ...]) -> None:
        super().__init__()
        rows, cols = game.board_shape
        self.num_actions = game.num_actions
        width = hidden[-1]
        self.representation = _mlp([game.num_planes * rows * cols, *hidden, latent_size])
        self.dynamics_trunk = _trunk([latent_size + game.num_actions, *hidden])
        self.dynamics_state = nn.Linear(width, latent_size)
        self.dynamics_reward = nn.Linear(width, 1)
        self.prediction_trunk = _trunk([latent_size, *hidden])
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


# ============================================================================ latent search
def _softmax(logits: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Softmax over the last axis (over ``mask``'s True entries only, when given)."""
    logits = np.asarray(logits, dtype=np.float64)
    if mask is not None:
        logits = np.where(mask, logits, -np.inf)
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


class LatentModel:
    """The search's evaluator in the learned model (:mod:`rlx.games.evaluators`): a root is
    ``s^0, p^0 = h(o), f(h(o))`` with the prior over the legal moves; beyond the tree,
    ``s', r = g(s, a)`` and ``p', v' = f(s')``, every action allowed (the model has no rules).

    ``net`` is a :class:`MuZeroNet`, or anything with its ``initial_inference`` and
    ``recurrent_inference``.
    """

    def __init__(self, net: Any) -> None:
        self.net = net
        # the search keeps latent states on the host: one transfer each way per batch
        parameters = net.parameters() if isinstance(net, nn.Module) else iter(())
        self.device = next(parameters, torch.zeros(())).device

    def roots(self, game: Game, states: Sequence[GameState], rng: np.random.Generator) -> list:
        planes = torch.from_numpy(game.encode_batch(states)).to(self.device)
        legal = np.stack([game.legal_mask(s) for s in states])
        with torch.inference_mode():
            hidden, logits, _ = self.net.initial_inference(planes)
        priors = _softmax(logits.cpu().numpy(), legal)
        rows = zip(hidden.cpu().numpy(), legal, priors, strict=True)
        return [Leaf(h, 0.0, mask, prior) for h, mask, prior in rows]

    def leaves(
        self,
        game: Game,
        positions: Sequence[np.ndarray],
        actions: Sequence[int],
        rng: np.random.Generator,
    ) -> list:
        parents = torch.from_numpy(np.stack(positions)).to(self.device)
        with torch.inference_mode():
            s_next, rewards, logits, values = self.net.recurrent_inference(
                parents, torch.tensor(actions, device=self.device)
            )
        priors = _softmax(logits.cpu().numpy())
        everything = np.ones(game.num_actions, dtype=bool)
        s_next, values, rewards = (x.cpu().numpy() for x in (s_next, values, rewards))
        rows = zip(s_next, values, priors, rewards, strict=True)
        return [Leaf(s, float(v), everything, prior, reward=r) for s, v, prior, r in rows]


# ============================================================================ replay
@dataclass
class Trajectory:
    """One self-play game: per move the observation, the action, the root visit distribution,
    the reward of the mover and the final outcome from the mover's point of view."""

    observations: np.ndarray  # [T, C, H, W]
    actions: np.ndarray  # [T]
    policies: np.ndarray  # [T, A]
    rewards: np.ndarray  # [T]: u_t, for the player who made move t
    values: np.ndarray  # [T]: z_t, for the player to move at t


def trajectory(
    observations: list[np.ndarray],
    actions: list[int],
    policies: list[np.ndarray],
    to_play: list[int],
    result: int,
) -> Trajectory:
    """A finished game as a :class:`Trajectory`: ``z_t = result * to_play_t``; the last move's
    reward is its outcome for the mover, every other reward 0."""
    sign = np.asarray(to_play, dtype=np.float32)
    rewards = np.zeros(len(actions), dtype=np.float32)
    rewards[-1] = result * sign[-1]
    return Trajectory(
        np.stack(observations).astype(np.float32),
        np.asarray(actions, dtype=np.int64),
        np.stack(policies).astype(np.float32),
        rewards,
        (result * sign).astype(np.float32),
    )


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

    def __getitem__(self, index: Any) -> UnrollTargets:
        return UnrollTargets(*(getattr(self, f)[index] for f in self.FIELDS))


def unroll_targets(
    game_record: Trajectory, unroll_steps: int, rng: np.random.Generator
) -> UnrollTargets:
    """The targets of every position ``t`` of a game, ``K = unroll_steps`` moves ahead.

    Past the game's end (``t + k >= T``) the state is absorbing: value, reward and policy
    targets are 0 (the policy is masked out of the loss) and the actions are random.
    """
    t_len, k = len(game_record.actions), unroll_steps
    num_actions = game_record.policies.shape[1]
    actions = np.concatenate([game_record.actions, rng.integers(0, num_actions, size=k)])
    rewards = np.concatenate([game_record.rewards, np.zeros(k, dtype=np.float32)])
    values = np.concatenate([game_record.values, np.zeros(k + 1, dtype=np.float32)])
    policies = np.concatenate(
        [game_record.policies, np.zeros((k + 1, num_actions), dtype=np.float32)]
    )
    mask = np.concatenate([np.ones(t_len), np.zeros(k + 1)]).astype(np.float32)
    starts = np.arange(t_len)[:, None]
    steps, steps_1 = starts + np.arange(k), starts + np.arange(k + 1)
    return UnrollTargets(
        game_record.observations.copy(),
        actions[steps],
        rewards[steps],
        values[steps_1],
        policies[steps_1],
        mask[steps_1],
    )


def symmetry_permutations(game: Game) -> tuple[np.ndarray, np.ndarray]:
    """The game's symmetries as permutations: cells ``[S, H*W]`` and actions ``[S, A]``, with
    ``new[..., i] = old[..., perm[i]]``. Only the identity when a symmetry is not a
    permutation of cells and actions."""
    rows, cols = game.board_shape
    cells = np.broadcast_to(
        np.arange(rows * cols, dtype=np.float32).reshape(1, rows, cols),
        (game.num_planes, rows, cols),
    ).copy()
    actions = np.arange(game.num_actions, dtype=np.float32)
    cell_perms, action_perms = [], []
    for planes, policy in game.symmetries(cells, actions):
        cell_perm = np.rint(np.asarray(planes)[0]).astype(np.int64).reshape(-1)
        action_perm = np.rint(np.asarray(policy)).astype(np.int64).reshape(-1)
        if sorted(cell_perm) != list(range(rows * cols)) or sorted(action_perm) != list(
            range(game.num_actions)
        ):
            return np.arange(rows * cols)[None], np.arange(game.num_actions)[None]
        cell_perms.append(cell_perm)
        action_perms.append(action_perm)
    return np.stack(cell_perms), np.stack(action_perms)


def augment(
    batch: UnrollTargets, cell_perms: np.ndarray, action_perms: np.ndarray, which: np.ndarray
) -> UnrollTargets:
    """Each sample ``i`` under symmetry ``which[i]``: the observation's cells and the policies
    permuted, each action mapped to its image."""
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


class ReplayBuffer:
    """A ring of positions with their unroll targets; samples uniformly over positions."""

    def __init__(self, capacity: int, game: Game, unroll_steps: int) -> None:
        rows, cols = game.board_shape
        k, a = unroll_steps, game.num_actions
        self.data = UnrollTargets(
            np.zeros((capacity, game.num_planes, rows, cols), dtype=np.float32),
            np.zeros((capacity, k), dtype=np.int64),
            np.zeros((capacity, k), dtype=np.float32),
            np.zeros((capacity, k + 1), dtype=np.float32),
            np.zeros((capacity, k + 1, a), dtype=np.float32),
            np.zeros((capacity, k + 1), dtype=np.float32),
        )
        self.capacity, self.size, self.cursor = capacity, 0, 0

    def add(self, targets: UnrollTargets) -> None:
        targets = targets[-self.capacity :]
        n = len(targets.actions)
        index = (self.cursor + np.arange(n)) % self.capacity
        for f in UnrollTargets.FIELDS:
            getattr(self.data, f)[index] = getattr(targets, f)
        self.cursor = int((self.cursor + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)

    def sample(self, n: int, rng: np.random.Generator) -> UnrollTargets:
        return self.data[rng.integers(0, self.size, size=n)]

    def state(self) -> dict[str, Any]:
        return {
            **{f: getattr(self.data, f)[: self.size].copy() for f in UnrollTargets.FIELDS},
            "cursor": self.cursor,
        }

    def restore(self, state: dict[str, Any]) -> None:
        n = len(state["actions"])
        for f in UnrollTargets.FIELDS:
            getattr(self.data, f)[:n] = state[f]
        self.size, self.cursor = n, int(state["cursor"])


# ============================================================================ self-play
@dataclass
class SelfPlayResult:
    games: list[Trajectory]
    results: list[int]


def self_play(
    game: Game, net: MuZeroNet, config: MuZeroConfig, rng: np.random.Generator
) -> SelfPlayResult:
    """``games_per_iteration`` games played together, every move searched in the model."""
    settings, model = config.search(selfplay=True), LatentModel(net)
    states = [game.initial_state() for _ in range(config.games_per_iteration)]
    records: list[tuple[list, list, list, list]] = [([], [], [], []) for _ in states]
    net.eval()
    while open_games := [i for i, s in enumerate(states) if not s.is_terminal]:
        counts = search(game, [states[i] for i in open_games], model, settings, rng).counts
        for i, n in zip(open_games, counts, strict=True):
            state = states[i]
            temperature = 1.0 if state.moves < config.temperature_moves else 0.0
            action = choose(n, temperature, rng)
            observations, actions, policies, to_play = records[i]
            observations.append(game.encode(state))
            actions.append(action)
            policies.append(visit_policy(n, 1.0))
            to_play.append(state.to_play)
            states[i] = game.play(state, action)
    games = [
        trajectory(*record, result=int(final.result))
        for record, final in zip(records, states, strict=True)
    ]
    return SelfPlayResult(games, [int(s.result) for s in states])


# ============================================================================ update
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
    value_loss_weight: float = 1.0,
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
    loss = policy_loss + value_loss_weight * value_loss + reward_loss
    return loss, {
        M.POLICY_LOSS: policy_loss,
        M.VALUE_LOSS: value_loss,
        "reward_loss": reward_loss,
    }


def _as_tensors(batch: UnrollTargets, device: torch.device | None = None) -> dict[str, Tensor]:
    return {
        f: torch.from_numpy(np.ascontiguousarray(getattr(batch, f))).to(device)
        for f in batch.FIELDS
    }


def train_network(
    net: MuZeroNet,
    optimizer: torch.optim.Optimizer,
    buffer: ReplayBuffer,
    config: MuZeroConfig,
    rng: np.random.Generator,
    symmetries: tuple[np.ndarray, np.ndarray],
) -> dict[str, float]:
    """``train_steps_per_iteration`` gradient steps on replayed positions; the mean losses."""
    net.train()
    device = next(net.parameters()).device
    totals = torch.zeros(4, device=device)  # read once, after the steps
    cell_perms, action_perms = symmetries
    for _ in range(config.train_steps_per_iteration):
        batch = buffer.sample(config.batch_size, rng)
        if config.augment and len(cell_perms) > 1:
            which = rng.integers(0, len(cell_perms), size=config.batch_size)
            batch = augment(batch, cell_perms, action_perms, which)
        t = _as_tensors(batch, device)
        logits, values, rewards = unroll(net, t["observations"], t["actions"])
        loss, parts = muzero_loss(
            logits, values, rewards, t["policies"], t["policy_mask"], t["values"],
            t["rewards"], config.value_loss_weight,
        )  # fmt: skip
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        totals += torch.stack(
            [
                loss.detach(),
                *(parts[m].detach() for m in (M.POLICY_LOSS, M.VALUE_LOSS, "reward_loss")),
            ]
        )
    net.eval()
    loss, policy_loss, value_loss, reward_loss = (
        totals / max(config.train_steps_per_iteration, 1)
    ).tolist()
    return {
        M.LOSS: loss,
        M.POLICY_LOSS: policy_loss,
        M.VALUE_LOSS: value_loss,
        "reward_loss": reward_loss,
    }


# ============================================================================ the agent
class MuZeroAgent:
    """A trained MuZero player (a :class:`rlx.core.agent.GameAgent`): ``agent.act(state)``
    searches the learned model (no noise) and plays the most visited move; ``agent(state)`` is
    the same, so an agent is an arena player."""

    def __init__(self, game: Game, net: MuZeroNet, config: MuZeroConfig) -> None:
        self.game, self.net, self.config = game, net.eval(), config
        self.rng = np.random.default_rng(config.seed)
        self.run_dir = None

    def search_batch(
        self, states: Sequence[GameState], simulations: int | None = None
    ) -> np.ndarray:
        """The root visit counts ``[B, A]`` of a search of ``states`` (none terminal)."""
        if any(s.is_terminal for s in states):
            raise ConfigError("the game is over; there is no move to choose.")
        config = self.config.search(selfplay=False)
        if simulations is not None:
            config = dataclasses.replace(config, simulations=simulations)
        return search(self.game, states, LatentModel(self.net), config, self.rng).counts

    def search(self, state: GameState, simulations: int | None = None) -> np.ndarray:
        """The root visit counts of a search of ``state`` (not a terminal one)."""
        return self.search_batch([state], simulations)[0]

    def act(
        self, state: GameState, deterministic: bool = True, *, simulations: int | None = None
    ) -> int:
        """The move to play in ``state``: the most visited root action, or with
        ``deterministic=False`` one drawn from ``pi ∝ N``."""
        return self.act_batch([state], deterministic, simulations=simulations)[0]

    def act_batch(
        self,
        states: Sequence[GameState],
        deterministic: bool = True,
        *,
        simulations: int | None = None,
    ) -> list[int]:
        """:meth:`act` for several positions, searched together."""
        temperature = 0.0 if deterministic else 1.0
        counts = self.search_batch(states, simulations)
        return [choose(n, temperature, self.rng) for n in counts]

    def __call__(self, state: GameState) -> int:
        return self.act(state)

    def __repr__(self) -> str:
        return f"MuZeroAgent(game={self.game.name}, simulations={self.config.eval_simulations})"


# ============================================================================ training
def train(config: MuZeroConfig, env: Any, run: Any) -> MuZeroAgent:
    """Self-play, train and evaluate for ``config.iterations`` iterations inside ``run``."""
    game = make(env)
    check_opponents(game, config.eval_opponents)
    rng = seed_everything(config.seed)
    net = MuZeroNet(game, config.latent_size, config.hidden).to(resolve_device(config.device))
    optimizer = torch.optim.Adam(
        net.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay
    )
    buffer = ReplayBuffer(config.buffer_size, game, config.unroll_steps)
    symmetries = symmetry_permutations(game)
    iteration = 0
    if run.resumed_state is not None:
        iteration = _restore(run.resumed_state, game, net, optimizer, buffer, rng)
    agent = MuZeroAgent(game, net, config)
    last_arena: dict[str, float] = {}
    while iteration < config.iterations and not run.stop_requested:
        t0 = time.perf_counter()
        played = self_play(game, net, config, rng)
        for record in played.games:
            buffer.add(unroll_targets(record, config.unroll_steps, rng))
        t1 = time.perf_counter()
        metrics = train_network(net, optimizer, buffer, config, rng, symmetries)
        iteration += 1
        metrics.update(_selfplay_metrics(played, time.perf_counter() - t1, t1 - t0))
        if iteration % config.eval_every == 0 or iteration == config.iterations:
            last_arena = _evaluate(agent, config, iteration)
            metrics.update(last_arena)
        run.log(iteration, metrics)
        run.update_progress(iteration)
        if run.checkpoint_due():
            run.save_checkpoint(iteration, _state(game, net, optimizer, buffer, rng, iteration))
    run.save_checkpoint(iteration, _state(game, net, optimizer, buffer, rng, iteration))
    if not last_arena and iteration > 0 and not run.stop_requested:  # resumed at the end
        last_arena = _evaluate(agent, config, iteration)
    run.finish(iteration, {"game": game.name, **last_arena})
    return agent


def _evaluate(agent: MuZeroAgent, config: MuZeroConfig, iteration: int) -> dict[str, float]:
    """Arena rates against every opponent; the agent's tie-breaking is seeded per evaluation,
    so evaluating never changes what training does."""
    if config.eval_games == 0 or not config.eval_opponents:
        return {}
    agent.rng = np.random.default_rng(config.seed + iteration)
    results = arena(agent.game, agent, config.eval_opponents, config.eval_games, config.seed)
    return arena_metrics(results)


def _selfplay_metrics(played: SelfPlayResult, train_s: float, selfplay_s: float) -> dict:
    results = np.asarray(played.results)
    return {
        "game_length": float(np.mean([len(g.actions) for g in played.games])),
        "first_player_win": float(np.mean(results == 1)),
        "draw": float(np.mean(results == 0)),
        "selfplay_s": selfplay_s,
        "train_s": train_s,
    }


def _state(game, net, optimizer, buffer, rng, iteration) -> dict[str, Any]:
    return {
        "game": game.name,
        "muzero": net.state_dict(),
        "optimizer": optimizer.state_dict(),
        "buffer": buffer.state(),
        "rng": rng_state(rng),
        "iteration": iteration,
    }


def _restore(state, game, net, optimizer, buffer, rng) -> int:
    _check_checkpoint(state, game)
    try:
        net.load_state_dict(state["muzero"])
        optimizer.load_state_dict(state["optimizer"])
    except (KeyError, RuntimeError, ValueError) as exc:
        raise CheckpointError(
            f"the checkpoint does not match this MuZero config ({type(exc).__name__}); "
            "resume with the run's own config."
        ) from exc
    buffer.restore(state["buffer"])
    set_rng_state(state["rng"], rng)
    return int(state["iteration"])


def _check_checkpoint(state: dict[str, Any], game: Game) -> None:
    if "muzero" not in state:
        raise CheckpointError("this checkpoint holds no MuZero networks; load a muzero run.")
    check_same_game(game.name, state["game"], "this MuZero checkpoint")


def load(config: MuZeroConfig, env_id: str, state: dict[str, Any]) -> MuZeroAgent:
    """The agent of a checkpoint's state (``rlx.load(run_dir)``)."""
    game = make(env_id)
    _check_checkpoint(state, game)
    net = MuZeroNet(game, config.latent_size, config.hidden)
    try:
        net.load_state_dict(state["muzero"])
    except RuntimeError as exc:
        raise CheckpointError(
            "the checkpoint's networks do not match its config (latent_size, hidden)."
        ) from exc
    return MuZeroAgent(game, net, config)


registry.register(
    registry.Algorithm(
        name="muzero",
        config=MuZeroConfig,
        train=train,
        load=load,
        budget_field="iterations",
        unit="iterations",
        presets=PRESETS,
        renamed={"lr": "learning_rate"},
    )
)
