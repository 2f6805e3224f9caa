"""The self-play loop of AlphaZero and MuZero: actor, learner and evaluator around one model.

An algorithm (:mod:`rlx.games.alphazero`, :mod:`rlx.games.muzero`) keeps its network, its
targets and its loss, and plugs them into :func:`train` as a :class:`SelfPlayMethod`. One
iteration, read top to bottom in :func:`one_iteration` and :func:`train`:

1. **Act (self-play).** ``games_per_iteration`` games are played together by the current
   network (:func:`self_play`): every ply, every open game's position is searched by
   :func:`rlx.games.search.search` with the algorithm's evaluator (the rules and a
   policy-value network for AlphaZero, a learned model for MuZero), Dirichlet noise at the
   root, and the move drawn from ``pi(a) ∝ N(s, a)`` for the first ``temperature_moves``
   plies, the most visited move after. A move records ``(s, pi, to_play, Q, a)``: the
   position, the root's visit distribution, the player to move, the search's root value
   ``Q = sum_a W(a) / sum_a N(a)`` and the move. The games are played here, in ``workers``
   processes or on ``runners`` Ray workers (:class:`SelfPlayPool`), each a share of them
   with its own seed drawn from the run's generator.
2. **Learn.** The algorithm turns the games into targets in its replay buffer
   (:class:`ReplayRing`) and takes ``train_steps_per_iteration`` gradient steps on it
   (Adam, ``weight_decay`` the ``c`` of ``c ||theta||^2``), with step size ``learning_rate``
   or the cosine decay to ``learning_rate_end`` (:func:`learning_rate_at`).
3. **Evaluate (arena).** Every ``eval_every`` iterations, and after the last, the agent
   (search without noise, ``eval_simulations``, most visited move) plays ``eval_games``
   games against each of ``eval_opponents`` (seats alternating), logged as
   ``vs_<opponent>_win|draw|loss``.

A checkpoint holds the network, the optimiser, the replay buffer, the random generators and
the iteration (:class:`Learner`); a resumed run continues as the uninterrupted one would have.
The Ray workers are built by :mod:`rlx.distributed.selfplay` and handed to :func:`train` as
``remote`` (a :class:`RemoteSelfPlayFactory`); this module never imports it.
"""

from __future__ import annotations

import dataclasses
import math
import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from rlx import metrics as M
from rlx.core.checks import at_least, check_runner_fields, in_range, positive
from rlx.core.devices import check_device, resolve_device
from rlx.core.fields import CheckedFields, CheckpointFields
from rlx.core.seeding import rng_state, seed_everything, set_rng_state
from rlx.core.threads import set_torch_threads
from rlx.errors import CheckpointError, ConfigError
from rlx.games.agent import SearchAgent
from rlx.games.base import Game, check_same_game
from rlx.games.evaluation import arena, arena_metrics, check_opponents
from rlx.games.leaf_evaluators import Evaluator
from rlx.games.search import SearchConfig, choose, search, visit_policy
from rlx.runs.handle import RunHandle


