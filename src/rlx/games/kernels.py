"""The search's fast path for tic-tac-toe and Connect Four: its tree walks in numba kernels.

:func:`rlx.games.search.search` runs here when the game follows the bitboard rules
(:mod:`rlx.games.bitboards`) and its evaluator is one the kernels know; the algorithm and its
arithmetic are those of the search's Python tree, which stays the reference (a test checks that
both give the same visit counts, move by move):

- **random rollouts** (:class:`~rlx.games.leaf_evaluators.RandomRollouts`): the whole UCT search in
  :func:`uct_search`, one call per position, over preallocated arrays with one slot per node
  (first child, number of children, action, N, W);
- **a policy-value network** (:class:`~rlx.games.leaf_evaluators.PolicyValueEvaluator`): the PUCT
  walks of every tree in :func:`puct_descend`, which stops at the positions outside the trees
  for the network to evaluate in one batch, and their expansion and backup in
  :func:`puct_expand_and_backup`. The trees are :class:`ArrayTrees`: one row per node (a
  simulation adds at most one), with the position as bitboards, the prior ``P``, the visits
  ``N`` and value sums ``W`` of each action, and the child each action leads to.

A terminal position is never added to a tree; its value is its result, read again at each
visit, as in the Python tree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit

from rlx.games.bitboards import (
    ONGOING,
    encode,
    is_legal,
    legal_row,
    max_moves,
    num_actions,
    outcome,
    play,
    random_playout,
)

#: a child slot not in the tree yet
NO_CHILD = -1


# ============================================================================ UCT, rollouts
@njit(cache=True, inline="always")
def _uct_expand(
    kind: int,
    node: int,
    mask: np.int64,
    free: int,
    first_child: np.ndarray,
    num_children: np.ndarray,
    action_of: np.ndarray,
) -> int:
    """Give ``node`` one child per legal move, from slot ``free``, in a random order (so that
    the first unvisited child, the one selection takes, is a random one); the next free slot."""
    n = 0
    for action in range(num_actions(kind)):
        if is_legal(kind, mask, action):
            j = np.random.randint(0, n + 1)  # inside-out Fisher-Yates shuffle
            action_of[free + n] = action_of[free + j]
            action_of[free + j] = action
            n += 1
    first_child[node] = free
    num_children[node] = n
    return free + n


@njit(cache=True, inline="always")
def _uct_select(
    node: int,
    c: float,
    first_child: np.ndarray,
    num_children: np.ndarray,
    visits: np.ndarray,
    value: np.ndarray,
) -> int:
    """The child with the highest ``W/N + c sqrt(ln N_parent / N)``; an unvisited one first."""
    start = first_child[node]
    log_parent = math.log(max(visits[node], 1))
    best, best_score = start, -np.inf
    for child in range(start, start + num_children[node]):
        n = visits[child]
        if n == 0:
            return child
        score = value[child] / n + c * math.sqrt(log_parent / n)
        if score > best_score:
            best, best_score = child, score
    return best


@njit(cache=True, error_model="numpy")
def uct_search(
    kind: int,
    root_position: np.int64,
    root_mask: np.int64,
    root_moves: int,
    root_to_play: int,
    simulations: int,
    c: float,
    seed: int,
) -> tuple[np.ndarray, float]:
    """Visit counts of the root's moves after ``simulations`` UCT simulations with random
    rollouts, and the root's value ``sum W / sum N`` for its player to move.

    A node is expanded at its second visit (its first gave a rollout, as in OpenSpiel's MCTS);
    ``W`` of a node is from the point of view of the player who moved into it."""
    np.random.seed(seed)
    actions = num_actions(kind)
    # every simulation expands at most one node, by at most num_actions children
    capacity = 1 + actions * (simulations + 1)
    first_child = np.full(capacity, -1, dtype=np.int32)
    num_children = np.zeros(capacity, dtype=np.int32)
    action_of = np.zeros(capacity, dtype=np.int32)
    visits = np.zeros(capacity, dtype=np.int32)
    value = np.zeros(capacity, dtype=np.float64)
    path = np.zeros(max_moves(kind) + 2, dtype=np.int32)
    # the root is expanded at once, so that every simulation passes through one of its children
    free = _uct_expand(kind, 0, root_mask, 1, first_child, num_children, action_of)

    for _ in range(simulations):
        node, depth = 0, 0
        position, mask, moves, to_play = root_position, root_mask, root_moves, root_to_play
        path[0] = 0
        # selection: down the tree while the node has children (so is not terminal)
        while first_child[node] >= 0:
            node = _uct_select(node, c, first_child, num_children, visits, value)
            position, mask = play(kind, position, mask, action_of[node])
            moves += 1
            to_play = -to_play
            depth += 1
            path[depth] = node
        result = outcome(kind, position, mask, moves, to_play)
        # expansion, at a leaf's second visit
        if result == ONGOING and visits[node] > 0:
            free = _uct_expand(kind, node, mask, free, first_child, num_children, action_of)
            node = first_child[node]
            position, mask = play(kind, position, mask, action_of[node])
            moves += 1
            to_play = -to_play
            depth += 1
            path[depth] = node
            result = outcome(kind, position, mask, moves, to_play)
        if result == ONGOING:
            result = random_playout(kind, position, mask, moves, to_play)
        # backup: the node at depth d was moved into by the root's mover if d is odd
        for d in range(depth + 1):
            mover = root_to_play if d % 2 == 1 else -root_to_play
            visits[path[d]] += 1
            value[path[d]] += result * mover

    counts = np.zeros(actions, dtype=np.int64)
    total = 0.0
    start = first_child[0]
    for child in range(start, start + num_children[0]):
        counts[action_of[child]] = visits[child]
        total += value[child]
    return counts, total / max(simulations, 1)


# ============================================================================ PUCT, a network
@njit(cache=True)
def puct_descend(
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
    actions = num_actions(kind)
    open_leaves = 0
    for b in range(position.shape[0]):
        if not active[b]:
            depth[b], leaf_value[b] = 0, 0.0
            continue
        node, d = 0, 0
        while True:
            total = 0.0
            for a in range(actions):
                total += n[b, node, a]
            root_n = np.sqrt(max(total, 1.0))
            best, best_score = -1, -np.inf
            for a in range(actions):
                if not is_legal(kind, mask[b, node], a):
                    continue
                visits = n[b, node, a]
                q = w[b, node, a] / max(visits, 1.0) if visits > 0 else fpu
                score = q + c_puct * prior[b, node, a] * root_n / (1.0 + visits)
                if score > best_score:
                    best, best_score = a, score
            path[b, d, 0], path[b, d, 1] = node, best
            d += 1
            if child[b, node, best] == NO_CHILD:
                break
            node = child[b, node, best]
        depth[b] = d
        to_play = 1 if moves[b, node] % 2 == 0 else -1  # the mover at ``node``
        new_position, new_mask = play(kind, position[b, node], mask[b, node], best)
        leaf[b, 0], leaf[b, 1] = new_position, new_mask
        result = outcome(kind, new_position, new_mask, moves[b, node] + 1, -to_play)
        if result == ONGOING:
            leaf_value[b] = np.nan
            encode(kind, new_position, new_mask, planes[open_leaves])
            legal_row(kind, new_mask, legal[open_leaves])
            open_leaves += 1
        else:
            # the player to move at the leaf is -to_play; a win is always the last mover's
            leaf_value[b] = result * -to_play
    return open_leaves


@njit(cache=True)
def puct_expand_and_backup(
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
            if child[b, old, a] == NO_CHILD:
                to_child[to_b, new, a] = NO_CHILD
            else:
                order[size] = child[b, old, a]
                to_child[to_b, new, a] = size
                size += 1
        new += 1
    return size


@njit(cache=True)
def _subtree_size(child: np.ndarray, b: int, start: int) -> int:
    stack = np.empty(child.shape[1], dtype=np.int64)
    stack[0], top, size = start, 1, 0
    while top:
        top -= 1
        node = stack[top]
        size += 1
        for a in range(child.shape[2]):
            if child[b, node, a] != NO_CHILD:
                stack[top] = child[b, node, a]
                top += 1
    return size


@dataclass
class ArrayTrees:
    """``B`` PUCT trees of up to ``nodes`` nodes each, in the kernels' arrays; node 0 is the
    root. A tree of size 0 has no root yet (the search plants it)."""

    position: np.ndarray  # [B, nodes] the mover's stones
    mask: np.ndarray  # [B, nodes] all stones
    moves: np.ndarray  # [B, nodes] stones on the board: the first player moves at even counts
    prior: np.ndarray  # [B, nodes, A]
    n: np.ndarray  # [B, nodes, A]
    w: np.ndarray  # [B, nodes, A]
    child: np.ndarray  # [B, nodes, A] the node an action leads to, or NO_CHILD
    size: np.ndarray  # [B] nodes in use

    @classmethod
    def empty(cls, trees: int, nodes: int, actions: int) -> ArrayTrees:
        def zeros(*shape: int, dtype: type = np.int64) -> np.ndarray:
            return np.zeros((trees, *shape), dtype=dtype)

        return cls(
            zeros(nodes), zeros(nodes), zeros(nodes), zeros(nodes, actions, dtype=np.float64),
            zeros(nodes, actions, dtype=np.float64), zeros(nodes, actions, dtype=np.float64),
            np.full((trees, nodes, actions), NO_CHILD, dtype=np.int64), np.zeros(trees, np.int64),
        )  # fmt: skip

    def arrays(
        self,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The per-node arrays, in the order the kernels take them."""
        return self.position, self.mask, self.moves, self.prior, self.n, self.w, self.child

    def after(self, rows: Sequence[int], actions: Sequence[int], extra_nodes: int) -> ArrayTrees:
        """The subtrees reached by playing ``actions[i]`` in tree ``rows[i]``, each re-rooted at
        that move's node with all its statistics (AlphaGo Zero's tree reuse), with room for
        ``extra_nodes`` more; a move whose node is not in the tree gives a tree of size 0."""
        starts = [int(self.child[r, 0, a]) for r, a in zip(rows, actions, strict=True)]
        kept = [_subtree_size(self.child, r, s) if s != NO_CHILD else 0
                for r, s in zip(rows, starts, strict=True)]  # fmt: skip
        out = ArrayTrees.empty(len(rows), max(kept, default=0) + extra_nodes, self.n.shape[2])
        for i, (r, s) in enumerate(zip(rows, starts, strict=True)):
            if s != NO_CHILD:
                out.size[i] = _copy_subtree(*self.arrays(), r, s, *out.arrays(), i)
        return out

    def __len__(self) -> int:
        return len(self.size)
