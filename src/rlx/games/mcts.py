"""Monte Carlo tree search guided by a network (PUCT), as AlphaZero uses it.

Each simulation walks from the root by

    a* = argmax_a  Q(s, a) + c_puct * P(s, a) * sqrt(sum_b N(s, b)) / (1 + N(s, a))

until it reaches a position not yet in the tree, which the network evaluates, ``(P, v) =
f(s)``; ``v`` is then backed up the path with its sign flipped at every ply (each node's
statistics are from the point of view of the player to move there):

    N(s, a) <- N(s, a) + 1,    W(s, a) <- W(s, a) + v_(s),    Q(s, a) = W(s, a) / N(s, a)

At the root, Dirichlet noise ``P <- (1 - eps) P + eps * Dir(alpha)`` over the legal moves keeps
self-play exploring, and the move is drawn from ``pi(a) ∝ N(s, a)^(1/T)`` (``T -> 0``: the most
visited move). Many games are searched together: one simulation step of every tree sends its
leaf to one batched network call, which is what makes self-play fast on a CPU.

The helpers :func:`puct_select`, :func:`add_root_noise` and :func:`visit_policy` are shared
with MuZero's search in the learned latent space.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx.errors import EnvError
from rlx.games.base import Game, GameState

#: ``evaluate(planes[B, C, H, W], legal[B, A]) -> (priors[B, A], values[B])``; priors are
#: probabilities over the legal moves, values in [-1, 1] for the player to move.
Evaluator = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class SearchConfig:
    """How one move is searched.

    Attributes:
        simulations: simulations per move (a kept tree's root: the visits to reach).
        c_puct: exploration weight of the prior term.
        dirichlet_alpha: concentration of the root noise (about 10 / typical legal moves).
        noise_fraction: ``eps``, the share of the root prior replaced by noise (0: none).
        fpu: Q of a move not yet visited ("first-play urgency"), for the player to move.
    """

    simulations: int = 100
    c_puct: float = 1.5
    dirichlet_alpha: float = 1.0
    noise_fraction: float = 0.0
    fpu: float = 0.0


class Node:
    """A position in the tree: priors, visit counts and value sums per action."""

    __slots__ = ("children", "legal", "n", "prior", "state", "w")

    def __init__(self, state: GameState, prior: np.ndarray, legal: np.ndarray) -> None:
        self.state = state
        self.prior = prior
        self.legal = legal
        self.n = np.zeros(len(prior), dtype=np.float64)
        self.w = np.zeros(len(prior), dtype=np.float64)
        self.children: dict[int, Node] = {}


def puct_select(
    prior: np.ndarray, n: np.ndarray, q: np.ndarray, legal: np.ndarray, c_puct: float
) -> int:
    """``argmax_a Q + c_puct P sqrt(sum N) / (1 + N)`` over the legal actions."""
    u = c_puct * prior * np.sqrt(max(n.sum(), 1.0)) / (1.0 + n)
    score = np.where(legal, q + u, -np.inf)
    return int(np.argmax(score))


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


def _q(node: Node, fpu: float) -> np.ndarray:
    return np.where(node.n > 0, node.w / np.maximum(node.n, 1.0), fpu)


def _descend(root: Node, game: Game, c_puct: float, fpu: float) -> tuple[list, GameState]:
    """Walk by PUCT to a position outside the tree: the path of (node, action), the position."""
    path: list[tuple[Node, int]] = []
    node = root
    while True:
        action = puct_select(node.prior, node.n, _q(node, fpu), node.legal, c_puct)
        path.append((node, action))
        child = node.children.get(action)
        if child is None:
            return path, game._play(node.state, action)
        node = child


def _backup(path: list[tuple[Node, int]], value: float) -> None:
    """``value`` is for the player to move at the leaf; each parent sees it negated."""
    for node, action in reversed(path):
        value = -value
        node.n[action] += 1.0
        node.w[action] += value


def _expand(states: Sequence[GameState], game: Game, evaluate: Evaluator) -> list:
    """Evaluate the non-terminal ``states`` in one batch: (priors, legal, value) each; a
    terminal state's value is its result for the player to move there."""
    out: list = [None] * len(states)
    open_ = [i for i, s in enumerate(states) if not s.is_terminal]
    for i, s in enumerate(states):
        if s.is_terminal:
            out[i] = (None, None, float(s.result * s.to_play))
    if open_:
        planes = np.stack([game.encode(states[i]) for i in open_])
        legal = np.stack([game.legal_mask(states[i]) for i in open_])
        priors, values = evaluate(planes, legal)
        for j, i in enumerate(open_):
            out[i] = (np.asarray(priors[j], dtype=np.float64), legal[j], float(values[j]))
    return out


def search(
    game: Game,
    states: Sequence[GameState],
    evaluate: Evaluator,
    config: SearchConfig,
    rng: np.random.Generator,
) -> np.ndarray:
    """Search every (non-terminal) position in ``states`` together; visit counts ``[B, A]``.

    Tic-tac-toe and Connect Four run in numba kernels (:mod:`rlx.games.puct_kernel`), other
    games in :func:`python_search`; both give the same counts."""
    return search_with_values(game, states, evaluate, config, rng)[0]


def search_with_values(
    game: Game,
    states: Sequence[GameState],
    evaluate: Evaluator,
    config: SearchConfig,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`search`'s visit counts ``[B, A]`` and each root's search value ``[B]``,
    ``Q = sum_a W(a) / sum_a N(a)`` for its player to move (the mean of every backed-up
    simulation)."""
    counts, values, _ = search_trees(game, states, evaluate, config, rng)
    return counts, values


def search_trees(
    game: Game,
    states: Sequence[GameState],
    evaluate: Evaluator,
    config: SearchConfig,
    rng: np.random.Generator,
    kept: Any = None,
) -> tuple[np.ndarray, np.ndarray, Any]:
    """:func:`search_with_values`, and the searched trees. ``kept``, the trees of the previous
    move's search passed through their ``after(rows, actions, extra_nodes)`` (the subtrees of
    the moves played, re-rooted), continues them: AlphaGo Zero's tree reuse. A kept root
    already holds visits, so it runs only the simulations that bring it to ``simulations``
    (at least a quarter of them, with fresh root noise)."""
    from rlx.games import puct_kernel  # here, not above: it imports this module

    if puct_kernel.has_kernel(game):
        return puct_kernel.search_trees(game, states, evaluate, config, rng, kept)
    return python_search_trees(game, states, evaluate, config, rng, kept)


def root_values(n: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``sum_a W(a) / sum_a N(a)`` of each root's edges ``[B, A]`` (0 before any visit)."""
    return w.sum(axis=-1) / np.maximum(n.sum(axis=-1), 1.0)


def python_search(
    game: Game,
    states: Sequence[GameState],
    evaluate: Evaluator,
    config: SearchConfig,
    rng: np.random.Generator,
) -> np.ndarray:
    """:func:`search` in plain Python on :class:`GameState` objects: any game."""
    return python_search_with_values(game, states, evaluate, config, rng)[0]


def python_search_with_values(
    game: Game,
    states: Sequence[GameState],
    evaluate: Evaluator,
    config: SearchConfig,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`search_with_values` in plain Python: any game."""
    counts, values, _ = python_search_trees(game, states, evaluate, config, rng)
    return counts, values


class NodeTrees(list):
    """The roots of :func:`python_search_trees` (``None``: no tree yet)."""

    def after(self, rows: Sequence[int], actions: Sequence[int], extra_nodes: int) -> NodeTrees:
        """The nodes reached by playing ``actions[i]`` from root ``rows[i]``, as new roots."""
        return NodeTrees(self[r].children.get(a) for r, a in zip(rows, actions, strict=True))


def python_search_trees(
    game: Game,
    states: Sequence[GameState],
    evaluate: Evaluator,
    config: SearchConfig,
    rng: np.random.Generator,
    kept: NodeTrees | None = None,
) -> tuple[np.ndarray, np.ndarray, NodeTrees]:
    """:func:`search_trees` in plain Python: any game."""
    kept = NodeTrees([None] * len(states)) if kept is None else kept
    if len(kept) != len(states):
        raise EnvError(f"{len(kept)} kept trees for {len(states)} positions.")
    fresh = [b for b, root in enumerate(kept) if root is None]
    expanded = iter(_expand([states[b] for b in fresh], game, evaluate))
    roots = NodeTrees()
    for b, state in enumerate(states):
        root = kept[b]
        if root is None:
            prior, legal, _ = next(expanded)
            root = Node(state, prior, legal)
        elif root.state.key() != state.key():
            raise EnvError("a kept search tree is not rooted at the position to search.")
        root.prior = add_root_noise(
            root.prior, root.legal, config.dirichlet_alpha, config.noise_fraction, rng
        )
        roots.append(root)
    budget = simulations_to_run(config, np.array([root.n.sum() for root in roots]))
    for i in range(int(budget.max(initial=0))):
        active = [root for root, b in zip(roots, budget, strict=True) if b > i]
        walks = [_descend(root, game, config.c_puct, config.fpu) for root in active]
        leaves = _expand([leaf for _, leaf in walks], game, evaluate)
        for (path, leaf), (prior, legal, value) in zip(walks, leaves, strict=True):
            parent, action = path[-1]
            if prior is not None:
                parent.children[action] = Node(leaf, prior, legal)
            _backup(path, value)
    n = np.stack([root.n for root in roots])
    return n.copy(), root_values(n, np.stack([root.w for root in roots])), roots


def simulations_to_run(config: SearchConfig, root_visits: np.ndarray) -> np.ndarray:
    """Simulations each root runs: ``simulations`` for a fresh one; a kept one, enough to bring
    it to ``simulations`` visits and at least a quarter of them (so that the root's new noise
    still steers part of the search)."""
    least = max(config.simulations // 4, 1)
    return np.maximum(config.simulations - root_visits.astype(np.int64), least)


def choose(counts: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    """A move drawn from :func:`visit_policy` (``T = 0``: a most visited move, ties at
    random)."""
    policy = visit_policy(counts, temperature)
    return int(rng.choice(len(policy), p=policy))