# ============================================================================ config
@dataclass(frozen=True)
class _SelfPlayBasics(CheckedFields):
    """The fields of :class:`SelfPlayFields` ahead of the checkpoint fields in ``--help``."""

    iterations: int = 30
    """self-play + training rounds (the budget)"""
    games_per_iteration: int = 64
    """self-play games per iteration, searched together in one batch"""
    simulations: int = 80
    """MCTS simulations per self-play move"""
    eval_simulations: int = 80
    """MCTS simulations per move when the agent plays (arena, act)"""
    c_puct: float = 1.5
    """exploration weight of the prior in PUCT"""
    dirichlet_alpha: float = 1.0
    """root noise concentration (about 10 / typical number of legal moves)"""
    noise_fraction: float = 0.25
    """share of the root prior replaced by noise in self-play"""
    temperature_moves: int = 4
    """plies played by sampling pi ∝ N; later plies take the most visited move"""
    augment: bool = True
    """learn from the board's symmetries of each position (AlphaZero stores every symmetric
    copy, MuZero trains on a random one per sample)"""
    buffer_size: int = 40_000
    """positions kept in the replay buffer (the oldest leave first)"""
    batch_size: int = 256
    """positions per gradient step"""
    train_steps_per_iteration: int = 100
    """gradient steps per iteration"""
    learning_rate: float = 2e-3
    """Adam's step size (of the first iteration when learning_rate_end is set)"""
    learning_rate_end: float | None = None
    """step size of the last iteration, reached by cosine decay over the iterations (None:
    learning_rate throughout)"""
    weight_decay: float = 1e-4
    """c of the L2 term c ||theta||^2 (Adam's coupled weight_decay)"""
    hidden_sizes: tuple[int, ...] = (128, 128)
    """hidden layer widths of the networks' MLPs"""
    eval_every: int = 5
    """iterations between arena evaluations (the last iteration always has one)"""
    eval_games: int = 100
    """games against each opponent per evaluation, seats alternating (0: none)"""
    eval_opponents: tuple[str, ...] = ("random", "solver")
    """random, mcts-K (pure MCTS with K rollout simulations) or solver (perfect play,
    tictactoe only)"""
    workers: int = 1
    """processes that play the self-play games, each a share with its own seed drawn from the
    run's generator (1: in the training process)"""
    runners: int | None = None
    """Ray workers that play the self-play games instead of workers processes (the same shares
    and seeds; extra ray; None: no Ray)"""
    ray_address: str | None = None
    """with runners: join the Ray cluster at HOST:PORT (None: start a local Ray for the run)"""
    max_minutes: float = 0.0
    """also stop (checkpoint saved) once an iteration ends after this many minutes (0: no
    time limit)"""
    seed: int = 0
    """seeds the network, self-play, the replay sampling and the arena"""
    device: str = "auto"
    """where the network learns and evaluates positions: auto (CUDA, then MPS, then the CPU),
    cpu, cuda, cuda:N or mps; self-play worker processes evaluate on the CPU"""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_device(self)
        object.__setattr__(self, "hidden_sizes", tuple(int(h) for h in self.hidden_sizes))
        object.__setattr__(self, "eval_opponents", tuple(self.eval_opponents))
        for name in ("iterations", "games_per_iteration", "simulations", "eval_simulations",
                     "batch_size", "eval_every", "buffer_size", "workers"):  # fmt: skip
            at_least(self, name, 1)
        check_runner_fields(self)
        if self.runners is not None and self.workers > 1:
            raise ConfigError(
                f"workers={self.workers} and runners={self.runners} both ask for parallel "
                "self-play; use workers (processes on this machine) or runners (Ray), not both."
            )
        for name in ("train_steps_per_iteration", "temperature_moves", "eval_games",
                     "max_minutes", "weight_decay"):  # fmt: skip
            at_least(self, name, 0)
        in_range(self, "noise_fraction", 0.0, 1.0)
        for name in ("c_puct", "dirichlet_alpha", "learning_rate"):
            positive(self, name)
        end = self.learning_rate_end
        if end is not None and not 0 < end <= self.learning_rate:
            raise ConfigError(
                f"learning_rate_end must be in (0, learning_rate={self.learning_rate}] (None: a "
                f"constant learning rate), not {end}."
            )
        if any(width < 1 for width in self.hidden_sizes):
            raise ConfigError(f"hidden_sizes={self.hidden_sizes}: every width must be >= 1.")

    def search(self, *, selfplay: bool) -> SearchConfig:
        """How a move is searched: in self-play (root noise) or when the agent plays."""
        raise NotImplementedError

    def searches(
        self, num_games: int, rng: np.random.Generator
    ) -> list[tuple[list[int], SearchConfig, bool]]:
        """This ply's searches of the open games: ``(rows, search, recorded)``; one full
        search of them all, each move recorded (AlphaZero's playout cap splits them)."""
        return [(list(range(num_games)), self.search(selfplay=True), True)]

    def keeps_trees(self) -> bool:
        """Whether a move's search continues the subtree of the move before (tree reuse)."""
        return False


@dataclass(frozen=True)
class SelfPlayFields(CheckpointFields, _SelfPlayBasics):
    """What the self-play loop reads, for AlphaZero and MuZero alike (their configs inherit it
    and redeclare a default where theirs differs), then when to checkpoint (steps: iterations).
    (A dataclass lists the last base's fields first, so the checkpoint fields follow.)"""


