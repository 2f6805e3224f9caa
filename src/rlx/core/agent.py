"""The Agent protocol: what ``rlx.train`` returns and ``rlx.load(run_dir)`` restores.

Every trained agent, whatever learned it, offers the same four things, so callers (the CLI,
evaluation, a user's script) dispatch on the protocol rather than on an agent's class:

- ``act(observation, deterministic=True)``: the action for one observation (a state of a
  tabular MDP, a Gymnasium observation, a board position, a prompt);
- ``act_batch(observations, deterministic=True)``: the actions for a batch of them;
- ``config``: the frozen config the agent was trained with;
- ``run_dir``: the run folder it came from (None before it is saved).

Two refinements say where an agent acts: a :class:`GameAgent` plays a board game (``game``)
and a :class:`TextAgent` completes prompts (``model``, ``tokenizer``); any other agent acts in the
environment its run was trained on (``env_id``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Agent(Protocol):
    """A trained agent."""

    config: Any
    run_dir: Path | None

    def act(self, observation: Any, deterministic: bool = True) -> Any:
        """The action for one observation."""
        ...

    def act_batch(self, observations: Any, deterministic: bool = True) -> Any:
        """The actions for a batch of observations, in order."""
        ...


@runtime_checkable
class EnvAgent(Agent, Protocol):
    """An agent that acts in an environment: Gymnasium, or a tabular MDP."""

    env_id: str


@runtime_checkable
class GameAgent(Agent, Protocol):
    """An agent that plays a board game: observations are game states, actions moves; called
    on a state it plays its move there (a player of :func:`rlx.games.evaluation.arena`)."""

    game: Any

    def __call__(self, state: Any) -> int:
        """The move to play in ``state``."""
        ...


@runtime_checkable
class TextAgent(Agent, Protocol):
    """A language model: observations are prompts, actions their completions."""

    model: Any
    tokenizer: Any


__all__ = ["Agent", "EnvAgent", "GameAgent", "TextAgent"]
