"""AlphaZero (registered as ``alphazero``): self-play with MCTS, then fit the network to it.

The loop (self-play, the replay buffer, the arena, checkpoints, workers) is
:mod:`rlx.games.selfplay`'s; this module is what AlphaZero puts into it (Silver et al., 2018):

- **Network.** ``(p, v) = f_theta(s)``: policy logits and a value in [-1, 1] for the player to
  move, from the position as the mover sees it (:meth:`Game.encode`), so one network plays both
  seats. An MLP for tic-tac-toe, a small residual convolutional network for Connect Four. The
  search (:mod:`rlx.games.search`) runs it as its evaluator: the rules give the positions, the
  network their priors ``P = softmax(p)`` over the legal moves and their values.
- **Targets.** Every recorded self-play move gives a sample ``(s, pi, z)``: the root's visit
  distribution ``pi`` and the game's outcome ``z`` for the player to move in ``s``; with
  ``value_target_q = m``, ``(1 - m) z + m Q``, ``Q`` the search's mean value at the root (less
  noise than one game's outcome). Each sample enters the buffer with its board symmetries (8
  for tic-tac-toe, 2 for Connect Four). With playout-cap randomisation
  (``full_search_fraction = p < 1``, KataGo; Wu, 2019) each move is searched fully
  (``simulations``, root noise) with probability ``p`` and recorded, and otherwise fast
  (``fast_simulations``, no noise) and not: more games, so more independent value targets, for
  the same search work.
- **Loss.** On minibatches from the buffer,

      L(theta) = (z - v)^2 - pi^T log p + c ||theta||^2,     (p, v) = f_theta(s)

  with ``c`` the optimiser's ``weight_decay`` (coupled L2 in Adam: the gradient gains
  ``c theta``, the gradient of ``c/2 ||theta||^2``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from rlx import metrics as M
from rlx import registry
from rlx.core.checks import at_least, in_range, one_of
from rlx.core.optim import gradient_step
from rlx.errors import ConfigError
from rlx.games import ConnectFour, make, selfplay
from rlx.games.agent import SearchAgent
from rlx.games.base import Game
from rlx.games.leaf_evaluators import PolicyValueEvaluator
from rlx.games.search import SearchConfig
from rlx.games.selfplay import PlayedGame, ReplayRing, SelfPlayFields, SelfPlayMethod
from rlx.runs.handle import RunHandle


# ============================================================================ config
@dataclass(frozen=True)
class AlphaZeroConfig(SelfPlayFields):
    """AlphaZero's settings: the self-play loop's (:class:`rlx.games.selfplay.SelfPlayFields`),
    then its own; the defaults are tuned for tic-tac-toe, the ``connect4`` preset for Connect
    Four."""

    net: Literal["mlp", "resnet"] = "mlp"
    """mlp (flattened board, hidden_sizes) or resnet (3x3 convolutions with skip connections)"""
    channels: int = 64
    """residual network width"""
    blocks: int = 4
    """residual blocks"""
    threat_planes: bool = False
    """Connect Four only: the network also sees each player's threat cells, the empty cells
    where one more stone makes four (rlx.games.ConnectFour), besides the stones; on in the
    connect4 preset (--no-threat-planes: the stones alone)"""
    value_target_q: float = 0.0
    """weight m of the root's search value in the value target (1 - m) z + m Q, Q = sum_a W(a)
    / sum_a N(a) of the move's search; 0: the game's outcome z alone (AlphaZero's target)"""
    full_search_fraction: float = 1.0
    """playout-cap randomisation (KataGo): the share p of self-play moves searched with
    simulations and root noise, each of which gives a training sample; the others are searched
    with fast_simulations, without noise, and give none. 1: every move searched fully"""
    fast_simulations: int | None = None
    """simulations of a fast move when full_search_fraction < 1; None: a fifth of simulations
    (at least 1; KataGo's is a sixth)"""
    reuse_tree: bool = False
    """keep the subtree of the move played as the next move's search tree, with its statistics
    (AlphaGo Zero's tree reuse), and search only until its root has simulations visits (at
    least a quarter of them new, under fresh root noise)"""

    def __post_init__(self) -> None:
        super().__post_init__()
        one_of(self, "net", ("mlp", "resnet"))
        at_least(self, "channels", 1)
        at_least(self, "blocks", 0)
        in_range(self, "value_target_q", 0.0, 1.0)
        if not 0.0 < self.full_search_fraction <= 1.0:
            raise ConfigError(
                f"full_search_fraction must be in (0, 1] (1: every move searched fully), not "
                f"{self.full_search_fraction}."
            )
        if self.full_search_fraction == 1.0:
            return
        if self.fast_simulations is not None and not 1 <= self.fast_simulations <= self.simulations:
            raise ConfigError(
                f"fast_simulations must be in [1, simulations={self.simulations}] (None: a "
                f"fifth of simulations), not {self.fast_simulations}."
            )
        if self.reuse_tree:
            raise ConfigError(
                "reuse_tree and full_search_fraction < 1 do not combine (a kept tree would carry "
                "a fast search's visits into a full one); set one of them."
            )

    def search(self, *, selfplay: bool) -> SearchConfig:
        if selfplay:
            return SearchConfig(
                self.simulations, self.c_puct, self.dirichlet_alpha, self.noise_fraction
            )
        return SearchConfig(self.eval_simulations, self.c_puct)

    def fast_search(self) -> SearchConfig:
        """The search of a fast self-play move: ``fast_simulations``, no root noise."""
        fast = self.fast_simulations or max(self.simulations // 5, 1)
        return SearchConfig(fast, self.c_puct)

    def searches(
        self, num_games: int, rng: np.random.Generator
    ) -> list[tuple[list[int], SearchConfig, bool]]:
        """Without playout-cap randomisation one full search of the open games; with it each
        game's move is full (recorded) with probability ``full_search_fraction``, else fast."""
        every = list(range(num_games))
        if self.full_search_fraction == 1.0:
            return [(every, self.search(selfplay=True), True)]
        full = rng.random(num_games) < self.full_search_fraction
        groups = [
            ([j for j in every if full[j]], self.search(selfplay=True), True),
            ([j for j in every if not full[j]], self.fast_search(), False),
        ]
        return [group for group in groups if group[0]]

    def keeps_trees(self) -> bool:
        return self.reuse_tree


def make_game(env: Any, config: AlphaZeroConfig) -> Game:
    """The game ``env`` names, encoded for the network as ``config`` asks."""
    game = make(env)
    if not config.threat_planes:
        return game
    if not isinstance(game, ConnectFour):
        raise ConfigError(f"threat_planes is for connect4, not {game.name}; leave it false.")
    return ConnectFour(threat_planes=True)


PRESETS = {
    "connect4": {
        "net": "resnet",
        "channels": 32,
        "blocks": 3,
        # the threat cells as input: which player's threats sit on odd or even rows decides
        # Connect Four, and a small network finds them hard to compute from the stones alone
        "threat_planes": True,
        # playout-cap randomisation: a quarter of the moves searched with 100 simulations (each
        # a sample), the rest with 20; for the same search work it plays more games, so the
        # value network learns from more independent outcomes
        "full_search_fraction": 0.25,
        "games_per_iteration": 160,
        # the value target (z + Q) / 2: the outcome is unbiased but one late blunder decides it,
        # the search's root value is smooth but carries the network's own errors
        "value_target_q": 0.5,
        "simulations": 100,
        "eval_simulations": 200,
        "dirichlet_alpha": 1.0,
        "temperature_moves": 10,
        "buffer_size": 40_000,  # the samples of the last dozen or so iterations
        "train_steps_per_iteration": 200,
        "learning_rate": 1e-3,
        # sized to the preset's budget, an hour on one CPU core; max_minutes bounds a run on a
        # slower machine (benchmarks/bench_alphazero_connect4.py measures the strength reached)
        "iterations": 150,
        "eval_every": 50,  # an arena against mcts-200 costs minutes: three in a run
        "eval_games": 50,
        "eval_opponents": ("random", "mcts-200"),
    },
}


# ============================================================================ network
class PolicyValueNet(nn.Module):
    """``f_theta(s) = (policy logits, v)``, ``v = tanh(.)`` in [-1, 1] for the player to move."""

    def __init__(self, game: Game, config: AlphaZeroConfig) -> None:
        super().__init__()
        planes, (rows, cols) = game.num_planes, game.board_shape
        if config.net == "mlp":
            layers: list[nn.Module] = [nn.Flatten()]
            width = planes * rows * cols
            for size in config.hidden_sizes:
                layers += [nn.Linear(width, size), nn.ReLU()]
                width = size
            self.trunk = nn.Sequential(*layers)
            self.policy: nn.Module = nn.Linear(width, game.num_actions)
            self.value = nn.Sequential(nn.Linear(width, 64), nn.ReLU(), nn.Linear(64, 1))
        else:
            c = config.channels
            self.trunk = nn.Sequential(
                _conv(planes, c), *[_ResidualBlock(c) for _ in range(config.blocks)]
            )
            self.policy = nn.Sequential(
                nn.Conv2d(c, 2, 1), nn.BatchNorm2d(2), nn.ReLU(), nn.Flatten(),
                nn.Linear(2 * rows * cols, game.num_actions),
            )  # fmt: skip
            self.value = nn.Sequential(
                nn.Conv2d(c, 1, 1), nn.BatchNorm2d(1), nn.ReLU(), nn.Flatten(),
                nn.Linear(rows * cols, 64), nn.ReLU(), nn.Linear(64, 1),
            )  # fmt: skip

    def forward(self, planes: Tensor) -> tuple[Tensor, Tensor]:
        h = self.trunk(planes)
        return self.policy(h), torch.tanh(self.value(h)).squeeze(-1)


def _conv(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()
    )


class _ResidualBlock(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = _conv(c, c)
        self.conv2 = nn.Sequential(nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c))

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x + self.conv2(self.conv1(x)))


def search_copy(net: nn.Module) -> nn.Module:
    """A frozen copy of ``net`` for search, in evaluation mode: each batch norm folded into the
    convolution before it (``w' = w gamma / sqrt(var + eps)``, ``b' = (b - mu) gamma /
    sqrt(var + eps) + beta``) and, for the residual network, channels-last memory: the same
    outputs to float rounding, for fewer operations per call at self-play's small batches."""
    folded = copy.deepcopy(net).eval()
    for sequence in [m for m in folded.modules() if isinstance(m, nn.Sequential)]:
        for i in range(len(sequence) - 1):
            conv, norm = sequence[i], sequence[i + 1]
            if isinstance(conv, nn.Conv2d) and isinstance(norm, nn.BatchNorm2d):
                sequence[i], sequence[i + 1] = fuse_conv_bn_eval(conv, norm), nn.Identity()
    if any(isinstance(m, nn.Conv2d) for m in folded.modules()):
        # Module.to takes memory_format, which torch's typed overloads of it leave out
        folded = folded.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    return folded.requires_grad_(False)


def evaluator(net: nn.Module) -> PolicyValueEvaluator:
    """The search's evaluator: ``(P, v) = f(s)`` with the policy renormalised over the legal
    moves, computed by a :func:`search_copy` of ``net`` as it is now (calling it gives
    ``(priors, values)`` of a batch of planes and legal masks)."""
    frozen = search_copy(net)
    device = next(frozen.parameters()).device

    def policy_value(planes: np.ndarray, legal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # one transfer each way per batch of leaves: the search itself runs on the host
        with torch.inference_mode():
            logits, values = frozen(torch.from_numpy(planes).to(device))
            logits = logits.masked_fill(~torch.from_numpy(legal).to(device), -torch.inf)
            return torch.softmax(logits, -1).cpu().numpy(), values.cpu().numpy()

    return PolicyValueEvaluator(policy_value)


# ============================================================================ targets
def samples(
    game: Game, games: list[PlayedGame], config: AlphaZeroConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(planes, pi, z)`` of every recorded move, game after game, each with its board
    symmetries when ``augment``: ``z = result * to_play``, or ``(1 - m) z + m Q`` with
    ``m = value_target_q``."""
    planes, pis, zs = [], [], []
    m = config.value_target_q
    for played in games:
        outcomes = played.result * played.to_play
        for p, pi, z, q in zip(played.planes, played.policies, outcomes, played.root_values,
                               strict=True):  # fmt: skip
            z = (1.0 - m) * float(z) + m * float(q) if m else float(z)
            for sp, spi in game.symmetries(p, pi) if config.augment else [(p, pi)]:
                planes.append(sp)
                pis.append(spi)
                zs.append(z)
    shape = (0, game.num_planes, *game.board_shape)
    return (
        np.stack(planes) if planes else np.zeros(shape, np.float32),
        np.asarray(pis, dtype=np.float32).reshape(-1, game.num_actions),
        np.asarray(zs, dtype=np.float32),
    )


def make_buffer(game: Game, config: AlphaZeroConfig) -> ReplayRing:
    """A ring of ``buffer_size`` samples ``(planes, pi, z)``."""
    return ReplayRing(config.buffer_size, {
        "planes": ((game.num_planes, *game.board_shape), np.float32),
        "pi": ((game.num_actions,), np.float32),
        "z": ((), np.float32),
    })  # fmt: skip


def store(
    buffer: ReplayRing,
    game: Game,
    games: list[PlayedGame],
    config: AlphaZeroConfig,
    rng: np.random.Generator,
) -> None:
    """The :func:`samples` of the played games into the buffer."""
    planes, pi, z = samples(game, games, config)
    buffer.add(planes=planes, pi=pi, z=z)


# ============================================================================ loss, update
def alphazero_loss(
    logits: Tensor, values: Tensor, pi: Tensor, z: Tensor
) -> tuple[Tensor, dict[str, Tensor]]:
    """``(z - v)^2 - pi^T log p`` averaged over the batch (the L2 term is the optimiser's)."""
    value_loss = F.mse_loss(values, z)
    policy_loss = -(pi * F.log_softmax(logits, -1)).sum(-1).mean()
    return value_loss + policy_loss, {M.VALUE_LOSS: value_loss, M.POLICY_LOSS: policy_loss}


def train_network(
    net: PolicyValueNet,
    optimizer: torch.optim.Optimizer,
    buffer: ReplayRing,
    game: Game,
    config: AlphaZeroConfig,
    rng: np.random.Generator,
) -> dict[str, float]:
    """``train_steps_per_iteration`` minibatch steps on the buffer; the mean losses."""
    device = next(net.parameters()).device
    totals = torch.zeros(3, device=device)  # read once, after the steps
    for _ in range(config.train_steps_per_iteration):
        batch = buffer.sample(config.batch_size, rng)
        planes, pi, z = (torch.from_numpy(batch[name]).to(device) for name in ("planes", "pi", "z"))
        if config.net == "resnet":
            planes = planes.contiguous(memory_format=torch.channels_last)
        logits, values = net(planes)
        loss, parts = alphazero_loss(logits, values, pi, z)
        gradient_step(optimizer, loss)
        totals += torch.stack([loss.detach(), parts[M.POLICY_LOSS].detach(),
                               parts[M.VALUE_LOSS].detach()])  # fmt: skip
    loss, policy_loss, value_loss = (totals / max(config.train_steps_per_iteration, 1)).tolist()
    return {M.LOSS: loss, M.POLICY_LOSS: policy_loss, M.VALUE_LOSS: value_loss}


# ============================================================================ registration
METHOD = SelfPlayMethod(
    name="alphazero",
    title="AlphaZero",
    make_game=make_game,
    make_net=PolicyValueNet,
    evaluator=evaluator,
    make_buffer=make_buffer,
    store=store,
    update=train_network,
)


def train(
    config: AlphaZeroConfig,
    env: Any,
    run: RunHandle,
    remote: selfplay.RemoteSelfPlayFactory | None = None,
) -> SearchAgent:
    """Train AlphaZero on the game ``env`` names inside an open :class:`rlx.runs.Run`: the
    self-play loop (:func:`rlx.games.selfplay.train`) with this module's network, targets and
    loss; with ``runners``, self-play runs on the workers that ``remote`` starts."""
    return selfplay.train(METHOD, config, env, run, remote)


def load(config: AlphaZeroConfig, env_id: str, state: dict[str, Any]) -> SearchAgent:
    """The agent of a checkpoint's state (``rlx.load(run_dir)``)."""
    return selfplay.load(METHOD, config, env_id, state)


registry.register(
    registry.Algorithm(
        name="alphazero",
        config=AlphaZeroConfig,
        train=train,
        load=load,
        budget_field="iterations",
        unit="iterations",
        presets=PRESETS,
        renamed={
            "lr": "learning_rate",
            "lr_final": "learning_rate_end",
            "train_steps": "train_steps_per_iteration",
            "hidden": "hidden_sizes",
        },
        remote="self-play",
    )
)
