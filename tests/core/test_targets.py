"""TD targets on numbers worked out by hand, including terminal vs truncated transitions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlx.core.advantages import discounted_returns
from rlx.core.targets import (
    double_q_target,
    n_step_window,
    q_learning_target,
    td_target,
)


def test_td_target_bootstraps_unless_terminated():
    # y = r + gamma * (1 - terminated) * V(s')
    r = torch.tensor([1.0, 1.0, -2.0])
    v_next = torch.tensor([10.0, 10.0, 4.0])
    terminated = torch.tensor([False, True, False])
    y = td_target(r, 0.9, v_next, terminated)
    assert y.tolist() == pytest.approx([1.0 + 9.0, 1.0, -2.0 + 3.6])


def test_truncated_transition_bootstraps_like_an_ordinary_one():
    # a time limit is not a terminal state: the target still adds gamma * V(final obs)
    r, v_final = np.array([1.0]), np.array([50.0])
    truncated_target = td_target(r, 0.99, v_final, terminated=np.array([False]))
    terminal_target = td_target(r, 0.99, v_final, terminated=np.array([True]))
    assert truncated_target[0] == pytest.approx(1.0 + 0.99 * 50.0)
    assert terminal_target[0] == pytest.approx(1.0)


def test_q_learning_target_takes_the_max_of_the_target_net():
    r = torch.tensor([0.5, 0.5])
    next_q = torch.tensor([[1.0, 3.0, 2.0], [4.0, -1.0, 0.0]])
    y = q_learning_target(r, 0.5, next_q, torch.tensor([False, True]))
    assert y.tolist() == pytest.approx([0.5 + 0.5 * 3.0, 0.5])


def test_double_q_target_uses_online_argmax_and_target_value():
    r = torch.tensor([1.0, 1.0, 0.0])
    online = torch.tensor([[5.0, 1.0], [0.0, 2.0], [3.0, 9.0]])  # argmax: 0, 1, 1
    target = torch.tensor([[2.0, 7.0], [6.0, 4.0], [8.0, 1.0]])  # values there: 2, 4, 1
    terminated = torch.tensor([False, False, True])
    y = double_q_target(r, 0.5, online, target, terminated)
    assert y.tolist() == pytest.approx([1.0 + 0.5 * 2.0, 1.0 + 0.5 * 4.0, 0.0])
    # vanilla DQN would take the target's own max (7 and 6): the Double target is lower
    vanilla = q_learning_target(r, 0.5, target, terminated)
    assert vanilla.tolist() == pytest.approx([1.0 + 3.5, 1.0 + 3.0, 0.0])


def test_per_sample_discounts_for_n_step_targets():
    y = td_target(
        torch.tensor([1.0, 1.0]),
        torch.tensor([0.25, 0.5]),
        torch.tensor([4.0, 4.0]),
        torch.tensor([False, False]),
    )
    assert y.tolist() == pytest.approx([2.0, 3.0])


def test_shape_mismatches_are_rejected():
    with pytest.raises(ValueError, match=r"\[B, A\]"):
        q_learning_target(torch.zeros(3), 0.9, torch.zeros(3), torch.zeros(3))
    with pytest.raises(ValueError, match="same shape"):
        double_q_target(torch.zeros(2), 0.9, torch.zeros(2, 3), torch.zeros(2, 4), torch.zeros(2))


def test_n_step_window_by_hand():
    gamma = 0.5
    rewards = np.array(
        [
            [1.0, 2.0, 4.0],  # no episode end: all three, bootstrap with gamma^3
            [1.0, 2.0, 4.0],  # terminated at the 2nd: stop there, no bootstrap
            [1.0, 2.0, 4.0],  # truncated at the 2nd: stop there, bootstrap with gamma^2
            [1.0, 2.0, 4.0],  # only 1 transition stored so far: bootstrap with gamma^1
            [3.0, 2.0, 4.0],  # terminated at the first
        ]
    )
    terminated = np.array([[0, 0, 0], [0, 1, 0], [0, 0, 0], [0, 0, 0], [1, 0, 0]], dtype=bool)
    truncated = np.array([[0, 0, 0], [0, 0, 1], [0, 1, 0], [0, 0, 0], [0, 0, 0]], dtype=bool)
    available = np.array([3, 3, 3, 1, 3])
    G, k, term = n_step_window(rewards, terminated, truncated, available, gamma)
    assert G.tolist() == pytest.approx([1 + 1 + 1, 1 + 1, 1 + 1, 1, 3])
    assert k.tolist() == [3, 2, 2, 1, 1]
    assert term.tolist() == [False, True, False, False, True]


def test_discounted_returns_reverse_sweep():
    # G = r + gamma * G from the end: [1 + 0.5 * (0 + 0.5 * 4), 0 + 0.5 * 4, 4]
    assert discounted_returns([1.0, 0.0, 4.0], 0.5).tolist() == pytest.approx([2.0, 2.0, 4.0])
