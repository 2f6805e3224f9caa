"""The game protocol every board game in rlx follows, and the errors of bad moves.

A two-player, zero-sum, perfect-information game with alternating moves:

- a :class:`GameState` holds ``board`` (numpy ``int8``; +1 the first player's stones, -1 the
  second's, 0 empty), ``to_play`` (+1 or -1) and, once the game is over, ``result`` (+1 or -1
  for the winner, 0 for a draw; ``None`` while it goes on);
- a :class:`Game` turns states into states: ``initial_state``, ``legal_actions``,
  ``apply`` (``play``: the same without the legality check, for search), ``is_terminal``,
  ``winner``; ``encode`` gives the state from the point of view of the player to move, as
  planes for a network, and ``symmetries`` the board's symmetries for data augmentation.

States are never changed in place: ``apply`` returns a new one, so a search tree can keep them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rlx.errors import EnvError, RLXError


class IllegalMoveError(RLXError):
    """A move that the rules do not allow in this state."""


@dataclass(frozen=True, eq=False)
class GameState:
    """One position. ``board`` must not be written to: states are shared by search trees."""

    board: np.ndarray
    to_play: int
    result: int | None = None
    moves: int = 0

    @property
    def is_terminal(self) -> bool:
        return self.result is not None

    def key(self) -> bytes:
        """A hashable identity of the position (board and player to move)."""
        return self.board.tobytes() + (b"+" if self.to_play == 1 else b"-")


class Game(ABC):
    """A board game: the rules, the network encoding and the symmetries."""

    name: str
    board_shape: tuple[int, int]
    num_actions: int
    #: planes of :meth:`encode`: the mover's stones, the opponent's stones, a plane of ones
    num_planes: int = 3
    #: the rules of :mod:`rlx.games.bitboards` this game follows (``"tictactoe"`` or
    #: ``"connect4"``), so that search runs in its compiled kernels; None: none of them
    bitboard_rules: str | None = None

    # ------------------------------------------------------------------ rules
    def initial_state(self) -> GameState:
        return GameState(np.zeros(self.board_shape, dtype=np.int8), to_play=1)

    @abstractmethod
    def legal_mask(self, state: GameState) -> np.ndarray:
        """Boolean mask over the ``num_actions`` actions; all False in a terminal state."""

    def legal_actions(self, state: GameState) -> np.ndarray:
        """The legal actions, ascending."""
        return np.flatnonzero(self.legal_mask(state))

    def apply(self, state: GameState, action: int) -> GameState:
        """The state after the player to move plays ``action``."""
        action = int(action)
        if state.is_terminal:
            raise IllegalMoveError("the game is over; no move can be played after it ends.")
        if not 0 <= action < self.num_actions or not self.legal_mask(state)[action]:
            legal = ", ".join(str(a) for a in self.legal_actions(state))
            raise IllegalMoveError(
                f"move {action} is not legal in {self.name} here; legal moves: {legal}."
            )
        return self.play(state, action)

    @abstractmethod
    def play(self, state: GameState, action: int) -> GameState:
        """:meth:`apply` for a move known to be legal, without checking it: what search,
        rollouts and self-play call, having taken the move from :meth:`legal_mask`."""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        # games written to the protocol before ``play`` was public defined ``_play``
        if "_play" in cls.__dict__ and "play" not in cls.__dict__:
            # _play exists only on such subclasses, and play is set on the class on purpose
            cls.play = cls._play  # type: ignore[attr-defined,method-assign]

    def is_terminal(self, state: GameState) -> bool:
        return state.is_terminal

    def winner(self, state: GameState) -> int | None:
        """+1 or -1 for the winner, 0 for a draw, None while the game goes on."""
        return state.result

    def random_playout(self, state: GameState, rng: np.random.Generator) -> int:
        """The result (+1, -1 or 0, as :meth:`winner`) of uniformly random legal moves from
        ``state`` to the end of the game."""
        draw = integer_draw(rng)
        while not state.is_terminal:
            legal = self.legal_actions(state)
            state = self.play(state, int(legal[draw(len(legal))]))
        assert state.result is not None  # the loop ends at a terminal state
        return int(state.result)

    # ------------------------------------------------------------------ for networks
    def encode(self, state: GameState) -> np.ndarray:
        """``(num_planes, rows, cols)`` float32 planes from the mover's point of view: its own
        stones, the opponent's stones, ones. The same position with colours swapped and the
        other player to move encodes the same, so one network plays both seats."""
        own = state.board == state.to_play
        other = state.board == -state.to_play
        return np.stack([own, other, np.ones_like(own)]).astype(np.float32)

    def encode_batch(self, states: Sequence[GameState]) -> np.ndarray:
        return np.stack([self.encode(s) for s in states])

    @abstractmethod
    def symmetries(
        self, planes: np.ndarray, policy: np.ndarray
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Every symmetric copy (identity first) of encoded ``planes`` and a ``policy`` over
        actions, transformed alike."""

    # ------------------------------------------------------------------ for people
    @abstractmethod
    def render(self, state: GameState) -> str:
        """The board as text."""

    def action_to_string(self, action: int) -> str:
        return str(int(action))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def integer_draw(rng: np.random.Generator) -> Callable[[int], int]:
    """``draw(n)``: the number ``rng.integers(n)`` would give, from the same stream, for a loop
    of random moves that draws many.

    numpy draws an integer below ``n`` by Lemire's method on 32-bit draws ``u`` of the bit
    generator: ``m = u * n``, drawn again while ``m mod 2^32 < 2^32 mod n``, gives
    ``floor(m / 2^32)``; ``n = 1`` draws nothing. Done here through the bit generator's ctypes
    interface, it skips the checks of ``integers``' arguments, which cost more than the draw
    (and its lock: a generator is for one thread at a time).
    """
    interface = getattr(getattr(rng, "bit_generator", None), "ctypes", None)
    if interface is None:  # not numpy's Generator: no ctypes interface to call
        return lambda n: int(rng.integers(n))
    next_uint32, bits = interface.next_uint32, interface.state

    def draw(n: int) -> int:
        if n == 1:
            return 0
        m = next_uint32(bits) * n
        if m & 0xFFFFFFFF < n:
            threshold = (0x100000000 - n) % n
            while m & 0xFFFFFFFF < threshold:
                m = next_uint32(bits) * n
        return m >> 32

    return draw


