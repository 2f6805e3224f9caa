"""Pure Monte Carlo tree search, the classic ``mcts-k`` baseline: UCT with random rollouts.

:class:`MCTSPlayer` plays the most visited move of :func:`rlx.games.search.search` with
:class:`~rlx.games.leaf_evaluators.RandomRollouts` as its evaluator: ``k`` simulations per move,
each selecting by ``W/N + c sqrt(ln N(s) / N)``, expanding a node at its second visit and
valuing the new position by one game of random moves (the formulas are in
:mod:`rlx.games.search`). Tic-tac-toe and Connect Four run wholly in one numba kernel per move;
an ``OpenSpielGame`` in the Python tree, which is much slower.

    player = MCTSPlayer(ConnectFour(), simulations=1000, seed=0)   # player.name == "mcts-1000"
    action = player(state)
"""

from __future__ import annotations

import numpy as np

from rlx.errors import ConfigError, EnvError
from rlx.games.base import Game, GameState
from rlx.games.bitboards import kind_of
from rlx.games.leaf_evaluators import RandomRollouts
from rlx.games.search import SearchConfig, search

#: the exploration constant; OpenSpiel's examples use 2 for results in [-1, 1]
DEFAULT_C = 2.0


def check_searchable(game: Game) -> None:
    """Rollouts need a game that ends under random play: the bitboard games and OpenSpiel's."""
    from rlx.games.openspiel import OpenSpielGame  # imports without open_spiel installed

    if kind_of(game) is not None or isinstance(game, OpenSpielGame):
        return
    raise EnvError(
        f"rollout MCTS has no kernel for {type(game).__name__}; it plays TicTacToe, ConnectFour "
        "or an OpenSpielGame."
    )


class MCTSPlayer:
    """Plays the most visited move of a UCT search with random rollouts; ties at random.

    ``MCTSPlayer(game, simulations=1000, seed=0)`` is the player ``mcts-1000``: the same seed
    plays the same moves.
    """

    def __init__(
        self, game: Game, simulations: int = 1000, seed: int = 0, c: float = DEFAULT_C
    ) -> None:
        if not c >= 0:
            raise ConfigError(f"c, the exploration constant, must be >= 0, not {c!r}.")
        self.config = SearchConfig(simulations, c_uct=float(c))
        check_searchable(game)
        self.game = game
        self.simulations = int(simulations)
        self.c = float(c)
        self.rng = np.random.default_rng(seed)
        self.name = f"mcts-{self.simulations}"

    def __call__(self, state: GameState) -> int:
        counts = search(self.game, [state], RandomRollouts(), self.config, self.rng).counts[0]
        most = np.flatnonzero(counts == counts.max())
        return int(self.rng.choice(most))
