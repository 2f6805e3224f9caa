"""Pure Monte Carlo tree search with random rollouts (UCT): the classic ``mcts-k`` baseline.

Each of the ``k`` simulations of a move walks down the tree from the root, choosing at every
node the child with the highest upper confidence bound (Kocsis and Szepesvari, 2006):

    UCT(child) = Q / N + c * sqrt(ln N_parent / N)         (an unvisited child: +infinity)

where ``N`` is the child's visit count and ``Q`` the sum of the results of the games played
through it, from the point of view of the player who moved into it (+1 won, 0 drawn, -1 lost).
At the first node that has no children it expands (a node seen once before gets one child per
legal move, and the walk takes one of them), plays the game out with uniformly random moves,
and adds the result to ``N`` and ``Q`` of every node on the path. The move played is the root
child visited most often.

Tic-tac-toe and Connect Four run wholly in one numba kernel, over preallocated arrays (one slot
per node: first child, number of children, action, N, Q) and bitboards (Connect Four: one
``int64`` of 7 columns x 7 bits, the seventh bit of each column always empty so that shifts
never carry from one column into the next; tic-tac-toe: 9 bits and a table of the 512 won
masks). A position is ``(position, mask)``: the stones of the player to move, and all stones.
An ``OpenSpielGame`` is searched by the same algorithm in plain Python on its OpenSpiel states,
which is much slower.

    player = MCTSPlayer(ConnectFour(), simulations=1000, seed=0)   # player.name == "mcts-1000"
    action = player(state)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from rlx.errors import ConfigError, EnvError
from rlx.games.base import Game, GameState, IllegalMoveError
from rlx.games.connect4 import ConnectFour
from rlx.games.tictactoe import LINES, TicTacToe

#: the exploration constant; OpenSpiel's examples use 2 for results in [-1, 1]
DEFAULT_C = 2.0

_TICTACTOE = 0
_CONNECT4 = 1
_ONGOING = 2  # an outcome that is not +1, -1 or 0: the game goes on

# ---------------------------------------------------------------------------- tic-tac-toe


def _tictactoe_won_table() -> np.ndarray:
    """``table[m]`` is True when the 9-bit mask ``m`` of one player's stones holds a line."""
    line_masks = [sum(1 << int(cell) for cell in line) for line in LINES]
    masks = np.arange(512)
    return np.array([any(m & lm == lm for lm in line_masks) for m in masks], dtype=np.bool_)


_TTT_WON = _tictactoe_won_table()

# ---------------------------------------------------------------------------- Connect Four
_C4_ROWS, _C4_COLS = 6, 7
_C4_HEIGHT = _C4_ROWS + 1  # bits per column, the top one a sentinel that stays empty


@njit(cache=True, inline="always")
def _c4_won(stones: np.int64) -> bool:
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


_C4_BOARD = np.int64(sum(((1 << _C4_ROWS) - 1) << (c * _C4_HEIGHT) for c in range(_C4_COLS)))


@njit(cache=True, inline="always")
def _c4_threats(stones: np.int64, mask: np.int64) -> np.int64:
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
    return found & (_C4_BOARD ^ mask)


@njit(cache=True, inline="always")
def _c4_threat_planes(position: np.int64, mask: np.int64, out: np.ndarray) -> None:
    """``out[0]`` the mover's threat cells (``position`` its stones), ``out[1]`` the
    opponent's, as 0/1 over ``[rows, cols]`` with row 0 the top (``out`` starts zeroed)."""
    mine = _c4_threats(position, mask)
    theirs = _c4_threats(position ^ mask, mask)
    for c in range(_C4_COLS):
        for h in range(_C4_ROWS):
            bit = np.int64(1) << (c * _C4_HEIGHT + h)
            if mine & bit:
                out[0, _C4_ROWS - 1 - h, c] = 1.0
            if theirs & bit:
                out[1, _C4_ROWS - 1 - h, c] = 1.0


# ---------------------------------------------------------------------------- the two games
@njit(cache=True, inline="always")
def _num_actions(kind: int) -> int:
    return 9 if kind == _TICTACTOE else _C4_COLS


@njit(cache=True, inline="always")
def _max_moves(kind: int) -> int:
    return 9 if kind == _TICTACTOE else _C4_ROWS * _C4_COLS


