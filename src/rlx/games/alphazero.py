"""AlphaZero (registered as ``alphazero``): self-play with MCTS, then fit the network to it.

One iteration, read top to bottom in :func:`train`:

1. **Self-play.** ``games_per_iteration`` games are played together by the current network
   with PUCT search (:mod:`rlx.games.search`, the network as its evaluator), Dirichlet noise at
   the root and moves drawn from ``pi(a) ∝ N(s, a)`` for the first ``temperature_moves`` plies,
   the most visited move after.
   Every position gives a sample ``(s, pi, z)``: the root's visit distribution ``pi`` and the
   final outcome ``z`` from the point of view of the player to move in ``s`` (with
   ``value_target_q = m``, ``(1 - m) z + m Q``, ``Q`` the search's mean value at the root: a
   target with less noise than one game's outcome). Each sample enters the replay buffer with
   its board symmetries (8 for tic-tac-toe, 2 for Connect Four). With playout-cap
   randomisation (``full_search_fraction = p < 1``, KataGo; Wu, 2019) each move is searched
   fully (``simulations``, root noise) with probability ``p`` and gives a sample, and otherwise
   fast (``fast_simulations``, no noise) and gives none: more games, so more independent value
   targets, for the same search work.
2. **Training.** ``train_steps`` minibatches from the buffer (``learning_rate``, or a cosine
   decay to ``learning_rate_end`` over the iterations), minimising (Silver et al., 2018)

       L(theta) = (z - v)^2 - pi^T log p + c ||theta||^2,     (p, v) = f_theta(s)

   with ``c`` the optimiser's ``weight_decay`` (coupled L2 in Adam: the gradient gains
   ``c theta``, the gradient of ``c/2 ||theta||^2``).
3. **Arena.** Every ``eval_every`` iterations the agent (search without noise, most visited
   move, ``eval_simulations``) plays ``eval_games`` games against each of ``eval_opponents``
   (seats alternating); the rates are logged as ``vs_<opponent>_win|draw|loss``.

The network sees the position from the mover's side (:meth:`Game.encode`), so one network plays
both seats. Tic-tac-toe uses an MLP, Connect Four a small residual convolutional network.

A checkpoint holds the network, the optimiser, the replay buffer, the random generators and
the iteration; a resumed run continues as the uninterrupted one would have.

Self-play runs in this process, in ``workers`` processes, or on ``runners`` Ray workers: the
Ray part is built by :mod:`rlx.distributed.selfplay` and handed to :func:`train` as
``remote`` (a :class:`RemoteSelfPlay` factory); this module never imports it.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import multiprocessing
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from rlx import registry
from rlx.core.checks import at_least, check_runner_fields, in_range, one_of, positive
from rlx.core.devices import check_device, resolve_device
from rlx.core.seeding import rng_state, seed_everything, set_rng_state
from rlx.core.threads import set_torch_threads
from rlx.errors import CheckpointError, ConfigError
from rlx.games import ConnectFour, make
from rlx.games.base import Game, GameState, check_same_game
from rlx.games.evaluation import arena, arena_metrics, check_opponents
from rlx.games.evaluators import PolicyValueEvaluator
from rlx.games.search import SearchConfig, choose, search, visit_policy


# ============================================================================ config
@dataclass(frozen=True)
class AlphaZeroConfig:
    """AlphaZero's settings; the defaults are tuned for tic-tac-toe, the ``connect4`` preset
    for Connect Four.

    Attributes:
        iterations: self-play + training rounds (the budget).
        games_per_iteration: self-play games per iteration, played together in one batch.
        simulations: MCTS simulations per self-play move.
        eval_simulations: MCTS simulations per move when the agent plays (arena, ``act``).
        c_puct: exploration weight of the network prior in PUCT.
        dirichlet_alpha: root noise concentration (about 10 / typical number of legal moves).
        noise_fraction: share of the root prior replaced by noise in self-play.
        temperature_moves: plies played by sampling ``pi ∝ N``; later plies take the most
            visited move.
        threat_planes: Connect Four only: the network also sees each player's threat cells,
            the empty cells where one more stone makes four (:class:`rlx.games.ConnectFour`),
            besides the stones; on in the ``connect4`` preset (``--no-threat-planes``: the
            stones alone).
        reuse_tree: keep the subtree of the move played as the next move's search tree, with
            its statistics (AlphaGo Zero's tree reuse), and search only until its root has
            ``simulations`` visits (at least a quarter of them new, under fresh root noise):
            the same root visits per move for fewer network evaluations.
        value_target_q: weight ``m`` of the root's search value in the value target,
            ``(1 - m) z + m Q`` with ``Q = sum_a W(a) / sum_a N(a)`` of the move's search; 0:
            the game's outcome ``z`` alone (AlphaZero's target).
        full_search_fraction: playout-cap randomisation (KataGo): the share ``p`` of self-play
            moves searched with ``simulations`` and root noise, each of which gives a training
            sample; the others are searched with ``fast_simulations``, without noise, and
            give none. 1: every move searched fully (AlphaZero).
        fast_simulations: simulations of a fast move when ``full_search_fraction < 1``;
            None: a fifth of ``simulations`` (at least 1; KataGo's is a sixth).
        augment: add every board symmetry of each sample to the replay buffer.
        buffer_size: positions kept in the replay buffer (the oldest leave first).
        batch_size: positions per gradient step.
        train_steps: gradient steps per iteration.
        learning_rate: Adam's step size (of the first iteration when ``learning_rate_end`` is
            set).
        learning_rate_end: the step size of the last iteration, reached by cosine decay over
            ``iterations``; None: ``learning_rate`` throughout.
        weight_decay: ``c`` of the L2 term.
        net: ``mlp`` (flattened board) or ``resnet`` (3x3 convolutions with skip connections).
        hidden: MLP hidden layer sizes.
        channels: residual network width.
        blocks: residual blocks.
        eval_every: iterations between arena evaluations (the last iteration always has one).
        eval_games: games against each opponent per evaluation (seats alternate); 0: none.
        eval_opponents: ``random``, ``mcts-K`` (pure MCTS with K rollout simulations) or
            ``solver`` (perfect play, tic-tac-toe only).
        workers: processes that play the self-play games (each a share of them, with its own
            seed drawn from the run's generator); 1 plays them in the training process.
        runners: Ray workers that play the self-play games instead of ``workers`` processes
            (the same shares and seeds; extra ``ray``); None: no Ray.
        ray_address: with ``runners``, the Ray cluster to join (``HOST:PORT``); None starts a
            local Ray instance for the run.
        max_minutes: also stop (checkpoint saved) once an iteration ends after this many
            minutes of training; 0: no time limit.
        seed: seeds the network, self-play and the arena.
        device: where the network learns and evaluates positions: auto (CUDA, then MPS, then
            the CPU), cpu, cuda, cuda:N or mps (:mod:`rlx.core.devices`); self-play worker
            processes evaluate on the CPU.
    """

    iterations: int = 30
    games_per_iteration: int = 64
    simulations: int = 80
    eval_simulations: int = 80
    c_puct: float = 1.5
    dirichlet_alpha: float = 1.0
    noise_fraction: float = 0.25
    temperature_moves: int = 4
    threat_planes: bool = False
    reuse_tree: bool = False
    value_target_q: float = 0.0
    full_search_fraction: float = 1.0
    fast_simulations: int | None = None
    augment: bool = True
    buffer_size: int = 40_000
    batch_size: int = 256
    train_steps: int = 100
    learning_rate: float = 2e-3
    learning_rate_end: float | None = None
    weight_decay: float = 1e-4
    net: Literal["mlp", "resnet"] = "mlp"
    hidden: tuple[int, ...] = (128, 128)
    channels: int = 64
    blocks: int = 4
    eval_every: int = 5
    eval_games: int = 100
    eval_opponents: tuple[str, ...] = ("random", "solver")
    workers: int = 1
    runners: int | None = None
    ray_address: str | None = None
    max_minutes: float = 0.0
    seed: int = 0
    device: str = "auto"

    def __post_init__(self) -> None:
        check_device(self)
        for name in ("iterations", "games_per_iteration", "simulations", "eval_simulations",
                     "batch_size", "eval_every", "buffer_size", "workers"):  # fmt: skip
            at_least(self, name, 1)
        check_runner_fields(self)
        if self.runners is not None and self.workers > 1:
            raise ConfigError(
                f"workers={self.workers} and runners={self.runners} both ask for parallel "
                "self-play; use workers (processes on this machine) or runners (Ray), not both."
            )
        for name in ("train_steps", "temperature_moves", "eval_games", "max_minutes",
                     "weight_decay"):  # fmt: skip
            at_least(self, name, 0)
        one_of(self, "net", ("mlp", "resnet"))
        in_range(self, "value_target_q", 0.0, 1.0)
        self._check_playout_cap()
        in_range(self, "noise_fraction", 0.0, 1.0)
        for name in ("c_puct", "dirichlet_alpha", "learning_rate"):
            positive(self, name)
        end = self.learning_rate_end
        if end is not None and not 0 < end <= self.learning_rate:
            raise ConfigError(
                f"learning_rate_end must be in (0, learning_rate={self.learning_rate}] (None: a "
                f"constant learning rate), not {end}."
            )

    def _check_playout_cap(self) -> None:
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
        "train_steps": 200,
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
            for size in config.hidden:
                layers += [nn.Linear(width, size), nn.ReLU()]
                width = size
            self.trunk = nn.Sequential(*layers)
            self.policy = nn.Linear(width, game.num_actions)
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


def search_copy(net: PolicyValueNet) -> nn.Module:
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
        folded = folded.to(memory_format=torch.channels_last)
    return folded.requires_grad_(False)


def evaluator(net: PolicyValueNet) -> PolicyValueEvaluator:
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


# ============================================================================ replay
class SampleBuffer:
    """A ring of ``(planes, pi, z)`` samples."""

    def __init__(self, capacity: int, planes_shape: tuple[int, ...], num_actions: int) -> None:
        self.planes = np.zeros((capacity, *planes_shape), dtype=np.float32)
        self.pi = np.zeros((capacity, num_actions), dtype=np.float32)
        self.z = np.zeros(capacity, dtype=np.float32)
        self.capacity, self.size, self.cursor = capacity, 0, 0

    def add(self, planes: np.ndarray, pi: np.ndarray, z: np.ndarray) -> None:
        for i in range(len(z)):
            self.planes[self.cursor], self.pi[self.cursor], self.z[self.cursor] = (
                planes[i],
                pi[i],
                z[i],
            )
            self.cursor = (self.cursor + 1) % self.capacity
            self.size = min(self.size + 1, self.capacity)

    def sample(
        self, n: int, rng: np.random.Generator, device: torch.device | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """``n`` samples drawn uniformly, as tensors on ``device`` (None: the CPU)."""
        idx = rng.integers(0, self.size, size=n)
        return (
            torch.from_numpy(self.planes[idx]).to(device),
            torch.from_numpy(self.pi[idx]).to(device),
            torch.from_numpy(self.z[idx]).to(device),
        )

    def state(self) -> dict[str, Any]:
        n = self.size
        return {"planes": self.planes[:n].copy(), "pi": self.pi[:n].copy(),
                "z": self.z[:n].copy(), "cursor": self.cursor}  # fmt: skip

    def restore(self, state: dict[str, Any]) -> None:
        n = len(state["z"])
        self.planes[:n], self.pi[:n], self.z[:n] = state["planes"], state["pi"], state["z"]
        self.size, self.cursor = n, int(state["cursor"])


# ============================================================================ self-play
@dataclass
class SelfPlayResult:
    planes: np.ndarray
    pi: np.ndarray
    z: np.ndarray
    lengths: list[int]
    results: list[int]
    positions: int  # the moves that gave a sample (before their symmetries)


def self_play(
    game: Game, net: PolicyValueNet, config: AlphaZeroConfig, rng: np.random.Generator
) -> SelfPlayResult:
    """Play ``games_per_iteration`` games together; samples ``(s, pi, z)`` from every fully
    searched move (``z`` mixed with the search's root value by ``value_target_q``)."""
    states = [game.initial_state() for _ in range(config.games_per_iteration)]
    history: list[list[tuple[np.ndarray, np.ndarray, int, float]]] = [[] for _ in states]
    plies = [0] * len(states)
    evaluate = evaluator(net)
    net.eval()
    kept = None
    while open_games := [i for i, s in enumerate(states) if not s.is_terminal]:
        actions: dict[int, int] = {}
        for rows, search_config, recorded in search_groups(config, len(open_games), rng):
            group = [open_games[j] for j in rows]
            counts, values, trees = search(
                game, [states[i] for i in group], evaluate, search_config, rng, kept
            )
            for i, n, q in zip(group, counts, values, strict=True):
                state = states[i]
                if recorded:
                    history[i].append((game.encode(state), visit_policy(n, 1.0), state.to_play, q))
                temperature = 1.0 if state.moves < config.temperature_moves else 0.0
                actions[i] = choose(n, temperature, rng)
        for i in open_games:
            states[i] = game.play(states[i], actions[i])
            plies[i] += 1
        if config.reuse_tree:  # the trees of the games that go on, in their next order
            rows = [j for j, i in enumerate(open_games) if not states[i].is_terminal]
            kept = trees.after(rows, [actions[open_games[j]] for j in rows], config.simulations)
    planes, pis, zs = [], [], []
    m = config.value_target_q
    for game_history, final in zip(history, states, strict=True):
        for p, pi, to_play, q in game_history:
            z = float(final.result * to_play)
            z = (1.0 - m) * z + m * float(q) if m else z
            for sp, spi in game.symmetries(p, pi) if config.augment else [(p, pi)]:
                planes.append(sp)
                pis.append(spi)
                zs.append(z)
    shape = (0, game.num_planes, *game.board_shape)
    return SelfPlayResult(
        np.stack(planes) if planes else np.zeros(shape, np.float32),
        np.asarray(pis, dtype=np.float32).reshape(-1, game.num_actions),
        np.asarray(zs, dtype=np.float32), plies,
        [int(s.result) for s in states], sum(len(h) for h in history),
    )  # fmt: skip


def search_groups(
    config: AlphaZeroConfig, num_games: int, rng: np.random.Generator
) -> list[tuple[list[int], SearchConfig, bool]]:
    """This ply's searches: ``(rows of the open games, search, recorded)``. Without playout-cap
    randomisation one full search of them all; with it each game's move is full with
    probability ``full_search_fraction`` (a recorded sample) and fast otherwise."""
    every = list(range(num_games))
    if config.full_search_fraction == 1.0:
        return [(every, config.search(selfplay=True), True)]
    full = rng.random(num_games) < config.full_search_fraction
    groups = [
        ([j for j in every if full[j]], config.search(selfplay=True), True),
        ([j for j in every if not full[j]], config.fast_search(), False),
    ]
    return [group for group in groups if group[0]]


def merge(results: list[SelfPlayResult]) -> SelfPlayResult:
    """One result of several workers' games, in worker order."""
    return SelfPlayResult(
        np.concatenate([r.planes for r in results]), np.concatenate([r.pi for r in results]),
        np.concatenate([r.z for r in results]), [n for r in results for n in r.lengths],
        [w for r in results for w in r.results], sum(r.positions for r in results),
    )  # fmt: skip


def play_share(game_name: str, config: AlphaZeroConfig, weights: dict, seed: int,
               games: int) -> SelfPlayResult:  # fmt: skip
    """One worker's share of an iteration: ``games`` self-play games with the learner's
    ``weights`` and a generator seeded with ``seed`` (in a worker process or on a Ray worker)."""
    set_torch_threads(1)
    game = make_game(game_name, config)
    net = PolicyValueNet(game, config)
    net.load_state_dict(weights)
    share = dataclasses.replace(config, games_per_iteration=games, workers=1)
    return self_play(game, net, share, np.random.default_rng(seed))


class RemoteSelfPlay(Protocol):
    """Self-play workers elsewhere (Ray's, built by :mod:`rlx.distributed.selfplay`), as
    :func:`train` uses them: each plays its share with its seed by calling the ``work`` it was
    started with (:func:`play_share`)."""

    def play(self, weights: dict, seeds: list[int], shares: list[int]) -> list[SelfPlayResult]:
        """Every worker's share ``(seed, games)``, in worker order (empty shares skipped)."""
        ...

    def stats(self) -> dict[str, float]:
        """Metrics of the workers to log each iteration (e.g. how many were replaced)."""
        ...

    def close(self) -> None: ...


class RemoteSelfPlayFactory(Protocol):
    """What :func:`train` receives as ``remote``: it starts ``config.runners`` workers of a
    run, each of which answers a share ``(weights, seed, games)`` with
    ``work(**options, weights=weights, seed=seed, games=games)``. The game and the network
    travel in ``work`` and ``options``, so the workers' side knows no game."""

    def __call__(
        self, work: Callable[..., SelfPlayResult], options: dict[str, Any], config: Any
    ) -> RemoteSelfPlay: ...


class SelfPlayPool:
    """``workers`` processes (spawned once per run), or ``runners`` remote workers (started by
    ``remote``), that play self-play games in parallel with the current weights; with neither,
    the games are played in this process."""

    def __init__(
        self, game: Game, config: AlphaZeroConfig, remote: RemoteSelfPlayFactory | None = None
    ) -> None:
        self.game, self.config = game, config
        self.pool = None
        self.remote: RemoteSelfPlay | None = None
        if config.runners is not None:
            if remote is None:
                raise ConfigError(
                    f"runners={config.runners} needs Ray's self-play workers, which rlx.train "
                    "builds (rlx.distributed); train through rlx.train or leave runners out."
                )
            self.remote = remote(play_share, {"game_name": game.name, "config": config}, config)
        elif config.workers > 1:
            context = multiprocessing.get_context("spawn")  # no forked torch state
            self.pool = ProcessPoolExecutor(config.workers, mp_context=context)

    def play(self, net: PolicyValueNet, rng: np.random.Generator) -> SelfPlayResult:
        if self.pool is None and self.remote is None:
            return self_play(self.game, net, self.config, rng)
        n, k = self.config.games_per_iteration, self.config.runners or self.config.workers
        shares = [n // k + (i < n % k) for i in range(k)]
        seeds = rng.integers(0, 2**63 - 1, size=k)
        weights = {name: t.detach().cpu().clone() for name, t in net.state_dict().items()}
        if self.remote is not None:
            return merge(self.remote.play(weights, [int(s) for s in seeds], shares))
        futures = [
            self.pool.submit(play_share, self.game.name, self.config, weights, int(seed), games)
            for seed, games in zip(seeds, shares, strict=True)
            if games
        ]
        return merge([f.result() for f in futures])

    def metrics(self) -> dict[str, float]:
        """The remote workers' :meth:`RemoteSelfPlay.stats`; none in this process."""
        return {} if self.remote is None else self.remote.stats()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)
        if self.remote is not None:
            self.remote.close()


# ============================================================================ update
def alphazero_loss(
    logits: Tensor, values: Tensor, pi: Tensor, z: Tensor
) -> tuple[Tensor, dict[str, Tensor]]:
    """``(z - v)^2 - pi^T log p`` averaged over the batch (the L2 term is the optimiser's)."""
    value_loss = F.mse_loss(values, z)
    policy_loss = -(pi * F.log_softmax(logits, -1)).sum(-1).mean()
    return value_loss + policy_loss, {"value_loss": value_loss, "policy_loss": policy_loss}


def learning_rate_at(config: AlphaZeroConfig, iteration: int) -> float:
    """The step size of 0-based ``iteration``: ``learning_rate`` or, with
    ``learning_rate_end``, the cosine decay over the ``I`` iterations

        lr_i = lr_end + (lr - lr_end) (1 + cos(pi i / (I - 1))) / 2
    """
    start, end = config.learning_rate, config.learning_rate_end
    if end is None or config.iterations == 1:
        return start
    progress = min(iteration / (config.iterations - 1), 1.0)
    return end + (start - end) * (1 + math.cos(math.pi * progress)) / 2


def train_network(
    net: PolicyValueNet,
    optimizer: torch.optim.Optimizer,
    buffer: SampleBuffer,
    config: AlphaZeroConfig,
    rng: np.random.Generator,
) -> dict[str, float]:
    """``train_steps`` minibatch steps; the mean losses (none while the buffer is empty, as
    after a tiny first iteration whose moves were all fast searches)."""
    if buffer.size == 0:
        return {}
    net.train()
    device = next(net.parameters()).device
    totals = torch.zeros(3, device=device)  # read once, after the steps
    for _ in range(config.train_steps):
        planes, pi, z = buffer.sample(config.batch_size, rng, device)
        if config.net == "resnet":
            planes = planes.contiguous(memory_format=torch.channels_last)
        logits, values = net(planes)
        loss, parts = alphazero_loss(logits, values, pi, z)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        totals += torch.stack([loss.detach(), parts["policy_loss"].detach(),
                               parts["value_loss"].detach()])  # fmt: skip
    net.eval()
    loss, policy_loss, value_loss = (totals / max(config.train_steps, 1)).tolist()
    return {"loss": loss, "policy_loss": policy_loss, "value_loss": value_loss}


# ============================================================================ the agent
class AlphaZeroAgent:
    """A trained AlphaZero player (a :class:`rlx.core.agent.GameAgent`): ``agent.act(state)``
    searches with ``eval_simulations`` and no root noise and plays the most visited move.
    ``agent(state)`` is the same, so an agent is an arena player."""

    def __init__(self, game: Game, net: PolicyValueNet, config: AlphaZeroConfig) -> None:
        self.game, self.net, self.config = game, net.eval(), config
        self.rng = np.random.default_rng(config.seed)
        self.run_dir = None
        self.frozen: PolicyValueEvaluator | None = None  # the search's copy of ``net``

    def refresh(self) -> None:
        """Search with ``net``'s current weights from the next move on (the search runs a
        frozen copy, made once: call this after training ``net`` further)."""
        self.frozen = None

    def evaluator(self) -> PolicyValueEvaluator:
        """The search's evaluator: a frozen copy of ``net``, made at the first search."""
        if self.frozen is None:
            self.frozen = evaluator(self.net)
        return self.frozen

    def act(
        self, state: GameState, deterministic: bool = True, *, simulations: int | None = None
    ) -> int:
        """The move to play in ``state`` (not a terminal one): the most visited, or with
        ``deterministic=False`` one drawn from ``pi ∝ N``."""
        return self.act_batch([state], deterministic, simulations=simulations)[0]

    def act_batch(
        self,
        states: Sequence[GameState],
        deterministic: bool = True,
        *,
        simulations: int | None = None,
    ) -> list[int]:
        """:meth:`act` for several positions, searched together (one network call per
        simulation step for all of them)."""
        if any(s.is_terminal for s in states):
            raise ConfigError("the game is over; there is no move to choose.")
        config = self.config.search(selfplay=False)
        if simulations is not None:
            config = SearchConfig(simulations, config.c_puct)
        counts = search(self.game, states, self.evaluator(), config, self.rng).counts
        temperature = 0.0 if deterministic else 1.0
        return [choose(n, temperature, self.rng) for n in counts]

    def __call__(self, state: GameState) -> int:
        return self.act(state)

    def policy_value(self, state: GameState) -> tuple[np.ndarray, float]:
        """The network's prior over legal moves and its value for the player to move."""
        priors, values = self.evaluator()(
            self.game.encode(state)[None], self.game.legal_mask(state)[None]
        )
        return priors[0], float(values[0])

    def __repr__(self) -> str:
        return f"AlphaZeroAgent(game={self.game.name}, net={self.config.net})"


# ============================================================================ training
@dataclass
class Learner:
    """What training changes: the network, its optimiser, the replay buffer, the generator."""

    game: Game
    config: AlphaZeroConfig
    net: PolicyValueNet
    optimizer: torch.optim.Optimizer
    buffer: SampleBuffer
    rng: np.random.Generator

    @classmethod
    def create(cls, game: Game, config: AlphaZeroConfig) -> Learner:
        rng = seed_everything(config.seed)
        net = PolicyValueNet(game, config).to(resolve_device(config.device))
        if config.net == "resnet":
            # channels-last memory: the layout oneDNN's CPU convolutions run fastest on
            net = net.to(memory_format=torch.channels_last)
        optimizer = torch.optim.Adam(
            net.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay
        )
        planes_shape = (game.num_planes, *game.board_shape)
        buffer = SampleBuffer(config.buffer_size, planes_shape, game.num_actions)
        return cls(game, config, net, optimizer, buffer, rng)

    def state(self, iteration: int) -> dict[str, Any]:
        return {
            "game": self.game.name,
            "net": self.net.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "buffer": self.buffer.state(),
            "rng": rng_state(self.rng),
            "iteration": iteration,
        }

    def restore(self, state: dict[str, Any]) -> int:
        check_same_game(self.game.name, state["game"], "this checkpoint")
        self.net.load_state_dict(state["net"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.buffer.restore(state["buffer"])
        set_rng_state(state["rng"], self.rng)
        return int(state["iteration"])


def train(
    config: AlphaZeroConfig,
    env: Any,
    run: Any,
    remote: RemoteSelfPlayFactory | None = None,
) -> AlphaZeroAgent:
    """Self-play, train and evaluate for ``config.iterations`` iterations inside ``run``
    (or until ``max_minutes``, or a stop request); with ``runners``, self-play runs on the
    workers that ``remote`` starts."""
    game = make_game(env, config)
    check_opponents(game, config.eval_opponents)
    learner = Learner.create(game, config)
    iteration = learner.restore(run.resumed_state) if run.resumed_state is not None else 0
    agent = AlphaZeroAgent(game, learner.net, config)
    deadline = time.monotonic() + 60 * config.max_minutes if config.max_minutes else None
    last_arena: dict[str, float] = {}
    pool = SelfPlayPool(game, config, remote)
    try:
        while iteration < config.iterations and not run.stop_requested:
            metrics = {**one_iteration(learner, pool, iteration), **pool.metrics()}
            iteration += 1
            out_of_time = deadline is not None and time.monotonic() >= deadline
            final = iteration == config.iterations or out_of_time
            if config.eval_games and (iteration % config.eval_every == 0 or final):
                last_arena = evaluate(agent, config.seed + iteration)
                metrics.update(last_arena)
            run.log(iteration, metrics)
            run.update_progress(iteration)
            if out_of_time:
                break
            if run.checkpoint_due():
                run.save_checkpoint(iteration, learner.state(iteration))
    finally:
        pool.close()
    run.save_checkpoint(iteration, learner.state(iteration))
    run.finish(iteration, {"game": game.name, **last_arena})
    return agent


def one_iteration(learner: Learner, pool: SelfPlayPool, iteration: int) -> dict[str, float]:
    """Self-play a batch of games into the buffer, then train on the buffer (0-based
    ``iteration`` sets the learning rate)."""
    lr = learning_rate_at(learner.config, iteration)
    for group in learner.optimizer.param_groups:
        group["lr"] = lr
    t0 = time.perf_counter()
    played = pool.play(learner.net, learner.rng)
    learner.buffer.add(played.planes, played.pi, played.z)
    t1 = time.perf_counter()
    metrics = train_network(learner.net, learner.optimizer, learner.buffer, learner.config,
                            learner.rng)  # fmt: skip
    results = np.asarray(played.results)
    return {
        **metrics,
        "lr": lr,
        "game_length": float(np.mean(played.lengths)),
        "first_player_win": float(np.mean(results == 1)),
        "draw": float(np.mean(results == 0)),
        "positions": float(played.positions),
        "selfplay_s": t1 - t0,
        "train_s": time.perf_counter() - t1,
    }


def evaluate(agent: AlphaZeroAgent, seed: int) -> dict[str, float]:
    """The arena against the config's opponents, as ``vs_<name>_win|draw|loss`` rates."""
    config = agent.config
    agent.refresh()  # the network has trained since the last arena
    agent.rng = np.random.default_rng(seed)
    return arena_metrics(
        arena(agent.game, agent, config.eval_opponents, config.eval_games, config.seed)
    )


def load(config: AlphaZeroConfig, env_id: str, state: dict[str, Any]) -> AlphaZeroAgent:
    """The agent of a checkpoint's state."""
    game = make_game(env_id, config)
    if "net" not in state:
        raise CheckpointError("this checkpoint has no AlphaZero network.")
    check_same_game(game.name, state["game"], "this checkpoint")
    net = PolicyValueNet(game, config)
    net.load_state_dict(state["net"])
    return AlphaZeroAgent(game, net, config)


registry.register(
    registry.Algorithm(
        name="alphazero",
        config=AlphaZeroConfig,
        train=train,
        load=load,
        budget_field="iterations",
        unit="iterations",
        presets=PRESETS,
        renamed={"lr": "learning_rate", "lr_final": "learning_rate_end"},
        remote="self-play",
    )
)
