"""Learning on two-digit addition with a tiny Llama, start to finish: SFT lifts exact match
far above its start (0), the reward model separates correct from wrong sums on held-out
gold-labelled pairs, and DPO on the SFT model's own mistakes raises exact match over SFT.

Thresholds a broken stage cannot reach: a random model answers no problem exactly, a reward
model that reads the wrong token or masks the wrong positions stays near 0.5 pair accuracy,
and DPO with a sign error or a moving reference lowers the accuracy it starts from.

DPO runs with ``rpo_alpha=1.0`` (an NLL term on the chosen answer): on these pairs, whose
chosen and rejected answers share all but a digit or two, the DPO loss alone lowers the
likelihood of both and exact match falls (TRL's DPOTrainer does the same,
``benchmarks/bench_llm.py``).
"""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from rlx import llm

QUIET = {"progress": False, "eval_every": 10**6}
NO_DECODING = {**QUIET, "eval_exact_match": False}


@pytest.fixture(scope="module")
def arithmetic(tmp_path_factory):
    root = tmp_path_factory.mktemp("learn")
    sft_rows = llm.arithmetic_sft(4000, seed=0)
    llm.write_jsonl(root / "sft.jsonl", sft_rows)
    test = llm.arithmetic(300, seed=99)
    base = llm.make_tiny_lm(root / "tiny", texts=llm.task_texts(sft_rows), hidden_size=160)
    start = llm.exact_match(base, test)
    sft = llm.sft(base, root / "sft.jsonl", run_dir=root / "sft", steps=300, **NO_DECODING)
    return {"root": root, "test": test, "start": start, "sft": sft,
            "sft_accuracy": llm.exact_match(sft.model_dir, test)}  # fmt: skip


def test_sft_lifts_exact_match_far_above_its_start(arithmetic):
    assert arithmetic["start"] == 0.0
    assert arithmetic["sft_accuracy"] >= 0.10, arithmetic["sft_accuracy"]


def test_reward_model_separates_correct_sums_on_held_out_pairs(arithmetic):
    root = arithmetic["root"]
    # 4,000 pairs and 600 steps: with half of either, some CPUs' rounding lands too close to
    # the bar for a test
    llm.write_jsonl(root / "gold.jsonl", llm.arithmetic_preferences(4000, seed=1, mistake="random"))
    rm = llm.reward_model(arithmetic["sft"].model_dir, root / "gold.jsonl", run_dir=root / "rm",
                          steps=600, batch_size=32, learning_rate=1e-4, **QUIET)  # fmt: skip
    assert rm.metrics["eval_pair_accuracy"] >= 0.9, rm.metrics
    # the saved model scores fresh pairs the same way
    fresh = llm.arithmetic_preferences(200, seed=7, mistake="random")
    score = llm.load_reward_model(rm.model_dir)
    chosen = score([p.prompt for p in fresh], [p.chosen for p in fresh])
    rejected = score([p.prompt for p in fresh], [p.rejected for p in fresh])
    assert sum(c > r for c, r in zip(chosen, rejected, strict=True)) / len(fresh) >= 0.85


def test_dpo_on_its_own_mistakes_raises_exact_match_over_sft(arithmetic):
    root, sft = arithmetic["root"], arithmetic["sft"]
    pairs = llm.mistake_pairs(sft.model_dir, llm.arithmetic(3000, seed=5))
    assert len(pairs) > 1000  # the SFT model is far from perfect: plenty to learn from
    llm.write_jsonl(root / "mistakes.jsonl", pairs)
    dpo = llm.dpo(sft.model_dir, root / "mistakes.jsonl", run_dir=root / "dpo", epochs=8,
                  learning_rate=1e-4, rpo_alpha=1.0, **NO_DECODING)  # fmt: skip
    assert dpo.metrics["eval_pair_accuracy"] >= 0.8, dpo.metrics
    accuracy = llm.exact_match(dpo.model_dir, arithmetic["test"])
    # 300 problems: +0.05 is 15 more solved, where a sign error or a drifting reference loses
    assert accuracy >= arithmetic["sft_accuracy"] + 0.05, (arithmetic["sft_accuracy"], accuracy)


