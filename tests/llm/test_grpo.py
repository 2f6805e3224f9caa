"""GRPO: group advantages and the token loss against hand-worked numbers, the zero-spread
group gives no gradient, the token loss is PPO's surrogate on the masked tokens, bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

pytest.importorskip("transformers")

import torch

from rlx import llm
from rlx.core.policy_losses import clipped_surrogate
from rlx.errors import ConfigError
from rlx.llm.models import frozen_copy
from rlx.llm.online import RewardFunctionError
from rlx.llm.stages import grpo as G
from rlx.llm.training import StageData, resolved

TINY = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "max_length": 32}


def test_group_advantages_match_hand_numbers():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 2.0, 2.0, 2.0, 2.0])
    adv = G.group_advantages(rewards, 4)
    # group 1: mean 0.5, population std 0.5 -> (+1, -1, -1, +1) (up to the 1e-4 guard)
    expected = torch.tensor([1.0, -1.0, -1.0, 1.0]) * 0.5 / (0.5 + 1e-4)
    torch.testing.assert_close(adv[:4], expected)
    assert torch.equal(adv[4:], torch.zeros(4))  # identical rewards: no advantage at all
    torch.testing.assert_close(G.group_advantages(rewards, 4, scale=False)[:4],
                               torch.tensor([0.5, -0.5, -0.5, 0.5]))  # fmt: skip


def test_a_group_with_identical_rewards_gives_no_gradient():
    logp = torch.randn(4, 5, requires_grad=True)
    adv = G.group_advantages(torch.full((4,), 3.0), 4)
    mask = torch.ones(4, 5, dtype=torch.bool)
    loss, _ = clipped_surrogate(logp, logp.detach(), adv, 0.2, mask=mask,
                                aggregation="sequence")  # fmt: skip
    loss.backward()
    assert torch.equal(logp.grad, torch.zeros_like(logp))


def test_token_loss_equals_ppo_clipped_surrogate_on_the_masked_tokens():
    torch.manual_seed(0)
    logp = torch.randn(3, 6, requires_grad=True)
    old = logp.detach() + 0.3 * torch.randn(3, 6)
    adv = torch.tensor([1.5, -0.7, 0.2])
    mask = torch.tensor([[0, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 1], [0, 1, 1, 0, 0, 0]]).bool()
    ours, metrics = clipped_surrogate(logp, old, adv, 0.2, mask=mask,
                                      aggregation="token")  # fmt: skip
    flat_adv = adv.unsqueeze(-1).expand(3, 6)[mask]
    ppo, ppo_metrics = clipped_surrogate(logp[mask], old[mask], flat_adv, 0.2)
    torch.testing.assert_close(ours, ppo)
    torch.testing.assert_close(metrics["clip_fraction"], ppo_metrics["clip_fraction"])
    g_ours = torch.autograd.grad(ours, logp)[0]
    g_ppo = torch.autograd.grad(ppo, logp)[0]
    torch.testing.assert_close(g_ours, g_ppo)


def test_sequence_aggregation_weighs_each_completion_equally():
    logp = torch.zeros(2, 4, requires_grad=True)
    mask = torch.tensor([[1, 0, 0, 0], [1, 1, 1, 1]]).bool()
    loss, _ = clipped_surrogate(logp, logp.detach(), torch.tensor([1.0, 1.0]), 0.2, mask=mask,
                                aggregation="sequence")  # fmt: skip
    loss.backward()
    # d/dlogp of -(1/2) sum_i mean_t(r_it A_i): 1/2 for the lone token, 1/8 for the others
    assert logp.grad[0, 0] == pytest.approx(-0.5) and logp.grad[1, 0] == pytest.approx(-0.125)


def test_k3_kl_is_zero_for_equal_policies_and_positive_otherwise():
    logp = torch.log(torch.tensor([0.2, 0.5]))
    assert torch.equal(G.kl_k3(logp, logp), torch.zeros(2))
    ref = torch.log(torch.tensor([0.4, 0.1]))
    d = ref - logp
    torch.testing.assert_close(G.kl_k3(logp, ref), torch.exp(d) - d - 1)
    assert (G.kl_k3(logp, ref) > 0).all()
    assert math.isclose(float(G.kl_k3(logp, ref)[0]), 2 - math.log(2) - 1, rel_tol=1e-6)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("grpo")
    rows = llm.arithmetic(40, seed=0)
    llm.write_jsonl(root / "prompts.jsonl", rows)
    model = llm.make_tiny_lm(root / "tiny", texts=llm.task_texts(rows), **TINY)
    return root, model


def test_a_short_run_logs_the_grpo_metrics(tiny, tmp_path):
    import json

    root, model = tiny
    result = llm.grpo(model, root / "prompts.jsonl", run_dir=tmp_path / "r", steps=3,
                      batch_size=2, group_size=4, max_new_tokens=4, progress=False)  # fmt: skip
    rows = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    for key in ("reward", "group_reward_std", "frac_zero_std_groups", "kl_ref", "clip_fraction",
                "response_length", "truncated_fraction", "entropy", "generation_s",
                "update_s"):  # fmt: skip
        assert key in rows[0]
    assert all(0.0 <= r["truncated_fraction"] <= 1.0 for r in rows)
    assert (result.model_dir / "config.json").is_file()


def test_truncated_share_counts_completions_cut_before_their_eos():
    from rlx.llm.generation import truncated_share

    eos = 2
    completions = [[5, 6, 7], [5, eos], [5, 6, eos], [eos], [7, 7, 7]]
    # budget 3: [5, 6, 7] and [7, 7, 7] ran out; [5, 6, eos] ended on its last token
    assert truncated_share(completions, eos, 3) == pytest.approx(2 / 5)
    assert truncated_share(completions, eos, 4) == 0.0  # none reached a budget of 4
    assert truncated_share(completions, None, 3) == pytest.approx(3 / 5)  # no eos to tell
    assert truncated_share([], eos, 3) == 0.0


def test_a_one_token_budget_is_named_by_the_doctor(tiny, tmp_path):
    """Every completion of one token that is not the eos is cut: the run logs it, and the
    doctor names it with a larger budget in the run's own field."""
    import json

    import rlx

    root, model = tiny
    llm.grpo(model, root / "prompts.jsonl", run_dir=tmp_path / "r", steps=12, batch_size=2,
             group_size=4, max_new_tokens=1, progress=False)  # fmt: skip
    rows = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    assert sum(r["truncated_fraction"] for r in rows) / len(rows) > 0.5
    found = {f.rule.id: f for f in rlx.doctor(tmp_path / "r")}
    assert "truncated-completions" in found
    finding = found["truncated-completions"]
    assert (finding.field, finding.current, finding.suggested) == ("max_new_tokens", 1, 2)


