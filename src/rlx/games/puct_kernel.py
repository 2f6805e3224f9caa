"""AlphaZero's PUCT search (:mod:`rlx.games.mcts`) for tic-tac-toe and Connect Four, with the
tree walks in numba kernels.

The algorithm and its arithmetic are those of :func:`rlx.games.mcts.search`, which stays the
reference for every other game: from the same evaluator and generator both give the same visit
counts (a test checks it). Each simulation picks, at every node of every game's tree,

    a* = argmax_a  Q(s, a) + c_puct * P(s, a) * sqrt(sum_b N(s, b)) / (1 + N(s, a))

down to a position outside the tree, which the network evaluates in one batch with the other
games' leaves; the value is then backed up with its sign flipped at every ply. Only the walks
and the backups move here: in Python they took about half of a Connect Four self-play
iteration with a trained network (numpy calls on arrays of 7 numbers, once per node per
simulation); in kernels they take about 5%, so self-play is bound by the network
(``benchmarks/bench_alphazero_selfplay.py``).

A tree is a set of arrays with one row per node (a simulation adds at most one node): the
position as bitboards (:mod:`rlx.games.rollout_mcts`'s ``(position, mask)``), the prior ``P``,
the visits ``N`` and value sums ``W`` of each action, and the child reached by each action
(-1: not in the tree yet). A terminal position is never added; its value is its result, read
again at each visit, as in the reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit

from rlx.errors import EnvError
from rlx.games.base import Game, GameState, IllegalMoveError
from rlx.games.mcts import (
    Evaluator,
    SearchConfig,
    add_root_noise,
    root_values,
    simulations_to_run,
)
from rlx.games.rollout_mcts import (
    _C4_HEIGHT,
    _C4_ROWS,
    _ONGOING,
    _TICTACTOE,
    _bitboards,
    _c4_threat_planes,
    _is_legal,
    _kernel_kind,
    _num_actions,
    _outcome,
    _play,
)

_NO_CHILD = -1


def has_kernel(game: Game) -> bool:
    """Whether ``game`` is searched by these kernels (tic-tac-toe and Connect Four)."""
    return _kernel_kind(game) is not None


# ---------------------------------------------------------------------------- planes
@njit(cache=True, inline="always")
def _encode(kind: int, position: np.int64, mask: np.int64, out: np.ndarray) -> None:
    """``Game.encode`` from bitboards: the mover's stones, the opponent's, ones (``out`` is
    ``[3, rows, cols]``; Connect Four's row 0 is the top row), then, when ``out`` has 5 planes
    (``ConnectFour(threat_planes=True)``), the mover's and the opponent's threat cells."""
    out[:] = 0.0
    out[2] = 1.0
    rows, cols = out.shape[1], out.shape[2]
    for r in range(rows):
        for c in range(cols):
            if kind == _TICTACTOE:
                bit = np.int64(1) << (r * 3 + c)
            else:
                bit = np.int64(1) << (c * _C4_HEIGHT + _C4_ROWS - 1 - r)
            if position & bit:
                out[0, r, c] = 1.0
            elif mask & bit:
                out[1, r, c] = 1.0
    if out.shape[0] == 5:
        _c4_threat_planes(position, mask, out[3:])


@njit(cache=True, inline="always")
def _legal_row(kind: int, mask: np.int64, out: np.ndarray) -> None:
    for a in range(_num_actions(kind)):
        out[a] = _is_legal(kind, mask, a)


# ---------------------------------------------------------------------------- the two kernels
@njit(cache=True)
def _descend(
    kind: int,
    c_puct: float,
    fpu: float,
    position: np.ndarray,
    mask: np.ndarray,
    moves: np.ndarray,
    prior: np.ndarray,
    n: np.ndarray,
    w: np.ndarray,
    child: np.ndarray,
    path: np.ndarray,
    depth: np.ndarray,
    leaf: np.ndarray,
    leaf_value: np.ndarray,
    planes: np.ndarray,
    legal: np.ndarray,
    active: np.ndarray,
) -> int:
    """Walk every ``active`` tree by PUCT to a position outside it. Per tree: the path of
    (node, action) in ``path[b, :depth[b]]`` (an inactive tree: depth 0), the leaf's bitboards
    in ``leaf[b]``, and ``leaf_value[b]``, the result for the player to move there if the game
    is over, else NaN. The open leaves' planes and legal masks fill ``planes`` and ``legal`` in
    tree order; their number is returned."""
    num_actions = _num_actions(kind)
    open_leaves = 0
    for b in range(position.shape[0]):
        if not active[b]:
            depth[b], leaf_value[b] = 0, 0.0
            continue
        node, d = 0, 0
        while True:
            total = 0.0
            for a in range(num_actions):
                total += n[b, node, a]
            root_n = np.sqrt(max(total, 1.0))
            best, best_score = -1, -np.inf
            for a in range(num_actions):
                if not _is_legal(kind, mask[b, node], a):
                    continue
                visits = n[b, node, a]
                q = w[b, node, a] / max(visits, 1.0) if visits > 0 else fpu
                score = q + c_puct * prior[b, node, a] * root_n / (1.0 + visits)
                if score > best_score:
                    best, best_score = a, score
            path[b, d, 0], path[b, d, 1] = node, best
            d += 1
            if child[b, node, best] == _NO_CHILD:
                break
            node = child[b, node, best]
        depth[b] = d
        to_play = 1 if moves[b, node] % 2 == 0 else -1  # the mover at ``node``
        new_position, new_mask = _play(kind, position[b, node], mask[b, node], best)
        leaf[b, 0], leaf[b, 1] = new_position, new_mask
        outcome = _outcome(kind, new_position, new_mask, moves[b, node] + 1, -to_play)
        if outcome == _ONGOING:
            leaf_value[b] = np.nan
            _encode(kind, new_position, new_mask, planes[open_leaves])
            _legal_row(kind, new_mask, legal[open_leaves])
            open_leaves += 1
        else:
            # the player to move at the leaf is -to_play; a win is always the last mover's
            leaf_value[b] = outcome * -to_play
    return open_leaves


@njit(cache=True)
def _expand_and_backup(
    position: np.ndarray,
    mask: np.ndarray,
    moves: np.ndarray,
    prior: np.ndarray,
    n: np.ndarray,
    w: np.ndarray,
    child: np.ndarray,
    size: np.ndarray,
    path: np.ndarray,
    depth: np.ndarray,
    leaf: np.ndarray,
    leaf_value: np.ndarray,
    priors: np.ndarray,
    values: np.ndarray,
) -> None:
    """Add every open leaf to its tree with the network's ``priors`` and back up ``v``:
    ``N(s, a) += 1, W(s, a) += v`` along the path, ``v`` negated at every ply."""
    k = 0
    for b in range(position.shape[0]):
        if depth[b] == 0:  # not searched this simulation
            continue
        parent, action = path[b, depth[b] - 1, 0], path[b, depth[b] - 1, 1]
        value = leaf_value[b]
        if np.isnan(value):
            node = size[b]
            size[b] += 1
            position[b, node], mask[b, node] = leaf[b, 0], leaf[b, 1]
            moves[b, node] = moves[b, parent] + 1
            prior[b, node] = priors[k]
            child[b, parent, action] = node
            value = values[k]
            k += 1
        for d in range(depth[b] - 1, -1, -1):
            value = -value
            node, action = path[b, d, 0], path[b, d, 1]
            n[b, node, action] += 1.0
            w[b, node, action] += value


@njit(cache=True)
def _copy_subtree(
    position: np.ndarray,
    mask: np.ndarray,
    moves: np.ndarray,
    prior: np.ndarray,
    n: np.ndarray,
    w: np.ndarray,
    child: np.ndarray,
    b: int,
    start: int,
    to_position: np.ndarray,
    to_mask: np.ndarray,
    to_moves: np.ndarray,
    to_prior: np.ndarray,
    to_n: np.ndarray,
    to_w: np.ndarray,
    to_child: np.ndarray,
    to_b: int,
) -> int:
    """Copy the subtree under node ``start`` of tree ``b`` into tree ``to_b``, renumbered
    breadth first from 0 (``start`` becomes the root); its number of nodes."""
    order = np.empty(position.shape[1], dtype=np.int64)  # old node of each new node
    order[0], size, new = start, 1, 0
    while new < size:
        old = order[new]
        to_position[to_b, new], to_mask[to_b, new] = position[b, old], mask[b, old]
        to_moves[to_b, new] = moves[b, old]
        for a in range(prior.shape[2]):
            to_prior[to_b, new, a], to_n[to_b, new, a] = prior[b, old, a], n[b, old, a]
            to_w[to_b, new, a] = w[b, old, a]
            if child[b, old, a] == _NO_CHILD:
                to_child[to_b, new, a] = _NO_CHILD
            else:
                order[size] = child[b, old, a]
                to_child[to_b, new, a] = size
                size += 1
        new += 1
    return size


# ---------------------------------------------------------------------------- from Python
@dataclass
class _Trees:
    """``B`` trees of up to ``nodes`` nodes each, in the kernels' arrays; node 0 is the root.
    A tree of size 0 has no root yet (:func:`search_with_values` plants it)."""

    position: np.ndarray  # [B, nodes] the mover's stones
    mask: np.ndarray  # [B, nodes] all stones
    moves: np.ndarray  # [B, nodes] stones on the board: the first player moves at even counts
    prior: np.ndarray  # [B, nodes, A]
    n: np.ndarray  # [B, nodes, A]
    w: np.ndarray  # [B, nodes, A]
    child: np.ndarray  # [B, nodes, A] the node an action leads to, or _NO_CHILD
    size: np.ndarray  # [B] nodes in use

    @classmethod
    def empty(cls, trees: int, nodes: int, actions: int) -> _Trees:
        def zeros(*shape: int, dtype: type = np.int64) -> np.ndarray:
            return np.zeros((trees, *shape), dtype=dtype)

        return cls(
            zeros(nodes), zeros(nodes), zeros(nodes), zeros(nodes, actions, dtype=np.float64),
            zeros(nodes, actions, dtype=np.float64), zeros(nodes, actions, dtype=np.float64),
            np.full((trees, nodes, actions), _NO_CHILD, dtype=np.int64), np.zeros(trees, np.int64),
        )  # fmt: skip

    def _arrays(self) -> tuple[np.ndarray, ...]:
        return self.position, self.mask, self.moves, self.prior, self.n, self.w, self.child

    def after(self, rows: Sequence[int], actions: Sequence[int], extra_nodes: int) -> _Trees:
        """The subtrees reached by playing ``actions[i]`` in tree ``rows[i]``, each re-rooted at
        that move's node with all its statistics (AlphaGo Zero's tree reuse), with room for
        ``extra_nodes`` more; a move whose node is not in the tree gives a tree of size 0."""
        starts = [int(self.child[r, 0, a]) for r, a in zip(rows, actions, strict=True)]
        kept = [_subtree_size(self.child, r, s) if s != _NO_CHILD else 0
                for r, s in zip(rows, starts, strict=True)]  # fmt: skip
        out = _Trees.empty(len(rows), max(kept, default=0) + extra_nodes, self.n.shape[2])
        for i, (r, s) in enumerate(zip(rows, starts, strict=True)):
            if s != _NO_CHILD:
                out.size[i] = _copy_subtree(*self._arrays(), r, s, *out._arrays(), i)
        return out


@njit(cache=True)
def _subtree_size(child: np.ndarray, b: int, start: int) -> int:
    stack = np.empty(child.shape[1], dtype=np.int64)
    stack[0], top, size = start, 1, 0
    while top:
        top -= 1
        node = stack[top]
        size += 1
        for a in range(child.shape[2]):
            if child[b, node, a] != _NO_CHILD:
                stack[top] = child[b, node, a]
                top += 1
    return size


def _plant_roots(
    game: Game,
    states: Sequence[GameState],
    evaluate: Evaluator,
    config: SearchConfig,
    rng: np.random.Generator,
    kept: _Trees | None,
) -> _Trees:
    """The trees to search: ``kept`` ones keep their root and statistics; the others hold only
    their root with the network's priors. Every root's prior gets fresh noise from ``rng``, in
    the order :func:`rlx.games.mcts.python_search` draws it."""
    if kept is None:
        trees = _Trees.empty(len(states), config.simulations + 1, game.num_actions)
    elif len(kept.size) != len(states):
        raise EnvError(f"{len(kept.size)} kept trees for {len(states)} positions.")
    else:
        trees = kept
    fresh = [b for b in range(len(states)) if trees.size[b] == 0]
    legal = np.stack([game.legal_mask(s) for s in states])
    fresh_priors = iter(())
    if fresh:
        planes = np.stack([game.encode(states[b]) for b in fresh])
        fresh_priors = iter(evaluate(planes, legal[fresh])[0])
    for b, state in enumerate(states):
        _, position, mask = _bitboards(game, state)
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


def search_with_values(
    game: Game,
    states: Sequence[GameState],
    evaluate: Evaluator,
    config: SearchConfig,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`rlx.games.mcts.search_with_values` for tic-tac-toe and Connect Four: visit counts
    ``[B, A]`` and root values ``[B]`` of the (non-terminal) ``states``, searched together."""
    counts, values, _ = search_trees(game, states, evaluate, config, rng)
    return counts, values