@njit(cache=True, inline="always")
def _is_legal(kind: int, mask: np.int64, action: int) -> bool:
    if kind == _TICTACTOE:
        return ((mask >> action) & 1) == 0
    # a column is full when its top cell (bit 5 of the column) is taken
    return ((mask >> (action * _C4_HEIGHT + _C4_ROWS - 1)) & 1) == 0


@njit(cache=True, inline="always")
def _play(kind: int, position: np.int64, mask: np.int64, action: int) -> tuple[np.int64, np.int64]:
    """The ``(position, mask)`` after the player to move plays ``action``; the new position is
    the stones of the other player, who moves next: the old ``mask ^ position``."""
    if kind == _TICTACTOE:
        new_mask = mask | (np.int64(1) << action)
    else:
        # adding the column's bottom bit carries up through its stones into the lowest empty cell
        new_mask = mask | (mask + (np.int64(1) << (action * _C4_HEIGHT)))
    return position ^ mask, new_mask


@njit(cache=True, inline="always")
def _mover_won(kind: int, position: np.int64, mask: np.int64) -> bool:
    """Whether the player who just moved (whose stones are ``mask ^ position``) has won."""
    stones = mask ^ position
    if kind == _TICTACTOE:
        return _TTT_WON[stones]
    return _c4_won(stones)


@njit(cache=True, inline="always")
def _outcome(kind: int, position: np.int64, mask: np.int64, moves: int, to_play: int) -> int:
    """+1 / -1 the winner, 0 a draw, ``_ONGOING`` otherwise; only the last mover can have won."""
    if _mover_won(kind, position, mask):
        return -to_play
    if moves == _max_moves(kind):
        return 0
    return _ONGOING


@njit(cache=True, inline="always")
def _random_legal_action(kind: int, mask: np.int64) -> int:
    # rejection sampling is uniform over the legal moves and cheaper than listing them
    n = _num_actions(kind)
    while True:
        action = np.random.randint(0, n)
        if _is_legal(kind, mask, action):
            return action


@njit(cache=True, inline="always")
def _rollout(kind: int, position: np.int64, mask: np.int64, moves: int, to_play: int) -> int:
    """Random moves from a non-terminal position to the end; the winner +1 / -1, or 0."""
    while True:
        position, mask = _play(kind, position, mask, _random_legal_action(kind, mask))
        moves += 1
        to_play = -to_play
        outcome = _outcome(kind, position, mask, moves, to_play)
        if outcome != _ONGOING:
            return outcome


