"""Board games: the protocol, tic-tac-toe, Connect Four, search and the agents that learn them.

Example::

    from rlx import games
    g = games.TicTacToe()          # or games.ConnectFour(), or games.make("connect4")
    s = g.initial_state()          # s.board: +1 first player, -1 second, 0 empty; s.to_play
    s = g.apply(s, 4)
    g.legal_actions(s), g.is_terminal(s), g.winner(s)
"""

from __future__ import annotations

import difflib
from pathlib import Path

from rlx._kernel_cache import drop_stale_kernels
from rlx.errors import EnvError
from rlx.games.arena import MatchResult, RandomPlayer, play_game, play_match
from rlx.games.base import Game, GameState, IllegalMoveError
from rlx.games.connect4 import ConnectFour
from rlx.games.tictactoe import TicTacToe

# the modules whose numba functions other modules' kernels inline; kernels load their cache at
# their first call, after this
drop_stale_kernels(Path(__file__).resolve().parent, ("bitboards.py", "kernels.py"))

GAMES: dict[str, type[Game]] = {"tictactoe": TicTacToe, "connect4": ConnectFour}
_ALIASES = {"tic-tac-toe": "tictactoe", "connect-four": "connect4", "connectfour": "connect4"}


def is_game(name: object) -> bool:
    """True when ``name`` names a board game (so ``rlx train`` treats it as one)."""
    if not isinstance(name, str):
        return isinstance(name, Game)
    key = name.strip().lower()
    return key in GAMES or key in _ALIASES or key.startswith("openspiel:")


def make(name: str | Game) -> Game:
    """The game called ``name``: ``tictactoe``, ``connect4``, or ``openspiel:<game>`` (needs the
    ``open_spiel`` package)."""
    if isinstance(name, Game):
        return name
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key in GAMES:
        return GAMES[key]()
    if key.startswith("openspiel:"):
        from rlx.games.openspiel import OpenSpielGame

        return OpenSpielGame(name.split(":", 1)[1])
    close = difflib.get_close_matches(key, list(GAMES), n=2, cutoff=0.5)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise EnvError(
        f"unknown game {name!r}; valid games: {', '.join(GAMES)} or openspiel:<name>.{hint}"
    )


_LAZY = {
    "MCTSPlayer": "rlx.games.rollout_mcts",
    "OpenSpielGame": "rlx.games.openspiel",
    "SolverPlayer": "rlx.games.solver",
}


def __getattr__(name: str):
    # numba and open_spiel load only when their players are asked for
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rlx.games' has no attribute {name!r}")


__all__ = [
    "GAMES",
    "ConnectFour",
    "Game",
    "GameState",
    "IllegalMoveError",
    "MCTSPlayer",
    "MatchResult",
    "OpenSpielGame",
    "RandomPlayer",
    "SolverPlayer",
    "TicTacToe",
    "is_game",
    "make",
    "play_game",
    "play_match",
]
