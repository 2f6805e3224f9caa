"""A trained AlphaZero or MuZero player: the search with the algorithm's evaluator of its net.

:class:`SearchAgent` is a :class:`rlx.core.agent.GameAgent`: ``agent.act(state)`` searches
``state`` with ``eval_simulations`` simulations and no root noise
(:func:`rlx.games.search.search`, the algorithm's evaluator of the network at its leaves) and
plays the most visited move; ``agent(state)`` is the same, so an agent is an arena player.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rlx.errors import ConfigError
from rlx.games.base import Game, GameState
from rlx.games.leaf_evaluators import Evaluator
from rlx.games.search import choose, search


class SearchAgent:
    """Plays the most visited move of a search whose leaves ``evaluator(net)`` values.

    The search runs the evaluator made at its first call (AlphaZero's holds a frozen copy of
    the network): call :meth:`refresh` after training ``net`` further.
    """

    def __init__(
        self,
        name: str,
        game: Game,
        net: Any,
        config: Any,
        evaluator: Callable[[Any], Evaluator],
    ) -> None:
        self.name, self.game, self.net, self.config = name, game, net.eval(), config
        self.make_evaluator = evaluator
        self.rng = np.random.default_rng(config.seed)
        self.run_dir = None
        self.frozen: Evaluator | None = None  # the search's evaluator of ``net``

    def refresh(self) -> None:
        """Search with ``net``'s current weights from the next move on."""
        self.frozen = None

    def evaluator(self) -> Evaluator:
        """The search's evaluator, made at the first search after a :meth:`refresh`."""
        if self.frozen is None:
            self.frozen = self.make_evaluator(self.net)
        return self.frozen

    def search_batch(
        self, states: Sequence[GameState], simulations: int | None = None
    ) -> np.ndarray:
        """The root visit counts ``[B, A]`` of one search of ``states`` (none terminal)."""
        if any(s.is_terminal for s in states):
            raise ConfigError("the game is over; there is no move to choose.")
        config = self.config.search(selfplay=False)
        if simulations is not None:
            config = dataclasses.replace(config, simulations=simulations)
        return search(self.game, states, self.evaluator(), config, self.rng).counts

    def act(
        self, state: GameState, deterministic: bool = True, *, simulations: int | None = None
    ) -> int:
        """The move to play in ``state`` (not a terminal one): the most visited, or with
        ``deterministic=False`` one drawn from ``pi ∝ N``; ``simulations`` overrides
        ``eval_simulations``."""
        return self.act_batch([state], deterministic, simulations=simulations)[0]

    def act_batch(
        self,
        states: Sequence[GameState],
        deterministic: bool = True,
        *,
        simulations: int | None = None,
    ) -> list[int]:
        """:meth:`act` for several positions, searched together (one evaluation per
        simulation step for all of them)."""
        temperature = 0.0 if deterministic else 1.0
        return [choose(n, temperature, self.rng) for n in self.search_batch(states, simulations)]

    def __call__(self, state: GameState) -> int:
        return self.act(state)

    def policy_value(self, state: GameState) -> tuple[np.ndarray, float]:
        """The network's prior over the legal moves of ``state`` and its value for the player
        to move, as the search's root sees them."""
        root = self.evaluator().roots(self.game, [state], self.rng)[0]
        return root.prior, float(root.value)

    def __repr__(self) -> str:
        return (
            f"SearchAgent({self.name}, game={self.game.name}, "
            f"simulations={self.config.eval_simulations})"
        )
