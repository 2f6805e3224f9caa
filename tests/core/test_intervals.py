"""The headline intervals against values worked out by hand (scipy only gives the quantiles)."""

from __future__ import annotations

import math

import pytest

from rlx.core.intervals import mean_interval, proportion_interval


def test_the_t_interval_of_a_mean_matches_the_hand_computation():
    # mean 3, s = sqrt(2.5), s / sqrt(5) = 0.70711, t_{0.975, 4} = 2.776445
    low, high = mean_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    assert low == pytest.approx(3 - 2.776445 * 0.7071068, abs=1e-5)
    assert high == pytest.approx(3 + 2.776445 * 0.7071068, abs=1e-5)


def test_identical_returns_give_the_point_and_one_return_gives_no_interval():
    assert mean_interval([500.0] * 10) == (500.0, 500.0)
    assert all(math.isnan(x) for x in mean_interval([1.0]))


def test_wilson_interval_of_11_in_20_matches_the_hand_computation():
    # p = 0.55, z = 1.959964: (p + z^2/40 -+ z sqrt(p q / 20 + z^2 / 1600)) / (1 + z^2 / 20)
    low, high = proportion_interval(11, 20)
    assert low == pytest.approx(0.342089, abs=1e-5)
    assert high == pytest.approx(0.741804, abs=1e-5)


def test_wilson_interval_stays_in_0_1_and_is_not_a_point_at_the_ends():
    low, high = proportion_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.277530, abs=1e-5)  # (2 z^2/20) / (1 + z^2/10)
    low, high = proportion_interval(10, 10)
    assert (
        high == pytest.approx(1.0) and high <= 1.0 and low == pytest.approx(1 - 0.277530, abs=1e-5)
    )


def test_a_share_outside_its_count_is_refused():
    with pytest.raises(ValueError, match="hits=11"):
        proportion_interval(11, 10)
    assert all(math.isnan(x) for x in proportion_interval(0, 0))
