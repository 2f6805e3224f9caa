"""The rules of tic-tac-toe and Connect Four on bitboards, compiled by numba.

A position is two integers, ``(position, mask)``: the stones of the player to move, and all
stones. A move sets one bit of ``mask``, and the player who moves next owns the other stones,
so playing ``a`` gives ``(mask ^ position, mask | bit(a))``; only the last mover can have won.

- **Tic-tac-toe**: bit ``i`` is cell ``i`` (row-major); :data:`TICTACTOE_WON` lists, for each
  of the 512 sets of one player's stones, whether it holds a line.
- **Connect Four**: one ``int64`` of 7 columns x 7 bits, bit ``col * 7 + height`` the cell
  ``height`` rows above the bottom of column ``col``. The seventh bit of each column stays
  empty, so that the shifts that find four in a line never carry from one column into the
  next, and adding a column's bottom bit to ``mask`` carries up through its stones into the
  lowest empty cell.

The kernels of the search (:mod:`rlx.games.kernels`) and the Connect Four solver
(:mod:`rlx.games.connect4_solver`) play through these functions; :func:`from_state` turns a
:class:`~rlx.games.base.GameState` into bitboards. Which games they play is said by the game
itself, ``Game.bitboard_rules`` (``"tictactoe"`` or ``"connect4"``), read by :func:`kind_of`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from rlx.errors import EnvError
from rlx.games.base import Game, GameState
from rlx.games.tictactoe import LINES

#: the two games the kernels play, as the ``kind`` argument of every function here
TICTACTOE = 0
CONNECT4 = 1
#: an :func:`outcome` that is not +1, -1 or 0: the game goes on
ONGOING = 2

KINDS = {"tictactoe": TICTACTOE, "connect4": CONNECT4}

# ---------------------------------------------------------------------------- tic-tac-toe


def _tictactoe_won_table() -> np.ndarray:
    line_masks = [sum(1 << int(cell) for cell in line) for line in LINES]
    masks = np.arange(512)
    return np.array([any(m & lm == lm for lm in line_masks) for m in masks], dtype=np.bool_)


#: ``TICTACTOE_WON[m]``: whether the 9-bit set ``m`` of one player's stones holds a line
TICTACTOE_WON = _tictactoe_won_table()

# ---------------------------------------------------------------------------- Connect Four
C4_ROWS, C4_COLS = 6, 7
#: bits per column: the rows, and a sentinel above them that stays empty
C4_HEIGHT = C4_ROWS + 1
#: every cell of the board (no sentinel bits)
C4_BOARD = np.int64(sum(((1 << C4_ROWS) - 1) << (c * C4_HEIGHT) for c in range(C4_COLS)))


@njit(cache=True, inline="always")
def c4_won(stones: np.int64) -> bool:
    """Four in a line: ``s & s >> d`` marks pairs along direction ``d``; ``& >> 2d`` fours.
    Directions: 1 vertical, 7 horizontal, 6 and 8 the two diagonals."""
    pairs = stones & (stones >> 1)
    if pairs & (pairs >> 2):
        return True
    pairs = stones & (stones >> 7)
    if pairs & (pairs >> 14):
        return True
    pairs = stones & (stones >> 6)
    if pairs & (pairs >> 12):
        return True
    pairs = stones & (stones >> 8)
    return (pairs & (pairs >> 16)) != 0


@njit(cache=True, inline="always")
def c4_threats(stones: np.int64, mask: np.int64) -> np.int64:
    """The empty cells (playable now or not) where one more of ``stones`` makes four in a line:
    for each direction ``d`` (1, 7, 6, 8) an empty cell with three stones on one side, or two on
    one side and one on the other; ``mask`` holds every stone of both players."""
    found = (stones << 1) & (stones << 2) & (stones << 3)  # vertical: only stones below count
    for d in (7, 6, 8):
        # shifted left by k*d, a stone's bit lands k cells further along the direction
        after = (stones << d) & (stones << 2 * d)
        found |= after & (stones << 3 * d)
        found |= after & (stones >> d)
        before = (stones >> d) & (stones >> 2 * d)
        found |= before & (stones >> 3 * d)
        found |= before & (stones << d)
    return found & (C4_BOARD ^ mask)


@njit(cache=True, inline="always")
def c4_threat_planes(position: np.int64, mask: np.int64, out: np.ndarray) -> None:
    """``out[0]`` the mover's threat cells (``position`` its stones), ``out[1]`` the
    opponent's, as 0/1 over ``[rows, cols]`` with row 0 the top (``out`` starts zeroed)."""
    mine = c4_threats(position, mask)
    theirs = c4_threats(position ^ mask, mask)
    for c in range(C4_COLS):
        for h in range(C4_ROWS):
            bit = np.int64(1) << (c * C4_HEIGHT + h)
            if mine & bit:
                out[0, C4_ROWS - 1 - h, c] = 1.0
            if theirs & bit:
                out[1, C4_ROWS - 1 - h, c] = 1.0


# ---------------------------------------------------------------------------- both games
@njit(cache=True, inline="always")
def num_actions(kind: int) -> int:
    return 9 if kind == TICTACTOE else C4_COLS


@njit(cache=True, inline="always")
def max_moves(kind: int) -> int:
    """Moves until the board is full."""
    return 9 if kind == TICTACTOE else C4_ROWS * C4_COLS