def test_bad_input_is_one_clear_error(tiny, tmp_path):
    root, model = tiny
    data = root / "prompts.jsonl"
    with pytest.raises(ConfigError, match="group_size=1"):
        llm.grpo(model, data, run_dir=tmp_path / "a", group_size=1)
    with pytest.raises(ConfigError, match="max_new_tokens=0"):
        llm.grpo(model, data, run_dir=tmp_path / "b", max_new_tokens=0)
    with pytest.raises(ConfigError, match="context"):
        llm.grpo(model, data, run_dir=tmp_path / "c", max_new_tokens=10_000)

    def broken(prompts, completions, **kw):
        raise ValueError("boom")

    def short(prompts, completions, **kw):
        return [1.0]

    def nan(prompts, completions, **kw):
        return [float("nan")] * len(completions)

    for fn, message in ((broken, "broken raised ValueError: boom"), (short, "one number"),
                        (nan, "NaN")):  # fmt: skip
        with pytest.raises(RewardFunctionError, match=message):
            llm.grpo(model, data, reward=fn, run_dir=tmp_path / fn.__name__, steps=1,
                     batch_size=2, group_size=2, max_new_tokens=3, progress=False)  # fmt: skip
    with pytest.raises(ConfigError, match="not a known reward"):
        llm.grpo(model, data, reward="nope", run_dir=tmp_path / "d", steps=1)


