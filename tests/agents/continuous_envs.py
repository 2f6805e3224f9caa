"""Small continuous-action envs for the SAC and TD3 tests, registered under ``rlx-test/...``.

- ``Target``: a contextual bandit on an off-centre action box ``[0, 4]``. The observation is
  ``s ~ U(-1, 1)``, the best action ``a* = 2 + 1.5 s``, the reward ``-(a - a*)**2``, and every
  episode ends after one step (terminated), so ``Q(s, a)`` is the reward itself. A uniformly
  random action earns about -1.7 on average; a learner that ignores the state, the action
  rescaling, or the sign of its gradient cannot get near 0.
- ``Unbounded``: the same, with actions ``Box(-inf, inf)`` (SAC and TD3 must refuse it).
- ``DiscreteTarget``: the same, with ``Discrete(3)`` actions (SAC and TD3 must refuse it).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class TargetEnv(gym.Env):
    def __init__(self) -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.action_space = spaces.Box(0.0, 4.0, (1,), np.float32)
        self.s = 0.0

    def best_action(self, s: float) -> float:
        return 2.0 + 1.5 * s

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.s = float(self.np_random.uniform(-1.0, 1.0))
        return np.array([self.s], dtype=np.float32), {}

    def step(self, action):
        a = float(np.asarray(action).reshape(-1)[0])
        reward = -((a - self.best_action(self.s)) ** 2)
        return np.array([self.s], dtype=np.float32), reward, True, False, {}


class UnboundedEnv(TargetEnv):
    def __init__(self) -> None:
        super().__init__()
        self.action_space = spaces.Box(-np.inf, np.inf, (1,), np.float32)


class DiscreteTargetEnv(TargetEnv):
    def __init__(self) -> None:
        super().__init__()
        self.action_space = spaces.Discrete(3)


def register() -> None:
    if "rlx-test/Target-v0" not in gym.registry:
        gym.register("rlx-test/Target-v0", entry_point=TargetEnv, max_episode_steps=10)
        gym.register("rlx-test/Unbounded-v0", entry_point=UnboundedEnv, max_episode_steps=10)
        gym.register(
            "rlx-test/DiscreteTarget-v0", entry_point=DiscreteTargetEnv, max_episode_steps=10
        )


register()
