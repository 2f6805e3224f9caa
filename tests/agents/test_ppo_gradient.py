"""PPO's gradient backends (``PPOConfig.gradient``): the hand-written numpy gradient and
autograd give the same update, the choice is made once per run and named in its
``config.json``, and ``numpy`` asked where it cannot apply is one clear sentence."""

from __future__ import annotations

import copy
import functools
import json
import re

import numpy as np
import pytest
import torch

import rlx
from rlx import metrics as M
from rlx.agents import ppo
from rlx.core.optim import Adam
from rlx.core.policies import ActorCritic
from rlx.core.policy_losses import normalize
from rlx.core.rollout_batch import RolloutBatch
from rlx.errors import ConfigError
from tests.agents.pg_helpers import metric_rows, summary, train
from tests.agents.test_engines import InProcessRunners

SMALL = {"num_envs": 4, "num_steps": 32, "minibatch_size": 64, "num_epochs": 2}
MASKED = "tests.agents.space_envs:MaskedChoice"


def recorded_gradient(run_dir) -> str:
    return json.loads((run_dir / "config.json").read_text())["config"]["gradient"]


def one_sentence(text: str) -> bool:
    return "\n" not in text and text.endswith(".") and not re.search(r"\.\s+[A-Z]", text)


def minibatch(B: int = 64) -> tuple[ActorCritic, RolloutBatch]:
    """test_policy_math's setup: a float64 policy moved away from its near-uniform start and
    old log-probs off its own, so that some ratios are clipped."""
    torch.manual_seed(0)
    policy = ActorCritic(4, {"n": 3}, (16, 8)).double()
    for p in policy.parameters():
        p.data.add_(0.3 * torch.randn_like(p))
    obs = torch.randn(B, 4, dtype=torch.float64)
    actions = torch.randint(0, 3, (B,))
    with torch.no_grad():
        log_probs = policy.log_prob_entropy(obs, actions)[0] + 0.3 * torch.randn(B).double()
    batch = RolloutBatch(obs, actions, log_probs, torch.randn(B).double(),
                         normalize(torch.randn(B).double()), torch.randn(B).double(),
                         0.0)  # fmt: skip
    return policy, batch


# ---------------------------------------------------------------------------- the two backends
def test_both_backends_take_the_same_gradient_step_on_one_minibatch(monkeypatch):
    """One epoch of one minibatch through ``update`` under each backend: the gradients handed
    to the optimizer, the metrics and the parameters after the step agree up to rounding."""
    policy, batch = minibatch()
    taken: dict[str, list[torch.Tensor]] = {}
    step = ppo.gradient_step

    def recording(backend, optimizer, loss, params, max_grad_norm):
        if isinstance(loss, torch.Tensor):  # autograd's loss: its gradients, graph kept
            taken[backend] = list(torch.autograd.grad(loss, params, retain_graph=True))
        else:  # the hand-written gradients themselves
            taken[backend] = [g.clone() for g in loss]
        return step(optimizer, loss, params, max_grad_norm)

    results, after = {}, {}
    for backend in ("numpy", "autograd"):
        config = ppo.PPOConfig(num_envs=2, num_steps=32, minibatch_size=64, num_epochs=1,
                               max_grad_norm=None, gradient=backend)  # fmt: skip
        net = copy.deepcopy(policy)
        monkeypatch.setattr(ppo, "gradient_step", functools.partial(recording, backend))
        results[backend] = ppo.update(
            net, Adam(net.parameters(), 1e-3), batch, config, np.random.default_rng(0)
        )
        after[backend] = [p.detach().clone() for p in net.parameters()]
    assert results["autograd"][M.CLIP_FRACTION].item() > 0  # the clipped branch is exercised
    for hand, auto in zip(taken["numpy"], taken["autograd"], strict=True):
        torch.testing.assert_close(hand, auto, rtol=1e-6, atol=1e-9)
    for hand, auto in zip(after["numpy"], after["autograd"], strict=True):
        torch.testing.assert_close(hand, auto, rtol=1e-6, atol=1e-9)
    assert results["numpy"].keys() == results["autograd"].keys()
    for key, value in results["autograd"].items():
        torch.testing.assert_close(results["numpy"][key], value, rtol=1e-6, atol=1e-9)


def test_the_backend_is_chosen_in_one_place():
    policy, _ = minibatch()
    auto, numpy_, autograd = (ppo.PPOConfig(gradient=g) for g in ("auto", "numpy", "autograd"))
    assert ppo.gradient_backend(policy, auto, masked=False) == "numpy"
    assert ppo.gradient_backend(policy, auto, masked=True) == "autograd"
    assert ppo.gradient_backend(policy, numpy_, masked=False) == "numpy"
    assert ppo.gradient_backend(policy, autograd, masked=False) == "autograd"
    clipped = ppo.PPOConfig(clip_value=0.2)
    assert ppo.gradient_backend(policy, clipped, masked=False) == "autograd"
    box = {"low": np.full(1, -2.0, np.float32), "high": np.full(1, 2.0, np.float32)}
    continuous = ActorCritic(3, box, (16,))
    assert ppo.gradient_backend(continuous, auto, masked=False) == "autograd"
    with pytest.raises(ConfigError, match="env gives action masks"):
        ppo.gradient_backend(policy, numpy_, masked=True)