def learning_rate_at(config: SelfPlayFields, iteration: int) -> float:
    """The step size of 0-based ``iteration``: ``learning_rate`` or, with
    ``learning_rate_end``, the cosine decay over the ``I`` iterations

        lr_i = lr_end + (lr - lr_end) (1 + cos(pi i / (I - 1))) / 2
    """
    start, end = config.learning_rate, config.learning_rate_end
    if end is None or config.iterations == 1:
        return start
    progress = min(iteration / (config.iterations - 1), 1.0)
    return end + (start - end) * (1 + math.cos(math.pi * progress)) / 2


# ============================================================================ the algorithm
@dataclass(frozen=True)
class SelfPlayMethod:
    """What an algorithm adds to :func:`train`: module-level functions and classes, so that
    worker processes and Ray workers receive it whole (by reference).

    Attributes:
        name: the registered name (``"alphazero"``), for the agent and messages.
        title: the name as people write it (``"AlphaZero"``), for error messages.
        make_game: ``make_game(env, config)``: the game ``env`` names, encoded as ``config``
            asks.
        make_net: ``make_net(game, config)``: a fresh network, on the CPU.
        evaluator: ``evaluator(net)``: what the search values its leaves with
            (:mod:`rlx.games.leaf_evaluators`).
        make_buffer: ``make_buffer(game, config)``: an empty :class:`ReplayRing` of its targets.
        store: ``store(buffer, game, games, config, rng)``: the targets of the played games
            into the buffer.
        update: ``update(net, optimizer, buffer, game, config, rng)``:
            ``train_steps_per_iteration`` gradient steps on a buffer that holds samples (the
            network in training mode); the log row's metrics.
    """

    name: str
    title: str
    make_game: Callable[[Any, Any], Game]
    make_net: Callable[[Game, Any], nn.Module]
    evaluator: Callable[[nn.Module], Evaluator]
    make_buffer: Callable[[Game, Any], ReplayRing]
    store: Callable[..., None]
    update: Callable[..., dict[str, float]]


# ============================================================================ act: self-play
@dataclass
class PlayedGame:
    """One self-play game: its recorded moves (every move, or with playout-cap randomisation
    the fully searched ones), its length and its result (+1, -1 or 0, as ``Game.winner``)."""

    planes: np.ndarray  # [M, C, H, W] float32: the positions, from the mover's side
    policies: np.ndarray  # [M, A] float32: the root visit distributions pi = N / sum N
    to_play: np.ndarray  # [M] int64: the player to move, +1 or -1
    root_values: np.ndarray  # [M] float64: the search's root value Q, for the player to move
    actions: np.ndarray  # [M] int64: the moves played
    length: int  # plies
    result: int


def self_play(
    game: Game, evaluator: Evaluator, config: SelfPlayFields, rng: np.random.Generator
) -> list[PlayedGame]:
    """``games_per_iteration`` games played together, every ply of every open game searched in
    one batch (``config.searches``), with tree reuse when ``config.keeps_trees()``."""
    states = [game.initial_state() for _ in range(config.games_per_iteration)]
    moves: list[list[tuple[np.ndarray, np.ndarray, int, float, int]]] = [[] for _ in states]
    plies = [0] * len(states)
    kept = None
    while open_games := [i for i, s in enumerate(states) if not s.is_terminal]:
        actions: dict[int, int] = {}
        for rows, settings, recorded in config.searches(len(open_games), rng):
            group = [open_games[j] for j in rows]
            counts, values, trees = search(
                game, [states[i] for i in group], evaluator, settings, rng, kept
            )
            for i, n, q in zip(group, counts, values, strict=True):
                state = states[i]
                temperature = 1.0 if state.moves < config.temperature_moves else 0.0
                actions[i] = choose(n, temperature, rng)
                if recorded:
                    pi = visit_policy(n, 1.0)
                    moves[i].append((game.encode(state), pi, state.to_play, q, actions[i]))
        for i in open_games:
            states[i] = game.play(states[i], actions[i])
            plies[i] += 1
        if config.keeps_trees():  # the trees of the games that go on, in their next order
            rows = [j for j, i in enumerate(open_games) if not states[i].is_terminal]
            kept = trees.after(rows, [actions[open_games[j]] for j in rows], config.simulations)
    return [_played(game, *game_moves) for game_moves in zip(moves, plies, states, strict=True)]


