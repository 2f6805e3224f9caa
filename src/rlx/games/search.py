"""Monte Carlo tree search: one search, whose leaves an evaluator values.

Each simulation walks from the root, choosing at every node of the tree the move with the
highest score, down to a move whose position is not in the tree yet. An evaluator
(:mod:`rlx.games.leaf_evaluators`) says what lies there, a
:class:`~rlx.games.leaf_evaluators.Leaf`: the position, its value ``v`` for its player to move
and, when the evaluator has them, the priors ``P`` of its moves; it joins the tree (unless
the game is over there) and the value is backed up the path. Each node keeps, per move ``a``,
the visits ``N(s, a)``, the sum ``W(s, a)`` of the values backed up through it, from the point
of view of the player to move at ``s``, and the reward ``r(s, a)`` of the move (0 unless a
learned model predicts one). From the leaf up,

    G <- r(s, a) + gamma * sigma * G,   N(s, a) <- N(s, a) + 1,   W(s, a) <- W(s, a) + G

with ``sigma = -1`` when the player to move changes from ``s`` to the next node (every move of
tic-tac-toe and Connect Four, and every move of a learned model), ``+1`` when the same player
moves again (some OpenSpiel games). The score of a move is

- **PUCT** (AlphaZero, MuZero), when the evaluator gives priors:

      a* = argmax_a  Q(s, a) + c_puct * P(s, a) * sqrt(sum_b N(s, b)) / (1 + N(s, a))

  with ``Q = W / N``, or ``fpu`` for a move not tried yet; with ``value_bounds`` (MuZero) every
  Q is first scaled to [0, 1] by the smallest and largest value backed up in the tree,
  ``Qn = (Q - min) / (max - min)``, the range starting from the bounds.
- **UCT** (pure MCTS, Kocsis and Szepesvari, 2006), when it gives none (random rollouts):

      a* = argmax_a  W(s, a) / N(s, a) + c_uct * sqrt(ln N(s) / N(s, a))

  with ``N(s)`` the visits of ``s`` itself; the moves not tried yet come first, in a random
  order drawn at the node's second visit (its first gave a rollout), as in OpenSpiel's MCTS.

At the root, Dirichlet noise ``P <- (1 - eps) P + eps * Dir(alpha)`` over the legal moves keeps
self-play exploring, and the move is drawn from ``pi(a) ∝ N(s, a)^(1/T)`` (``T -> 0``: the most
visited move). Many positions are searched together: one simulation step of every tree sends
its leaf to one batched evaluation, which is what makes self-play fast on a CPU. Random
rollouts gain nothing from a batch: the Python tree values their leaves one after the other,
with the same draws, and leaves a new node unopened (no legal moves or statistics) until a
walk first goes through it, which most never do.

Tic-tac-toe and Connect Four searched with random rollouts or a policy-value network run in
numba kernels (:mod:`rlx.games.kernels`): the same algorithm and the same visit counts as the
Python tree, which every other game and evaluator uses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import inf, log, sqrt
from typing import Any, NamedTuple, TypeAlias, cast

import numpy as np

from rlx.errors import ConfigError, EnvError
from rlx.games import bitboards, kernels
from rlx.games.base import Game, GameState, IllegalMoveError
from rlx.games.leaf_evaluators import (
    Evaluator,
    Leaf,
    PolicyValue,
    PolicyValueEvaluator,
    RandomRollouts,
    as_evaluator,
    result_value,
)


@dataclass(frozen=True)
class SearchConfig:
    """How one move is searched.

    Attributes:
        simulations: simulations per move (a kept tree's root: the visits to reach).
        c_puct: PUCT's exploration weight of the prior term.
        dirichlet_alpha: concentration of the root noise (about 10 / typical legal moves).
        noise_fraction: ``eps``, the share of the root prior replaced by noise (0: none).
        fpu: PUCT's Q of a move not yet visited ("first-play urgency"), for the player to move.
        c_uct: UCT's exploration constant (OpenSpiel's examples use 2 for values in [-1, 1]).
        gamma: the discount of the backup (1 for board games).
        value_bounds: None: PUCT reads Q as it is (AlphaZero); ``(low, high)``: Q scaled to
            [0, 1] by the tree's range of values, starting from these known bounds (MuZero).
    """

    simulations: int = 100
    c_puct: float = 1.5
    dirichlet_alpha: float = 1.0
    noise_fraction: float = 0.0
    fpu: float = 0.0
    c_uct: float = 2.0
    gamma: float = 1.0
    value_bounds: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        whole = isinstance(self.simulations, int | np.integer) and not isinstance(
            self.simulations, bool
        )
        if not whole or self.simulations < 1:
            raise ConfigError(f"simulations must be an integer >= 1, not {self.simulations!r}.")


class SearchResult(NamedTuple):
    """What a search of ``B`` positions found."""

    counts: np.ndarray  # [B, A] visits N(root, a), int64; zero on illegal moves
    values: np.ndarray  # [B] each root's sum_a W(a) / sum_a N(a), for its player to move
    trees: Any  # the searched trees, to continue with ``trees.after(...)`` (None: no reuse)


# ============================================================================ the root
def add_root_noise(
    prior: np.ndarray, legal: np.ndarray, alpha: float, fraction: float, rng: np.random.Generator
) -> np.ndarray:
    """``(1 - eps) P + eps Dir(alpha)`` on the legal actions; illegal ones stay 0."""
    if fraction <= 0:
        return prior
    noise = np.zeros_like(prior)
    noise[legal] = rng.dirichlet(np.full(int(legal.sum()), alpha))
    return (1.0 - fraction) * prior + fraction * noise


def visit_policy(counts: np.ndarray, temperature: float) -> np.ndarray:
    """``pi(a) ∝ N(a)^(1/T)``; ``T = 0`` puts all mass on the most visited moves (ties
    shared)."""
    counts = np.asarray(counts, dtype=np.float64)
    if temperature <= 0:
        best = counts == counts.max()
        return best / best.sum()
    scaled = counts ** (1.0 / temperature)
    return scaled / scaled.sum()


def choose(counts: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    """A move drawn from :func:`visit_policy` (``T = 0``: a most visited move, ties at
    random)."""
    policy = visit_policy(counts, temperature)
    return int(rng.choice(len(policy), p=policy))


def root_values(n: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``sum_a W(a) / sum_a N(a)`` of each root's edges ``[B, A]`` (0 before any visit)."""
    return w.sum(axis=-1) / np.maximum(n.sum(axis=-1), 1.0)


