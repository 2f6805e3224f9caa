"""Exact values of Connect Four positions late in the game: alpha-beta negamax on bitboards.

``value(s)`` is the game-theoretic outcome for the player to move (+1 win, 0 draw, -1 loss):

    value(s) = +1                                  if a legal move wins at once
    value(s) = 0                                   if the board fills (42 stones) without a win
    value(s) = max_a  -value(apply(s, a))          otherwise, pruned by alpha-beta on {-1, 0, 1}

with the centre columns tried first. It has no transposition table, so it is for the late game,
positions with about 28 or fewer empty cells (the empty board is far out of reach): the test
oracle of the late game, and the tool that finds where an agent's game was lost
(``benchmarks/analyse_connect4_losses.py``). ``max_nodes`` bounds the work; past it
:func:`value` gives ``None``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from rlx.games.base import GameState
from rlx.games.bitboards import CONNECT4, c4_won, from_state, is_legal, play
from rlx.games.connect4 import ConnectFour

_GAME = ConnectFour()
_CELLS = 42
_CENTRE_FIRST = np.array([3, 2, 4, 1, 5, 0, 6], dtype=np.int64)
_OUT_OF_NODES = 2  # not a game value: the search gave up


@njit(cache=True)
def _negamax(
    position: np.int64, mask: np.int64, moves: int, alpha: int, beta: int, nodes: np.ndarray
) -> int:
    """The value for the player to move (``position`` their stones, ``mask`` all stones) within
    the window ``(alpha, beta)``; ``nodes[0]`` counts down the node budget."""
    nodes[0] -= 1
    if nodes[0] < 0:
        return _OUT_OF_NODES
    for action in range(7):
        if is_legal(CONNECT4, mask, action):
            after, after_mask = play(CONNECT4, position, mask, action)
            if c4_won(after_mask ^ after):
                return 1
    if moves + 1 >= _CELLS:  # the last stone cannot win (checked above): a draw
        return 0
    best = -1
    for i in range(7):
        action = _CENTRE_FIRST[i]
        if not is_legal(CONNECT4, mask, action):
            continue
        after, after_mask = play(CONNECT4, position, mask, action)
        reply = _negamax(after, after_mask, moves + 1, -beta, -alpha, nodes)
        if reply == _OUT_OF_NODES:
            return _OUT_OF_NODES
        if -reply > best:
            best = -reply
            alpha = max(alpha, best)
            if alpha >= beta:
                break
    return best


def value(state: GameState, max_nodes: int = 50_000_000) -> int | None:
    """The outcome for the player to move under perfect play (+1, 0 or -1), or ``None`` when the
    search needs more than ``max_nodes`` positions."""
    if state.is_terminal:
        assert state.result is not None  # a terminal state has a result
        return int(state.result * state.to_play)
    position, mask = from_state(CONNECT4, state)
    stones = int(np.count_nonzero(state.board))
    budget = np.array([max_nodes], dtype=np.int64)
    # numba takes the Python ints position and mask as the kernel's int64
    found = _negamax(position, mask, stones, -1, 1, budget)  # type: ignore[arg-type]
    return None if found == _OUT_OF_NODES else int(found)


def action_values(state: GameState, max_nodes: int = 50_000_000) -> dict[int, int | None]:
    """For each legal action, the mover's outcome under perfect play after it (``None``: out of
    nodes)."""
    out: dict[int, int | None] = {}
    for action in _GAME.legal_actions(state):
        reply = value(_GAME.play(state, int(action)), max_nodes)
        out[int(action)] = None if reply is None else -reply
    return out