def _played(game: Game, record: list, length: int, final: Any) -> PlayedGame:
    planes, policies, to_play, values, actions = zip(*record, strict=True) if record else ([],) * 5
    shape = (0, game.num_planes, *game.board_shape)
    return PlayedGame(
        np.stack(planes) if planes else np.zeros(shape, np.float32),
        np.asarray(policies, dtype=np.float32).reshape(-1, game.num_actions),
        np.asarray(to_play, dtype=np.int64), np.asarray(values, dtype=np.float64),
        np.asarray(actions, dtype=np.int64), length, int(final.result),
    )  # fmt: skip


def play_share(
    method: SelfPlayMethod, game_name: str, config: SelfPlayFields, weights: dict, seed: int,
    games: int,
) -> list[PlayedGame]:  # fmt: skip
    """One worker's share of an iteration: ``games`` self-play games with the learner's
    ``weights`` and a generator seeded with ``seed`` (in a worker process or on a Ray worker)."""
    set_torch_threads(1)
    game = method.make_game(game_name, config)
    net = method.make_net(game, config)
    net.load_state_dict(weights)
    share = dataclasses.replace(config, games_per_iteration=games, workers=1)
    return self_play(game, method.evaluator(net.eval()), share, np.random.default_rng(seed))


class RemoteSelfPlay(Protocol):
    """Self-play workers elsewhere (Ray's, built by :mod:`rlx.distributed.selfplay`), as
    :func:`train` uses them: each plays its share with its seed by calling the ``work`` it was
    started with (:func:`play_share`)."""

    def play(self, weights: dict, seeds: list[int], shares: list[int]) -> list[list[PlayedGame]]:
        """Every worker's share ``(seed, games)``, in worker order (empty shares skipped)."""
        ...

    def stats(self) -> dict[str, float]:
        """Metrics of the workers to log each iteration (e.g. how many were replaced)."""
        ...

    def close(self) -> None: ...


class RemoteSelfPlayFactory(Protocol):
    """What :func:`train` receives as ``remote``: it starts ``config.runners`` workers of a
    run, each of which answers a share ``(weights, seed, games)`` with
    ``work(**options, weights=weights, seed=seed, games=games)``. The algorithm, the game and
    the network travel in ``work`` and ``options``, so the workers' side knows no game."""

    def __call__(
        self, work: Callable[..., list[PlayedGame]], options: dict[str, Any], config: Any
    ) -> RemoteSelfPlay: ...


class SelfPlayPool:
    """``workers`` processes (spawned once per run), or ``runners`` remote workers (started by
    ``remote``), that play self-play games in parallel with the current weights; with neither,
    the games are played in this process."""

    def __init__(
        self,
        method: SelfPlayMethod,
        game: Game,
        config: SelfPlayFields,
        remote: RemoteSelfPlayFactory | None = None,
    ) -> None:
        self.method, self.game, self.config = method, game, config
        self.pool = None
        self.remote: RemoteSelfPlay | None = None
        if config.runners is not None:
            if remote is None:
                raise ConfigError(
                    f"runners={config.runners} needs Ray's self-play workers, which rlx.train "
                    "builds (rlx.distributed); train through rlx.train or leave runners out."
                )
            options = {"method": method, "game_name": game.name, "config": config}
            self.remote = remote(play_share, options, config)
        elif config.workers > 1:
            context = multiprocessing.get_context("spawn")  # no forked torch state
            self.pool = ProcessPoolExecutor(config.workers, mp_context=context)

    def play(self, net: nn.Module, rng: np.random.Generator) -> list[PlayedGame]:
        """This iteration's games, in worker order."""
        if self.pool is None and self.remote is None:
            return self_play(self.game, self.method.evaluator(net.eval()), self.config, rng)
        n, k = self.config.games_per_iteration, self.config.runners or self.config.workers
        shares = [n // k + (i < n % k) for i in range(k)]
        seeds = rng.integers(0, 2**63 - 1, size=k)
        weights = {name: t.detach().cpu().clone() for name, t in net.state_dict().items()}
        if self.remote is not None:
            played = self.remote.play(weights, [int(s) for s in seeds], shares)
        else:
            assert self.pool is not None  # more than one worker, and no Ray runners
            played = [f.result() for f in [
                self.pool.submit(play_share, self.method, self.game.name, self.config, weights,
                                 int(seed), games)
                for seed, games in zip(seeds, shares, strict=True) if games
            ]]  # fmt: skip
        return [g for share in played for g in share]

    def metrics(self) -> dict[str, float]:
        """The remote workers' :meth:`RemoteSelfPlay.stats`; none in this process."""
        return {} if self.remote is None else self.remote.stats()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)
        if self.remote is not None:
            self.remote.close()


