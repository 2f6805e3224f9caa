"""AlphaZero and MuZero take the deep agents' ``device`` field (:mod:`rlx.core.devices`)."""

from __future__ import annotations

import pytest
import torch

from rlx.errors import ConfigError
from rlx.games import make
from rlx.games.alphazero import METHOD, AlphaZeroConfig
from rlx.games.selfplay import Learner

CONFIGS = ["alphazero", "muzero"]


def config_class(name):
    if name == "alphazero":
        return AlphaZeroConfig
    from rlx.games.muzero import MuZeroConfig

    return MuZeroConfig


@pytest.mark.parametrize("name", CONFIGS)
def test_the_device_field_is_checked_and_defaults_to_auto(name):
    assert config_class(name)().device == "auto"
    with pytest.raises(ConfigError, match="device='tpu' is not a device"):
        config_class(name)(device="tpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_alphazero_asks_for_its_device_when_it_builds_the_network():
    game = make("tictactoe")
    assert next(Learner.create(METHOD, game, AlphaZeroConfig(device="cpu")).net.parameters()).is_cpu
    with pytest.raises(ConfigError, match="available: cpu"):
        Learner.create(METHOD, game, AlphaZeroConfig(device="cuda"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_muzero_asks_for_its_device_when_it_builds_the_network(tmp_path):
    import rlx

    with pytest.raises(ConfigError, match="available: cpu"):
        rlx.train("muzero", "tictactoe", device="cuda", run_dir=tmp_path / "mz", progress=False)
