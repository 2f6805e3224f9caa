"""The factored policies' formulas against hand-worked numbers, and masked logits."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rlx.core.distributions import (
    bernoulli_log_prob_entropy,
    categorical_log_prob_entropy,
    factored_categorical_log_prob_entropy,
    mask_logits,
)
from rlx.core.policies import ActorCritic

LN3 = math.log(3.0)


def h(*p: float) -> float:
    """The entropy ``-sum p log p`` of a distribution written out."""
    return -sum(q * math.log(q) for q in p)


def test_multidiscrete_sums_log_probs_and_entropies_over_the_entries():
    # entry 0: logits (0, ln 3) -> (1/4, 3/4); entry 1: (0, 0, 0) -> 1/3 each
    logits = torch.tensor([[0.0, LN3, 0.0, 0.0, 0.0]])
    log_prob, entropy = factored_categorical_log_prob_entropy(
        logits, torch.tensor([[1, 2]]), (2, 3)
    )
    assert log_prob.item() == pytest.approx(math.log(3 / 4) + math.log(1 / 3), abs=1e-6)
    assert entropy.item() == pytest.approx(h(1 / 4, 3 / 4) + math.log(3), abs=1e-6)


def test_equal_entries_take_the_same_formula():
    # (2, 2): entry 0 (0, ln 3) -> (1/4, 3/4), entry 1 (ln 3, 0) -> (3/4, 1/4)
    logits = torch.tensor([[0.0, LN3, LN3, 0.0]])
    log_prob, entropy = factored_categorical_log_prob_entropy(
        logits, torch.tensor([[0, 0]]), (2, 2)
    )
    assert log_prob.item() == pytest.approx(math.log(1 / 4) + math.log(3 / 4), abs=1e-6)
    assert entropy.item() == pytest.approx(2 * h(1 / 4, 3 / 4), abs=1e-6)


def test_multibinary_is_one_bernoulli_per_entry():
    # sigmoid(0) = 1/2, sigmoid(ln 3) = 3/4; a = (1, 0): log(1/2) + log(1 - 3/4)
    logits = torch.tensor([[0.0, LN3]])
    log_prob, entropy = bernoulli_log_prob_entropy(logits, torch.tensor([[1.0, 0.0]]))
    assert log_prob.item() == pytest.approx(math.log(1 / 2) + math.log(1 / 4), abs=1e-6)
    assert entropy.item() == pytest.approx(h(1 / 2, 1 / 2) + h(3 / 4, 1 / 4), abs=1e-6)


def test_a_masked_action_has_probability_zero_and_a_finite_gradient():
    logits = torch.tensor([[0.0, 5.0, 0.0]], requires_grad=True)
    mask = torch.tensor([[True, False, True]])
    masked = mask_logits(logits, mask)
    log_prob, entropy = categorical_log_prob_entropy(masked, torch.tensor([0]))
    assert log_prob.item() == pytest.approx(math.log(1 / 2), abs=1e-6)
    assert entropy.item() == pytest.approx(math.log(2), abs=1e-6)
    assert torch.softmax(masked, -1)[0, 1].item() == 0.0
    (log_prob + entropy).sum().backward()
    assert torch.isfinite(logits.grad).all() and logits.grad[0, 1] == 0.0


@pytest.mark.parametrize("actions", [{"n": 4}, {"nvec": [2, 2], "start": [0, 0]}])
def test_a_policy_never_samples_nor_prefers_a_masked_action(actions):
    policy = ActorCritic(3, actions, (8,))
    obs = np.random.default_rng(0).standard_normal((64, 3)).astype(np.float32)
    mask = np.zeros((64, 4), dtype=bool)
    mask[:, [0, 3]] = True  # Discrete: actions 0 and 3; (2, 2): entry 0 takes 0, entry 1 takes 1
    drawn = policy.sample(obs, np.random.default_rng(1), mask)
    best = policy.mode(obs, mask)
    if "n" in actions:
        assert set(drawn.tolist()) <= {0, 3} and set(best.tolist()) <= {0, 3}
    else:
        assert (drawn == [0, 1]).all() and (best == [0, 1]).all()