def symmetry_permutations(game: Game) -> tuple[np.ndarray, np.ndarray]:
    """The game's symmetries as permutations: cells ``[S, H*W]`` and actions ``[S, A]``, with
    ``new[..., i] = old[..., perm[i]]``. Only the identity when a symmetry is not a
    permutation of cells and actions."""
    rows, cols = game.board_shape
    cells = np.broadcast_to(
        np.arange(rows * cols, dtype=np.float32).reshape(1, rows, cols),
        (game.num_planes, rows, cols),
    ).copy()
    actions = np.arange(game.num_actions, dtype=np.float32)
    cell_perms, action_perms = [], []
    for planes, policy in game.symmetries(cells, actions):
        cell_perm = np.rint(np.asarray(planes)[0]).astype(np.int64).reshape(-1)
        action_perm = np.rint(np.asarray(policy)).astype(np.int64).reshape(-1)
        if sorted(cell_perm) != list(range(rows * cols)) or sorted(action_perm) != list(
            range(game.num_actions)
        ):
            return np.arange(rows * cols)[None], np.arange(game.num_actions)[None]
        cell_perms.append(cell_perm)
        action_perms.append(action_perm)
    return np.stack(cell_perms), np.stack(action_perms)


def check_same_game(expected: str, found: str, where: str) -> None:
    """An error when a checkpoint or agent of one game is used for another."""
    if expected != found:
        raise EnvError(f"{where} was trained on {found!r}, not {expected!r}; use a {expected} run.")
