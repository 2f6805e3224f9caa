"""Running statistics, observation normalisation, reward scaling, RNG state round trips."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from rlx.core.normalize import ObsNormalizer, RewardScaler, RunningMeanStd
from rlx.core.seeding import rng_state, seed_everything, set_rng_state


def test_running_mean_std_equals_numpy_over_all_batches():
    data = np.random.default_rng(0).normal(3.0, 2.0, size=(1000, 3))
    rms = RunningMeanStd((3,), epsilon=0.0)
    for chunk in np.array_split(data, 17):
        rms.update(chunk)
    assert np.allclose(rms.mean, data.mean(axis=0))
    assert np.allclose(rms.var, data.var(axis=0))
    rms.update(np.zeros((0, 3)))  # an empty batch changes nothing
    assert rms.count == 1000


def test_obs_normalizer_round_trips_its_state():
    norm = ObsNormalizer((2,))
    norm.update(np.random.default_rng(1).normal(5.0, 3.0, size=(500, 2)))
    z = norm(np.array([[5.0, 5.0]]))
    assert np.abs(z).max() < 0.2 and z.dtype == np.float32
    other = ObsNormalizer((2,))
    other.load_state_dict(norm.state_dict())
    x = np.array([[1.0, 9.0]])
    assert np.array_equal(other(x), norm(x))


def test_reward_scaler_divides_by_the_std_of_the_discounted_return():
    scaler = RewardScaler(num_envs=1, gamma=0.0)  # gamma 0: the return is the reward itself
    rewards = np.random.default_rng(2).normal(0.0, 4.0, size=5000)
    for r in rewards:
        scaler.update(np.array([r]), np.array([False]), np.array([True]))
    assert scaler.scale == pytest.approx(1 / 4.0, rel=0.05)
    assert np.sign(scaler(np.array([-3.0, 2.0]))).tolist() == [-1.0, 1.0]


def test_rng_state_restores_numpy_torch_and_python_streams():
    rng = seed_everything(7)
    state = rng_state(rng)
    first = (rng.random(3), torch.rand(3), random.random())
    rng2 = seed_everything(99)
    set_rng_state(state, rng2)
    again = (rng2.random(3), torch.rand(3), random.random())
    assert np.array_equal(first[0], again[0])
    assert torch.equal(first[1], again[1]) and first[2] == again[2]
