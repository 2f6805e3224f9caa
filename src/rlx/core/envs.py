"""Environment ids: Gymnasium ids, and rlx's own ``GridWorld`` / ``GridWorld-RxC`` MDPs."""

from __future__ import annotations

import re
from typing import Any

from rlx.errors import EnvError

_GRIDWORLD = re.compile(r"^gridworld(?:-(\d+)x(\d+))?$", re.IGNORECASE)


def is_gridworld_id(env_id: str) -> bool:
    """``GridWorld`` (Sutton & Barto's 4x4) or ``GridWorld-RxC``."""
    return bool(_GRIDWORLD.match(env_id.strip()))


def gridworld_from_id(env_id: str, gamma: float | None = None) -> Any:
    """The GridWorld named by ``env_id`` (see :func:`is_gridworld_id`)."""
    from rlx.mdp import GridWorld

    m = _GRIDWORLD.match(env_id.strip())
    if m is None:
        raise EnvError(f"{env_id!r} is not a GridWorld id; use 'GridWorld' or 'GridWorld-RxC'.")
    rows, cols = (int(m.group(1)), int(m.group(2))) if m.group(1) else (4, 4)
    kwargs = {} if gamma is None else {"gamma": gamma}
    return GridWorld(rows, cols, **kwargs)


def tabular_mdp(env: Any, gamma: float | None = None) -> Any:
    """A TabularMDP from an MDP, a GridWorld id, or a model-based Gymnasium toy-text env."""
    from rlx.mdp import TabularMDP, from_gymnasium

    if isinstance(env, TabularMDP):
        return env
    if isinstance(env, str) and is_gridworld_id(env):
        return gridworld_from_id(env, gamma)
    return from_gymnasium(env, **({} if gamma is None else {"gamma": gamma}))
