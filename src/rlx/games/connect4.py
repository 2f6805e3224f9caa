"""Connect Four: 6 rows x 7 columns, stones drop to the lowest empty cell of a column; four in
a row, column or diagonal wins; a full board without one draws.

Actions are columns ``0..6``. Row 0 of ``board`` is the top row, as the board is drawn.
"""

from __future__ import annotations

import numpy as np

from rlx.games.base import Game, GameState

ROWS, COLS = 6, 7
#: the four directions of a line: along a row, a column and the two diagonals
DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))


def line_length(board: np.ndarray, row: int, col: int, dr: int, dc: int) -> int:
    """Stones of the colour at (row, col) in a line through it along (dr, dc)."""
    colour = board[row, col]
    n = 1
    for sign in (1, -1):
        r, c = row + sign * dr, col + sign * dc
        while 0 <= r < ROWS and 0 <= c < COLS and board[r, c] == colour:
            n += 1
            r, c = r + sign * dr, c + sign * dc
    return n


class ConnectFour(Game):
    """Connect Four (6x7). ``apply(state, column)`` drops the mover's stone into ``column``.

    ``threat_planes=True`` adds two planes to :meth:`encode`: the empty cells where one more
    stone of the mover, and of the opponent, would make four in a line (playable now or not:
    Connect Four strategy turns on which player's threats sit on odd or even rows). The rules
    are the same; only what a network sees changes, as AlphaGo's liberty planes did for Go.
    """

    name = "connect4"
    board_shape = (ROWS, COLS)
    num_actions = COLS
    bitboard_rules = "connect4"

    def __init__(self, threat_planes: bool = False) -> None:
        self.threat_planes = bool(threat_planes)
        self.num_planes = 5 if self.threat_planes else 3

    def legal_mask(self, state: GameState) -> np.ndarray:
        if state.is_terminal:
            return np.zeros(COLS, dtype=bool)
        return state.board[0] == 0

    def play(self, state: GameState, action: int) -> GameState:
        board = state.board.copy()
        row = int(np.flatnonzero(board[:, action] == 0)[-1])
        board[row, action] = state.to_play
        won = any(line_length(board, row, action, dr, dc) >= 4 for dr, dc in DIRECTIONS)
        moves = state.moves + 1
        result = state.to_play if won else (0 if moves == ROWS * COLS else None)
        return GameState(board, -state.to_play, result, moves)

    def encode(self, state: GameState) -> np.ndarray:
        planes = super().encode(state)
        if not self.threat_planes:
            return planes
        # here, not above: numba loads only when a game asks for its compiled rules
        from rlx.games import bitboards

        position, mask = bitboards.from_state(bitboards.CONNECT4, state)
        threats = np.zeros((2, ROWS, COLS), dtype=np.float32)
        bitboards.c4_threat_planes(np.int64(position), np.int64(mask), threats)
        return np.concatenate([planes, threats])

    def symmetries(
        self, planes: np.ndarray, policy: np.ndarray
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        mirrored = np.ascontiguousarray(np.flip(planes, axis=-1))
        return [(planes, np.asarray(policy)), (mirrored, np.asarray(policy)[::-1].copy())]

    def render(self, state: GameState) -> str:
        marks = {1: "X", -1: "O", 0: "."}
        rows = [" ".join(marks[int(v)] for v in row) for row in state.board]
        return "\n".join([*rows, " ".join(str(c) for c in range(COLS))])

    def __repr__(self) -> str:
        return "ConnectFour(threat_planes=True)" if self.threat_planes else "ConnectFour()"
