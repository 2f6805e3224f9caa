"""A tiny two-player game whose perfect play is known in closed form, for fast learning tests.

Race to N: a counter starts at 0; the players take turns adding 1 or 2 to it (actions 0 and
1); whoever brings it to exactly N wins. The player to move from count ``c`` wins with
perfect play unless ``N - c`` is a multiple of 3; the winning move then adds
``(N - c) mod 3``, leaving the opponent a multiple of 3. A game lasts at most N moves.
"""

from __future__ import annotations

import numpy as np

from rlx.games.base import Game, GameState


class RaceTo(Game):
    """Race to ``target``. The board is one row of ``target`` cells, filled left to right with
    the mark (+1 or -1) of the player whose move covered them, so the count is the number of
    marked cells and :meth:`Game.encode` needs no change."""

    num_actions = 2

    def __init__(self, target: int = 7) -> None:
        self.target = target
        self.name = f"race-to-{target}"
        self.board_shape = (1, target)

    def count(self, state: GameState) -> int:
        return int(np.count_nonzero(state.board))

    def legal_mask(self, state: GameState) -> np.ndarray:
        if state.is_terminal:
            return np.zeros(2, dtype=bool)
        left = self.target - self.count(state)
        return np.array([left >= 1, left >= 2])

    def _play(self, state: GameState, action: int) -> GameState:
        cells = state.board.reshape(-1).copy()
        count = self.count(state)
        cells[count : count + action + 1] = state.to_play
        won = count + action + 1 == self.target
        result = state.to_play if won else None
        return GameState(cells.reshape(self.board_shape), -state.to_play, result, state.moves + 1)

    def winning_action(self, state: GameState) -> int | None:
        """The move that wins with perfect play from here, None when every move loses."""
        left = (self.target - self.count(state)) % 3
        return None if left == 0 else left - 1

    def symmetries(
        self, planes: np.ndarray, policy: np.ndarray
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        return [(planes, policy)]

    def render(self, state: GameState) -> str:
        return f"{self.count(state)} of {self.target}"
