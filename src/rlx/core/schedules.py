"""Schedules: a value as a function of the training step (epsilon, learning rate, ...).

A schedule is a small frozen dataclass called with the step, so its position is the step
itself: a resumed run that restores the step is back on the same point of the schedule.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlx.errors import ConfigError


@dataclass(frozen=True)
class LinearSchedule:
    """``v(t) = start + (end - start) * min(t / duration, 1)``: a straight line, then flat."""

    start: float
    end: float
    duration: int

    def __post_init__(self) -> None:
        if self.duration < 0:
            raise ConfigError(f"schedule duration={self.duration} must be >= 0.")

    def __call__(self, step: int) -> float:
        if self.duration == 0:
            return self.end
        frac = min(max(step, 0) / self.duration, 1.0)
        return self.start + (self.end - self.start) * frac


@dataclass(frozen=True)
class ExponentialSchedule:
    """``v(t) = start * (end / start) ** min(t / duration, 1)``: geometric, then flat.

    The same factor per step all the way (for epsilon from 1.0 to 0.01 over ``duration``
    steps, ``(0.01) ** (1 / duration)``); ``start`` and ``end`` must be > 0.
    """

    start: float
    end: float
    duration: int

    def __post_init__(self) -> None:
        if self.start <= 0 or self.end <= 0:
            raise ConfigError(
                f"an exponential schedule needs start > 0 and end > 0, got {self.start} and "
                f"{self.end}; use LinearSchedule to reach 0."
            )
        if self.duration < 0:
            raise ConfigError(f"schedule duration={self.duration} must be >= 0.")

    def __call__(self, step: int) -> float:
        if self.duration == 0:
            return self.end
        frac = min(max(step, 0) / self.duration, 1.0)
        return self.start * (self.end / self.start) ** frac