def test_grpo_learns_what_the_verifier_rewards(tiny, tmp_path, train_seed):
    """A reward for completions that start with '7': from about 1 in 20 samples at random
    init, GRPO must make it most of them (a sign error or a misaligned mask goes the other way)."""
    import json

    root, model = tiny

    def starts_with_seven(prompts, completions, **kw):
        return [1.0 if c.startswith("7") else 0.0 for c in completions]

    llm.grpo(model, root / "prompts.jsonl", reward=starts_with_seven, run_dir=tmp_path / "r",
             steps=40, batch_size=4, group_size=8, max_new_tokens=3, learning_rate=3e-3,
             beta=0.0, eval_exact_match=False, progress=False, seed=train_seed)  # fmt: skip
    rows = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    first = np.mean([r["reward"] for r in rows[:5]])
    last = np.mean([r["reward"] for r in rows[-5:]])
    assert first < 0.2 and last > 0.6, (first, last)


def test_builtin_rewards_numeric_and_python_tests():
    numeric = llm.get_reward("numeric")
    got = numeric(["q"] * 6, ["81", " 81.0", "= 81", "it is 81", "eighty-one", "80"],
                  answers=["81"] * 6)  # fmt: skip
    assert got == [1.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    run_tests = llm.get_reward("python-tests")
    prompts = ["def inc(x):\n", "def inc(x):\n"]
    rewards = run_tests(prompts, ["    return x + 1\n", "    return x + 2\n"],
                        tests=["assert inc(1) == 2", "assert inc(1) == 2"])  # fmt: skip
    assert rewards == [1.0, 0.0]


def test_interrupted_and_resumed_equals_uninterrupted(tiny, tmp_path, monkeypatch):
    """Sampling, rewards and updates continue exactly: same final weights either way."""
    import rlx

    root, model = tiny
    common = dict(steps=4, batch_size=2, group_size=4, max_new_tokens=3, learning_rate=1e-3,
                  eval_exact_match=False, progress=False)  # fmt: skip
    llm.grpo(model, root / "prompts.jsonl", run_dir=tmp_path / "whole", **common)
    log = rlx.runs.Run.log

    def log_then_stop(self, step, metrics):
        values = log(self, step, metrics)
        self.stop_requested = self.stop_requested or step == 2
        return values

    with monkeypatch.context() as patch:
        patch.setattr(rlx.runs.Run, "log", log_then_stop)
        part = llm.grpo(model, root / "prompts.jsonl", run_dir=tmp_path / "part", **common)
    assert part.status == "interrupted"
    llm.grpo("", root / "prompts.jsonl", run_dir=tmp_path / "part", resume=True, progress=False)
    a = torch.load(tmp_path / "whole" / "checkpoints" / "latest", weights_only=True)
    b = torch.load(tmp_path / "part" / "checkpoints" / "latest", weights_only=True)
    assert a["step"] == b["step"] == 4
    for key, value in a["state"]["model"].items():
        torch.testing.assert_close(value, b["state"]["model"][key], rtol=0, atol=1e-6)


def test_resume_keeps_the_runs_reward_and_never_reuses_an_old_callable(tiny, tmp_path):
    import json

    root, model = tiny
    data = root / "prompts.jsonl"
    common = dict(batch_size=2, group_size=2, max_new_tokens=3, eval_exact_match=False,
                  progress=False)  # fmt: skip

    def always_one(prompts, completions, **kw):
        return [1.0] * len(completions)

    llm.grpo(model, data, reward=always_one, run_dir=tmp_path / "c", steps=1, **common)
    with pytest.raises(ConfigError, match=r"pass it again \(reward=\.\.\.\)"):
        llm.grpo("", data, run_dir=tmp_path / "c", resume=True, steps=2, progress=False)
    llm.grpo(model, data, reward="numeric", run_dir=tmp_path / "n", steps=1, **common)
    llm.grpo("", data, run_dir=tmp_path / "n", resume=True, steps=2, progress=False)
    config = json.loads((tmp_path / "n" / "config.json").read_text())["config"]
    assert config["reward"] == "numeric" and config["steps"] == 2


def test_a_callable_reward_reaches_its_own_run_only_and_resumes_when_given_again(tiny, tmp_path):
    """The callable travels with its run (no module state): it scores that run's samples, not
    a later run's, is recorded as not importable (a local function), and a resumed run takes
    it again."""
    root, model = tiny
    data = root / "prompts.jsonl"
    common = dict(batch_size=2, group_size=2, max_new_tokens=3, eval_exact_match=False,
                  progress=False)  # fmt: skip
    calls = []

    def counting(prompts, completions, **kw):
        calls.append(len(completions))
        return [float(len(c)) for c in completions]

    llm.grpo(model, data, reward=counting, run_dir=tmp_path / "c", steps=1, **common)
    assert calls == [4]
    config = json.loads((tmp_path / "c" / "config.json").read_text())["config"]
    assert config["reward"] == "<python callable counting: not importable>"
    llm.grpo(model, data, reward="numeric", run_dir=tmp_path / "n", steps=1, **common)
    assert calls == [4]  # the next run never sees it
    llm.grpo("", data, reward=counting, run_dir=tmp_path / "c", resume=True, steps=2,
             progress=False)  # fmt: skip
    assert calls == [4, 4]
    assert not any(value is counting for value in vars(G).values())
    with pytest.raises(ConfigError, match="pass it again"):
        G.reward_function(config["reward"])
    given = StageData(str(data), str(data), rewards=(counting,))
    assert G.run_rewards(G.GRPOConfig(reward=config["reward"]), given).functions == [counting]


def test_packed_groups_score_exactly_as_separate_rows(tiny):
    """Each prompt's G completions in one row (prompt computed once) give the log-probs and
    entropies of separate prompt + completion rows, completions of different lengths."""
    _, path = tiny
    model, tokenizer = llm.load_model(path)
    prompts = ["12+34=", "5+67=", "99+1="]
    rng = np.random.default_rng(0)
    vocab = model.config.vocab_size
    completions = [list(rng.integers(3, vocab, size=int(n))) for n in [1, 4, 2, 5, 3, 1, 2, 2, 6]]
    with torch.no_grad():
        logps, mask = G.completion_scorer(tokenizer, prompts, completions, "cpu", packing=True)
        packed_lp, packed_h = logps(model)
        logps, sep_mask = G.completion_scorer(tokenizer, prompts, completions, "cpu", False)
        sep_lp, sep_h = logps(model)
    assert mask.sum(-1).tolist() == [len(c) for c in completions]
    torch.testing.assert_close(packed_lp[mask], sep_lp[sep_mask], atol=1e-5, rtol=0)
    torch.testing.assert_close(packed_h[mask], sep_h[sep_mask], atol=1e-5, rtol=0)
    assert G.use_group_packing(None, model, tokenizer, llm.arithmetic(3, seed=1))


def test_a_packed_step_trains_the_same_weights_as_separate_rows(tiny):
    import copy

    _, path = tiny
    model, tokenizer = llm.load_model(path)
    config = G.GRPOConfig(model=str(path), data="x", batch_size=2, group_size=4,
                          max_new_tokens=4, learning_rate=1e-2, steps=1)  # fmt: skip
    config = resolved(config)  # device "auto" decided, as the stage's train does first
    rows = llm.arithmetic(2, seed=3)

    def longer_is_better(prompts, completions, **kw):  # rewards that differ within a group
        return [float(len(c)) for c in completions]

    weights = []
    for packing in (True, False):
        m = copy.deepcopy(model)
        optimizer = torch.optim.SGD(m.parameters(), lr=1.0)  # moves only by the gradient
        torch.manual_seed(7)  # the same samples both times
        metrics = G.grpo_step(m, frozen_copy(model), tokenizer, optimizer, rows,
                              longer_is_better, config, packing)  # fmt: skip
        assert metrics["group_reward_std"] > 0 and math.isfinite(metrics["policy_loss"])
        weights.append([p.detach().clone() for p in m.parameters()])
    for a, b in zip(*weights, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    moved = [not torch.equal(a, b) for a, b in zip(weights[0], model.parameters(), strict=True)]
    assert sum(moved) > len(moved) // 2


def test_a_model_that_cannot_pack_falls_back_or_says_so(tiny, monkeypatch):
    _, path = tiny
    model, tokenizer = llm.load_model(path)

    def ignores_positions(model, packed):
        raise TypeError("unexpected keyword argument 'position_ids'")

    monkeypatch.setattr(G, "packed_group_logprobs", ignores_positions)
    rows = llm.arithmetic(3, seed=1)
    assert not G.use_group_packing(None, model, tokenizer, rows)
    with pytest.raises(ConfigError, match="pack_groups=False"):
        G.use_group_packing(True, model, tokenizer, rows)


@pytest.mark.parametrize("packing", [True, False])
def test_samples_are_scored_under_the_temperature_they_were_drawn_at(tiny, packing):
    """PPO's ratio pi_theta / pi_old must compare the distribution that was sampled: at
    temperature T the scorer's log-probs equal log softmax(logits / T) of the sampler's own
    steps (transformers' generate with output_scores, only the temperature warper on), for
    GRPO's scorer (packed or not) and RLHF's policy and reference alike."""
    from rlx.llm.batching import EncodedSequence, SequenceTable, encode_prompt
    from rlx.llm.generation import left_pad
    from rlx.llm.logprobs import next_token_logprobs
    from rlx.llm.stages import rlhf as R

    _, path = tiny
    model, tokenizer = llm.load_model(path)
    model.eval()
    prompts, T = ["12+34=", "5+67=", "99+1="], 0.6
    ids, attention = left_pad(
        [encode_prompt(tokenizer, p) for p in prompts], tokenizer.pad_token_id
    )
    torch.manual_seed(0)
    out = model.generate(
        input_ids=ids, attention_mask=attention, do_sample=True, temperature=T, top_k=0,
        top_p=1.0, max_new_tokens=5, output_scores=True, return_dict_in_generate=True,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=None,
    )  # fmt: skip
    completions = out.sequences[:, ids.shape[1] :].tolist()
    steps = torch.stack(out.scores, dim=1).log_softmax(-1)  # [B, 5, V], logits / T
    expected = steps.gather(-1, torch.tensor(completions).unsqueeze(-1)).squeeze(-1)
    with torch.no_grad():
        logps, mask = G.completion_scorer(tokenizer, prompts, completions, "cpu", packing, T)
        scored = logps(model)[0][mask].view(len(prompts), -1)
        untempered = G.completion_scorer(tokenizer, prompts, completions, "cpu", packing)[0]
        at_one = untempered(model)[0][mask].view(len(prompts), -1)
    torch.testing.assert_close(scored, expected, atol=1e-4, rtol=0)
    assert (scored - at_one).abs().max() > 0.01  # T = 0.6 is not the raw distribution

    seqs = [EncodedSequence.from_parts(encode_prompt(tokenizer, p), c)
            for p, c in zip(prompts, completions, strict=True)]  # fmt: skip
    batch = SequenceTable(seqs, tokenizer.pad_token_id).batch(np.arange(len(seqs)))
    with torch.no_grad():
        policy_lp = R.PolicyWithValueHead(model, T)(batch)[0][batch.target_mask]
        reference_lp = next_token_logprobs(model, batch, T)[batch.target_mask]
    torch.testing.assert_close(policy_lp.view(len(prompts), -1), expected, atol=1e-4, rtol=0)
    torch.testing.assert_close(reference_lp.view(len(prompts), -1), expected, atol=1e-4, rtol=0)


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_sampling_runs_each_prompt_once_and_draws_generates_tokens(tmp_path, arch, monkeypatch):
    """``sample`` computes each prompt once and copies its cache G times, yet with a seed it
    draws exactly the tokens of transformers' ``generate(num_return_sequences=G)``, which runs
    every prompt G times: at T = 1, at T = 0.6 and with top-p 0.8; and a model whose cache
    cannot be copied is sampled by ``generate`` itself."""
    from rlx.llm import generation
    from rlx.llm.batching import encode_prompt
    from rlx.llm.generation import left_pad, sample

    rows = llm.arithmetic(40, seed=0)
    path = llm.make_tiny_lm(tmp_path / arch, texts=llm.task_texts(rows), arch=arch, **TINY)
    model, tokenizer = llm.load_model(path)
    prompts, n = ["12+34=", "5+67=", "99+1="], 6
    ids, attention = left_pad([encode_prompt(tokenizer, p) for p in prompts], 0)
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    batch_sizes: list[int] = []
    model.register_forward_pre_hook(
        lambda module, args, kwargs: batch_sizes.append(kwargs["input_ids"].shape[0]),
        with_kwargs=True,
    )

    def reference(T, top_p):
        out = model.generate(
            input_ids=ids, attention_mask=attention, do_sample=True, temperature=T, top_p=top_p,
            top_k=0, max_new_tokens=6, num_return_sequences=n, pad_token_id=pad,
            eos_token_id=eos,
        )[:, ids.shape[1] :].tolist()  # fmt: skip
        return [r[: r.index(eos) + 1] if eos in r else r for r in out]

    for T, top_p in [(1.0, 1.0), (0.6, 1.0), (1.0, 0.8)]:
        torch.manual_seed(7)
        batch_sizes.clear()
        drawn = sample(model, tokenizer, prompts, n=n, max_new_tokens=6, temperature=T,
                       top_p=top_p)  # fmt: skip
        assert batch_sizes[0] == len(prompts) and set(batch_sizes[1:]) == {len(prompts) * n}
        torch.manual_seed(7)
        assert drawn == reference(T, top_p)
        assert len({tuple(c) for c in drawn}) > 3  # really sampled, not one greedy answer

    monkeypatch.setattr(generation, "_decode_from_shared_prompts", lambda *a, **k: None)
    torch.manual_seed(7)
    drawn = sample(model, tokenizer, prompts, n=n, max_new_tokens=6, temperature=0.6)
    torch.manual_seed(7)
    assert drawn == reference(0.6, 1.0)


# --- the python-tests reward inside a run ------------------------------------------------------


@pytest.fixture(scope="module")
def code_task(tmp_path_factory):
    """Prompts that start a function, answers that are its tests, a tiny model of that text."""
    root = tmp_path_factory.mktemp("code")
    rows = [{"prompt": f"def inc{i}(x):\n", "answer": f"assert inc{i}(1) == 2\n"} for i in range(8)]
    (root / "code.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    texts = [row["prompt"] + "    return x + 1\n" + row["answer"] for row in rows]
    return root, llm.make_tiny_lm(root / "tiny", texts=texts, **TINY)


def _code_run(code_task, run_dir, **kw):
    root, model = code_task
    return llm.grpo(model, root / "code.jsonl", reward="python-tests", run_dir=run_dir, steps=1,
                    batch_size=2, group_size=2, max_new_tokens=4, eval_exact_match=False,
                    progress=False, **kw)  # fmt: skip


def test_a_code_reward_run_records_the_sandbox_and_the_doctor_shows_it(code_task, tmp_path):
    import rlx
    from rlx.sandbox import sandbox_info

    _code_run(code_task, tmp_path / "r")
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    info = sandbox_info()
    assert summary["sandbox"]["missing"] == info["missing"]
    assert ("uid_drop" in summary["sandbox"]["protections"]) == info["uid_drop"]
    report = str(rlx.doctor(tmp_path / "r"))
    assert "sandbox: model-written code ran" in report.splitlines()[1]


def test_without_isolation_a_code_reward_run_refuses_to_start(code_task, tmp_path, monkeypatch):
    """The refusal path, simulated: no root means no namespaces and no uid change."""
    import sys
    import threading

    import rlx
    import rlx.sandbox.process as process
    import rlx.sandbox.reward as reward
    from rlx.errors import SandboxError
    from rlx.sandbox import Isolation, SandboxWarning

    unisolated = Isolation(sys.executable, None, None)
    monkeypatch.setattr(process, "current_isolation", lambda: unisolated)
    monkeypatch.setattr(reward, "current_isolation", lambda: unisolated)
    monkeypatch.setattr(reward, "_warned", threading.Event())
    with pytest.raises(SandboxError, match="allow_unisolated"):
        _code_run(code_task, tmp_path / "refused")
    assert not (tmp_path / "refused").exists()  # refused before training: no folder left
    with pytest.warns(SandboxWarning) as caught:
        _code_run(code_task, tmp_path / "allowed", allow_unisolated=True)
    assert len(caught) == 1  # one warning, at the start of the run
    summary = json.loads((tmp_path / "allowed" / "summary.json").read_text())
    assert len(summary["sandbox"]["missing"]) == 2 and summary["sandbox"]["allow_unisolated"]
    assert "sandbox: UNISOLATED" in str(rlx.doctor(tmp_path / "allowed"))
