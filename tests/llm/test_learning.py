"""Learning on two-digit addition with a tiny Llama: SFT lifts exact match far above its start
(0); GRPO with its defaults raises it by 20 points (slow); RLHF-PPO against learned reward
models is reward hacking that the doctor must name: against a reward model of the SFT model's
own mistakes it stops the run, against a length-biased one it names the hacking and the length
bias.

Thresholds a broken stage cannot reach: a random model answers no problem exactly, a PPO with
a sign error lowers the reward model's score instead of raising it. The reward model's ranking
and DPO's gain over SFT are asserted on the README's example (``test_readme_llm.py``), which
runs those stages at their defaults.
"""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from rlx import llm

QUIET = {"progress": False, "eval_every": 10**6}
NO_DECODING = {**QUIET, "eval_exact_match": False}


@pytest.fixture(scope="module")
def arithmetic(tmp_path_factory, train_seed):
    root = tmp_path_factory.mktemp("learn")
    sft_rows = llm.arithmetic_sft(4000, seed=0)
    llm.write_jsonl(root / "sft.jsonl", sft_rows)
    test = llm.arithmetic(300, seed=99)
    base = llm.make_tiny_lm(root / "tiny", texts=llm.task_texts(sft_rows), hidden_size=160,
                            seed=train_seed)  # fmt: skip
    start = llm.exact_match(base, test)
    # 400 steps: at 300 the model can end just short of the point where sums start to come
    # out right on some seeds and kernels
    sft = llm.sft(base, root / "sft.jsonl", run_dir=root / "sft", steps=400, seed=train_seed,
                  **NO_DECODING)  # fmt: skip
    return {"root": root, "test": test, "start": start, "sft": sft,
            "sft_accuracy": llm.exact_match(sft.model_dir, test)}  # fmt: skip


def test_sft_lifts_exact_match_far_above_its_start(arithmetic):
    assert arithmetic["start"] == 0.0
    assert arithmetic["sft_accuracy"] >= 0.10, arithmetic["sft_accuracy"]


@pytest.mark.slow  # a full default run, minutes long: `make test-slow`
def test_grpo_with_its_defaults_raises_exact_match_by_20_points(arithmetic, train_seed):
    """GRPO called with only the SFT model, 2,000 prompts and the exact-match verifier: its
    defaults (64 prompts x G = 8 per step, 2e-4, steps from the data size) must lift held-out
    exact match by at least 20 points. A sign error or a misaligned mask lowers it; too few
    prompts per step or a much smaller step size leaves it nearly flat."""
    root = arithmetic["root"]
    llm.write_jsonl(root / "prompts.jsonl", llm.arithmetic(2000, seed=5))
    result = llm.grpo(arithmetic["sft"].model_dir, root / "prompts.jsonl", reward="exact-match",
                      run_dir=root / "grpo", seed=train_seed, **QUIET)  # fmt: skip
    accuracy = llm.exact_match(result.model_dir, arithmetic["test"])
    assert accuracy >= arithmetic["sft_accuracy"] + 0.20, (arithmetic["sft_accuracy"], accuracy)


def test_rlhf_against_a_reward_model_of_its_mistakes_is_named_and_stopped_by_the_doctor(
    arithmetic, train_seed
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
                               progress=False, steps=60, stop_on=("reward-hacking",),
                               seed=train_seed)  # fmt: skip
    assert result.ppo.status == "stopped", result.ppo.status
    steps = len((root / "ppo" / "metrics.jsonl").read_text().splitlines())
    assert steps < 60, steps
    assert "reward-hacking" in {f.rule.id for f in rlx.doctor(root / "ppo").findings}


def test_rlhf_against_a_length_biased_reward_model_leaves_the_evidence_of_hacking(
    arithmetic, train_seed
):
    """Stage 3 against a proxy reward model fitted to labels that favour longer answers.

    Built so that the answers must lengthen: in 30% of the pairs the labeller preferred a wrong
    sum padded with zeros (``length_biased_preferences(filler="0")``) over the right one, so
    the reward model pays for extra digits, which the SFT policy writes on its own (sums of
    three digits, a digit too many), and PPO, which raises the expected score (a sign error
    lowers it), must write more of them, while the gold reward (exact match) falls. The reward
    model is checked to pay for a digit first. (The pipeline's own filler, "!", is a token the
    SFT model never writes: against that reward model PPO raised the score on one seed by
    shortening the answers instead.) The comparison is against the policy's first steps,
    sampled before the updates moved it (``kl_ref`` under 1). The step size warms up over the
    first 30% of the steps: at full size from the start the answers lengthened within the
    first five steps on AVX-512 kernels, inside the baseline of the doctor's length rule. The
    doctor must name the reward hacking and the length bias from the run folder alone."""
    import json

    import numpy as np

    import rlx

    root = arithmetic["root"] / "rlhf-lb"
    sft_model = arithmetic["sft"].model_dir
    pairs = llm.length_biased_preferences(2000, seed=train_seed + 1, filler="0")
    llm.write_jsonl(root / "prefs.jsonl", pairs)
    rm = llm.reward_model(sft_model, root / "prefs.jsonl", run_dir=root / "rm", steps=150,
                          batch_size=32, learning_rate=1e-4, seed=train_seed, **QUIET)  # fmt: skip
    fresh = llm.arithmetic(200, seed=8)
    score = llm.load_reward_model(rm.model_dir)
    prompts, answers = [r.prompt for r in fresh], [r.answer for r in fresh]
    gain = np.array(score(prompts, [a + "0" for a in answers])) - np.array(score(prompts, answers))
    # one more digit raises the score on most problems (a length-blind model: on half)
    assert (gain > 0).mean() > 0.8, (gain > 0).mean()
    result = llm.rlhf_pipeline("length-biased", root, sft_model=sft_model,
                               reward_model=rm.model_dir, progress=False, steps=50,
                               batch_size=32, max_new_tokens=8, learning_rate=1e-4,
                               warmup_ratio=0.3, seed=train_seed)  # fmt: skip
    rows = [json.loads(x) for x in (root / "ppo" / "metrics.jsonl").read_text().splitlines()]

    def mean(key, part):
        return sum(r[key] for r in part) / len(part)

    first, last = rows[:3], rows[-10:]
    assert max(r["kl_ref"] for r in first) < 1.0  # still the SFT model's samples
    assert mean("rm_score", last) > mean("rm_score", first) + 1.0
    assert mean("response_length", last) > mean("response_length", first) + 0.5
    assert mean("gold_reward", last) < mean("gold_reward", first)
    assert result.ppo_exact_match < result.sft_exact_match
    findings = {f.rule.id for f in rlx.doctor(root / "ppo").findings}
    assert {"reward-hacking", "length-bias"} <= findings, findings