@njit(cache=True, inline="always")
def is_legal(kind: int, mask: np.int64, action: int) -> bool:
    if kind == TICTACTOE:
        return ((mask >> action) & 1) == 0
    # a column is full when its top cell (bit 5 of the column) is taken
    return ((mask >> (action * C4_HEIGHT + C4_ROWS - 1)) & 1) == 0


@njit(cache=True, inline="always")
def play(kind: int, position: np.int64, mask: np.int64, action: int) -> tuple[np.int64, np.int64]:
    """The ``(position, mask)`` after the player to move plays ``action``; the new position is
    the stones of the other player, who moves next: the old ``mask ^ position``."""
    if kind == TICTACTOE:
        new_mask = mask | (np.int64(1) << action)
    else:
        # adding the column's bottom bit carries up through its stones into the lowest empty cell
        new_mask = mask | (mask + (np.int64(1) << (action * C4_HEIGHT)))
    return position ^ mask, new_mask


@njit(cache=True, inline="always")
def mover_won(kind: int, position: np.int64, mask: np.int64) -> bool:
    """Whether the player who just moved (whose stones are ``mask ^ position``) has won."""
    stones = mask ^ position
    if kind == TICTACTOE:
        return TICTACTOE_WON[stones]
    return c4_won(stones)


@njit(cache=True, inline="always")
def outcome(kind: int, position: np.int64, mask: np.int64, moves: int, to_play: int) -> int:
    """+1 / -1 the winner, 0 a draw, :data:`ONGOING` otherwise; ``moves`` stones are on the
    board and ``to_play`` moves next (only the last mover, ``-to_play``, can have won)."""
    if mover_won(kind, position, mask):
        return -to_play
    if moves == max_moves(kind):
        return 0
    return ONGOING


@njit(cache=True, inline="always")
def random_legal_action(kind: int, mask: np.int64) -> int:
    # rejection sampling is uniform over the legal moves and cheaper than listing them
    n = num_actions(kind)
    while True:
        action = np.random.randint(0, n)
        if is_legal(kind, mask, action):
            return action


@njit(cache=True, inline="always")
def random_playout(kind: int, position: np.int64, mask: np.int64, moves: int, to_play: int) -> int:
    """Uniformly random moves (numba's generator) from a position that goes on, to the end:
    the winner +1 / -1, or 0."""
    while True:
        position, mask = play(kind, position, mask, random_legal_action(kind, mask))
        moves += 1
        to_play = -to_play
        result = outcome(kind, position, mask, moves, to_play)
        if result != ONGOING:
            return result


@njit(cache=True, inline="always")
def encode(kind: int, position: np.int64, mask: np.int64, out: np.ndarray) -> None:
    """``Game.encode`` from bitboards: the mover's stones, the opponent's, ones (``out`` is
    ``[planes, rows, cols]``; Connect Four's row 0 is the top row), then, when ``out`` has 5
    planes (``ConnectFour(threat_planes=True)``), the mover's and the opponent's threat cells."""
    out[:] = 0.0
    out[2] = 1.0
    rows, cols = out.shape[1], out.shape[2]
    for r in range(rows):
        for c in range(cols):
            if kind == TICTACTOE:
                bit = np.int64(1) << (r * 3 + c)
            else:
                bit = np.int64(1) << (c * C4_HEIGHT + C4_ROWS - 1 - r)
            if position & bit:
                out[0, r, c] = 1.0
            elif mask & bit:
                out[1, r, c] = 1.0
    if out.shape[0] == 5:
        c4_threat_planes(position, mask, out[3:])


@njit(cache=True, inline="always")
def legal_row(kind: int, mask: np.int64, out: np.ndarray) -> None:
    """``Game.legal_mask`` from bitboards, into ``out``."""
    for a in range(num_actions(kind)):
        out[a] = is_legal(kind, mask, a)


# ---------------------------------------------------------------------------- from GameState
def kind_of(game: Game) -> int | None:
    """:data:`TICTACTOE` or :data:`CONNECT4` for a game these rules play, else None."""
    rules = getattr(game, "bitboard_rules", None)
    return None if rules is None else KINDS.get(rules)


def from_state(kind: int, state: GameState) -> tuple[int, int]:
    """``(position, mask)`` of a tic-tac-toe or Connect Four ``state``."""
    board = state.board
    if kind == TICTACTOE:
        flat = board.reshape(-1)
        bit = np.int64(1) << np.arange(9, dtype=np.int64)
        mine, theirs = int(bit[flat == state.to_play].sum()), int(bit[flat == -state.to_play].sum())
        return mine, mine | theirs
    # bit (col * 7 + height) for the stone at ``height`` from the bottom of column col
    bit = np.int64(1) << (
        np.arange(C4_COLS, dtype=np.int64)[None, :] * C4_HEIGHT
        + np.arange(C4_ROWS - 1, -1, -1, dtype=np.int64)[:, None]
    )
    filled = board != 0
    # a stone above an empty cell would break the carry in play(): stones must lie on the bottom
    if (filled[:-1] & ~filled[1:]).any():
        raise EnvError("this Connect Four board has a stone above an empty cell; build it by play.")
    mine, theirs = int(bit[board == state.to_play].sum()), int(bit[board == -state.to_play].sum())
    return mine, mine | theirs
