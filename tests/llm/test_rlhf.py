"""RLHF-PPO: the per-token reward, token GAE, the value loss and the KL controller against
hand-worked numbers; a short run logs every metric; bad input is one clear error."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("transformers")

import torch

from rlx import llm
from rlx.core.policy_losses import value_loss
from rlx.errors import ConfigError
from rlx.llm.stages import rlhf as R

TINY = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "max_length": 32}


def test_per_token_reward_is_the_kl_penalty_plus_the_score_at_the_last_token():
    logp = torch.tensor([[-9.0, -1.0, -2.0, -0.5, 0.0], [-9.0, -0.3, -0.7, 0.0, 0.0]])
    ref = torch.tensor([[-9.0, -1.5, -1.0, -0.5, 0.0], [-9.0, -0.1, -0.2, 0.0, 0.0]])
    mask = torch.tensor([[0, 1, 1, 1, 0], [0, 1, 1, 0, 0]], dtype=torch.bool)
    scores = torch.tensor([2.0, -1.0])
    beta = 0.1
    rewards = R.per_token_rewards(logp, ref, scores, mask, beta)
    expected = torch.tensor(
        [
            [0.0, -0.1 * 0.5, -0.1 * -1.0, -0.1 * 0.0 + 2.0, 0.0],
            [0.0, -0.1 * -0.2, -0.1 * -0.5 - 1.0, 0.0, 0.0],
        ]
    )
    torch.testing.assert_close(rewards, expected)
    # the sum over tokens is the sequence's R - beta * KL (summed log-ratio)
    kl = ((logp - ref) * mask).sum(-1)
    torch.testing.assert_close(rewards.sum(-1), scores - beta * kl)


def test_token_gae_equals_the_direct_sum():
    rng = np.random.default_rng(0)
    B, T = 3, 7
    rewards = torch.tensor(rng.normal(size=(B, T)), dtype=torch.float64)
    values = torch.tensor(rng.normal(size=(B, T)), dtype=torch.float64)
    mask = torch.zeros(B, T, dtype=torch.bool)
    spans = [(2, 6), (1, 2), (3, 7)]  # each row's completion tokens [start, end)
    for row, (a, b) in enumerate(spans):
        mask[row, a:b] = True
    gamma, lam = 0.9, 0.8
    adv, ret = R.token_advantages(rewards * mask, values, mask, gamma, lam)
    for row, (a, b) in enumerate(spans):
        r, v = rewards[row].numpy(), values[row].numpy()
        for t in range(a, b):
            direct = 0.0
            for k in range(t, b):
                next_v = v[k + 1] if k + 1 < b else 0.0  # V after the last token is 0
                delta = r[k] + gamma * next_v - v[k]
                direct += (gamma * lam) ** (k - t) * delta
            assert adv[row, t].item() == pytest.approx(direct, abs=1e-12)
            assert ret[row, t].item() == pytest.approx(direct + v[t], abs=1e-12)
        assert adv[row, ~mask[row]].abs().sum() == 0
    # lambda = 1, gamma = 1: the advantage is the return-to-go minus V
    adv1, _ = R.token_advantages(rewards * mask, values, mask, 1.0, 1.0)
    a, b = spans[0]
    togo = rewards[0, a:b].flip(0).cumsum(0).flip(0)
    torch.testing.assert_close(adv1[0, a:b], togo - values[0, a:b])


def test_clipped_value_loss_by_hand():
    values = torch.tensor([[1.0, 0.0]])
    old = torch.tensor([[0.5, 0.0]])
    returns = torch.tensor([[0.0, 2.0]])
    mask = torch.tensor([[True, True]])
    # token 0: (1-0)^2 = 1 vs clipped V 0.7 -> 0.49: max 1. token 1: (0-2)^2 = 4 both ways
    loss, _ = value_loss(values, returns, old, 0.2, mask=mask)
    assert loss.item() == pytest.approx(0.5 * (1.0 + 4.0) / 2)
    # when clipping makes the error bigger it is the one taken (the pessimistic bound)
    one = torch.tensor([[1.0]])
    loss, _ = value_loss(0.1 * one, 0.0 * one, one, 0.2, mask=one.bool())
    assert loss.item() == pytest.approx(0.5 * 0.8**2)


def test_adaptive_kl_controller_by_hand():
    c = R.AdaptiveKLController(beta=0.1, target=6.0, horizon=1000)
    assert c.update(kl=12.0, n=100) == pytest.approx(0.1 * (1 + 0.2 * 0.1))  # error clipped
    c = R.AdaptiveKLController(beta=0.1, target=6.0, horizon=1000)
    assert c.update(kl=5.4, n=100) == pytest.approx(0.1 * (1 - 0.1 * 0.1))


def test_whiten_uses_only_the_masked_entries():
    x = torch.tensor([[1.0, 2.0, 100.0], [3.0, 4.0, -50.0]])
    mask = torch.tensor([[True, True, False], [True, True, False]])
    w = R.whiten(x, mask)
    vals = w[mask]
    assert vals.mean().abs() < 1e-6 and (vals.pow(2).mean() - 1).abs() < 1e-4
    assert (w[~mask] == 0).all()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("rlhf")
    rows = llm.arithmetic(40, seed=0)
    llm.write_jsonl(root / "prompts.jsonl", rows)
    llm.write_jsonl(root / "prefs.jsonl", llm.arithmetic_preferences(100, seed=1))
    model = llm.make_tiny_lm(root / "tiny", texts=llm.task_texts(rows), **TINY)
    rm = llm.reward_model(model, root / "prefs.jsonl", run_dir=root / "rm", steps=3,
                          kind="bow", progress=False)  # fmt: skip
    return root, model, rm.model_dir


def test_a_short_run_logs_the_rlhf_metrics_and_saves_the_policy(tiny, tmp_path):
    root, model, rm = tiny
    result = llm.rlhf(model, root / "prompts.jsonl", reward_model=rm, run_dir=tmp_path / "r",
                      steps=3, batch_size=4, minibatch_size=2, max_new_tokens=4,
                      progress=False)  # fmt: skip
    rows = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    for key in ("kl_ref", "rm_score", "reward", "gold_reward", "response_length", "approx_kl",
                "clip_fraction", "entropy", "value_loss", "policy_loss", "beta",
                "explained_variance"):  # fmt: skip
        assert key in rows[0], key
    assert all(r["explained_variance"] <= 1.0 for r in rows)
    # the folder holds the trained policy (not the start model, no value head) as a plain LM
    from transformers import AutoModelForCausalLM

    saved = AutoModelForCausalLM.from_pretrained(result.model_dir).state_dict()
    start = AutoModelForCausalLM.from_pretrained(model).state_dict()
    assert saved.keys() == start.keys()
    assert any(not torch.equal(saved[k], start[k]) for k in saved)
    # kl_ref, a KL (k3 terms): exactly 0 while the policy is the reference (step 1 samples
    # before any update), then strictly positive as the updated policy differs from the frozen
    # reference (a reference that followed the policy would stay at 0)
    assert rows[0]["kl_ref"] == 0.0
    assert all(r["kl_ref"] > 0.0 for r in rows[1:]), [r["kl_ref"] for r in rows]


def test_prompts_without_answers_run_without_the_gold_reward(tiny, tmp_path):
    _, model, rm = tiny
    llm.write_jsonl(tmp_path / "p.jsonl", [{"prompt": "12+34="}, {"prompt": "50+50="}])
    llm.rlhf(model, tmp_path / "p.jsonl", reward_model=rm, run_dir=tmp_path / "r", steps=1,
             batch_size=2, max_new_tokens=3, eval_fraction=0.0, progress=False)  # fmt: skip
    row = json.loads((tmp_path / "r" / "metrics.jsonl").read_text().splitlines()[0])
    assert "gold_reward" not in row and "rm_score" in row


def test_interrupted_and_resumed_equals_uninterrupted(tiny, tmp_path, monkeypatch):
    """Sampling, rewards, the value head and beta continue exactly: same final weights."""
    import rlx

    root, model, rm = tiny
    common = dict(reward_model=rm, steps=4, batch_size=4, max_new_tokens=3, learning_rate=1e-3,
                  adaptive_kl=True, eval_exact_match=False, progress=False)  # fmt: skip
    llm.rlhf(model, root / "prompts.jsonl", run_dir=tmp_path / "whole", **common)
    log = rlx.runs.Run.log

    def log_then_stop(self, step, metrics):
        values = log(self, step, metrics)
        self.stop_requested = self.stop_requested or step == 2
        return values

    with monkeypatch.context() as patch:
        patch.setattr(rlx.runs.Run, "log", log_then_stop)
        part = llm.rlhf(model, root / "prompts.jsonl", run_dir=tmp_path / "part", **common)
    assert part.status == "interrupted"
    llm.rlhf("", root / "prompts.jsonl", reward_model="", run_dir=tmp_path / "part",
             resume=True, progress=False)  # fmt: skip
    a = torch.load(tmp_path / "whole" / "checkpoints" / "latest", weights_only=True)
    b = torch.load(tmp_path / "part" / "checkpoints" / "latest", weights_only=True)
    assert a["step"] == b["step"] == 4
    assert a["state"]["beta"] == pytest.approx(b["state"]["beta"]) and a["state"]["beta"] != 0.05
    for key, value in a["state"]["model"].items():
        torch.testing.assert_close(value, b["state"]["model"][key], rtol=0, atol=1e-6)


def test_bad_input_is_one_clear_error(tiny, tmp_path):
    root, model, rm = tiny
    data = root / "prompts.jsonl"
    with pytest.raises(ConfigError, match="needs reward_model="):
        llm.rlhf(model, data, reward_model="", run_dir=tmp_path / "a", steps=1)
    with pytest.raises(ConfigError, match="max_new_tokens=0"):
        llm.rlhf(model, data, reward_model=rm, run_dir=tmp_path / "b", max_new_tokens=0)
    with pytest.raises(ConfigError, match="context"):
        llm.rlhf(model, data, reward_model=rm, run_dir=tmp_path / "c", max_new_tokens=10_000)
    with pytest.raises(ConfigError, match="does not exist"):
        llm.rlhf(model, data, reward_model=tmp_path / "nope", run_dir=tmp_path / "d", steps=1)


def test_cli_rlhf_stage_and_pipeline_errors(tiny, tmp_path, capsys):
    from rlx.cli import main

    root, model, rm = tiny
    code = main(["align", "rlhf", "--model", str(model), "--data", str(root / "prompts.jsonl"),
                 "--reward-model", str(rm), "--run-dir", str(tmp_path / "r"), "--steps", "1",
                 "--batch-size", "2", "--max-new-tokens", "3"])  # fmt: skip
    assert code == 0 and (tmp_path / "r" / "model" / "config.json").is_file()
    assert main(["align", "rlhf", "--task", "chess", "--run-dir", str(tmp_path / "p")]) == 2
    assert "unknown rlhf task 'chess'; valid tasks: arithmetic, length-biased" in (
        capsys.readouterr().err
    )


def test_ppo_learns_what_the_reward_rewards(tiny, tmp_path, monkeypatch, train_seed):
    """A reward for completions that start with '7' (about 1 in 20 at random init): PPO with
    per-token GAE must make it most of them; a sign error or a misaligned value/log-prob index
    goes nowhere."""
    from rlx.llm import rewards

    root, model, _ = tiny

    def starts_with_seven(prompts, completions, **kw):
        return [1.0 if c.startswith("7") else 0.0 for c in completions]

    monkeypatch.setitem(rewards.REWARDS, "starts-with-7", starts_with_seven)
    llm.rlhf(model, root / "prompts.jsonl", reward_model="starts-with-7", run_dir=tmp_path / "r",
             steps=40, batch_size=16, max_new_tokens=3, learning_rate=3e-3, beta=0.0,
             eval_exact_match=False, progress=False, seed=train_seed)  # fmt: skip
    rows = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    first = np.mean([r["rm_score"] for r in rows[:2]])  # sampled before the updates
    last = np.mean([r["rm_score"] for r in rows[-5:]])
    assert first < 0.2 and last > 0.9, (first, last)


def test_align_rlhf_help_names_the_command(capsys):
    from rlx.cli import main

    with pytest.raises(SystemExit):
        main(["align", "rlhf", "--help"])
    assert capsys.readouterr().out.startswith("usage: rlx align rlhf [")