def test_update_refuses_a_masked_batch_under_numpy_rather_than_switch():
    policy, batch = minibatch()
    batch.masks = torch.ones(len(batch), 3, dtype=torch.bool)
    config = ppo.PPOConfig(num_envs=2, num_steps=32, minibatch_size=64, gradient="numpy")
    with pytest.raises(ConfigError, match=r"action masks.*gradient='autograd'"):
        ppo.update(policy, Adam(policy.parameters(), 1e-3), batch, config,
                   np.random.default_rng(0))  # fmt: skip


# ---------------------------------------------------------------------------- the config
def test_an_unknown_backend_is_one_clear_sentence():
    with pytest.raises(ConfigError) as info:
        ppo.PPOConfig(gradient="jax")
    message = str(info.value)
    assert "gradient='jax'" in message and "'auto', 'autograd', 'numpy'" in message
    assert one_sentence(message)


@pytest.mark.parametrize(
    "env, options, why",
    [("Pendulum-v1", {}, "not discrete"), ("CartPole-v1", {"clip_value": 0.2}, "clip_value=0.2"),
     (MASKED, {}, "action masks")],
    ids=["continuous", "value-clipping", "masks"],
)  # fmt: skip
def test_numpy_where_it_cannot_apply_is_refused_with_the_reason(tmp_path, env, options, why):
    with pytest.raises(ConfigError) as info:
        train("ppo", env, tmp_path / "run", total_steps=256, gradient="numpy", **SMALL, **options)
    message = str(info.value)
    assert "gradient='numpy'" in message and why in message and "gradient='autograd'" in message
    assert one_sentence(message)
    assert not (tmp_path / "run" / "metrics.jsonl").exists() or not metric_rows(tmp_path / "run")


# ---------------------------------------------------------------------------- runs name it
@pytest.mark.parametrize(
    "env, asked, used",
    [("CartPole-v1", "auto", "numpy"), ("Pendulum-v1", "auto", "autograd"),
     ("CartPole-v1", "autograd", "autograd"), (MASKED, "auto", "autograd")],
)  # fmt: skip
def test_a_run_records_the_backend_it_used(tmp_path, env, asked, used):
    options = {} if asked == "auto" else {"gradient": asked}  # auto: the default
    agent = train("ppo", env, tmp_path / "run", total_steps=256, **SMALL, **options)
    assert summary(tmp_path / "run")["status"] == "completed"
    assert recorded_gradient(tmp_path / "run") == used
    assert agent.config.gradient == used
    assert all(np.isfinite(row[M.POLICY_LOSS]) for row in metric_rows(tmp_path / "run"))


def test_a_resumed_run_keeps_the_recorded_backend(tmp_path):
    train("ppo", "CartPole-v1", tmp_path / "run", total_steps=128, **SMALL)
    assert recorded_gradient(tmp_path / "run") == "numpy"
    rlx.train("ppo", "CartPole-v1", run_dir=tmp_path / "run", resume=True, total_steps=256,
              progress=False)  # fmt: skip
    assert summary(tmp_path / "run")["steps"] >= 256
    assert recorded_gradient(tmp_path / "run") == "numpy"


# ---------------------------------------------------------------------------- env runners
@pytest.fixture
def in_process_runners(monkeypatch) -> InProcessRunners:
    """``rlx.train(..., runners=K)`` with the runners built in this process instead of Ray."""
    import rlx.distributed

    runners = InProcessRunners()
    monkeypatch.setattr(
        rlx.distributed, "scaled_out", lambda spec: functools.partial(spec.train, remote=runners)
    )
    return runners


RUNNERS = {"runners": 2, "num_envs": 2, "num_steps": 16, "minibatch_size": 32, "num_epochs": 2}


@pytest.mark.parametrize("env, used", [("CartPole-v1", "numpy"), (MASKED, "autograd")])
def test_with_env_runners_auto_is_resolved_once_their_masks_are_known(
    tmp_path, in_process_runners, env, used
):
    """Env runners say whether the env gives masks only in their fragments: ``auto`` is
    resolved after the first rollout, before the first update."""
    train("ppo", env, tmp_path / "run", total_steps=256, **RUNNERS)
    assert summary(tmp_path / "run")["status"] == "completed"
    assert recorded_gradient(tmp_path / "run") == used


def test_with_env_runners_numpy_on_a_masked_env_is_refused(tmp_path, in_process_runners):
    with pytest.raises(ConfigError, match=r"gradient='numpy'.*action masks"):
        train("ppo", MASKED, tmp_path / "run", total_steps=256, gradient="numpy", **RUNNERS)