@pytest.mark.slow  # a full default run, minutes long: `make test-slow`
def test_grpo_with_its_defaults_raises_exact_match_by_20_points(arithmetic):
    """GRPO called with only the SFT model, 2,000 prompts and the exact-match verifier: its
    defaults (64 prompts x G = 8 per step, 2e-4, steps from the data size) must lift held-out
    exact match by at least 20 points. A sign error or a misaligned mask lowers it; too few
    prompts per step or a much smaller step size leaves it nearly flat."""
    root = arithmetic["root"]
    llm.write_jsonl(root / "prompts.jsonl", llm.arithmetic(2000, seed=5))
    result = llm.grpo(arithmetic["sft"].model_dir, root / "prompts.jsonl", reward="exact-match",
                      run_dir=root / "grpo", **QUIET)  # fmt: skip
    accuracy = llm.exact_match(result.model_dir, arithmetic["test"])
    assert accuracy >= arithmetic["sft_accuracy"] + 0.20, (arithmetic["sft_accuracy"], accuracy)


def test_rlhf_against_a_reward_model_of_its_mistakes_is_named_and_stopped_by_the_doctor(
    arithmetic,
):
    """Where RLHF-PPO cannot raise exact match against a learned reward model, the doctor must
    say so. `rlx align rlhf --task arithmetic` with its defaults (a reward model fitted to the
    SFT model's own mistakes; PPO at 1e-5 on 64 prompts a step) lowers exact match within a
    few steps while ``rm_score`` rises, where the same PPO with the exact-match verifier as its
    reward keeps it. With ``stop_on=("reward-hacking",)`` the doctor must name it from the
    logged gold reward and end the run early."""
    import rlx

    root = arithmetic["root"] / "rlhf-sums"
    result = llm.rlhf_pipeline("arithmetic", root, sft_model=arithmetic["sft"].model_dir,
                               progress=False, steps=60, stop_on=("reward-hacking",))  # fmt: skip
    assert result.ppo.status == "stopped", result.ppo.status
    steps = len((root / "ppo" / "metrics.jsonl").read_text().splitlines())
    assert steps < 60, steps
    assert "reward-hacking" in {f.rule.id for f in rlx.doctor(root / "ppo").findings}


def test_rlhf_against_a_length_biased_reward_model_leaves_the_evidence_of_hacking(arithmetic):
    """Stage 3 against a proxy reward model fitted to labels that favour longer answers: PPO
    must raise the reward model's score (a sign error lowers it) while the answers lengthen and
    the gold reward (exact match) falls, and the doctor must name the reward hacking and the
    length bias from the run folder alone. 50 steps, because the float rounding of a CPU's
    kernels moves shorter runs enough to blur the length trend."""
    import json

    import rlx

    root = arithmetic["root"] / "rlhf-lb"
    result = llm.rlhf_pipeline("length-biased", root, sft_model=arithmetic["sft"].model_dir,
                               rm_steps=150, progress=False, steps=50, batch_size=32,
                               max_new_tokens=8, learning_rate=1e-4)  # fmt: skip
    rows = [json.loads(x) for x in (root / "ppo" / "metrics.jsonl").read_text().splitlines()]

    def mean(key, part):
        return sum(r[key] for r in part) / len(part)

    first, last = rows[:5], rows[-5:]
    assert mean("rm_score", last) > mean("rm_score", first) + 1.0
    assert mean("response_length", last) > mean("response_length", first) + 0.5
    assert mean("gold_reward", last) <= mean("gold_reward", first)
    assert result.ppo_exact_match < result.sft_exact_match
    findings = {f.rule.id for f in rlx.doctor(root / "ppo").findings}
    assert {"reward-hacking", "length-bias"} <= findings, findings
