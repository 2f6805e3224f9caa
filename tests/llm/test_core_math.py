"""The core's masked math, which the language-model stages use on padded ``[B, T]`` tokens:
each masked function equals its unmasked core function applied to the unpadded sequences."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlx import metrics as M
from rlx.core.advantages import gae, masked_gae
from rlx.core.policy_losses import (
    approx_kl,
    clipped_surrogate,
    masked_mean,
    value_loss,
)

SPANS = [(2, 6), (1, 2), (3, 7), (0, 5)]  # each row's real entries [start, end) of T = 7
T = 7


def padded(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Log-probs, old log-probs, per-token advantages and the mask of four padded rows; the
    padding holds large junk, which must never count."""
    gen = torch.Generator().manual_seed(seed)
    mask = torch.zeros(len(SPANS), T, dtype=torch.bool)
    for row, (a, b) in enumerate(SPANS):
        mask[row, a:b] = True
    logp = torch.randn(len(SPANS), T, generator=gen, dtype=torch.float64)
    old = logp + 0.4 * torch.randn(len(SPANS), T, generator=gen, dtype=torch.float64)
    adv = torch.randn(len(SPANS), T, generator=gen, dtype=torch.float64)
    junk = ~mask
    logp, old, adv = logp.masked_fill(junk, 50.0), old.masked_fill(junk, -50.0), adv + 99 * junk
    return logp, old, adv, mask


@pytest.mark.parametrize(("gamma", "lam"), [(1.0, 0.95), (0.9, 0.8), (0.99, 0.0), (1.0, 1.0)])
def test_masked_gae_is_gae_of_each_unpadded_row(gamma, lam):
    """A completion is an episode that terminates at its last token: ``gae`` on the row's own
    steps, with ``V`` after the last one 0."""
    rng = np.random.default_rng(1)
    mask = np.zeros((len(SPANS), T), dtype=bool)
    for row, (a, b) in enumerate(SPANS):
        mask[row, a:b] = True
    rewards = np.where(mask, rng.normal(size=mask.shape), 1e6)  # junk in the padding
    values = np.where(mask, rng.normal(size=mask.shape), -1e6)
    advantages, returns = masked_gae(rewards, values, mask, gamma, lam)
    for row, (a, b) in enumerate(SPANS):
        r, v = rewards[row, a:b], values[row, a:b]
        ended = np.arange(b - a) == b - a - 1
        expected = gae(r, v, np.append(v[1:], 0.0), ended, np.zeros_like(ended), gamma, lam)
        np.testing.assert_allclose(advantages[row, a:b], expected, rtol=0, atol=1e-12)
        np.testing.assert_allclose(returns[row, a:b], expected + v, rtol=0, atol=1e-12)
    assert not advantages[~mask].any() and not returns[~mask].any()


def test_masked_gae_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        masked_gae(np.zeros((2, 3)), np.zeros((2, 4)), np.ones((2, 3), bool), 1.0, 0.9)


def test_token_aggregation_is_the_surrogate_of_the_flattened_tokens():
    logp, old, adv, mask = padded()
    logp.requires_grad_(True)
    ours, metrics = clipped_surrogate(logp, old, adv, 0.2, mask=mask, aggregation="token")
    flat, flat_metrics = clipped_surrogate(logp[mask], old[mask], adv[mask], 0.2)
    torch.testing.assert_close(ours, flat)
    for key in (M.POLICY_LOSS, M.CLIP_FRACTION, M.APPROX_KL):
        torch.testing.assert_close(metrics[key], flat_metrics[key])
    torch.testing.assert_close(
        torch.autograd.grad(ours, logp)[0], torch.autograd.grad(flat, logp)[0]
    )


