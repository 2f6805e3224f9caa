"""SAC and TD3 math on numbers worked out by hand; the batched twin critics against plain MLPs.

:class:`rlx.core.distributions.TanhGaussian`'s log-prob correction is checked against a direct
change of variables in ``tests/core/test_distributions.py``; SAC's written-out sampler
(:func:`squashed_gaussian_sample`) is checked here against both.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from rlx.core.continuous import (
    ActionScaler,
    box_action_bounds,
    deterministic_actor_loss,
    polyak_update,
    sac_actor_loss,
    sac_target,
    smoothed_target_action,
    squashed_gaussian_sample,
    td3_target,
    temperature_loss,
    twin_critic_loss,
)
from rlx.core.critics import EnsembleQ
from rlx.core.distributions import TanhGaussian
from rlx.errors import EnvError

R = torch.tensor([1.0, -0.5, 2.0])
TERMINATED = torch.tensor([0.0, 0.0, 1.0])
# two target critics at (s', a'): min over the twins is [2, -1, 5]
NEXT_Q = torch.tensor([[3.0, -1.0, 5.0], [2.0, 0.0, 7.0]])


def test_sac_target_takes_the_twin_minimum_minus_the_entropy_term():
    # y = r + gamma (1 - d) (min(Q1', Q2') - alpha log pi(a'|s')), gamma 0.9, alpha 0.2
    next_log_prob = torch.tensor([-1.0, 0.5, 0.3])
    y = sac_target(R, 0.9, TERMINATED, NEXT_Q, next_log_prob, 0.2)
    # [1 + 0.9 (2 + 0.2), -0.5 + 0.9 (-1 - 0.1), 2 (terminated: no bootstrap)]
    assert y.tolist() == pytest.approx([2.98, -1.49, 2.0])


def test_sac_target_with_zero_temperature_is_the_td3_target():
    y_sac = sac_target(R, 0.9, TERMINATED, NEXT_Q, torch.tensor([5.0, -3.0, 1.0]), 0.0)
    y_td3 = td3_target(R, 0.9, TERMINATED, NEXT_Q)
    assert y_sac.tolist() == pytest.approx(y_td3.tolist())


def test_td3_target_bootstraps_from_the_smaller_twin_unless_terminated():
    y = td3_target(R, 0.9, TERMINATED, NEXT_Q)
    assert y.tolist() == pytest.approx([1.0 + 0.9 * 2.0, -0.5 + 0.9 * -1.0, 2.0])


def test_per_sample_discounts_are_accepted():
    y = td3_target(R, torch.tensor([0.5, 1.0, 0.9]), TERMINATED, NEXT_Q)
    assert y.tolist() == pytest.approx([2.0, -1.5, 2.0])


def test_smoothing_noise_is_clipped_then_the_action_is_clipped_into_the_box():
    target_action = torch.tensor([[0.9], [-0.2], [0.0], [-0.95]])
    noise = torch.tensor([[0.7], [-0.3], [-0.1], [-0.6]])
    a = smoothed_target_action(target_action, noise, noise_clip=0.5)
    # noise clipped to [0.5, -0.3, -0.1, -0.5]; sums [1.4, -0.5, -0.1, -1.45]; box [-1, 1]
    assert a.flatten().tolist() == pytest.approx([1.0, -0.5, -0.1, -1.0])


def test_targets_check_shapes():
    with pytest.raises(ValueError, match=r"\[K, B\]"):
        td3_target(R, 0.9, TERMINATED, NEXT_Q[:, :2])
    with pytest.raises(ValueError, match="next_log_prob"):
        sac_target(R, 0.9, TERMINATED, NEXT_Q, torch.zeros(2), 0.1)


def test_twin_critic_loss_sums_the_mean_squared_errors_of_the_twins():
    q = torch.tensor([[1.0, 2.0], [3.0, 0.0]], requires_grad=True)
    loss, metrics = twin_critic_loss(q, torch.tensor([2.0, 1.0]))
    # errors [[-1, 1], [1, -1]]: each critic's mean square is 1
    assert loss.item() == pytest.approx(2.0)
    assert metrics["q_mean"].item() == pytest.approx(1.5)
    assert metrics["td_error"].item() == pytest.approx(1.0)
    loss.backward()
    # d/dQ_k,b of mean_b (Q - y)**2 = 2 (Q - y) / B
    np.testing.assert_allclose(q.grad.numpy(), [[-1.0, 1.0], [1.0, -1.0]])


def test_sac_actor_loss_and_its_entropy_estimate():
    log_prob = torch.tensor([-1.0, 0.5])
    q_new = torch.tensor([[3.0, 1.0], [2.0, 4.0]])  # min over the twins: [2, 1]
    loss, metrics = sac_actor_loss(log_prob, q_new, 0.5)
    # mean [0.5 (-1) - 2, 0.5 (0.5) - 1] = mean [-2.5, -0.75]
    assert loss.item() == pytest.approx(-1.625)
    assert metrics["entropy"].item() == pytest.approx(0.25)


@pytest.mark.parametrize(
    ("log_prob", "direction"),
    [([-0.5, -1.5], "down"), ([2.0, 2.0], "up")],  # entropy 1 > -1: lower alpha; -2 < -1: raise
)
def test_temperature_moves_alpha_toward_the_target_entropy(log_prob, direction):
    log_alpha = torch.tensor(math.log(0.5), requires_grad=True)
    loss, metrics = temperature_loss(log_alpha, torch.tensor(log_prob), target_entropy=-1.0)
    loss.backward()
    # L = -log alpha * mean(log pi + H): grad = -mean(log pi + H) = 2 (first case), -3 (second)
    expected_grad = -float(np.mean(np.array(log_prob) - 1.0))
    assert log_alpha.grad.item() == pytest.approx(expected_grad)
    assert (log_alpha.grad.item() > 0) == (direction == "down")  # descent lowers log alpha
    assert metrics["alpha"].item() == pytest.approx(0.5)


def test_deterministic_actor_loss_is_minus_the_mean_q():
    loss, metrics = deterministic_actor_loss(torch.tensor([1.0, 3.0]))
    assert loss.item() == -2.0 and metrics["actor_loss"].item() == -2.0


def test_polyak_update_moves_targets_a_tau_step_toward_the_online_weights():
    target, online = [torch.zeros(3), torch.full((2,), 4.0)], [torch.ones(3), torch.zeros(2)]
    polyak_update(target, online, 0.25)
    assert target[0].tolist() == [0.25] * 3 and target[1].tolist() == [3.0, 3.0]


# ---------------------------------------------------------------------------- squashed Gaussian
def test_squashed_sample_log_prob_is_the_change_of_variables_density():
    # one dimension: pi(a) = N(atanh(a); mu, sigma**2) * |d atanh(a) / da| = N(u) / (1 - a**2)
    mean, log_std = torch.tensor([[0.3]]), torch.tensor([[math.log(0.7)]])
    a, log_prob = squashed_gaussian_sample(mean, log_std, noise=torch.tensor([[1.2]]))
    u = 0.3 + 0.7 * 1.2
    normal = math.exp(-0.5 * 1.2**2) / (0.7 * math.sqrt(2 * math.pi))
    assert a.item() == pytest.approx(math.tanh(u))
    assert log_prob.item() == pytest.approx(math.log(normal / (1 - math.tanh(u) ** 2)), rel=1e-5)


def test_squashed_sample_matches_the_core_tanh_gaussian():
    torch.manual_seed(0)
    mean, log_std = torch.randn(64, 3) * 2, torch.randn(64, 3) * 0.5
    torch.manual_seed(1)
    a, log_prob = squashed_gaussian_sample(mean, log_std)
    torch.manual_seed(1)
    a_core, log_prob_core = TanhGaussian(mean, log_std).rsample_with_log_prob()
    torch.testing.assert_close(a, a_core)
    torch.testing.assert_close(log_prob, log_prob_core)


def test_squashed_sample_is_finite_far_in_the_tails():
    a, log_prob = squashed_gaussian_sample(torch.tensor([[30.0]]), torch.tensor([[0.0]]))
    assert a.item() == 1.0 and torch.isfinite(log_prob).all()


# ---------------------------------------------------------------------------- batched critics
def _plain_mlp_q(critic: EnsembleQ, k: int, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
    """Critic ``k`` of the ensemble computed as an ordinary MLP, layer by layer."""
    h = torch.cat([obs, act], dim=-1)
    layers = list(zip(critic.weights, critic.biases, strict=True))
    for i, (w, b) in enumerate(layers):
        h = F.linear(h, w[k].T, b[k, 0])
        if i < len(layers) - 1:
            h = torch.relu(h)
    return h.squeeze(-1)


def test_ensemble_critics_equal_separate_mlps_and_differ_from_each_other():
    torch.manual_seed(0)
    critic = EnsembleQ(3, 2, (16, 8), n_critics=2)
    obs, act = torch.randn(5, 3), torch.randn(5, 2)
    q = critic(obs, act)
    assert q.shape == (2, 5)
    for k in range(2):
        torch.testing.assert_close(q[k], _plain_mlp_q(critic, k, obs, act))
    assert not torch.allclose(q[0], q[1])
    torch.testing.assert_close(critic(obs, act, first=1)[0], q[0])


def test_one_backward_pass_trains_both_critics_like_two_separate_losses():
    torch.manual_seed(1)
    critic = EnsembleQ(3, 1, (8,), n_critics=2)
    obs, act, y = torch.randn(6, 3), torch.randn(6, 1), torch.randn(6)
    twin_critic_loss(critic(obs, act), y)[0].backward()
    batched = [p.grad.clone() for p in critic.parameters()]
    critic.zero_grad()
    for k in range(2):
        ((_plain_mlp_q(critic, k, obs, act) - y) ** 2).mean().backward()
    for g_batched, p in zip(batched, critic.parameters(), strict=True):
        torch.testing.assert_close(g_batched, p.grad)


def test_frozen_critics_pass_gradients_to_the_action_only():
    critic = EnsembleQ(3, 1, (8, 8))
    action = torch.zeros(4, 1, requires_grad=True)
    critic(torch.randn(4, 3), action, frozen=True).sum().backward()
    assert action.grad is not None and action.grad.abs().sum() > 0
    assert all(p.grad is None for p in critic.parameters())


# ---------------------------------------------------------------------------- action spaces
def test_action_scaler_maps_the_unit_box_onto_the_env_bounds_and_back():
    scaler = ActionScaler([0.0, -1.0], [4.0, 1.0])
    unit = np.array([[-1.0, 0.0], [1.0, 1.0], [0.0, -0.5]], dtype=np.float32)
    env = scaler.to_env(unit)
    np.testing.assert_allclose(env, [[0.0, 0.0], [4.0, 1.0], [2.0, -0.5]])
    np.testing.assert_allclose(scaler.from_env(env), unit, atol=1e-6)


def test_discrete_actions_are_refused_with_the_methods_to_use_instead():
    with pytest.raises(EnvError, match="DQN or PPO"):
        box_action_bounds(gym.spaces.Discrete(2), "SAC", "CartPole-v1")


def test_unbounded_actions_are_refused_with_a_way_out():
    space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    with pytest.raises(EnvError, match=r"unbounded actions.*finite bounds"):
        box_action_bounds(space, "TD3", "Weird-v0")


def test_bounds_of_a_box():
    low, high = box_action_bounds(gym.spaces.Box(-2.0, 2.0, (1,), np.float32), "SAC", "P")
    assert low.tolist() == [-2.0] and high.tolist() == [2.0]
