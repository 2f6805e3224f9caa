"""ortho_init: orthogonal weights by default (SB3's ortho_init=True), PyTorch's default
initialisation with ortho_init=False (what rl-baselines3-zoo sets for PPO and A2C on some
envs), recorded in the checkpoint's architecture so the agent rebuilds the same network."""

from __future__ import annotations

import math

import pytest
import torch

import rlx
from rlx.core.policies import ActorCritic

BOX = {"kind": "box", "shape": [1], "low": [-1.0], "high": [1.0]}


def hidden_weight(policy: ActorCritic) -> torch.Tensor:
    return policy.actor.layers[1].weight.detach()


def test_orthogonal_by_default_and_pytorchs_default_when_off():
    torch.manual_seed(0)
    ortho = ActorCritic(3, BOX, (64, 64))
    w = hidden_weight(ortho)
    torch.testing.assert_close(w @ w.T, 2.0 * torch.eye(64), atol=1e-4, rtol=0)  # gain sqrt(2)
    assert "ortho_init" not in ortho.architecture  # older checkpoints rebuild as they were
    torch.manual_seed(0)
    plain = ActorCritic(3, BOX, (64, 64), ortho_init=False)
    w = hidden_weight(plain)
    # nn.Linear's own: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) weights and biases, none zero
    assert w.abs().max() <= 1 / math.sqrt(64) and not torch.allclose(w @ w.T, 2 * torch.eye(64))
    assert plain.actor.layers[1].bias.abs().sum() > 0
    assert plain.architecture["ortho_init"] is False


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_the_field_reaches_the_network_and_the_checkpoint(algo, tmp_path):
    extra = {"minibatch_size": 16} if algo == "ppo" else {}
    agent = rlx.train(algo, "Pendulum-v1", ortho_init=False, total_steps=64, num_envs=2,
                      num_steps=16, hidden_sizes=(8,), run_dir=tmp_path / algo, progress=False,
                      doctor=False, eval_episodes=1, **extra)  # fmt: skip
    loaded = rlx.load(tmp_path / algo)
    assert loaded.policy.architecture["ortho_init"] is False
    for a, b in zip(agent.policy.parameters(), loaded.policy.parameters(), strict=True):
        torch.testing.assert_close(a, b)