# ============================================================================ learn
class ReplayRing:
    """A ring of samples, each a row of every named array; samples are drawn uniformly and
    the oldest leave first. ``fields``: name -> (shape of one row, dtype)."""

    def __init__(self, capacity: int, fields: dict[str, tuple[tuple[int, ...], Any]]) -> None:
        self.data = {name: np.zeros((capacity, *shape), dtype=dtype)
                     for name, (shape, dtype) in fields.items()}  # fmt: skip
        self.capacity, self.size, self.cursor = capacity, 0, 0

    def add(self, **rows: np.ndarray) -> None:
        """Append ``n`` rows of every field; past the capacity the oldest are overwritten, as
        if the rows had come one by one."""
        n = len(next(iter(rows.values())))
        kept = min(n, self.capacity)
        index = (self.cursor + np.arange(n - kept, n)) % self.capacity
        for name, values in rows.items():
            self.data[name][index] = values[n - kept :]
        self.cursor = (self.cursor + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def sample(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """``n`` rows drawn uniformly, with replacement."""
        index = rng.integers(0, self.size, size=n)
        return {name: values[index] for name, values in self.data.items()}

    def state(self) -> dict[str, Any]:
        return {**{name: values[: self.size].copy() for name, values in self.data.items()},
                "cursor": self.cursor}  # fmt: skip

    def restore(self, state: dict[str, Any]) -> None:
        n = len(state[next(iter(self.data))])
        for name, values in self.data.items():
            values[:n] = state[name]
        self.size, self.cursor = n, int(state["cursor"])


@dataclass
class Learner:
    """What training changes: the network, its optimiser, the replay buffer, the generator;
    :meth:`state` is a checkpoint."""

    method: SelfPlayMethod
    game: Game
    config: SelfPlayFields
    net: nn.Module
    optimizer: torch.optim.Optimizer
    buffer: ReplayRing
    rng: np.random.Generator

    @classmethod
    def create(cls, method: SelfPlayMethod, game: Game, config: SelfPlayFields) -> Learner:
        rng = seed_everything(config.seed)
        net = method.make_net(game, config).to(resolve_device(config.device))
        if any(isinstance(m, nn.Conv2d) for m in net.modules()):
            # channels-last memory: the layout oneDNN's CPU convolutions run fastest on
            # Module.to takes memory_format, which torch's typed overloads of it leave out
            net = net.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        optimizer = torch.optim.Adam(
            net.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay
        )
        return cls(method, game, config, net, optimizer, method.make_buffer(game, config), rng)

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
        weights = network_state(self.method, state, self.game)
        try:
            self.net.load_state_dict(weights)
            self.optimizer.load_state_dict(state["optimizer"])
        except (KeyError, RuntimeError, ValueError) as exc:
            raise CheckpointError(
                f"the checkpoint does not match this {self.method.title} config "
                f"({type(exc).__name__}); resume with the run's own config."
            ) from exc
        self.buffer.restore(state["buffer"])
        set_rng_state(state["rng"], self.rng)
        return int(state["iteration"])


def network_state(method: SelfPlayMethod, state: dict[str, Any], game: Game) -> dict:
    """The network's weights in a checkpoint of ``game`` (MuZero's checkpoints before the
    shared loop kept them under ``"muzero"``)."""
    weights = state.get("net", state.get("muzero"))
    if weights is None:
        raise CheckpointError(
            f"this checkpoint holds no {method.title} network; load a {method.name} run."
        )
    check_same_game(game.name, state["game"], f"this {method.title} checkpoint")
    return weights


def one_iteration(learner: Learner, pool: SelfPlayPool, iteration: int) -> dict[str, float]:
    """Self-play a batch of games, store their targets, then train on the buffer (none while
    it is empty, as after a tiny first iteration whose moves were all fast searches)."""
    config, method = learner.config, learner.method
    lr = learning_rate_at(config, iteration)
    for group in learner.optimizer.param_groups:
        group["lr"] = lr
    t0 = time.perf_counter()
    games = pool.play(learner.net, learner.rng)
    method.store(learner.buffer, learner.game, games, config, learner.rng)
    t1 = time.perf_counter()
    metrics = {}
    if learner.buffer.size:
        learner.net.train()
        metrics = method.update(learner.net, learner.optimizer, learner.buffer, learner.game,
                                config, learner.rng)  # fmt: skip
        learner.net.eval()
    results = np.asarray([g.result for g in games])
    return {
        **metrics,
        M.LR: lr,
        M.GAME_LENGTH: float(np.mean([g.length for g in games])),
        M.FIRST_PLAYER_WIN: float(np.mean(results == 1)),
        M.DRAW: float(np.mean(results == 0)),
        M.POSITIONS: float(sum(len(g.actions) for g in games)),
        M.SELFPLAY_S: t1 - t0,
        M.TRAIN_S: time.perf_counter() - t1,
    }


# ============================================================================ evaluate: arena
def evaluate(agent: SearchAgent, iteration: int) -> dict[str, float]:
    """The arena against the config's opponents, as ``vs_<name>_win|draw|loss`` rates; the
    agent's tie-breaking is seeded per evaluation, so evaluating never changes training."""
    config = agent.config
    if not config.eval_games or not config.eval_opponents:
        return {}
    agent.refresh()  # the network has trained since the last arena
    agent.rng = np.random.default_rng(config.seed + iteration)
    return arena_metrics(
        arena(agent.game, agent, config.eval_opponents, config.eval_games, config.seed)
    )


# ============================================================================ the loop
def train(
    method: SelfPlayMethod,
    config: SelfPlayFields,
    env: Any,
    run: RunHandle,
    remote: RemoteSelfPlayFactory | None = None,
) -> SearchAgent:
    """Self-play, train and evaluate for ``config.iterations`` iterations inside ``run`` (or
    until ``max_minutes``, or a stop request); with ``runners``, self-play runs on the
    workers that ``remote`` starts."""
    game = method.make_game(env, config)
    check_opponents(game, config.eval_opponents)
    learner = Learner.create(method, game, config)
    iteration = learner.restore(run.resumed_state) if run.resumed_state is not None else 0
    agent = SearchAgent(method.name, game, learner.net, config, method.evaluator)
    deadline = time.monotonic() + 60 * config.max_minutes if config.max_minutes else None
    last_arena: dict[str, float] = {}
    pool = SelfPlayPool(method, game, config, remote)
    try:
        while iteration < config.iterations and not run.stop_requested:
            metrics = {**one_iteration(learner, pool, iteration), **pool.metrics()}
            iteration += 1
            out_of_time = deadline is not None and time.monotonic() >= deadline
            if iteration % config.eval_every == 0 or iteration == config.iterations or out_of_time:
                last_arena = evaluate(agent, iteration)
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
    if not last_arena and iteration > 0 and not run.stop_requested:  # resumed at the end
        last_arena = evaluate(agent, iteration)
    run.finish(iteration, {"game": game.name, **last_arena})
    return agent


def load(
    method: SelfPlayMethod, config: SelfPlayFields, env_id: str, state: dict[str, Any]
) -> SearchAgent:
    """The agent of a checkpoint's state (``rlx.load(run_dir)``)."""
    game = method.make_game(env_id, config)
    weights = network_state(method, state, game)
    net = method.make_net(game, config)
    try:
        net.load_state_dict(weights)
    except RuntimeError as exc:
        raise CheckpointError(
            f"the checkpoint's network does not match its {method.title} config (the fields "
            "that size the network)."
        ) from exc
    return SearchAgent(method.name, game, net, config, method.evaluator)


__all__ = [
    "Learner",
    "PlayedGame",
    "RemoteSelfPlay",
    "RemoteSelfPlayFactory",
    "ReplayRing",
    "SelfPlayFields",
    "SelfPlayMethod",
    "SelfPlayPool",
    "learning_rate_at",
    "load",
    "play_share",
    "self_play",
    "train",
]