# ---------------------------------------------------------------------------- the tree
@njit(cache=True, inline="always")
def _expand(
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
    for action in range(_num_actions(kind)):
        if _is_legal(kind, mask, action):
            j = np.random.randint(0, n + 1)  # inside-out Fisher-Yates shuffle
            action_of[free + n] = action_of[free + j]
            action_of[free + j] = action
            n += 1
    first_child[node] = free
    num_children[node] = n
    return free + n


@njit(cache=True, inline="always")
def _select(
    node: int,
    c: float,
    first_child: np.ndarray,
    num_children: np.ndarray,
    visits: np.ndarray,
    value: np.ndarray,
) -> int:
    """The child with the highest ``Q/N + c sqrt(ln N_parent / N)``; an unvisited one first."""
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


# numba's cache checks the timestamp of the defining file only, and puct_kernel.py inlines this
# file's functions: rlx.games drops both files' cached kernels when either changes.
@njit(cache=True, error_model="numpy")
def _search_kernel(
    kind: int,
    root_position: np.int64,
    root_mask: np.int64,
    root_moves: int,
    root_to_play: int,
    simulations: int,
    c: float,
    seed: int,
) -> np.ndarray:
    """Visit counts of the root's moves after ``simulations`` UCT simulations."""
    np.random.seed(seed)
    num_actions = _num_actions(kind)
    # every simulation expands at most one node, by at most num_actions children
    capacity = 1 + num_actions * (simulations + 1)
    first_child = np.full(capacity, -1, dtype=np.int32)
    num_children = np.zeros(capacity, dtype=np.int32)
    action_of = np.zeros(capacity, dtype=np.int32)
    visits = np.zeros(capacity, dtype=np.int32)
    value = np.zeros(capacity, dtype=np.float64)
    path = np.zeros(_max_moves(kind) + 2, dtype=np.int32)
    # the root is expanded at once, so that every simulation passes through one of its children
    free = _expand(kind, 0, root_mask, 1, first_child, num_children, action_of)

    for _ in range(simulations):
        node, depth = 0, 0
        position, mask, moves, to_play = root_position, root_mask, root_moves, root_to_play
        path[0] = 0
        # selection: down the tree while the node has children (so is not terminal)
        while first_child[node] >= 0:
            node = _select(node, c, first_child, num_children, visits, value)
            position, mask = _play(kind, position, mask, action_of[node])
            moves += 1
            to_play = -to_play
            depth += 1
            path[depth] = node
        outcome = _outcome(kind, position, mask, moves, to_play)
        # expansion, at a leaf's second visit (its first gave a rollout, as in OpenSpiel's MCTS)
        if outcome == _ONGOING and visits[node] > 0:
            free = _expand(kind, node, mask, free, first_child, num_children, action_of)
            node = first_child[node]
            position, mask = _play(kind, position, mask, action_of[node])
            moves += 1
            to_play = -to_play
            depth += 1
            path[depth] = node
            outcome = _outcome(kind, position, mask, moves, to_play)
        if outcome == _ONGOING:
            outcome = _rollout(kind, position, mask, moves, to_play)
        # backup: the node at depth d was moved into by the root's mover if d is odd
        for d in range(depth + 1):
            mover = root_to_play if d % 2 == 1 else -root_to_play
            visits[path[d]] += 1
            value[path[d]] += outcome * mover

    counts = np.zeros(num_actions, dtype=np.int64)
    start = first_child[0]
    for child in range(start, start + num_children[0]):
        counts[action_of[child]] = visits[child]
    return counts


# ---------------------------------------------------------------------------- from GameState
def _bitboards(game: Game, state: GameState) -> tuple[int, int, int]:
    """``(kind, position, mask)`` of a tic-tac-toe or Connect Four state for the kernel."""
    if isinstance(game, TicTacToe):
        flat = state.board.reshape(-1)
        bit = 1 << np.arange(9, dtype=np.int64)
        mine, theirs = int(bit[flat == state.to_play].sum()), int(bit[flat == -state.to_play].sum())
        return _TICTACTOE, mine, mine | theirs
    board = state.board
    # bit (col * 7 + height) for the stone at ``height`` from the bottom of column col
    bit = np.int64(1) << (
        np.arange(_C4_COLS, dtype=np.int64)[None, :] * _C4_HEIGHT
        + np.arange(_C4_ROWS - 1, -1, -1, dtype=np.int64)[:, None]
    )
    filled = board != 0
    # a stone above an empty cell would break the carry in _play: stones must lie on the bottom
    if (filled[:-1] & ~filled[1:]).any():
        raise EnvError("this Connect Four board has a stone above an empty cell; build it by play.")
    mine, theirs = int(bit[board == state.to_play].sum()), int(bit[board == -state.to_play].sum())
    return _CONNECT4, mine, mine | theirs


def _kernel_kind(game: Game) -> int | None:
    if isinstance(game, TicTacToe):
        return _TICTACTOE
    if isinstance(game, ConnectFour):
        return _CONNECT4
    return None


def _check_searchable(game: Game) -> None:
    if _kernel_kind(game) is not None or _is_openspiel(game):
        return
    raise EnvError(
        f"rollout MCTS has no kernel for {type(game).__name__}; it plays TicTacToe, ConnectFour "
        "or an OpenSpielGame."
    )


def _is_openspiel(game: Game) -> bool:
    from rlx.games.openspiel import OpenSpielGame  # imports without open_spiel installed

    return isinstance(game, OpenSpielGame)


def _check_settings(simulations: int, c: float) -> None:
    whole = isinstance(simulations, int | np.integer) and not isinstance(simulations, bool)
    if not whole or simulations < 1:
        raise ConfigError(f"simulations must be an integer >= 1, not {simulations!r}.")
    if not c >= 0:
        raise ConfigError(f"c, the exploration constant, must be >= 0, not {c!r}.")


def search(
    game: Game,
    state: GameState,
    simulations: int,
    rng_or_seed: np.random.Generator | int = 0,
    c: float = DEFAULT_C,
) -> np.ndarray:
    """Visit counts ``N(root, a)`` of every action (length ``game.num_actions``) after
    ``simulations`` UCT simulations from ``state``; they sum to ``simulations``.

    ``rng_or_seed`` seeds the search: the same seed (or a Generator in the same state) gives
    the same counts.
    """
    _check_settings(simulations, c)
    _check_searchable(game)
    if state.is_terminal:
        raise IllegalMoveError("the game is over; there is no move to search for.")
    rng = np.random.default_rng(rng_or_seed)
    # numba keeps its own generator, seeded per search from ours (its seed takes 32 bits)
    seed = int(rng.integers(2**32 - 1))
    kind = _kernel_kind(game)
    if kind is None:
        return _python_search(game, state, int(simulations), float(c), rng)
    _, position, mask = _bitboards(game, state)
    moves = int(np.count_nonzero(state.board))
    return _search_kernel(
        kind, position, mask, moves, int(state.to_play), int(simulations), float(c), seed
    )


class MCTSPlayer:
    """Plays the most visited move of a UCT search with random rollouts; ties at random.

    ``MCTSPlayer(game, simulations=1000, seed=0)`` is the player ``mcts-1000``: the same seed
    plays the same moves.
    """

    def __init__(
        self, game: Game, simulations: int = 1000, seed: int = 0, c: float = DEFAULT_C
    ) -> None:
        _check_settings(simulations, c)
        _check_searchable(game)
        self.game = game
        self.simulations = int(simulations)
        self.c = float(c)
        self.rng = np.random.default_rng(seed)
        self.name = f"mcts-{self.simulations}"

    def __call__(self, state: GameState) -> int:
        counts = search(self.game, state, self.simulations, self.rng, self.c)
        most = np.flatnonzero(counts == counts.max())
        return int(self.rng.choice(most))


# ---------------------------------------------------------------------------- plain Python
class _Node:
    """A node of the plain-Python tree: ``N`` and ``Q`` from the view of ``mover``, the player
    (+1 / -1) who moved into it, and its children (``None`` until expanded)."""

    __slots__ = ("action", "children", "mover", "value", "visits")

    def __init__(self, action: int, mover: int) -> None:
        self.action = action
        self.mover = mover
        self.visits = 0
        self.value = 0.0
        self.children: list[_Node] | None = None


def _python_search(
    game: Game, state: GameState, simulations: int, c: float, rng: np.random.Generator
) -> np.ndarray:
    """The kernel's algorithm on an OpenSpielGame's native states (clone and apply_action).

    Each node keeps its mover, for in some OpenSpiel games a player moves twice in a row."""
    root = _Node(-1, -state.to_play)
    root.children = _python_children(state.native, rng)
    for _ in range(simulations):
        native = state.native.clone()
        node, path = root, [root]
        while node.children:
            node = _python_select(node, c)
            native.apply_action(node.action)
            path.append(node)
        if not native.is_terminal() and node.visits > 0:
            node.children = _python_children(native, rng)
            node = node.children[0]
            native.apply_action(node.action)
            path.append(node)
        while not native.is_terminal():
            legal = native.legal_actions()
            native.apply_action(legal[int(rng.integers(len(legal)))])
        # +1 when the first player (OpenSpiel's player 0) won, as GameState.result
        outcome = float(np.sign(native.returns()[0]))
        for visited in path:
            visited.visits += 1
            visited.value += outcome * visited.mover
    counts = np.zeros(game.num_actions, dtype=np.int64)
    for child in root.children:
        counts[child.action] = child.visits
    return counts


def _python_children(native: Any, rng: np.random.Generator) -> list[_Node]:
    """One child per legal move, in a random order (selection takes the first unvisited)."""
    mover = 1 if native.current_player() == 0 else -1
    return [_Node(int(a), mover) for a in rng.permutation(native.legal_actions())]


def _python_select(node: _Node, c: float) -> _Node:
    """As :func:`_select`: the highest ``Q/N + c sqrt(ln N_parent / N)``, unvisited first."""
    log_parent = math.log(max(node.visits, 1))
    best, best_score = node.children[0], -math.inf
    for child in node.children:
        if child.visits == 0:
            return child
        score = child.value / child.visits + c * math.sqrt(log_parent / child.visits)
        if score > best_score:
            best, best_score = child, score
    return best
