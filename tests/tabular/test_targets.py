"""The update rules on numbers worked out by hand, terminated vs truncated included."""

from __future__ import annotations

import numpy as np
import pytest

from rlx.tabular.explore import epsilon_greedy_action, greedy_action, policy_cdf, sample_action
from rlx.tabular.rng import random_index, seed_rng, uniform
from rlx.tabular.targets import (
    bootstrap_target,
    double_q_target,
    episode_returns_into,
    epsilon_greedy_expectation,
    expected_sarsa_target,
    q_learning_target,
    sarsa_target,
    step_size,
    td_step,
)

Q_NEXT = np.array([1.0, 4.0, 2.0, -3.0])


def test_q_learning_target_bootstraps_on_the_max_unless_terminated():
    # 0.5 + 0.9 * max(1, 4, 2, -3) = 0.5 + 3.6
    assert q_learning_target(0.5, 0.9, Q_NEXT, False) == pytest.approx(4.1)
    assert q_learning_target(0.5, 0.9, Q_NEXT, True) == 0.5


def test_sarsa_target_uses_the_action_taken():
    # 0.5 + 0.9 * Q(s', 2) = 0.5 + 1.8
    assert sarsa_target(0.5, 0.9, Q_NEXT, 2, False) == pytest.approx(2.3)
    assert sarsa_target(0.5, 0.9, Q_NEXT, 2, True) == 0.5


def test_expected_sarsa_target_averages_over_epsilon_greedy():
    # pi = 0.2/4 = 0.05 on each action, + 0.8 on the greedy action 1:
    # E Q = 0.05 * (1 + 4 + 2 - 3) + 0.8 * 4 = 0.2 + 3.2 = 3.4; target = 0.5 + 0.9 * 3.4
    assert epsilon_greedy_expectation(Q_NEXT, 0.2) == pytest.approx(3.4)
    assert expected_sarsa_target(0.5, 0.9, Q_NEXT, 0.2, False) == pytest.approx(3.56)
    assert expected_sarsa_target(0.5, 0.9, Q_NEXT, 0.2, True) == 0.5
    # epsilon 0 is Q-learning's target, epsilon 1 the equiprobable mean (4 / 4 = 1)
    assert expected_sarsa_target(0.5, 0.9, Q_NEXT, 0.0, False) == pytest.approx(4.1)
    assert expected_sarsa_target(0.5, 0.9, Q_NEXT, 1.0, False) == pytest.approx(1.4)


def test_expectation_splits_the_greedy_mass_among_ties():
    q = np.array([2.0, 2.0, 0.0])
    # pi = (0.1/3 + 0.45, 0.1/3 + 0.45, 0.1/3): 2 * (0.1/3 + 0.45) * 2 = 1.8 + 0.4/3
    assert epsilon_greedy_expectation(q, 0.1) == pytest.approx(1.8 + 0.4 / 3)


def test_double_q_target_selects_with_one_table_and_values_with_the_other():
    q_select = np.array([0.0, 1.0, 5.0])  # argmax is action 2
    q_evaluate = np.array([10.0, 20.0, -1.0])
    rng = seed_rng(0)
    # 1 + 0.5 * q_evaluate[2] = 0.5, not 1 + 0.5 * max(q_evaluate) = 11
    assert double_q_target(1.0, 0.5, q_select, q_evaluate, False, rng) == pytest.approx(0.5)
    assert double_q_target(1.0, 0.5, q_select, q_evaluate, True, rng) == 1.0


def test_truncation_bootstraps_and_termination_does_not():
    # a truncated step is not terminated: the next state's value stays in the target
    assert bootstrap_target(-1.0, 1.0, -7.0, False) == -8.0
    assert bootstrap_target(-1.0, 1.0, -7.0, True) == -1.0


def test_td_step_moves_alpha_of_the_way_to_the_target():
    new, delta = td_step(2.0, 10.0, 0.25)  # 2 + 0.25 * (10 - 2)
    assert (new, delta) == (4.0, 8.0)
    assert step_size(0.25, 7) == 0.25
    assert step_size(0.0, 4) == 0.25  # alpha=None: the sample average 1 / N


def test_sample_average_step_sizes_give_the_mean():
    estimate = 123.0  # the first update (1/1) replaces the initial value
    for n, g in enumerate([3.0, 5.0, 10.0], start=1):
        estimate, _ = td_step(estimate, g, step_size(0.0, n))
    assert estimate == pytest.approx(6.0)


def test_discounted_returns_reverse_sweep():
    rewards = np.array([1.0, 0.0, 2.0, 99.0])  # only the first 3 belong to the episode
    out = np.zeros(4)
    episode_returns_into(rewards, 3, 0.5, 0.0, out)  # G2 = 2, G1 = 0 + 1 = 1, G0 = 1 + 0.5
    np.testing.assert_allclose(out[:3], [1.5, 1.0, 2.0])
    episode_returns_into(rewards, 3, 0.5, 8.0, out)  # truncated: G3 = 8 bootstraps the tail
    np.testing.assert_allclose(out[:3], [2.5, 3.0, 6.0])


def test_greedy_action_breaks_ties_uniformly_at_random():
    rng = seed_rng(1)
    q = np.array([1.0, 3.0, 3.0, 0.0, 3.0])
    picks = np.array([greedy_action(q, rng) for _ in range(3000)])
    assert set(np.unique(picks)) == {1, 2, 4}
    np.testing.assert_allclose(np.bincount(picks, minlength=5)[[1, 2, 4]] / 3000, 1 / 3, atol=0.04)
    assert greedy_action(np.array([0.0, 2.0, 1.0]), rng) == 1


def test_epsilon_greedy_explores_epsilon_of_the_time():
    rng = seed_rng(2)
    q = np.array([0.0, 1.0, 0.0, 0.0])
    picks = np.array([epsilon_greedy_action(q, 0.2, rng) for _ in range(4000)])
    # greedy with 1 - 0.2 + 0.2/4 = 0.85, each other action 0.05
    assert np.mean(picks == 1) == pytest.approx(0.85, abs=0.03)
    assert all(epsilon_greedy_action(q, 0.0, rng) == 1 for _ in range(100))


def test_sample_action_never_draws_a_zero_probability_action():
    cdf = policy_cdf(np.array([[0.0, 0.5, 0.5, 0.0], [0.0, 0.0, 0.0, 1.0]]))
    rng = seed_rng(3)
    picks = np.array([sample_action(cdf[0], rng) for _ in range(2000)])
    assert set(np.unique(picks)) == {1, 2}
    assert all(sample_action(cdf[1], rng) == 3 for _ in range(100))


def test_rng_is_reproducible_and_uniform():
    a, b = seed_rng(7), seed_rng(7)
    xs = np.array([uniform(a) for _ in range(20000)])
    assert all(uniform(b) == x for x in xs[:100])
    assert xs.min() >= 0.0 and xs.max() < 1.0
    assert xs.mean() == pytest.approx(0.5, abs=0.01)
    assert not np.array_equal(seed_rng(7), seed_rng(8))
    counts = np.bincount([random_index(a, 3) for _ in range(3000)], minlength=3)
    np.testing.assert_allclose(counts / 3000, 1 / 3, atol=0.04)