def simulations_to_run(config: SearchConfig, root_visits: np.ndarray) -> np.ndarray:
    """Simulations each root runs: ``simulations`` for a fresh one; a kept one, enough to bring
    it to ``simulations`` visits and at least a quarter of them (so that the root's new noise
    still steers part of the search)."""
    least = max(config.simulations // 4, 1)
    return np.maximum(config.simulations - root_visits.astype(np.int64), least)


# ============================================================================ the tree
#: a node's per-move statistics: numpy arrays under PUCT, lists of floats under UCT
Stats: TypeAlias = np.ndarray | list[float]


class MinMaxStats:
    """The smallest and largest value backed up in one tree, to scale Q to [0, 1]; ``bounds``
    (the known bounds, ``(-1, 1)`` for a board game) are in the range from the start."""

    __slots__ = ("high", "low")

    def __init__(self, bounds: tuple[float, float] | None = None) -> None:
        self.low, self.high = bounds if bounds is not None else (np.inf, -np.inf)

    def update(self, value: float) -> None:
        self.low, self.high = min(self.low, value), max(self.high, value)

    def normalize(self, q: np.ndarray) -> np.ndarray:
        if self.high > self.low:
            return (q - self.low) / (self.high - self.low)
        return q


class Node:
    """A position in the tree: per move the prior, visits, value sums and rewards.

    ``position`` is a :class:`GameState` or a learned model's latent state; ``prior`` is None
    in a search without priors (UCT), which draws ``order``, the random order of the untried
    moves, at the node's second visit, and counts in ``tried`` the moves at the head of
    ``order`` already tried; ``visits`` is ``N(s)``, the visits of the node itself. ``n``,
    ``w`` and ``reward`` are numpy arrays under PUCT, whose selection is one vector
    expression, and lists of floats under UCT, whose selection loops over the moves in Python
    (faster on floats than on numpy's scalars). A leaf of a rollout search joins the tree
    unopened, its ``legal``, statistics and ``children`` None until a walk first leaves it
    (:meth:`open`): most leaves are never walked through.
    """

    __slots__ = (
        "children", "legal", "n", "order", "position", "prior", "reward", "to_play", "tried",
        "visits", "w",
    )  # fmt: skip

    def __init__(
        self,
        position: Any,
        prior: np.ndarray | None,
        legal: np.ndarray | None,
        to_play: int | None = None,
    ) -> None:
        self.position, self.prior, self.to_play = position, prior, to_play
        self.visits = 0
        self.order: list[int] | None = None
        self.tried = 0
        # None until the node is opened (:meth:`open`)
        self.legal: np.ndarray | None = None
        self.n: Stats | None = None
        self.w: Stats | None = None
        self.reward: Stats | None = None
        self.children: dict[int, Node] | None = None
        if legal is not None:
            self.open(legal)

    def open(self, legal: np.ndarray) -> None:
        """Give the node its legal moves, no children and, per move, zero ``N``, ``W`` and
        ``r``."""
        moves = len(legal)
        self.legal = legal
        self.children = {}
        if self.prior is None:
            self.n, self.w, self.reward = [0.0] * moves, [0.0] * moves, [0.0] * moves
        else:
            self.n, self.w, self.reward = np.zeros(moves), np.zeros(moves), np.zeros(moves)

    @classmethod
    def of(cls, leaf: Leaf) -> Node:
        """The node of a leaf that joins the tree."""
        return cls(leaf.position, leaf.prior, leaf.legal, leaf.to_play)

    def q(self, stats: MinMaxStats | None, fpu: float) -> np.ndarray:
        """``Q(s, a) = W / N``, ``fpu`` for a move not visited yet; scaled by ``stats``."""
        # a node with priors (PUCT, the only kind asked for Q) keeps numpy arrays
        n, w = cast(np.ndarray, self.n), cast(np.ndarray, self.w)
        q = np.where(n > 0, w / np.maximum(n, 1.0), fpu)
        return q if stats is None else stats.normalize(q)


def puct_select(
    prior: np.ndarray, n: np.ndarray, q: np.ndarray, legal: np.ndarray, c_puct: float
) -> int:
    """``argmax_a Q + c_puct P sqrt(sum N) / (1 + N)`` over the legal actions."""
    u = c_puct * prior * np.sqrt(max(n.sum(), 1.0)) / (1.0 + n)
    score = np.where(legal, q + u, -np.inf)
    return int(np.argmax(score))


def uct_select(node: Node, c_uct: float, rng: np.random.Generator) -> int:
    """``argmax_a W / N + c_uct sqrt(ln N(s) / N)``; an untried move first, in random order."""
    order = node.order
    visits, values = node.n, node.w
    assert node.legal is not None and visits is not None and values is not None  # opened
    if order is None:
        # the shuffle of a list draws what rng.permutation of the same moves draws, without
        # making arrays
        order = node.order = node.legal.nonzero()[0].tolist()
        rng.shuffle(order)
    # the first move of the order not tried yet, if any; visits only grow, so the moves before
    # it stay tried and the next call starts there
    tried, moves = node.tried, len(order)
    while tried < moves and visits[order[tried]] != 0:
        tried += 1
    node.tried = tried
    if tried < moves:
        return order[tried]
    log_parent = log(max(node.visits, 1))
    best, best_score = order[0], -inf
    for action in order:
        n = visits[action]
        score = values[action] / n + c_uct * sqrt(log_parent / n)
        if score > best_score:
            best, best_score = action, score
    return best


def walk_to_leaf(
    root: Node,
    config: SearchConfig,
    stats: MinMaxStats | None,
    rng: np.random.Generator,
    legal_mask: Callable[[Any], np.ndarray] | None = None,
) -> list[tuple[Node, int]]:
    """Walk by PUCT (or UCT, in a tree without priors) to a move whose position is not in the
    tree: the path of (node, move). ``legal_mask(position)`` opens the unopened nodes on the
    way (:meth:`Node.open`)."""
    path = []
    node = root
    while True:
        if node.prior is None:
            if node.legal is None:
                assert legal_mask is not None, "an unopened node needs legal_mask to open it"
                node.open(legal_mask(node.position))
            action = uct_select(node, config.c_uct, rng)
        else:
            # a node with priors is opened when made, with numpy arrays
            n, legal = cast(np.ndarray, node.n), cast(np.ndarray, node.legal)
            q = node.q(stats, config.fpu)
            action = puct_select(node.prior, n, q, legal, config.c_puct)
        path.append((node, action))
        assert node.children is not None  # opened above, or when made
        child = node.children.get(action)
        if child is None:
            return path
        node = child


def backup(
    path: list[tuple[Node, int]],
    value: float,
    stats: MinMaxStats | None = None,
    gamma: float = 1.0,
    to_play: int | None = None,
) -> None:
    """``G <- r(s, a) + gamma * sigma * G`` up the path, from the leaf's ``value`` for its
    player to move ``to_play`` (``sigma`` is +1 when the player to move at ``s`` moves again
    below it, -1 otherwise or when unknown); each edge gains ``N += 1``, ``W += G``."""
    g, below = value, to_play
    for node, action in reversed(path):
        reward, n, w = node.reward, node.n, node.w
        assert reward is not None and n is not None and w is not None  # a walk opens its nodes
        same_player = below is not None and node.to_play == below
        g = reward[action] + gamma * (g if same_player else -g)
        n[action] += 1.0
        w[action] += g
        node.visits += 1
        if stats is not None:
            stats.update(g)
        below = node.to_play


class NodeTrees(list):
    """The roots of the Python tree (``None``: no tree yet)."""

    def after(self, rows: Sequence[int], actions: Sequence[int], extra_nodes: int) -> NodeTrees:
        """The nodes reached by playing ``actions[i]`` from root ``rows[i]``, as new roots."""
        return NodeTrees(self[r].children.get(a) for r, a in zip(rows, actions, strict=True))


# ============================================================================ the search
def search(
    game: Game,
    states: Sequence[GameState],
    evaluator: Evaluator | PolicyValue,
    config: SearchConfig,
    rng: np.random.Generator,
    kept: Any = None,
    *,
    use_kernels: bool = True,
) -> SearchResult:
    """Search every (non-terminal) position in ``states`` together.

    Args:
        evaluator: what values the leaves (:mod:`rlx.games.leaf_evaluators`); a bare
            policy-value function ``(planes, legal) -> (priors, values)`` is a
            :class:`~rlx.games.leaf_evaluators.PolicyValueEvaluator`.
        rng: the root noise, UCT's move orders and the rollouts (numba's generator, in the
            kernels, is seeded from it).
        kept: the previous move's trees passed through their ``after(rows, actions,
            extra_nodes)`` (the subtrees of the moves played, re-rooted), to continue them:
            AlphaGo Zero's tree reuse. A kept root already holds visits, so it runs only the
            simulations that bring it to ``simulations`` (at least a quarter of them, with fresh
            root noise).
        use_kernels: False searches tic-tac-toe and Connect Four in the Python tree too (the
            reference the kernels are tested against).

    Returns:
        the visit counts, root values and trees (:class:`SearchResult`).
    """
    evaluator = as_evaluator(evaluator)
    if any(s.is_terminal for s in states):
        raise IllegalMoveError("the game is over; there is no move to search for.")
    kind = bitboards.kind_of(game) if use_kernels else None
    if kind is not None and isinstance(evaluator, RandomRollouts):
        return _rollouts_in_kernels(kind, states, config, rng, kept)
    if kind is not None and isinstance(evaluator, PolicyValueEvaluator):
        return _network_in_kernels(kind, game, states, evaluator, config, rng, kept)
    return _tree_search(game, states, evaluator, config, rng, kept)


def _tree_search(
    game: Game,
    states: Sequence[GameState],
    evaluator: Evaluator,
    config: SearchConfig,
    rng: np.random.Generator,
    kept: NodeTrees | None,
) -> SearchResult:
    """:func:`search` in the Python tree: any game, any evaluator."""
    roots = _plant(game, states, evaluator, config, rng, kept)
    stats = [None if config.value_bounds is None else MinMaxStats(config.value_bounds)
             for _ in roots]  # fmt: skip
    # random rollouts value each leaf on its own: the lists and Leaf objects of a batched
    # evaluation would cost about as much as the short rollouts of a small game
    rollouts = evaluator if type(evaluator) is RandomRollouts else None
    budget = simulations_to_run(config, np.array([np.sum(root.n) for root in roots])).tolist()
    trees, last_steps = list(zip(roots, stats, budget, strict=True)), set(budget)
    legal_mask = game.legal_mask
    for i in range(max(budget, default=0)):
        if i in last_steps:  # some roots have run their simulations
            trees = [tree for tree in trees if tree[2] > i]
        # every tree walks before any leaf is valued: the rng's draws come in that order
        paths = [walk_to_leaf(root, config, tree_stats, rng, legal_mask)
                 for root, tree_stats, _ in trees]  # fmt: skip
        if rollouts is not None:
            _grow_by_rollouts(game, rollouts, paths, trees, config, rng)
        else:
            _grow_by_evaluator(game, evaluator, paths, trees, config, rng)
    n = np.stack([root.n for root in roots])
    values = root_values(n, np.stack([root.w for root in roots]))
    return SearchResult(n.astype(np.int64), values, roots)


def _grow_by_evaluator(
    game: Game,
    evaluator: Evaluator,
    paths: list[list[tuple[Node, int]]],
    trees: list[tuple[Node, MinMaxStats | None, int]],
    config: SearchConfig,
    rng: np.random.Generator,
) -> None:
    """The leaves at the ends of ``paths``, valued in one batch, join their trees (unless the
    game is over there) and their values are backed up."""
    leaves = evaluator.leaves(game, [path[-1][0].position for path in paths],
                              [path[-1][1] for path in paths], rng)  # fmt: skip
    for path, leaf, (_, tree_stats, _) in zip(paths, leaves, trees, strict=True):
        parent, action = path[-1]
        assert parent.reward is not None and parent.children is not None  # the walk opened it
        parent.reward[action] = leaf.reward
        if leaf.legal is not None:
            child = parent.children[action] = Node.of(leaf)
            child.visits = 1
        backup(path, leaf.value, tree_stats, config.gamma, leaf.to_play)


def _grow_by_rollouts(
    game: Game,
    evaluator: RandomRollouts,
    paths: list[list[tuple[Node, int]]],
    trees: list[tuple[Node, MinMaxStats | None, int]],
    config: SearchConfig,
    rng: np.random.Generator,
) -> None:
    """:func:`_grow_by_evaluator` for :class:`~rlx.games.leaf_evaluators.RandomRollouts`, one
    leaf after the other: the same leaves, values and draws of ``rng`` as its ``leaves``."""
    for path, (_, tree_stats, _) in zip(paths, trees, strict=True):
        parent, action = path[-1]
        assert parent.reward is not None and parent.children is not None  # the walk opened it
        state = game.play(parent.position, action)
        parent.reward[action] = 0.0  # the only reward of a board game is its result
        if state.is_terminal:
            value = result_value(state)
        else:
            value = evaluator.value(game, state, rng)
            child = parent.children[action] = Node(state, None, None, state.to_play)
            child.visits = 1
        backup(path, value, tree_stats, config.gamma, state.to_play)


def _plant(
    game: Game,
    states: Sequence[GameState],
    evaluator: Evaluator,
    config: SearchConfig,
    rng: np.random.Generator,
    kept: NodeTrees | None,
) -> NodeTrees:
    """The roots to search: ``kept`` ones with their statistics, the others new from the
    evaluator; every root's prior gets fresh noise from ``rng``, in root order."""
    kept = NodeTrees([None] * len(states)) if kept is None else kept
    if len(kept) != len(states):
        raise EnvError(f"{len(kept)} kept trees for {len(states)} positions.")
    fresh = [b for b, root in enumerate(kept) if root is None]
    planted = iter(evaluator.roots(game, [states[b] for b in fresh], rng) if fresh else [])
    roots = NodeTrees()
    for b, state in enumerate(states):
        root = kept[b]
        if root is None:
            root = Node.of(next(planted))
        elif root.position.key() != state.key():
            raise EnvError("a kept search tree is not rooted at the position to search.")
        elif root.legal is None:
            root.open(game.legal_mask(state))
        if root.prior is not None:
            root.prior = add_root_noise(
                root.prior, root.legal, config.dirichlet_alpha, config.noise_fraction, rng
            )
        roots.append(root)
    return roots


# ============================================================================ the fast path
def _rollouts_in_kernels(
    kind: int,
    states: Sequence[GameState],
    config: SearchConfig,
    rng: np.random.Generator,
    kept: Any,
) -> SearchResult:
    """UCT with random rollouts, one kernel call per position."""
    if kept is not None:
        raise ConfigError("a search with random rollouts keeps no trees; pass kept=None.")
    counts = np.zeros((len(states), bitboards.num_actions(kind)), dtype=np.int64)
    values = np.zeros(len(states))
    for b, state in enumerate(states):
        position, mask = bitboards.from_state(kind, state)
        # numba keeps its own generator, seeded per search from ours (its seed takes 32 bits)
        seed = int(rng.integers(2**32 - 1))
        moves = int(np.count_nonzero(state.board))
        # numba takes the Python ints position and mask as the kernel's int64
        counts[b], values[b] = kernels.uct_search(
            kind, position, mask,  # type: ignore[arg-type]
            moves, int(state.to_play), int(config.simulations), float(config.c_uct), seed,
        )  # fmt: skip
    return SearchResult(counts, values, None)


def _network_in_kernels(
    kind: int,
    game: Game,
    states: Sequence[GameState],
    evaluator: PolicyValueEvaluator,
    config: SearchConfig,
    rng: np.random.Generator,
    kept: kernels.ArrayTrees | None,
) -> SearchResult:
    """PUCT with a policy-value network: the walks and backups in kernels, the network called
    between them on every tree's open leaf at once."""
    t = _plant_arrays(kind, game, states, evaluator, config, rng, kept)
    budget = simulations_to_run(config, t.n[:, 0].sum(axis=1))
    count, actions = len(states), game.num_actions
    # a walk is at most one ply per empty cell long
    path = np.zeros((count, int(np.prod(game.board_shape)) + 1, 2), dtype=np.int64)
    depth = np.zeros(count, dtype=np.int64)
    leaf = np.zeros((count, 2), dtype=np.int64)
    leaf_value = np.zeros(count, dtype=np.float64)
    planes = np.zeros((count, game.num_planes, *game.board_shape), dtype=np.float32)
    legal = np.zeros((count, actions), dtype=np.bool_)
    none = np.zeros((0, actions), dtype=np.float64), np.zeros(0, dtype=np.float64)
    for i in range(int(budget.max())):
        active = budget > i
        open_leaves = kernels.puct_descend(
            kind, float(config.c_puct), float(config.fpu), *t.arrays(), path, depth, leaf,
            leaf_value, planes, legal, active,
        )  # fmt: skip
        priors, values = none
        if open_leaves:
            priors, values = evaluator.policy_value(planes[:open_leaves], legal[:open_leaves])
            priors = np.asarray(priors, dtype=np.float64)
            values = np.asarray(values, dtype=np.float64)
        kernels.puct_expand_and_backup(*t.arrays(), t.size, path, depth, leaf, leaf_value,
                                       priors, values)  # fmt: skip
    return SearchResult(t.n[:, 0].astype(np.int64), root_values(t.n[:, 0], t.w[:, 0]), t)


def _plant_arrays(
    kind: int,
    game: Game,
    states: Sequence[GameState],
    evaluator: PolicyValueEvaluator,
    config: SearchConfig,
    rng: np.random.Generator,
    kept: kernels.ArrayTrees | None,
) -> kernels.ArrayTrees:
    """:func:`_plant` for the kernels' trees, drawing the same root noise in the same order."""
    if kept is None:
        trees = kernels.ArrayTrees.empty(len(states), config.simulations + 1, game.num_actions)
    elif len(kept) != len(states):
        raise EnvError(f"{len(kept)} kept trees for {len(states)} positions.")
    else:
        trees = kept
    fresh = [b for b in range(len(states)) if trees.size[b] == 0]
    legal = np.stack([game.legal_mask(s) for s in states])
    fresh_priors = iter(())
    if fresh:
        planes = np.stack([game.encode(states[b]) for b in fresh])
        fresh_priors = iter(evaluator.policy_value(planes, legal[fresh])[0])
    for b, state in enumerate(states):
        position, mask = bitboards.from_state(kind, state)
        if trees.size[b] and (trees.position[b, 0], trees.mask[b, 0]) != (position, mask):
            raise EnvError("a kept search tree is not rooted at the position to search.")
        trees.position[b, 0], trees.mask[b, 0] = position, mask
        trees.moves[b, 0] = np.count_nonzero(state.board)
        if (1 if trees.moves[b, 0] % 2 == 0 else -1) != state.to_play:
            raise EnvError("this board's number of stones does not match its player to move.")
        prior = trees.prior[b, 0] if trees.size[b] else next(fresh_priors)
        trees.prior[b, 0] = add_root_noise(
            np.asarray(prior, dtype=np.float64), legal[b],
            config.dirichlet_alpha, config.noise_fraction, rng,
        )  # fmt: skip
        trees.size[b] = max(trees.size[b], 1)
    return trees