def search_trees(
    game: Game,
    states: Sequence[GameState],
    evaluate: Evaluator,
    config: SearchConfig,
    rng: np.random.Generator,
    kept: _Trees | None = None,
) -> tuple[np.ndarray, np.ndarray, _Trees]:
    """:func:`search_with_values`, and the searched trees; ``kept`` (from
    :meth:`_Trees.after`) continues earlier searches instead of starting from fresh roots."""
    kind = _kernel_kind(game)
    if kind is None:
        raise EnvError(f"the PUCT kernels play tictactoe and connect4, not {game.name}.")
    if any(s.is_terminal for s in states):
        raise IllegalMoveError("the game is over; there is no move to search for.")
    t = _plant_roots(game, states, evaluate, config, rng, kept)
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
        open_leaves = _descend(
            kind, float(config.c_puct), float(config.fpu), t.position, t.mask, t.moves,
            t.prior, t.n, t.w, t.child, path, depth, leaf, leaf_value, planes, legal, active,
        )  # fmt: skip
        priors, values = none
        if open_leaves:
            priors, values = evaluate(planes[:open_leaves], legal[:open_leaves])
            priors = np.asarray(priors, dtype=np.float64)
            values = np.asarray(values, dtype=np.float64)
        _expand_and_backup(
            t.position, t.mask, t.moves, t.prior, t.n, t.w, t.child, t.size, path, depth,
            leaf, leaf_value, priors, values,
        )  # fmt: skip
    return t.n[:, 0].copy(), root_values(t.n[:, 0], t.w[:, 0]), t
