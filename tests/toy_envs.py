"""Small Gymnasium envs for tests, registered under ``rlx-test/...`` ids.

- ``Count``: observation ``[100 * episode + t]`` so every transition says which episode and
  step it came from; action 1 at t >= 3 terminates, otherwise a TimeLimit truncates at 5.
- ``Chain``: a corridor of ``n`` states with one-hot observations; right at the right end
  pays 1 and terminates, left at the left end pays 0.1 and terminates; a TimeLimit truncates.
  Q* is known in closed form, so a learner can be checked value by value.
- ``NoisyBandit``: van Hasselt's maximisation-bias setting: every action pays
  ``N(-0.05, 1)``, episodes terminate with probability 0.1 per step, so Q*(s, a) < 0 for
  every action while a max over noisy estimates is biased upwards.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class CountEnv(gym.Env):
    def __init__(self) -> None:
        self.observation_space = spaces.Box(0.0, 1e9, (1,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.episode, self.t = -1, 0

    def _obs(self) -> np.ndarray:
        return np.array([100.0 * self.episode + self.t], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.episode, self.t = self.episode + 1, 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        terminated = bool(action == 1 and self.t >= 3)
        return self._obs(), 1.0, terminated, False, {}


class ChainEnv(gym.Env):
    def __init__(self, n: int = 8) -> None:
        self.n = n
        self.observation_space = spaces.Box(0.0, 1.0, (n,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.s = 1

    def _obs(self) -> np.ndarray:
        obs = np.zeros(self.n, dtype=np.float32)
        obs[self.s] = 1.0
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        # start anywhere inside, so every state is visited
        self.s = int(self.np_random.integers(1, self.n - 1))
        return self._obs(), {}

    def step(self, action):
        if action == 1 and self.s == self.n - 1:
            return self._obs(), 1.0, True, False, {}
        if action == 0 and self.s == 0:
            return self._obs(), 0.1, True, False, {}
        self.s = min(self.s + 1, self.n - 1) if action == 1 else max(self.s - 1, 0)
        return self._obs(), 0.0, False, False, {}

    @staticmethod
    def optimal_q(n: int, gamma: float) -> np.ndarray:
        """Q*(s, a) [n, 2] by value iteration on the known dynamics."""
        q = np.zeros((n, 2))
        for _ in range(10 * n):
            v = q.max(axis=1)
            q[:, 1] = [1.0 if s == n - 1 else gamma * v[s + 1] for s in range(n)]
            q[:, 0] = [0.1 if s == 0 else gamma * v[s - 1] for s in range(n)]
        return q


class NoisyBanditEnv(gym.Env):
    def __init__(self, n_actions: int = 8, n_states: int = 4) -> None:
        self.n_states = n_states
        self.observation_space = spaces.Box(0.0, 1.0, (n_states,), np.float32)
        self.action_space = spaces.Discrete(n_actions)
        self.s = 0

    def _obs(self) -> np.ndarray:
        obs = np.zeros(self.n_states, dtype=np.float32)
        obs[self.s] = 1.0
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.s = int(self.np_random.integers(self.n_states))
        return self._obs(), {}

    def step(self, action):
        reward = float(self.np_random.normal(-0.05, 1.0))
        terminated = bool(self.np_random.random() < 0.1)
        self.s = int(self.np_random.integers(self.n_states))
        return self._obs(), reward, terminated, False, {}


def register() -> None:
    if "rlx-test/Count-v0" not in gym.registry:
        gym.register("rlx-test/Count-v0", entry_point=CountEnv, max_episode_steps=5)
        gym.register("rlx-test/Chain-v0", entry_point=ChainEnv, max_episode_steps=20)
        gym.register("rlx-test/NoisyBandit-v0", entry_point=NoisyBanditEnv, max_episode_steps=100)
        gym.register("rlx-test/NaNAfter-v0", entry_point=NaNAfterEnv, max_episode_steps=5)


class NaNAfterEnv(CountEnv):
    """``Count``, but every reward after ``nan_after`` steps of this instance is NaN."""

    def __init__(self, nan_after: int = 1500) -> None:
        super().__init__()
        self.nan_after, self.total = nan_after, 0

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        self.total += 1
        return (
            obs,
            float("nan") if self.total > self.nan_after else reward,
            terminated,
            truncated,
            info,
        )


register()
