"""Action distributions: log-probs and entropies against direct computations."""

from __future__ import annotations

import math

import pytest
import torch

from rlx.core.distributions import TanhGaussian, categorical, diag_gaussian


def test_categorical_log_prob_and_entropy():
    logits = torch.tensor([[0.0, math.log(3.0)]])  # probabilities 1/4, 3/4
    d = categorical(logits)
    assert d.log_prob(torch.tensor([1])).item() == pytest.approx(math.log(0.75))
    assert d.entropy().item() == pytest.approx(-(0.25 * math.log(0.25) + 0.75 * math.log(0.75)))


def test_diag_gaussian_sums_over_action_dims():
    mean, log_std = torch.tensor([[0.0, 1.0]]), torch.tensor([0.0, math.log(2.0)])
    d = diag_gaussian(mean, log_std)
    a = torch.tensor([[1.0, 0.0]])
    by_hand = sum(
        -((x - m) ** 2) / (2 * s**2) - math.log(s) - 0.5 * math.log(2 * math.pi)
        for x, m, s in [(1.0, 0.0, 1.0), (0.0, 1.0, 2.0)]
    )
    assert d.log_prob(a).item() == pytest.approx(by_hand)
    entropy = sum(math.log(s) + 0.5 * (1 + math.log(2 * math.pi)) for s in (1.0, 2.0))
    assert d.entropy().item() == pytest.approx(entropy)


def direct_tanh_log_prob(u, mean, std, low, high):
    """Change of variables a = c + s tanh(u), in float64 with the naive Jacobian."""
    u, mean, std = (x.double() for x in (u, mean, std))
    scale = (high - low) / 2
    log_normal = -((u - mean) ** 2) / (2 * std**2) - torch.log(std) - 0.5 * math.log(2 * math.pi)
    jacobian = scale * (1 - torch.tanh(u) ** 2)
    return (log_normal - torch.log(jacobian)).sum(-1)


def test_tanh_gaussian_log_prob_matches_change_of_variables():
    torch.manual_seed(0)
    # moderate spreads, so that recovering u = atanh(a) from float32 actions stays exact
    mean, log_std = torch.randn(64, 3) * 0.5, torch.randn(64, 3) * 0.3 - 0.5
    low, high = -2.0, 1.0
    d = TanhGaussian(mean, log_std, low, high)
    action, log_prob = d.rsample_with_log_prob()
    assert action.min() >= low and action.max() <= high
    u = torch.atanh((action.double() - (high + low) / 2) / ((high - low) / 2))
    direct = direct_tanh_log_prob(u, mean, log_std.exp(), low, high)
    assert torch.allclose(log_prob.double(), direct, atol=1e-3)
    # log_prob of a given action (through atanh) agrees with the sampling path
    assert torch.allclose(d.log_prob(action), log_prob, atol=1e-3)


def test_tanh_gaussian_log_prob_is_finite_far_in_the_tails():
    d = TanhGaussian(torch.tensor([[12.0]]), torch.tensor([[0.0]]))
    _, log_prob = d.rsample_with_log_prob()
    assert torch.isfinite(log_prob).all()


def test_tanh_gaussian_entropy_matches_quadrature():
    torch.manual_seed(1)
    mean, std = 0.3, 0.8
    d = TanhGaussian(torch.tensor([[mean]]), torch.tensor([[math.log(std)]]))
    # H = -int p_u(u) log p_a(tanh(u)) du on a fine grid, p_a by the change of variables
    u = torch.linspace(mean - 10 * std, mean + 10 * std, 200_001, dtype=torch.float64)
    p_u = torch.exp(-((u - mean) ** 2) / (2 * std**2)) / (std * math.sqrt(2 * math.pi))
    log_p_a = direct_tanh_log_prob(u[:, None], torch.tensor(mean), torch.tensor(std), -1.0, 1.0)
    quadrature = -torch.trapezoid(p_u * log_p_a, u).item()
    assert d.entropy(samples=50_000).item() == pytest.approx(quadrature, abs=0.02)
    gaussian = math.log(std) + 0.5 * (1 + math.log(2 * math.pi))
    assert quadrature < gaussian  # tanh compresses, so the entropy can only drop
    assert d.mode.item() == pytest.approx(math.tanh(mean))
