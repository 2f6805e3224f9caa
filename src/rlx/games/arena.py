"""Matches between players, and the simple players every agent is measured against.

A player is any callable ``player(state) -> action``. :func:`play_match` plays ``n`` games
with the seats alternating (or fixed) and counts wins, draws and losses of the first player
given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rlx.games.base import Game, GameState

Player = Callable[[GameState], int]


@dataclass(frozen=True)
class MatchResult:
    """Win/draw/loss counts of one player over a match."""

    wins: int
    draws: int
    losses: int

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def win_rate(self) -> float:
        return self.wins / self.games if self.games else 0.0

    @property
    def loss_rate(self) -> float:
        return self.losses / self.games if self.games else 0.0

    @property
    def draw_rate(self) -> float:
        return self.draws / self.games if self.games else 0.0

    def __add__(self, other: MatchResult) -> MatchResult:
        return MatchResult(
            self.wins + other.wins, self.draws + other.draws, self.losses + other.losses
        )

    def __str__(self) -> str:
        return f"{self.wins} won, {self.draws} drawn, {self.losses} lost"


class RandomPlayer:
    """Plays a uniformly random legal move."""

    name = "random"

    def __init__(self, game: Game, seed: int = 0) -> None:
        self.game = game
        self.rng = np.random.default_rng(seed)

    def __call__(self, state: GameState) -> int:
        return int(self.rng.choice(self.game.legal_actions(state)))


def play_game(game: Game, first: Player, second: Player) -> int:
    """Play one game; the winner (+1 the first player, -1 the second, 0 a draw)."""
    state = game.initial_state()
    players = {1: first, -1: second}
    while not state.is_terminal:
        state = game.apply(state, players[state.to_play](state))
    assert state.result is not None  # the loop ends at a terminal state
    return int(state.result)


def play_match(
    game: Game, player: Player, opponent: Player, games: int = 100, seats: str = "alternate"
) -> MatchResult:
    """``games`` games of ``player`` against ``opponent``; counts from ``player``'s side.

    Args:
        seats: ``"alternate"`` (player moves first in even games), ``"first"`` or ``"second"``.
    """
    if seats not in ("alternate", "first", "second"):
        raise ValueError(f"seats must be alternate, first or second, not {seats!r}")
    wins = draws = losses = 0
    for i in range(games):
        first = seats == "first" or (seats == "alternate" and i % 2 == 0)
        outcome = play_game(game, player, opponent) if first else -play_game(game, opponent, player)
        wins += outcome == 1
        draws += outcome == 0
        losses += outcome == -1
    return MatchResult(wins, draws, losses)
