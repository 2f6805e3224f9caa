"""Perfect play for tic-tac-toe: minimax over every reachable position, memoised.

``value(s)`` is the game-theoretic outcome for the player to move (+1 win, 0 draw, -1 loss)
under best play by both sides:

    value(s) = winner(s) * to_play(s)                    if s is terminal
    value(s) = max_a  -value(apply(s, a))                otherwise

There are 5,478 reachable positions, so the whole table is built in well under a second and
then serves as the test oracle and the strongest possible opponent.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from rlx.games.base import GameState
from rlx.games.tictactoe import TicTacToe

_GAME = TicTacToe()
_STATES: dict[bytes, GameState] = {}


def value(state: GameState) -> int:
    """The outcome for the player to move under perfect play: +1, 0 or -1."""
    _STATES.setdefault(state.key(), state)
    return _value(state.key())


@cache
def _value(key: bytes) -> int:
    state = _STATES[key]
    if state.is_terminal:
        assert state.result is not None  # a terminal state has a result
        return state.result * state.to_play
    return max(-value(_GAME.play(state, int(a))) for a in _GAME.legal_actions(state))


def action_values(state: GameState) -> dict[int, int]:
    """For each legal action, the mover's outcome under perfect play after it."""
    return {int(a): -value(_GAME.play(state, int(a))) for a in _GAME.legal_actions(state)}


def best_actions(state: GameState) -> list[int]:
    """Every action that keeps the best outcome for the player to move."""
    values = action_values(state)
    best = max(values.values())
    return [a for a, v in values.items() if v == best]


class SolverPlayer:
    """Plays perfectly, choosing at random among the equally good moves (so 100 games against
    it are not 100 copies of one game)."""

    name = "solver"

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def __call__(self, state: GameState) -> int:
        return int(self.rng.choice(best_actions(state)))
