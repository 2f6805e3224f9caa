"""OpenSpiel's two-player board games behind rlx's :class:`~rlx.games.base.Game` protocol.

    game = games.make("openspiel:connect_four")    # or OpenSpielGame("tic_tac_toe")
    state = game.apply(game.initial_state(), 3)    # state.native is the pyspiel state

Only games that fit the protocol are accepted: two players, zero-sum, sequential moves, no
chance, perfect information. OpenSpiel's player 0 is rlx's first player (+1), player 1 the
second (-1); ``result`` is the sign of player 0's return at the end.

``board`` is the cell contents (+1 / -1 / 0, row 0 at the top) for ``tic_tac_toe`` and
``connect_four``, and for other games player 0's observation tensor as float32 planes
``(planes, *board_shape)``; ``board_shape`` is always the rows and columns of ``encode``.
``encode`` is the observation tensor of the player to move, as OpenSpiel defines it (for
these two games it is the same for both players: empty, x and o planes in some order).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import cached_property
from typing import Any, cast

import numpy as np

from rlx.errors import EnvError
from rlx.games.base import Game, GameState, integer_draw

# how the observation planes of player 0 give rlx's board: (plane of player 0's stones, plane
# of player 1's, whether OpenSpiel's row 0 is the bottom row so the rows must be flipped)
_BOARD_PLANES = {"tic_tac_toe": (2, 1, False), "connect_four": (0, 1, True)}


def _import_pyspiel() -> Any:
    try:
        import pyspiel
    except ImportError as exc:
        raise EnvError(
            "OpenSpiel games need the open_spiel package; pip install open_spiel "
            "(or pip install rlx[games])."
        ) from exc
    return pyspiel


@dataclass(frozen=True, eq=False)
class OpenSpielState(GameState):
    """A :class:`GameState` that also carries the pyspiel state it was made from.

    The game's own states (:meth:`with_lazy_board`) read their ``board`` from the observation
    tensor the first time it is asked for, then keep it: a search makes a state at every new
    leaf of its tree and reads none of their boards.
    """

    native: Any = None

    @classmethod
    def with_lazy_board(
        cls, native: Any, to_play: int, result: int | None, moves: int, game: OpenSpielGame
    ) -> OpenSpielState:
        """The state of ``native`` in ``game``, its board left to be read when first asked."""
        state = cls.__new__(cls)
        # set as the dataclass's own __init__ sets a frozen instance's fields, past __setattr__
        state.__dict__.update(native=native, to_play=to_play, result=result, moves=moves, game=game)
        return state

    # the field, read lazily: a state made with a board keeps it in the instance's __dict__
    @cached_property  # type: ignore[misc]
    def board(self) -> np.ndarray:
        """The board (see the module's docstring); a state made with a board keeps that one."""
        # ``game`` is set by with_lazy_board only, through __dict__: no field of the dataclass
        return self.game.board_of(self.native)  # type: ignore[attr-defined]

    def key(self) -> bytes:
        # the board of a generic game is an observation, which may not tell positions apart
        return str(self.native).encode() + (b"+" if self.to_play == 1 else b"-")


class OpenSpielGame(Game):
    """An OpenSpiel game, e.g. ``OpenSpielGame("tic_tac_toe")`` or ``"connect_four(rows=5)"``."""

    def __init__(self, game_name: str) -> None:
        pyspiel = _import_pyspiel()
        self.game_name = game_name.strip()
        self.name = f"openspiel:{self.game_name}"
        self.native_game = _load_game(pyspiel, self.game_name)
        _check_fits_protocol(pyspiel, self.native_game, self.game_name)
        self.short_name = self.native_game.get_type().short_name
        self.num_actions = int(self.native_game.num_distinct_actions())
        self.observation_shape = tuple(int(n) for n in self.native_game.observation_tensor_shape())
        planes = _as_planes(np.zeros(self.observation_shape, dtype=np.float32))
        self.num_planes = planes.shape[0]
        self.board_shape = planes.shape[1:]

    # ------------------------------------------------------------------ rules
    def initial_state(self) -> OpenSpielState:
        return self._wrap(self.native_game.new_initial_state())

    def legal_mask(self, state: GameState) -> np.ndarray:
        if state.is_terminal:
            return np.zeros(self.num_actions, dtype=bool)
        return np.asarray(cast(OpenSpielState, state).native.legal_actions_mask(), dtype=bool)

    def play(self, state: GameState, action: int) -> OpenSpielState:
        native = cast(OpenSpielState, state).native.clone()
        native.apply_action(int(action))
        return self._wrap(native, last_mover=state.to_play)

    def random_playout(self, state: GameState, rng: np.random.Generator) -> int:
        """:meth:`Game.random_playout` on a clone of the pyspiel state, without wrapping each
        position on the way."""
        native = cast(OpenSpielState, state).native.clone()
        # bound once: this loop is where pure MCTS spends most of its time
        legal_actions, apply_action, draw = (
            native.legal_actions,
            native.apply_action,
            integer_draw(rng),
        )
        # a game goes on while its player to move has a legal move (at the end it has none)
        while legal := legal_actions():
            apply_action(legal[draw(len(legal))])
        # +1 when the first player (OpenSpiel's player 0) won, as GameState.result
        return _sign(native.returns()[0])

    def _wrap(self, native: Any, last_mover: int = -1) -> OpenSpielState:
        if native.is_terminal():
            # OpenSpiel has no player to move at the end; rlx's games give the last mover's
            # opponent, as if the turn had passed
            to_play, result = -last_mover, _sign(native.returns()[0])
        else:
            # not always the last mover's opponent: in some games a player moves twice
            to_play, result = (1 if native.current_player() == 0 else -1), None
        return OpenSpielState.with_lazy_board(native, to_play, result, native.move_number(), self)

    def board_of(self, native: Any) -> np.ndarray:
        """The ``board`` of a pyspiel state (see the module's docstring)."""
        observation = np.asarray(native.observation_tensor(0), dtype=np.float32)
        observation = observation.reshape(self.observation_shape)
        if self.short_name not in _BOARD_PLANES:
            return _as_planes(observation)
        first, second, flip = _BOARD_PLANES[self.short_name]
        board = (observation[first] - observation[second]).astype(np.int8)
        return board[::-1].copy() if flip else board

    # ------------------------------------------------------------------ for networks
    def encode(self, state: GameState) -> np.ndarray:
        """The observation tensor of the player to move, as ``(planes, rows, cols)`` float32."""
        player = 0 if state.to_play == 1 else 1
        observation = np.asarray(
            cast(OpenSpielState, state).native.observation_tensor(player), dtype=np.float32
        )
        return _as_planes(observation.reshape(self.observation_shape))

    def symmetries(
        self, planes: np.ndarray, policy: np.ndarray
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """The identity only: OpenSpiel does not say which symmetries a game has."""
        return [(planes, np.asarray(policy))]

    # ------------------------------------------------------------------ for people
    def render(self, state: GameState) -> str:
        return str(cast(OpenSpielState, state).native)

    def __repr__(self) -> str:
        return f"OpenSpielGame({self.game_name!r})"


def _load_game(pyspiel: Any, game_name: str) -> Any:
    # checked here first: for an unknown name OpenSpiel also prints its whole list of games
    base_name = game_name.split("(")[0]
    names = list(pyspiel.registered_names())
    if base_name not in names:
        close = difflib.get_close_matches(base_name, names, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise EnvError(
            f"OpenSpiel has no game {base_name!r}; pyspiel.registered_names() lists them.{hint}"
        )
    try:
        return pyspiel.load_game(game_name)
    except pyspiel.SpielError as exc:  # e.g. a parameter the game does not have
        raise EnvError(f"OpenSpiel cannot load {game_name!r}: {exc}") from exc


def _check_fits_protocol(pyspiel: Any, game: Any, game_name: str) -> None:
    """An EnvError naming the first way the game differs from rlx's two-player board games."""
    kind = game.get_type()
    reasons = [
        (game.num_players() != 2, f"has {game.num_players()} players, not 2"),
        (kind.utility != pyspiel.GameType.Utility.ZERO_SUM, "is not zero-sum"),
        (kind.dynamics != pyspiel.GameType.Dynamics.SEQUENTIAL, "does not have sequential moves"),
        (kind.chance_mode != pyspiel.GameType.ChanceMode.DETERMINISTIC, "has chance events"),
        (
            kind.information != pyspiel.GameType.Information.PERFECT_INFORMATION,
            "has imperfect information",
        ),
        (not kind.provides_observation_tensor, "has no observation tensor"),
    ]
    for failed, reason in reasons:
        if failed:
            raise EnvError(
                f"OpenSpiel's {game_name!r} {reason}; rlx plays two-player, zero-sum, sequential, "
                "deterministic, perfect-information games (e.g. tic_tac_toe, connect_four)."
            )


def _as_planes(observation: np.ndarray) -> np.ndarray:
    """An observation as ``(planes, rows, cols)``: a flat vector becomes one row of one plane."""
    if observation.ndim == 3:
        return observation
    if observation.ndim == 2:
        return observation[None]
    return observation.reshape(1, 1, -1)


def _sign(x: float) -> int:
    """+1, -1 or 0 as ``np.sign``, on a Python float without the cost of a ufunc."""
    return (x > 0) - (x < 0)
