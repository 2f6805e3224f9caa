"""Tic-tac-toe: 3x3, three in a row, column or diagonal wins; a full board without one draws.

Actions are cell indices, row-major: ``0 1 2 / 3 4 5 / 6 7 8``.
"""

from __future__ import annotations

import numpy as np

from rlx.games.base import Game, GameState

# The eight lines, as flat cell indices.
LINES = np.array(
    [[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]]
)
# The lines through each cell, so a move checks only those.
_LINES_THROUGH = [LINES[np.equal(LINES, cell).any(axis=1)] for cell in range(9)]


def _dihedral(grid: np.ndarray) -> list[np.ndarray]:
    """The 8 rotations and reflections of the last two axes, identity first."""
    out = []
    for flipped in (grid, np.flip(grid, axis=-1)):
        for k in range(4):
            out.append(np.rot90(flipped, k, axes=(-2, -1)))
    return out


class TicTacToe(Game):
    """Tic-tac-toe. ``games.TicTacToe().initial_state()`` is the empty board, X (+1) to move."""

    name = "tictactoe"
    board_shape = (3, 3)
    num_actions = 9
    bitboard_rules = "tictactoe"

    def legal_mask(self, state: GameState) -> np.ndarray:
        if state.is_terminal:
            return np.zeros(9, dtype=bool)
        return state.board.reshape(-1) == 0

    def play(self, state: GameState, action: int) -> GameState:
        flat = state.board.reshape(-1).copy()
        flat[action] = state.to_play
        won = any(abs(int(flat[line].sum())) == 3 for line in _LINES_THROUGH[action])
        moves = state.moves + 1
        result = state.to_play if won else (0 if moves == 9 else None)
        return GameState(flat.reshape(3, 3), -state.to_play, result, moves)

    def symmetries(
        self, planes: np.ndarray, policy: np.ndarray
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        grids = _dihedral(np.asarray(policy).reshape(3, 3))
        return [
            (np.ascontiguousarray(p), np.ascontiguousarray(g).reshape(-1))
            for p, g in zip(_dihedral(planes), grids, strict=True)
        ]

    def render(self, state: GameState) -> str:
        marks = {1: "X", -1: "O", 0: "."}
        rows = []
        for r in range(3):
            cells = [marks[int(v)] if v else str(3 * r + c) for c, v in enumerate(state.board[r])]
            rows.append(" " + " | ".join(cells))
        return "\n---+---+---\n".join(rows)
