"""Devices: the ``device`` field, its one resolver, and checkpoints that load on any device."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rlx
from rlx.agents.dqn import DQNConfig
from rlx.agents.ppo import PPOConfig
from rlx.core.devices import available_devices, resolve_device
from rlx.errors import ConfigError, RLXError
from rlx.runs import load_checkpoint
from tests.agents.pg_helpers import metric_rows, train

NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
PPO = {"num_envs": 4, "num_steps": 32, "minibatch_size": 64, "num_epochs": 2}


@NO_CUDA
def test_auto_is_the_cpu_without_an_accelerator():
    if "mps" in available_devices():
        pytest.skip("this machine has MPS")
    assert resolve_device("auto") == torch.device("cpu")
    assert available_devices() == ["cpu"]


@NO_CUDA
@pytest.mark.parametrize("name", ["cuda", "cuda:1"])
def test_a_missing_accelerator_is_one_sentence_naming_what_there_is(name):
    with pytest.raises(RLXError, match=rf"device='{name}' asks for .*available: cpu\)"):
        resolve_device(name)


@NO_CUDA
def test_training_on_a_missing_device_fails_before_it_starts(tmp_path):
    # a config naming CUDA reads on any machine; training asks for the device
    assert PPOConfig(device="cuda").device == "cuda"
    with pytest.raises(ConfigError, match="available: cpu"):
        train("ppo", "CartPole-v1", tmp_path, total_steps=128, device="cuda", **PPO)


@pytest.mark.parametrize("config", [PPOConfig, DQNConfig])
def test_a_device_name_torch_does_not_know_is_a_config_error(config):
    with pytest.raises(ConfigError, match="device='gpu' is not a device; use one of auto, cpu"):
        config(device="gpu")


@NO_CUDA
@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_auto_trains_exactly_as_the_cpu_here(tmp_path, algo):
    if resolve_device("auto").type != "cpu":
        pytest.skip("auto is an accelerator here")
    options = PPO if algo == "ppo" else {"learning_starts": 100, "log_every": 100}
    for device in ("cpu", "auto"):
        train(algo, "CartPole-v1", tmp_path / device, total_steps=512, device=device, **options)
    assert metric_rows(tmp_path / "cpu") == metric_rows(tmp_path / "auto")


@pytest.mark.parametrize("algo", ["ppo", "dqn", "sac"])
def test_a_checkpoint_loads_onto_the_cpu_with_map_location(tmp_path, algo):
    env = "Pendulum-v1" if algo == "sac" else "CartPole-v1"
    options = {"ppo": PPO, "dqn": {"learning_starts": 50}, "sac": {"learning_starts": 50}}[algo]
    agent = train(algo, env, tmp_path, total_steps=200, device="cpu", **options)
    path = tmp_path / "checkpoints" / "latest"
    raw = torch.load(path, map_location=torch.device("cpu"), weights_only=True)
    tensors = [t for t in _tensors(raw)]
    assert tensors and all(t.device.type == "cpu" for t in tensors)
    _, state = load_checkpoint(path)
    loaded = rlx.load(tmp_path)
    obs = np.asarray(rlx.core.envs.make_env(env).reset(seed=1)[0])
    np.testing.assert_array_equal(loaded.act(obs), agent.act(obs))
    assert state["step"] >= 200


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)
