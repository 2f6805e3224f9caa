"""Schedules: linear and exponential, by hand."""

from __future__ import annotations

import pytest

from rlx.core.schedules import ExponentialSchedule, LinearSchedule
from rlx.errors import ConfigError


def test_linear_schedule_decays_then_stays():
    eps = LinearSchedule(1.0, 0.01, 100)  # the cheat sheet's 1.0 -> 0.01 over the first 10%
    assert [eps(t) for t in (0, 50, 100, 1000)] == pytest.approx([1.0, 0.505, 0.01, 0.01])
    assert LinearSchedule(1.0, 0.0, 0)(0) == 0.0


def test_exponential_schedule_is_geometric():
    s = ExponentialSchedule(1.0, 0.01, 100)
    assert [s(t) for t in (0, 50, 100, 200)] == pytest.approx([1.0, 0.1, 0.01, 0.01])
    assert s(26) / s(25) == pytest.approx(s(76) / s(75))


def test_bad_schedules():
    with pytest.raises(ConfigError, match="start > 0 and end > 0"):
        ExponentialSchedule(1.0, 0.0, 10)
    with pytest.raises(ConfigError, match="duration=-1"):
        LinearSchedule(1.0, 0.0, -1)