def test_sequence_aggregation_is_the_mean_of_each_rows_surrogate():
    logp, old, adv, mask = padded(2)
    logp.requires_grad_(True)
    ours, _ = clipped_surrogate(logp, old, adv, 0.2, mask=mask, aggregation="sequence")
    rows = [clipped_surrogate(logp[i, a:b], old[i, a:b], adv[i, a:b], 0.2)[0]
            for i, (a, b) in enumerate(SPANS)]  # fmt: skip
    expected = torch.stack(rows).mean()
    torch.testing.assert_close(ours, expected)
    torch.testing.assert_close(
        torch.autograd.grad(ours, logp)[0], torch.autograd.grad(expected, logp)[0]
    )


def test_a_per_sequence_advantage_is_shared_by_its_tokens():
    logp, old, _, mask = padded(3)
    per_sequence = torch.tensor([1.5, -0.7, 0.2, 0.0], dtype=torch.float64)
    shared, _ = clipped_surrogate(logp, old, per_sequence, 0.2, mask=mask)
    spread, _ = clipped_surrogate(logp, old, per_sequence[:, None].expand(-1, T), 0.2, mask=mask)
    torch.testing.assert_close(shared, spread)
    with pytest.raises(ValueError, match="advantages"):
        clipped_surrogate(logp, old, per_sequence[:2], 0.2, mask=mask)


def test_clip_higher_lets_a_rising_ratio_go_further_before_it_is_clipped():
    """A > 0 and r = 1.25: clipped at eps 0.2, not at eps_high 0.28 (DAPO's clip-higher)."""
    log_prob = torch.tensor([np.log(1.25)], dtype=torch.float64, requires_grad=True)
    old, adv = torch.zeros(1, dtype=torch.float64), torch.ones(1, dtype=torch.float64)
    _, symmetric = clipped_surrogate(log_prob, old, adv, 0.2)
    loss, higher = clipped_surrogate(log_prob, old, adv, 0.2, clip_eps_high=0.28)
    assert symmetric[M.CLIP_FRACTION] == 1.0 and higher[M.CLIP_FRACTION] == 0.0
    assert torch.autograd.grad(loss, log_prob)[0].item() == pytest.approx(-1.25)


def test_masked_value_loss_and_kl_are_those_of_the_flattened_entries():
    values, returns, old, mask = padded(4)
    for clip in (None, 0.2):
        ours, _ = value_loss(values, returns, old, clip, mask=mask)
        flat, _ = value_loss(values[mask], returns[mask], old[mask], clip)
        torch.testing.assert_close(ours, flat)
    torch.testing.assert_close(approx_kl(values - old, mask), approx_kl((values - old)[mask]))


def test_masked_mean_ignores_padding_and_an_empty_row_gives_zero():
    x = torch.tensor([[1.0, 3.0, 100.0], [7.0, -5.0, 100.0]])
    mask = torch.tensor([[True, True, False], [False, False, False]])
    assert masked_mean(x, mask).item() == 2.0
    assert masked_mean(x, mask, "sequence").item() == 1.0  # (2 + 0) / 2 rows
    assert masked_mean(x, torch.zeros_like(mask)).item() == 0.0
    assert masked_mean(x).item() == pytest.approx(x.mean().item())
    with pytest.raises(ValueError, match="aggregation"):
        masked_mean(x, mask, "row")


def test_entropy_is_chunked_without_a_gradient_and_equals_its_definition():
    from rlx.llm import logprobs as LP

    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(3, LP.ENTROPY_ROWS + 7, 11, generator=gen, requires_grad=True)
    log_probs = torch.log_softmax(logits, -1)
    targets = torch.randint(0, 11, (3, LP.ENTROPY_ROWS + 7), generator=gen)
    token, entropy = LP.gathered_and_entropy(log_probs, targets)
    p = torch.softmax(logits.detach().double(), -1)
    expected = -(p * p.log()).sum(-1)  # H = -sum_v p_v log p_v, in float64
    torch.testing.assert_close(entropy.double(), expected, rtol=1e-5, atol=1e-6)
    assert not entropy.requires_grad and token.requires_grad  # a figure, not a loss term
    torch.testing.assert_close(token, log_probs.gather(-1, targets[..., None])[..., 0])
