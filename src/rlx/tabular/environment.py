"""Where a tabular learner's episodes come from: a TabularMDP's model, or a Gymnasium env.

Every learner's episode loop is written once, as a plain function that calls
:func:`env_reset` and :func:`env_step`. Compiled by numba, it runs on :class:`ModelArrays`
(the fast path: whole chunks of episodes sampled inside one kernel); run as plain Python,
the same loop drives a :class:`GymEnv` through ``env.step``. Both paths call the same compiled
update rules, so they are the same algorithm.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import gymnasium as gym
import numpy as np
from numba import types
from numba.extending import overload

from rlx.errors import EnvError
from rlx.mdp.tabular import TabularMDP
from rlx.tabular.model import ModelArrays, model_arrays, start_state, step_model
from rlx.tabular.rng import draw_seed

DEFAULT_MAX_STEPS = 10_000
GYM_DEFAULT_GAMMA = 0.99


class GymEnv:
    """A Gymnasium env with Discrete spaces, stepped from the Python episode loop.

    Each reset is seeded from the learner's generator, so the env's own randomness is part of
    the learner's state: a run split in chunks, or resumed, sees the same episodes.
    """

    def __init__(self, env: gym.Env) -> None:
        self.env = env
        # Discrete(n, start=k) spaces are shifted so that tables are indexed from 0; both are
        # Discrete (check_discrete_spaces)
        self.obs_start = int(cast(gym.spaces.Discrete, env.observation_space).start)
        self.action_start = int(cast(gym.spaces.Discrete, env.action_space).start)

    def reset(self, rng: np.ndarray) -> int:
        obs, _ = self.env.reset(seed=draw_seed(rng))
        return int(obs) - self.obs_start

    def step(self, a: int) -> tuple[int, float, bool, bool]:
        obs, r, terminated, truncated, _ = self.env.step(int(a) + self.action_start)
        return int(obs) - self.obs_start, float(r), bool(terminated), bool(truncated)


def env_reset(env: ModelArrays | GymEnv, rng: np.ndarray) -> int:
    """The first state of an episode."""
    if isinstance(env, ModelArrays):
        return start_state(env, rng)
    return env.reset(rng)


def env_step(
    env: ModelArrays | GymEnv, s: int, a: int, rng: np.ndarray
) -> tuple[int, float, bool, bool]:
    """``(s', r, terminated, truncated)``; a model never truncates (the loop's step cap does)."""
    if isinstance(env, ModelArrays):
        s_next, r, terminated = step_model(env, s, a, rng)
        return s_next, r, terminated, False
    return env.step(a)


def _is_model(env: types.Type) -> bool:
    return isinstance(env, types.NamedTuple) and env.instance_class is ModelArrays


@overload(env_reset, inline="always")
def _env_reset_compiled(env, rng):
    if _is_model(env):
        return lambda env, rng: start_state(env, rng)
    return None


@overload(env_step, inline="always")
def _env_step_compiled(env, s, a, rng):
    if _is_model(env):

        def impl(env, s, a, rng):
            s_next, r, terminated = step_model(env, s, a, rng)
            return s_next, r, terminated, False

        return impl
    return None


@dataclass
class ResolvedEnv:
    """What a learner trains on: exactly one of ``model`` (fast path) or ``gym`` (Python loop)."""

    model: ModelArrays | None
    gym: GymEnv | None
    mdp: TabularMDP | None
    n_states: int
    n_actions: int
    gamma: float
    max_steps: int
    terminal: np.ndarray | None  # bool [S] when known (a model): those rows of Q stay 0
    label: str


def resolve_env(env: Any, algo: str, gamma: float | None, max_steps: int | None) -> ResolvedEnv:
    """A TabularMDP, a model-based id (``from_gymnasium``), or a Discrete Gymnasium env.

    An id string goes through ``from_gymnasium`` when the env has a model, and through the
    Python loop when it has not. Spaces other than Discrete raise an :class:`EnvError` that
    names the space and the methods that fit it.
    """
    from rlx.core.env_recipe import EnvRecipe

    if isinstance(env, EnvRecipe):
        env = _env_from_id(env.target, env.kwargs) if env.kind == "id" else env.make()
    elif callable(env) and not isinstance(env, (gym.Env, TabularMDP)):
        env = env()
    if isinstance(env, str):
        env = _env_from_id(env)
    if isinstance(env, TabularMDP):
        return _resolve_model(env, gamma, max_steps)
    if isinstance(env, gym.Env):
        return _resolve_gym(env, algo, gamma, max_steps)
    raise EnvError(
        f"{algo} cannot train on a {type(env).__name__}; give an rlx.mdp.TabularMDP, a "
        "Gymnasium env with Discrete spaces, or a Gymnasium id such as 'FrozenLake-v1'."
    )


def _env_from_id(env_id: str, kwargs: Mapping[str, Any] | None = None) -> TabularMDP | gym.Env:
    """The id's MDP when it has a model (or is a GridWorld id), else ``gym.make(env_id)``;
    ``kwargs`` go to ``gymnasium.make`` (or the GridWorld)."""
    from rlx.mdp import GridWorld, from_gymnasium

    kwargs = dict(kwargs or {})
    if GridWorld.is_id(env_id):
        return GridWorld.from_id(env_id, **kwargs)
    try:
        return from_gymnasium(env_id, **kwargs)
    except EnvError as no_model:
        try:
            return gym.make(env_id, **kwargs)
        except gym.error.Error:
            raise no_model from None  # its message lists similar ids and model-based envs


def _resolve_model(mdp: TabularMDP, gamma: float | None, max_steps: int | None) -> ResolvedEnv:
    cap = max_steps or getattr(mdp, "max_episode_steps", None) or DEFAULT_MAX_STEPS
    return ResolvedEnv(
        model=model_arrays(mdp),
        gym=None,
        mdp=mdp,
        n_states=mdp.n_states,
        n_actions=mdp.n_actions,
        gamma=float(mdp.gamma if gamma is None else gamma),
        max_steps=int(cap),
        terminal=mdp.terminal.copy(),
        label=getattr(mdp, "name", "TabularMDP"),
    )


def _resolve_gym(
    env: gym.Env, algo: str, gamma: float | None, max_steps: int | None
) -> ResolvedEnv:
    label = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
    check_discrete_spaces(env, algo, label)
    limit = env.spec.max_episode_steps if env.spec is not None else None
    # both spaces are Discrete: checked above
    obs_space = cast(gym.spaces.Discrete, env.observation_space)
    action_space = cast(gym.spaces.Discrete, env.action_space)
    return ResolvedEnv(
        model=None,
        gym=GymEnv(env),
        mdp=None,
        n_states=int(obs_space.n),
        n_actions=int(action_space.n),
        gamma=GYM_DEFAULT_GAMMA if gamma is None else float(gamma),
        max_steps=int(max_steps or limit or DEFAULT_MAX_STEPS),
        terminal=None,
        label=label,
    )


def check_discrete_spaces(env: gym.Env, algo: str, label: str) -> None:
    """Raise an :class:`EnvError` unless both spaces are Discrete, naming the method to use."""
    obs, act = env.observation_space, env.action_space
    continuous_actions = not isinstance(act, gym.spaces.Discrete)
    hint = "Try SAC, TD3 or PPO." if continuous_actions else "Try DQN or PPO."
    if not isinstance(obs, gym.spaces.Discrete):
        raise EnvError(f"{algo} needs a Discrete observation space; {label} has {obs}. {hint}")
    if continuous_actions:
        raise EnvError(f"{algo} needs a Discrete action space; {label} has {act}. {hint}")
