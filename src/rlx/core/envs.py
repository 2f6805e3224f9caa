"""Environments: Gymnasium ids and objects, vector envs, episode statistics, GridWorld ids.

Deep agents step ``num_envs`` copies of an env at once through Gymnasium's vector API
(:func:`make_vec_env`); :class:`EpisodeTracker` turns the vector steps into finished episodes.
rlx's own ``GridWorld`` / ``GridWorld-RxC`` ids name tabular MDPs.
"""

from __future__ import annotations

import functools
import re
from typing import Any, NamedTuple

import numpy as np

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
    kwargs: dict[str, Any] = {} if gamma is None else {"gamma": gamma}
    return GridWorld(rows, cols, **kwargs)


def tabular_mdp(env: Any, gamma: float | None = None) -> Any:
    """A TabularMDP from an MDP, a GridWorld id, or a model-based Gymnasium toy-text env."""
    from rlx.mdp import TabularMDP, from_gymnasium

    if isinstance(env, TabularMDP):
        return env
    if isinstance(env, str) and is_gridworld_id(env):
        return gridworld_from_id(env, gamma)
    return from_gymnasium(env, **({} if gamma is None else {"gamma": gamma}))


# ---------------------------------------------------------------------------- deep RL envs
VECTORIZATIONS = ("auto", "sync", "async")


def make_env(env: Any, **kwargs: Any) -> Any:
    """A Gymnasium env from an id (``gym.make(id, **kwargs)``), an
    :class:`~rlx.core.env_recipe.EnvRecipe`, a callable that returns one, or an env object (as
    is).

    An Atari game's id (``ALE/Breakout-v5``) gets the Nature DQN preprocessing
    (:func:`rlx.core.atari.atari_env`). An unknown id raises :class:`EnvError` naming the close
    registered ids.
    """
    import gymnasium as gym

    from rlx.core.atari import atari_env, is_atari_id
    from rlx.core.env_recipe import EnvRecipe, is_env_factory

    if isinstance(env, EnvRecipe) and env.kind == "id":
        env, kwargs = env.target, {**env.kwargs, **kwargs}  # as the id itself (Atari's too)
    if isinstance(env, EnvRecipe):
        return env.make()
    if is_env_factory(env):
        return _built(env, kwargs, lambda: env(**kwargs))
    if not isinstance(env, str):
        return env
    if is_atari_id(env):
        return _built(env, kwargs, lambda: atari_env(env, **kwargs))
    try:
        return _built(env, kwargs, lambda: gym.make(env, **kwargs))
    except gym.error.Error as exc:
        raise EnvError(_unknown_env_message(env, exc)) from exc


def _built(env: Any, kwargs: dict[str, Any], build: Any) -> Any:
    """``build()``, with the error of keyword arguments the env does not take (or values it
    refuses) as an EnvError naming the keyword and the env
    (:func:`rlx.core.env_recipe.kwargs_error`); without keyword arguments an error is the
    env's own and passes as it is."""
    from rlx.core.env_recipe import KWARG_ERRORS, import_path, kwargs_error

    try:
        return build()
    except KWARG_ERRORS as exc:
        if not kwargs:
            raise
        if isinstance(env, str):
            raise kwargs_error(env, kwargs, exc) from exc
        label = import_path(env)
        if not label:
            label = getattr(env, "__name__", type(env).__name__)
        raise kwargs_error(label, kwargs, exc, env) from exc


def make_vec_env(env: Any, num_envs: int = 1, *, vectorization: str = "auto", **kwargs: Any) -> Any:
    """``num_envs`` copies of ``env`` as one Gymnasium vector env with NEXT_STEP autoreset.

    ``env`` is a Gymnasium id or env object. ``vectorization``:

    - ``"auto"``: the env's native vector implementation when its spec has a
      ``vector_entry_point`` (CartPole's steps all copies in one numpy call, the fastest),
      else ``SyncVectorEnv`` (all copies in this process, one after another);
    - ``"sync"``: always ``SyncVectorEnv``;
    - ``"async"``: ``AsyncVectorEnv``, one subprocess per copy (for slow, CPU-heavy envs).

    An Atari game's copies each get the Nature DQN preprocessing
    (:func:`rlx.core.atari.atari_env`; ``"auto"`` steps them in this process), never ale-py's
    own vector env, whose observations differ.

    Every mode autoresets on the *next* step (Gymnasium's default): the step that returns
    ``terminated`` or ``truncated`` carries the true final observation, and the following
    step of that copy ignores its action and returns the reset observation with reward 0.
    """
    import gymnasium as gym

    if vectorization not in VECTORIZATIONS:
        raise EnvError(
            f"vectorization={vectorization!r} is not valid; use one of {', '.join(VECTORIZATIONS)}."
        )
    if num_envs < 1:
        raise EnvError(f"num_envs={num_envs} must be >= 1.")
    from rlx.core.atari import atari_env, is_atari_id
    from rlx.core.env_recipe import EnvRecipe

    if isinstance(env, EnvRecipe) and env.kind == "id":
        env, kwargs = env.target, {**env.kwargs, **kwargs}
    if is_atari_id(env):
        env = functools.partial(atari_env, env, **kwargs)  # one fresh game per copy
    if isinstance(env, str):
        mode = "sync" if vectorization == "auto" else vectorization
        spec = _spec_or_error(env)
        if vectorization == "auto" and spec.vector_entry_point is not None and not kwargs:
            mode = "vector_entry_point"
        try:
            vec = _built(
                env, kwargs, lambda: gym.make_vec(env, num_envs, vectorization_mode=mode, **kwargs)
            )
        except gym.error.Error as exc:
            raise EnvError(_unknown_env_message(env, exc)) from exc
    else:
        factories = [_env_factory(env, i) for i in range(num_envs)]
        if vectorization == "async":
            vec = gym.vector.AsyncVectorEnv(factories)
        else:
            vec = gym.vector.SyncVectorEnv(factories)
    _check_next_step_autoreset(vec)
    return vec


