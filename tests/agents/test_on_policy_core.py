"""The shared on-policy machinery: episode accounting, env state, optimizers, numpy acting."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlx.core.env_state import env_state, restore_env_state
from rlx.core.envs import EpisodeTracker, make_vec_env
from rlx.core.optim import Adam, RMSprop, clip_grad_norm
from rlx.core.policies import ActorCritic, NumpyForward
from rlx.core.rollout_batch import prepare_batch
from rlx.core.rollouts import Collector


@pytest.mark.parametrize("steps", [5, 40])
def test_rollout_episode_accounting_matches_the_per_step_tracker(steps):
    """Returns, lengths and end steps summed once per rollout equal EpisodeTracker's."""
    collector = Collector("CartPole-v1", 4, seed=0, algo="ppo", env_id="CartPole-v1")
    policy = ActorCritic(collector.obs_dim, collector.actions, (8,))
    buffer, rng = collector.new_buffer(steps), np.random.default_rng(0)
    tracker, ours, theirs, step = EpisodeTracker(4), [], [], 0
    for _ in range(240 // steps):  # episodes run across rollout boundaries
        before = step
        step, episodes = collector.collect(policy, buffer, rng, step)
        ours += list(zip(episodes.steps, episodes.returns, episodes.lengths, strict=True))
        counted = before
        for t in range(buffer.t):
            counted += int(buffer.valid[t].sum())
            done = tracker.step(buffer.rewards[t], buffer.terminated[t], buffer.truncated[t],
                                buffer.valid[t])  # fmt: skip
            theirs += [(counted, r, n) for r, n in zip(done.returns, done.lengths, strict=True)]
    assert len(ours) > 10
    assert ours == theirs
    assert step == counted


def test_next_step_reset_rows_are_invalid_and_final_observations_bootstrap():
    collector = Collector("CartPole-v1", 2, seed=1, algo="ppo", env_id="CartPole-v1")
    policy = ActorCritic(collector.obs_dim, collector.actions, (8,))
    buffer = collector.new_buffer(200)
    collector.collect(policy, buffer, np.random.default_rng(0), 0)
    done = buffer.terminated | buffer.truncated
    t, n = np.nonzero(done[:-1])
    assert len(t) > 0
    assert not buffer.valid[t + 1, n].any()  # the step after a done only resets
    assert buffer.valid[~np.roll(done, 1, axis=0)].all()
    # the row after a done holds the true final observation: CartPole ends out of bounds
    final = buffer.obs[t + 1, n]
    assert np.all((np.abs(final[:, 0]) > 2.4) | (np.abs(final[:, 2]) > 0.2094))
    batch = prepare_batch(buffer, policy, collector.last_obs, 0.99, 0.95)
    assert len(batch) == int(buffer.valid.sum())


@pytest.mark.parametrize("env_id, mode", [("CartPole-v1", "auto"), ("Pendulum-v1", "sync")])
def test_env_state_round_trip_continues_exactly(env_id, mode):
    a = make_vec_env(env_id, 3, vectorization=mode)
    a.reset(seed=0)
    actions = [a.action_space.sample() for _ in range(40)]
    for action in actions[:15]:
        a.step(action)
    saved = env_state(a)
    b = make_vec_env(env_id, 3, vectorization=mode)
    b.reset(seed=123)
    restore_env_state(b, saved)
    for action in actions[15:]:
        out_a, out_b = a.step(action), b.step(action)
        for x, y in zip(out_a[:4], out_b[:4], strict=True):
            np.testing.assert_array_equal(x, y)


def test_env_state_of_an_async_vector_env_is_none():
    env = gym.vector.AsyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2)
    try:
        assert env_state(env) is None
    finally:
        env.close()


def test_adam_equals_torch_fused_adam_step_by_step():
    torch.manual_seed(0)
    nets = [torch.nn.Linear(3, 2) for _ in range(2)]
    nets[1].load_state_dict(nets[0].state_dict())
    ours = Adam(nets[0].parameters(), lr=1e-2)
    ref = torch.optim.Adam(nets[1].parameters(), lr=1e-2, eps=1e-5, fused=True)
    x = torch.randn(5, 3)
    for _ in range(5):
        for net, opt in ((nets[0], ours), (nets[1], ref)):
            opt.zero_grad()
            net(x).square().sum().backward()
            opt.step()
    for p, q in zip(nets[0].parameters(), nets[1].parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    restored = Adam(nets[0].parameters(), lr=1.0)
    restored.load_state_dict(ours.state_dict())
    assert restored.lr == 1e-2 and torch.equal(restored.steps[0], ours.steps[0])


def test_rmsprop_equals_torch_rmsprop():
    torch.manual_seed(0)
    nets = [torch.nn.Linear(3, 2) for _ in range(2)]
    nets[1].load_state_dict(nets[0].state_dict())
    ours = RMSprop(nets[0].parameters(), lr=1e-2)
    ref = torch.optim.RMSprop(nets[1].parameters(), lr=1e-2, alpha=0.99, eps=1e-5)
    x = torch.randn(5, 3)
    for _ in range(5):
        for net, opt in ((nets[0], ours), (nets[1], ref)):
            opt.zero_grad()
            net(x).square().sum().backward()
            opt.step()
    for p, q in zip(nets[0].parameters(), nets[1].parameters(), strict=True):
        torch.testing.assert_close(p, q)


def test_clip_grad_norm_equals_torch():
    torch.manual_seed(0)
    net = torch.nn.Linear(4, 3)
    net(torch.randn(8, 4)).square().sum().backward()
    grads = [p.grad.clone() for p in net.parameters()]
    norm = clip_grad_norm(list(net.parameters()), 0.5)
    clipped = [p.grad.clone() for p in net.parameters()]
    for p, g in zip(net.parameters(), grads, strict=True):
        p.grad = g.clone()
    ref = torch.nn.utils.clip_grad_norm_(list(net.parameters()), 0.5)
    torch.testing.assert_close(norm, ref)
    for p, c in zip(net.parameters(), clipped, strict=True):
        torch.testing.assert_close(p.grad, c)


@pytest.mark.parametrize("activation", ["tanh", "relu"])
@pytest.mark.parametrize("hidden", [(), (16,), (16, 8)])
def test_numpy_acting_equals_torch(activation, hidden):
    policy = ActorCritic(5, {"n": 3}, hidden, activation=activation)
    x = np.random.default_rng(0).normal(size=(7, 5)).astype(np.float32)
    with torch.no_grad():
        expected = policy.actor(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(NumpyForward(policy.actor)(x), expected, rtol=1e-5, atol=1e-6)


def test_sampling_follows_the_policy():
    policy = ActorCritic(2, {"n": 3}, ())
    with torch.no_grad():
        policy.actor.weight.copy_(torch.tensor([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]]))
    obs = np.tile(np.array([[1.0, 0.0]], dtype=np.float32), (60_000, 1))
    actions = policy.sample(obs, np.random.default_rng(0))
    expected = np.exp([0.0, 1.0, 2.0]) / np.exp([0.0, 1.0, 2.0]).sum()
    np.testing.assert_allclose(
        np.bincount(actions, minlength=3) / len(actions), expected, atol=0.01
    )
