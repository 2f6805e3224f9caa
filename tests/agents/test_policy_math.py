"""The policy-gradient math on numbers worked out by hand: returns, GAE, losses, KL.

The rollout used throughout (one env copy, gamma 0.9, lambda 0.8):

    t            0     1          2     3           4
    r            1     2          3     4           5
    V(s_t)       0.5   1.0        1.5   2.0         2.5
    V(s_t+1)     1.0   7.0        2.0   9.0         3.0
    ends         -     truncated  -     terminated  -   (rollout cut after t = 4)

    delta_t = r + 0.9 (1 - term) V(s_t+1) - V(s_t) = 1.4, 7.3, 3.3, 2.0, 5.2
    GAE (0.72 carry, stops at either end):  A = 6.656, 7.3, 4.74, 2.0, 5.2
    MC returns (bootstrap at the truncation and the cut):  G = 8.47, 8.3, 6.6, 4.0, 7.7
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rlx import metrics as M
from rlx.core.advantages import discounted_returns, explained_variance, gae, td_residuals
from rlx.core.policies import ActorCritic
from rlx.core.policy_losses import (
    approx_kl,
    clipped_surrogate,
    entropy_bonus,
    normalize,
    policy_gradient_loss,
    value_loss,
)

GAMMA, LAM = 0.9, 0.8
REWARDS = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
VALUES = np.array([0.5, 1.0, 1.5, 2.0, 2.5])
NEXT_VALUES = np.array([1.0, 7.0, 2.0, 9.0, 3.0])
TERMINATED = np.array([False, False, False, True, False])
TRUNCATED = np.array([False, True, False, False, False])


def direct_gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    """``sum_l (gamma lambda)^l delta_{t+l}`` to the end of the episode or of the rollout."""
    delta = rewards + gamma * (1.0 - terminated) * next_values - values
    out = np.zeros_like(delta)
    for t in range(len(delta)):
        for k in range(len(delta) - t):
            out[t] += (gamma * lam) ** k * delta[t + k]
            if terminated[t + k] or truncated[t + k]:
                break
    return out


# ---------------------------------------------------------------------------- returns, GAE
def test_td_residuals_by_hand():
    delta = td_residuals(REWARDS, VALUES, NEXT_VALUES, TERMINATED, GAMMA)
    np.testing.assert_allclose(delta, [1.4, 7.3, 3.3, 2.0, 5.2])


def test_gae_by_hand_with_truncation_and_termination_inside():
    A = gae(REWARDS, VALUES, NEXT_VALUES, TERMINATED, TRUNCATED, GAMMA, LAM)
    np.testing.assert_allclose(A, [6.656, 7.3, 4.74, 2.0, 5.2])


def test_truncation_bootstraps_from_the_final_observation_value():
    # only V of the truncated step's true final observation (7.0) moves A_0 and A_1
    other = NEXT_VALUES.copy()
    other[1] = 0.0
    A = gae(REWARDS, VALUES, other, TERMINATED, TRUNCATED, GAMMA, LAM)
    np.testing.assert_allclose(A[1], 2.0 - 1.0)
    np.testing.assert_allclose(A[0], 1.4 + 0.72 * 1.0)
    # a termination ignores its next value entirely
    other = NEXT_VALUES.copy()
    other[3] = -100.0
    np.testing.assert_allclose(
        gae(REWARDS, VALUES, other, TERMINATED, TRUNCATED, GAMMA, LAM),
        [6.656, 7.3, 4.74, 2.0, 5.2],
    )


@pytest.mark.parametrize("lam", [0.0, 0.3, 0.8, 0.95, 1.0])
def test_gae_equals_the_direct_sum(lam):
    rng = np.random.default_rng(0)
    T, N = 12, 3
    rewards, values, next_values = rng.normal(size=(3, T, N))
    terminated = rng.random((T, N)) < 0.15
    truncated = (rng.random((T, N)) < 0.15) & ~terminated
    A = gae(rewards, values, next_values, terminated, truncated, GAMMA, lam)
    for n in range(N):
        expected = direct_gae(
            rewards[:, n], values[:, n], next_values[:, n], terminated[:, n], truncated[:, n],
            GAMMA, lam,
        )  # fmt: skip
        np.testing.assert_allclose(A[:, n], expected, atol=1e-12)


def test_lambda_zero_is_the_td_advantage():
    A = gae(REWARDS, VALUES, NEXT_VALUES, TERMINATED, TRUNCATED, GAMMA, 0.0)
    np.testing.assert_allclose(A, td_residuals(REWARDS, VALUES, NEXT_VALUES, TERMINATED, GAMMA))


def test_lambda_one_is_the_monte_carlo_return_minus_v():
    G = discounted_returns(
        REWARDS, GAMMA, terminated=TERMINATED, truncated=TRUNCATED, next_values=NEXT_VALUES
    )
    np.testing.assert_allclose(G, [8.47, 8.3, 6.6, 4.0, 7.7])
    A = gae(REWARDS, VALUES, NEXT_VALUES, TERMINATED, TRUNCATED, GAMMA, 1.0)
    np.testing.assert_allclose(A, G - VALUES)


def test_discounted_returns_reverse_sweep_per_column():
    # column 0: one episode of three steps that terminates; column 1: a time limit at t = 1
    rewards = np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]])
    terminated = np.array([[False, False], [False, False], [True, False]])
    truncated = np.array([[False, False], [False, True], [False, False]])
    next_values = np.array([[0.0, 0.0], [0.0, 10.0], [0.0, 5.0]])
    G = discounted_returns(
        rewards, 0.5, terminated=terminated, truncated=truncated, next_values=next_values
    )
    np.testing.assert_allclose(G[:, 0], [1.75, 1.5, 1.0])
    np.testing.assert_allclose(G[:, 1], [1 + 0.5 * 6.0, 1 + 0.5 * 10.0, 1 + 0.5 * 5.0])


def test_shapes_and_lambda_are_checked():
    with pytest.raises(ValueError, match="one shape"):
        gae(REWARDS, VALUES, NEXT_VALUES[:3], TERMINATED, TRUNCATED, GAMMA, LAM)
    with pytest.raises(ValueError, match="lam"):
        gae(REWARDS, VALUES, NEXT_VALUES, TERMINATED, TRUNCATED, GAMMA, 1.5)


def test_explained_variance():
    target = np.array([1.0, 2.0, 3.0, 4.0])
    assert explained_variance(target, target) == 1.0
    assert explained_variance(np.full(4, target.mean()), target) == 0.0
    assert explained_variance(target[::-1], target) == pytest.approx(1 - 5.0 / 1.25)
    assert explained_variance(target, np.ones(4)) == 0.0  # nothing to explain, no NaN


# ---------------------------------------------------------------------------- losses
RATIOS = torch.tensor([1.5, 1.5, 0.5, 0.5, 1.1, 0.9, 1.0, 1.3], dtype=torch.float64)
ADVANTAGES = torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0, -2.0, 0.0, 0.5], dtype=torch.float64)
EPS = 0.2


def surrogate_grad() -> tuple[torch.Tensor, dict]:
    log_prob = RATIOS.log().clone().requires_grad_(True)
    loss, metrics = clipped_surrogate(log_prob, torch.zeros_like(RATIOS), ADVANTAGES, EPS)
    loss.backward()
    return log_prob.grad, metrics


def test_clipped_surrogate_zero_gradient_exactly_when_clipped():
    grad, metrics = surrogate_grad()
    r, A = RATIOS.tolist(), ADVANTAGES.tolist()
    for i, (ratio, adv) in enumerate(zip(r, A, strict=True)):
        clipped = (adv > 0 and ratio > 1 + EPS) or (adv < 0 and ratio < 1 - EPS)
        # d/dlog_pi of -(r A)/B is -r A / B where unclipped
        expected = 0.0 if clipped else -ratio * adv / len(r)
        assert grad[i].item() == pytest.approx(expected, abs=1e-15), (ratio, adv)
    assert metrics[M.CLIP_FRACTION].item() == pytest.approx(3 / 8)  # cases 0, 3 and 7


def test_clipped_surrogate_value():
    _, metrics = surrogate_grad()
    terms = [min(r * a, min(max(r, 1 - EPS), 1 + EPS) * a) for r, a in zip(
        RATIOS.tolist(), ADVANTAGES.tolist(), strict=True)]  # fmt: skip
    assert metrics[M.POLICY_LOSS].item() == pytest.approx(-sum(terms) / len(terms))


def test_approx_kl_zero_for_identical_policies_positive_otherwise():
    log_old = torch.log(torch.tensor([0.2, 0.5, 0.9, 0.3]))
    assert approx_kl(log_old - log_old).item() == 0.0
    for shift in (0.01, -0.01, 0.5, -2.0):
        assert approx_kl(log_old + shift - log_old).item() > 0.0
    # k3 is exact in expectation: KL(p || q) for two categoricals, sampled from p
    p, q = torch.tensor([0.7, 0.2, 0.1]), torch.tensor([0.4, 0.4, 0.2])
    exact = (p * (p / q).log()).sum()
    actions = torch.multinomial(
        p, 200_000, replacement=True, generator=torch.Generator().manual_seed(0)
    )
    estimate = approx_kl(q.log()[actions] - p.log()[actions])
    assert estimate.item() == pytest.approx(exact.item(), rel=0.03)


def test_clipped_surrogate_kl_metric_is_zero_at_the_start_of_an_update():
    log_prob = torch.tensor([-0.1, -2.0, -0.7])
    _, metrics = clipped_surrogate(log_prob, log_prob.clone(), torch.ones(3), EPS)
    assert metrics[M.APPROX_KL].item() == 0.0
    assert metrics[M.CLIP_FRACTION].item() == 0.0


def test_value_loss_plain_and_clipped_by_hand():
    values = torch.tensor([2.0, 2.0])
    returns = torch.tensor([3.0, 0.0])
    old = torch.tensor([1.0, 1.0])
    loss, metrics = value_loss(values, returns)
    assert loss.item() == pytest.approx(0.5 * (1.0 + 4.0) / 2)
    # clipped: V may move 0.5 from V_old = 1, so V_clip = 1.5; max((V-R)^2, (V_clip-R)^2)
    loss, metrics = value_loss(values, returns, old, clip_eps=0.5)
    assert loss.item() == pytest.approx(0.5 * (2.25 + 4.0) / 2)
    assert metrics[M.VALUE_LOSS].item() == pytest.approx(loss.item())
    with pytest.raises(ValueError, match="old_values"):
        value_loss(values, returns, None, clip_eps=0.5)


def test_policy_gradient_loss_and_entropy_bonus():
    log_prob = torch.tensor([-1.0, -2.0], requires_grad=True)
    loss, _ = policy_gradient_loss(log_prob, torch.tensor([3.0, -1.0]))
    assert loss.item() == pytest.approx(-(-3.0 + 2.0) / 2)
    loss.backward()
    np.testing.assert_allclose(log_prob.grad.numpy(), [-1.5, 0.5])
    bonus, metrics = entropy_bonus(torch.tensor([0.5, 0.7]))
    assert bonus.item() == pytest.approx(-0.6)
    assert metrics[M.ENTROPY].item() == pytest.approx(0.6)


def test_normalize():
    x = normalize(torch.tensor([1.0, 2.0, 3.0, 6.0]))
    assert x.mean().item() == pytest.approx(0.0, abs=1e-6)
    assert x.std().item() == pytest.approx(1.0, abs=1e-6)


# ---------------------------------------------------------------------------- the annotated case
def test_empty_hidden_layers_give_the_cheat_sheets_linear_softmax_and_critic():
    torch.manual_seed(0)
    policy = ActorCritic(3, {"n": 2}, hidden_sizes=())
    theta, w = policy.actor.weight, policy.critic.weight
    assert policy.actor.bias is None and policy.critic.bias is None
    with torch.no_grad():
        theta.copy_(torch.tensor([[0.3, -0.2, 0.1], [0.0, 0.4, -0.5]]))
        w.copy_(torch.tensor([[1.0, 2.0, -1.0]]))
    x = torch.tensor([[1.0, 0.5, -2.0]])
    probs = torch.softmax(x @ theta.T, dim=-1)
    log_prob, _ = policy.log_prob_entropy(x, torch.tensor([1]))
    assert log_prob.item() == pytest.approx(probs[0, 1].log().item())
    assert policy.value(x).item() == pytest.approx(1.0 + 1.0 + 2.0)


@pytest.mark.parametrize("ratio_shift,adv", [(0.0, 1.0), (0.5, 1.0), (0.5, -1.0), (-0.5, -1.0)])
def test_clipped_update_matches_the_cheat_sheets_update_lines(ratio_shift, adv):
    """One record: -grad of our loss equals pg_scale * grad_logpi * x from the cheat sheet."""
    policy = ActorCritic(3, {"n": 2}, hidden_sizes=())
    x, a = torch.tensor([[1.0, 0.5, -2.0]]), 1
    with torch.no_grad():
        probs = torch.softmax(policy.actor(x), -1)[0]
    log_pi_old = math.log(probs[a].item()) - ratio_shift  # so ratio = exp(ratio_shift)
    log_prob, _ = policy.log_prob_entropy(x, torch.tensor([a]))
    loss, _ = clipped_surrogate(log_prob, torch.tensor([log_pi_old]), torch.tensor([adv]), EPS)
    loss.backward()
    # the cheat sheet's lines
    ratio = math.exp(math.log(probs[a].item()) - log_pi_old)
    clipped = (adv > 0 and ratio > 1 + EPS) or (adv < 0 and ratio < 1 - EPS)
    pg_scale = 0.0 if clipped else ratio * adv
    update = torch.zeros(2, 3)
    for action in range(2):
        grad_logpi = (1.0 if action == a else 0.0) - probs[action].item()
        for j in range(3):
            update[action, j] = pg_scale * grad_logpi * x[0, j]
    torch.testing.assert_close(-policy.actor.weight.grad, update)
    # critic step: w += lr_v * err * x, err = ret - value(w, x), from 1/2 (V - R)^2
    ret = 3.0
    v_loss, _ = value_loss(policy.value(x), torch.tensor([ret]))
    v_loss.backward()
    err = ret - policy.value(x).item()
    torch.testing.assert_close(-policy.critic.weight.grad, err * x)


@pytest.mark.parametrize("activation", ["tanh", "relu"])
@pytest.mark.parametrize("ent_coef", [0.0, 0.01])
def test_hand_written_ppo_gradient_matches_autograd(activation, ent_coef):
    from rlx.agents import ppo
    from rlx.core import manual_grad
    from rlx.core.rollout_batch import RolloutBatch

    torch.manual_seed(0)
    policy = ActorCritic(4, {"n": 3}, (16, 8), activation=activation).double()
    for p in policy.parameters():  # away from the near-uniform start, so ratios get clipped
        p.data.add_(0.3 * torch.randn_like(p))
    B = 64
    obs = torch.randn(B, 4, dtype=torch.float64)
    actions = torch.randint(0, 3, (B,))
    with torch.no_grad():
        log_probs = policy.log_prob_entropy(obs, actions)[0] + 0.3 * torch.randn(B).double()
    batch = RolloutBatch(obs, actions, log_probs, torch.randn(B).double(),
                         normalize(torch.randn(B).double()), torch.randn(B).double(),
                         0.0)  # fmt: skip
    config = ppo.PPOConfig(num_envs=2, num_steps=32, minibatch_size=64, ent_coef=ent_coef)
    assert manual_grad.supports(policy, config)
    loss, expected = ppo.ppo_loss(policy, batch, config, 0.2)
    policy.zero_grad()
    loss.backward()
    grads, metrics = manual_grad.loss_and_grads(
        policy, manual_grad.PreparedBatch(batch, 3), 0.2, config.vf_coef, ent_coef
    )
    assert expected[M.CLIP_FRACTION].item() > 0
    for p, g in zip(policy.parameters(), grads, strict=True):
        torch.testing.assert_close(g, p.grad, rtol=1e-6, atol=1e-9)
    for key, value in expected.items():
        torch.testing.assert_close(metrics[key], value, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("sizes", [(64, 64, 64), (64, 63, 65)])
def test_an_updates_metrics_reduced_together_equal_the_mean_of_each_steps(sizes):
    """PPO's update keeps each step's per-sample terms and reduces them at its end: the result
    is the mean over steps of what each step's own metrics are (equal or unequal sizes)."""
    from rlx.core import manual_grad
    from rlx.core.rollout_batch import RolloutBatch

    torch.manual_seed(1)
    policy = ActorCritic(4, {"n": 3}, (16, 8)).double()
    steps, per_step = [], []
    for B in sizes:
        obs = torch.randn(B, 4, dtype=torch.float64)
        with torch.no_grad():
            log_probs = policy.log_prob_entropy(obs, torch.zeros(B, dtype=torch.long))[0]
        batch = RolloutBatch(obs, torch.randint(0, 3, (B,)),
                             log_probs + 0.3 * torch.randn(B).double(),
                             torch.randn(B).double(), torch.randn(B).double(),
                             torch.randn(B).double(), 0.0)  # fmt: skip
        prepared = manual_grad.PreparedBatch(batch, 3)
        steps.append(manual_grad.grads_and_terms(policy, prepared, 0.2, 0.5, 0.01)[1])
        per_step.append(manual_grad.loss_and_grads(policy, prepared, 0.2, 0.5, 0.01)[1])
    together = manual_grad.metrics_of(steps)
    for key, value in together.items():
        expected = torch.stack([m[key] for m in per_step]).mean()
        torch.testing.assert_close(value, expected, rtol=1e-12, atol=1e-12)
    assert together[M.CLIP_FRACTION] > 0
