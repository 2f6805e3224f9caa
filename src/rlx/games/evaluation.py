"""The evaluation arena of the game agents: matches against fixed opponents, as metrics.

Opponents are named: ``random``; ``mcts-K``, pure Monte Carlo tree search with random
rollouts and K simulations per move; ``solver``, perfect play (tic-tac-toe only). Every match
alternates seats, and its counts are logged as ``vs_<name>_win``, ``vs_<name>_draw`` and
``vs_<name>_loss`` (rates in [0, 1]).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rlx import metrics as M
from rlx.errors import ConfigError
from rlx.games.arena import MatchResult, Player, RandomPlayer, play_match
from rlx.games.base import Game

_MCTS = re.compile(r"^mcts-(\d+)$")


def make_opponent(game: Game, name: str, seed: int = 0) -> Player:
    """The opponent called ``name``: ``random``, ``mcts-K`` or ``solver``."""
    if name == "random":
        return RandomPlayer(game, seed)
    if name == "solver":
        if game.name != "tictactoe":
            raise ConfigError(
                f"opponent 'solver' exists for tictactoe only, not {game.name}; "
                "use random or mcts-K."
            )
        from rlx.games.solver import SolverPlayer

        return SolverPlayer(seed)
    match = _MCTS.match(name)
    if match and int(match.group(1)) > 0:
        from rlx.games.rollout_mcts import MCTSPlayer

        return MCTSPlayer(game, simulations=int(match.group(1)), seed=seed)
    raise ConfigError(
        f"unknown opponent {name!r}; valid: random, mcts-K (K simulations, e.g. mcts-200), "
        "solver (tictactoe)."
    )


def check_opponents(game: Game, names: Sequence[str]) -> None:
    """Fail before training, not at the first evaluation, on a bad opponent name."""
    for name in names:
        make_opponent(game, name)


def arena(
    game: Game, player: Player, opponents: Sequence[str], games: int, seed: int = 0
) -> dict[str, MatchResult]:
    """``games`` games (seats alternating) of ``player`` against each named opponent."""
    return {
        name: play_match(game, player, make_opponent(game, name, seed + i), games)
        for i, name in enumerate(opponents)
    }


def arena_metrics(results: dict[str, MatchResult]) -> dict[str, float]:
    """``vs_<name>_win|draw|loss`` rates of :func:`arena`'s results."""
    out: dict[str, float] = {}
    for name, r in results.items():
        out[M.arena_metric(name, "win")] = r.win_rate
        out[M.arena_metric(name, "draw")] = r.draw_rate
        out[M.arena_metric(name, "loss")] = r.loss_rate
    return out
