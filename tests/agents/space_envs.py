"""Small envs written for the tests of every common space and of action masks.

Each is a module-level class, so a run can rebuild it (``module:factory``), and each is made
so that a broken implementation cannot reach the thresholds the tests assert:

- :class:`DictTarget`: a ``Dict`` observation whose answer is in one key only;
- :class:`MultiDiscreteTarget`: copy a target per entry (``MultiDiscrete`` actions);
- :class:`MultiBinaryTarget`: copy a bit pattern (``MultiBinary`` actions);
- :class:`Choice`: the valid actions change each step and the observation does not say
  which; an invalid action costs -1, so only an agent that reads the mask
  (:class:`MaskedChoice`, :class:`MethodMaskedChoice`) can win;
- :class:`FakeImage`: uint8 images, channel-first ``(4, 84, 84)`` (a stack of frames, as
  Atari's) or channel-last ``(84, 84, 3)``, whose answer is the brightness of the frame.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

EPISODE = 8


class _Episodic(gym.Env):
    """Episodes of :data:`EPISODE` steps; the subclass draws a target and scores an action."""

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.t = 0
        self.draw()
        return self.observe(), self.info()

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        reward = self.score(action)
        self.t += 1
        self.draw()
        return self.observe(), reward, False, self.t >= EPISODE, self.info()

    def info(self) -> dict:
        return {}

    def draw(self) -> None:
        raise NotImplementedError

    def observe(self) -> Any:
        raise NotImplementedError

    def score(self, action: Any) -> float:
        raise NotImplementedError


class DictTarget(_Episodic):
    """``{"noise": Box(3), "goal": Discrete(3)}``; reward 1 for the action equal to ``goal``."""

    def __init__(self) -> None:
        self.observation_space = spaces.Dict(
            {"noise": spaces.Box(-1.0, 1.0, (3,), np.float32), "goal": spaces.Discrete(3)}
        )
        self.action_space = spaces.Discrete(3)

    def draw(self) -> None:
        self.goal = int(self.np_random.integers(3))

    def observe(self) -> dict[str, Any]:
        noise = self.np_random.uniform(-1, 1, 3).astype(np.float32)
        return {"noise": noise, "goal": self.goal}

    def score(self, action: Any) -> float:
        return float(int(action) == self.goal)


class MultiDiscreteTarget(_Episodic):
    """Targets ``(i, j)`` in ``3 x 4`` shown one-hot; reward: the entries copied, over 2."""

    nvec = (3, 4)

    def __init__(self) -> None:
        self.observation_space = spaces.Box(0.0, 1.0, (sum(self.nvec),), np.float32)
        self.action_space = spaces.MultiDiscrete(self.nvec)

    def draw(self) -> None:
        self.target = np.array([self.np_random.integers(n) for n in self.nvec])

    def observe(self) -> np.ndarray:
        obs = np.zeros(sum(self.nvec), np.float32)
        obs[self.target[0]] = obs[self.nvec[0] + self.target[1]] = 1.0
        return obs

    def score(self, action: Any) -> float:
        return float(np.mean(np.asarray(action) == self.target))


class MultiBinaryTarget(_Episodic):
    """A bit pattern of 4 shown as +-1; reward: the bits copied, over 4."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = spaces.MultiBinary(4)

    def draw(self) -> None:
        self.bits = self.np_random.integers(0, 2, 4)

    def observe(self) -> np.ndarray:
        return (2.0 * self.bits - 1.0).astype(np.float32)

    def score(self, action: Any) -> float:
        return float(np.mean(np.asarray(action) == self.bits))


class Choice(_Episodic):
    """Four actions, two of them valid per step, drawn at random; the observation is constant.

    The lower valid action earns +1, the higher one 0, an invalid one -1. Only the mask says
    which are valid: an agent that reads it learns to prefer low actions and scores
    ``EPISODE``; one that does not can do no better than 0 on average (action 0 is valid, and
    then the best, half of the time).
    """

    def __init__(self) -> None:
        self.observation_space = spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = spaces.Discrete(4)

    def draw(self) -> None:
        self.valid = np.sort(self.np_random.choice(4, size=2, replace=False))

    def observe(self) -> np.ndarray:
        return np.ones(2, np.float32)

    def mask(self) -> np.ndarray:
        return np.isin(np.arange(4), self.valid)

    def score(self, action: Any) -> float:
        if int(action) == self.valid[0]:
            return 1.0
        return 0.0 if int(action) == self.valid[1] else -1.0


class MaskedChoice(Choice):
    """:class:`Choice` with its mask in ``info["action_mask"]``."""

    def info(self) -> dict:
        return {"action_mask": self.mask()}


class MethodMaskedChoice(Choice):
    """:class:`Choice` with its mask from ``action_masks()`` (sb3-contrib's convention)."""

    def action_masks(self) -> np.ndarray:
        return self.mask()


class FakeImage(_Episodic):
    """uint8 frames that are all bright or all dark; reward 1 for action 1 on bright ones."""

    def __init__(self, channels_first: bool = True) -> None:
        shape = (4, 84, 84) if channels_first else (84, 84, 3)
        self.observation_space = spaces.Box(0, 255, shape, np.uint8)
        self.action_space = spaces.Discrete(2)

    def draw(self) -> None:
        self.bright = bool(self.np_random.integers(2))

    def observe(self) -> np.ndarray:
        return np.full(self.observation_space.shape, 200 if self.bright else 20, np.uint8)

    def score(self, action: Any) -> float:
        return float(int(action) == int(self.bright))


def channels_last_image() -> FakeImage:
    return FakeImage(channels_first=False)