def _env_factory(env: Any, index: int) -> Any:
    """A factory for copy ``index`` of an env object (itself first, then fresh copies), of a
    recipe or of a callable (a fresh env each)."""
    import copy

    import gymnasium as gym

    from rlx.core.env_recipe import EnvRecipe, is_env_factory

    if isinstance(env, EnvRecipe):
        return env.make
    if is_env_factory(env):
        return env
    if index == 0:
        return lambda: env
    spec = getattr(env, "spec", None)
    if spec is not None:
        return lambda: gym.make(spec)
    return lambda: copy.deepcopy(env)


def _check_next_step_autoreset(vec: Any) -> None:
    from gymnasium.vector import AutoresetMode

    mode = vec.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    if mode != AutoresetMode.NEXT_STEP:
        raise EnvError(
            f"rlx needs vector envs with NEXT_STEP autoreset, but this one uses {mode}; "
            "build it with autoreset_mode=AutoresetMode.NEXT_STEP."
        )


def _spec_or_error(env_id: str) -> Any:
    import gymnasium as gym

    try:
        return gym.spec(env_id)
    except gym.error.Error as exc:
        raise EnvError(_unknown_env_message(env_id, exc)) from exc


def _unknown_env_message(env_id: str, exc: Exception) -> str:
    import difflib

    import gymnasium as gym

    close = difflib.get_close_matches(env_id, list(gym.registry), n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return f"cannot make Gymnasium env {env_id!r}: {str(exc).rstrip('.')}.{hint}"


def env_spaces(env: Any) -> tuple[Any, Any]:
    """The single-copy observation and action spaces of an env id or env object (an id is
    made, read and closed)."""
    if hasattr(env, "observation_space"):
        return env.observation_space, env.action_space
    probe = make_env(env)
    try:
        return probe.observation_space, probe.action_space
    finally:
        probe.close()


def require_discrete_actions(space: Any, algo: str, env_id: str, instead: str) -> int:
    """The number of actions of a ``Discrete`` space; anything else raises :class:`EnvError`."""
    import gymnasium as gym

    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    raise EnvError(
        f"{algo} needs a discrete action space, but {env_id} has {space}; "
        f"use {instead} for continuous actions."
    )


class EpisodeTracker:
    """Episode statistics of a vector env, one vectorised update per step.

    Per env copy it accumulates the undiscounted return, the length, and the discounted
    return from the episode's first state ``G_0 = sum_t gamma**t r_t``, together with a value
    recorded at that first state (e.g. the agent's ``Q(s_0, a_0)``), so that a value estimate
    can be compared with what actually followed. Steps with ``stored=False`` (the reset step
    after a done under NEXT_STEP autoreset) are not part of any episode.
    """

    def __init__(self, num_envs: int, gamma: float = 1.0) -> None:
        self.gamma = gamma
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.discounted = np.zeros(num_envs, dtype=np.float64)
        self.lengths = np.zeros(num_envs, dtype=np.int64)
        self.start_values = np.zeros(num_envs, dtype=np.float64)

    def step(
        self,
        rewards: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        stored: np.ndarray,
        values: np.ndarray | None = None,
        discounted_rewards: np.ndarray | None = None,
    ) -> FinishedEpisodes:
        """Add one vector step; returns the episodes that ended on it.

        ``values`` are recorded at each episode's first state; ``discounted_rewards`` (default
        ``rewards``) feed ``G_0``: pass the rewards the learner sees (e.g. clipped) so that
        ``G_0`` and the recorded values are in the same units.
        """
        first = stored & (self.lengths == 0)
        if values is not None:
            self.start_values = np.where(first, values, self.start_values)
        seen = rewards if discounted_rewards is None else discounted_rewards
        self.discounted += np.where(stored, seen, 0.0) * self.gamma**self.lengths
        rewards = np.where(stored, rewards, 0.0)
        self.returns += rewards
        self.lengths += stored
        done = stored & (np.asarray(terminated) | np.asarray(truncated))
        idx = np.flatnonzero(done)
        finished = FinishedEpisodes(
            envs=idx,
            returns=self.returns[idx].copy(),
            lengths=self.lengths[idx].copy(),
            discounted_returns=self.discounted[idx].copy(),
            start_values=self.start_values[idx].copy(),
            truncated=np.asarray(truncated)[idx].copy(),
        )
        self.returns[idx], self.discounted[idx], self.lengths[idx] = 0.0, 0.0, 0
        return finished

    def state_dict(self) -> dict[str, np.ndarray]:
        """The episodes in progress, for a checkpoint."""
        names = ("returns", "discounted", "lengths", "start_values")
        return {name: getattr(self, name).copy() for name in names}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        for name, value in state.items():
            setattr(self, name, np.asarray(value, dtype=getattr(self, name).dtype).copy())


class FinishedEpisodes(NamedTuple):
    """Episodes that ended on one vector step (arrays over those episodes)."""

    envs: np.ndarray
    returns: np.ndarray
    lengths: np.ndarray
    discounted_returns: np.ndarray
    start_values: np.ndarray
    truncated: np.ndarray
