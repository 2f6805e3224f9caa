"""Distributed settings without Ray: bad input, seeds, the address check, the CLI's answer."""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest

from rlx import cli, registry
from rlx.agents.a2c import A2CConfig
from rlx.agents.dqn import DQNConfig
from rlx.agents.ppo import PPOConfig
from rlx.core.seeding import env_seed, runner_seeds
from rlx.distributed.netns import isolated
from rlx.distributed.ray_runtime import check_reachable, parse_address
from rlx.errors import ConfigError
from rlx.games.alphazero import AlphaZeroConfig

CONFIGS = [PPOConfig, A2CConfig, DQNConfig, AlphaZeroConfig]


def closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("runners", [0, -2])
def test_runners_below_one_is_a_clear_error(config, runners):
    with pytest.raises(ConfigError, match=rf"runners={runners} is not valid; use a whole number"):
        config(runners=runners)


@pytest.mark.parametrize("config", CONFIGS)
def test_ray_address_needs_runners(config):
    with pytest.raises(ConfigError, match=r"ray_address='10\.0\.0\.1:6379' needs runners >= 1"):
        config(ray_address="10.0.0.1:6379")


@pytest.mark.parametrize("address", ["10.0.0.1", "head:port", "ray://", ":6379", "h:70000"])
def test_malformed_address_is_a_clear_error(address):
    with pytest.raises(ConfigError, match="is not an address; use HOST:PORT"):
        PPOConfig(runners=1, ray_address=address)


def test_addresses_that_parse():
    assert parse_address("10.0.0.1:6379") == ("10.0.0.1", 6379)
    assert parse_address("ray://head.example:10001") == ("head.example", 10001)
    assert parse_address("[::1]:6379") == ("::1", 6379)
    assert parse_address("auto") is None


def test_alphazero_takes_workers_or_runners_not_both():
    with pytest.raises(ConfigError, match="workers=2 and runners=2 both ask"):
        AlphaZeroConfig(workers=2, runners=2)


def test_dqn_reward_scaling_is_refused_with_runners():
    with pytest.raises(ConfigError, match="scale_rewards=True is not supported with runners=2"):
        DQNConfig(runners=2, scale_rewards=True)


def test_ppo_minibatches_count_every_runner():
    assert PPOConfig(num_envs=4, num_steps=32, minibatch_size=64, runners=2).num_minibatches == 4
    assert PPOConfig(num_envs=4, num_steps=32, minibatch_size=64).num_minibatches == 2


def test_runner_seeds_differ_and_repeat():
    first = [env_seed(s) for s in runner_seeds(0, 4)]
    assert len(set(first)) == 4
    assert first == [env_seed(s) for s in runner_seeds(0, 4)]
    assert first != [env_seed(s) for s in runner_seeds(1, 4)]
    assert set(first).isdisjoint(env_seed(s) for s in runner_seeds(0, 4, start_step=2048))
    draws = [np.random.default_rng(s).random(3) for s in runner_seeds(0, 2)]
    assert not np.allclose(draws[0], draws[1])


def test_unreachable_address_fails_fast():
    address = f"127.0.0.1:{closed_port()}"
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match="cannot reach the Ray cluster at ray_address="):
        check_reachable(address)
    assert time.monotonic() - t0 < 5


def test_cli_runners_zero_exits_2_without_a_run_folder(tmp_path, capsys):
    run_dir = tmp_path / "run"
    code = cli.main(["train", "ppo", "--env", "CartPole-v1", "--runners", "0",
                     "--run-dir", str(run_dir)])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "runners=0 is not valid" in err and "Traceback" not in err
    assert not run_dir.exists()


def test_cli_unreachable_address_exits_2_within_seconds(tmp_path, capsys):
    run_dir = tmp_path / "run"
    t0 = time.monotonic()
    code = cli.main(["train", "ppo", "--env", "CartPole-v1", "--runners", "2", "--ray-address",
                     f"127.0.0.1:{closed_port()}", "--run-dir", str(run_dir)])  # fmt: skip
    assert code == 2 and time.monotonic() - t0 < 10
    err = capsys.readouterr().err
    assert "cannot reach the Ray cluster" in err and "Traceback" not in err
    assert not run_dir.exists()


def test_runner_flags_come_from_the_configs():
    for name in ("ppo", "a2c", "dqn", "alphazero"):
        fields = {f for f in registry.get(name).config.__dataclass_fields__}
        assert {"runners", "ray_address"} <= fields


def test_isolated_command_brings_up_only_the_loopback():
    argv = isolated(["python", "-m", "pytest", "-m", "ray and not slow"])
    assert argv[:4] == ["unshare", "--net", "sh", "-c"]
    assert argv[4] == "ip link set lo up && exec python -m pytest -m 'ray and not slow'"
