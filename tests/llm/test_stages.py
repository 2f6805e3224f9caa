"""The training stages (SFT, reward model, DPO): the shared loop's invariants, run folders,
resume, the CLI, bad input. Learning thresholds live in ``test_learning.py``."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

pytest.importorskip("transformers")

import torch

import rlx
from rlx import cli, llm
from rlx.errors import ConfigError
from rlx.llm import pairs, stage_config, training
from rlx.llm.stages import dpo as dpo_stage
from rlx.llm.stages import reward_model as rm_stage
from rlx.llm.stages import sft as sft_stage

TINY = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "max_length": 32}
FAST = {"eval_every": 3, "progress": False}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("llm")
    sft_rows = llm.arithmetic_sft(64, seed=0)
    prefs = llm.arithmetic_preferences(64, seed=1)
    llm.write_jsonl(root / "sft.jsonl", sft_rows)
    llm.write_jsonl(root / "prefs.jsonl", prefs)
    llm.write_jsonl(root / "test.jsonl", llm.arithmetic(16, seed=2))
    model = llm.make_tiny_lm(root / "tiny", texts=llm.task_texts(sft_rows + prefs), **TINY)
    return {"root": root, "model": model}


# --- the shared loop --------------------------------------------------------------------------


def test_schedule_warms_up_then_decays_to_zero():
    factors = [training.warmup_linear(s, 10, 0.2) for s in range(10)]
    assert factors[:2] == [0.5, 1.0]
    assert factors[2] == 1.0 and factors[-1] == pytest.approx(1 / 8)
    assert all(a >= b for a, b in itertools.pairwise(factors[1:]))


def test_epoch_sampler_covers_every_row_once_per_epoch_and_resumes():
    sampler = training.EpochSampler(10, 4, seed=3)
    drawn = np.concatenate([sampler.next() for _ in range(5)])  # 20 rows = 2 epochs
    assert sorted(drawn[:10]) == list(range(10)) and sorted(drawn[10:]) == list(range(10))
    state = sampler.state_dict()
    later = [sampler.next() for _ in range(3)]
    again = training.EpochSampler(10, 4, seed=3)
    again.load_state_dict(state)
    assert all((a == b).all() for a, b in zip(later, [again.next() for _ in range(3)], strict=True))


def test_default_epochs_and_steps_follow_the_data_size():
    config = sft_stage.SFTConfig(model="m", data="d", batch_size=64)
    assert stage_config.resolve_epochs(config, 2000, 20_000) == 10.0
    assert stage_config.resolve_epochs(config, 4000, 20_000) == 5.0
    assert stage_config.resolve_epochs(config, 10**6, 20_000) == 1.0
    config = sft_stage.SFTConfig(model="m", data="d", epochs=2.0, batch_size=64)
    assert stage_config.resolve_steps(config, 100) == 4  # ceil(2 * 100 / 64)


@pytest.mark.parametrize("stage_module", [sft_stage, rm_stage, dpo_stage])
def test_accumulated_micro_batches_give_the_full_batch_gradient(files, stage_module):
    """One batch of 8 and 8 accumulated micro-batches of 1: the same gradient."""
    data = files["root"] / ("sft.jsonl" if stage_module is sft_stage else "prefs.jsonl")
    config_type = {
        sft_stage: sft_stage.SFTConfig,
        rm_stage: rm_stage.RewardModelConfig,
        dpo_stage: dpo_stage.DPOConfig,
    }[stage_module]
    config = config_type(model=str(files["model"]), data=str(data), steps=1, learning_rate=1e-3)
    config = training.resolved(config)  # device "auto" decided, as run_stage does first
    stage = stage_module.prepare(config).build(config)
    stage.model.eval()  # no dropout, so the two passes see the same function
    rows = np.arange(8)
    grads = []
    for parts in (1, 8):
        stage.model.zero_grad(set_to_none=True)
        training.accumulate_gradients(stage, rows, parts)
        grads.append(
            torch.cat([p.grad.flatten() for p in stage.model.parameters() if p.grad is not None])
        )
    assert grads[0].abs().sum() > 0
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-4, atol=1e-6)


# --- run folders --------------------------------------------------------------------------------


def test_sft_writes_a_run_folder_and_a_model_plain_transformers_loads(files, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    result = llm.sft(files["model"], files["root"] / "sft.jsonl", run_dir=tmp_path / "r",
                     steps=6, **FAST)  # fmt: skip
    record = json.loads((tmp_path / "r" / "config.json").read_text())
    assert record["algo"] == "sft" and record["config"]["steps"] == 6
    assert record["config"]["learning_rate"] == 1e-3  # chosen from the model size
    rows = [
        json.loads(line) for line in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()
    ]
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert {"loss", "token_accuracy", "lr", "grad_norm"} <= set(rows[0])
    assert {"eval_loss", "eval_token_accuracy", "exact_match"} <= set(rows[2])
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["status"] == "completed" and "eval_loss" in summary
    folder = AutoModelForCausalLM.from_pretrained(result.model_dir)
    tokenizer = AutoTokenizer.from_pretrained(result.model_dir)
    # the run's checkpoint (rlx.load) and its model folder are the same trained weights: they
    # answer alike, and unlike the start model
    from rlx.llm.generation import greedy

    loaded = rlx.load(tmp_path / "r")
    prompts = [r.prompt for r in llm.arithmetic(16, seed=4)]
    answers = loaded.greedy(prompts, max_new_tokens=3)
    assert answers == greedy(folder, tokenizer, prompts, max_new_tokens=3)
    start, _ = llm.load_model(files["model"])
    assert answers != greedy(start, tokenizer, prompts, max_new_tokens=3)


def test_loaded_models_are_agents_a_language_model_completes_a_reward_model_scores(files, tmp_path):
    from rlx.core.agent import Agent, TextAgent

    llm.sft(files["model"], files["root"] / "sft.jsonl", run_dir=tmp_path / "s", steps=2,
            eval_exact_match=False, **FAST)  # fmt: skip
    loaded = rlx.load(tmp_path / "s")
    assert isinstance(loaded, TextAgent)
    assert loaded.run_dir == tmp_path / "s" and loaded.config.steps == 2
    prompts = ["12+34=", "5+6="]
    assert loaded.act_batch(prompts) == loaded.greedy(prompts, loaded.max_new_tokens)
    assert loaded.act(prompts[1]) == loaded.act_batch(prompts)[1]
    torch.manual_seed(0)
    sampled = loaded.act_batch(prompts * 4, deterministic=False)
    assert len(sampled) == 8 and all(isinstance(text, str) for text in sampled)

    llm.reward_model(files["model"], files["root"] / "prefs.jsonl", run_dir=tmp_path / "rm",
                     steps=2, kind="bow", **FAST)  # fmt: skip
    scorer = rlx.load(tmp_path / "rm")
    assert isinstance(scorer, Agent) and scorer.run_dir == tmp_path / "rm"
    assert scorer.config.kind == "bow"
    pairs = [("12+34=", "46"), ("12+34=", "47")]
    scores = scorer(["12+34=", "12+34="], ["46", "47"])
    assert scorer.act_batch(pairs) == pytest.approx(scores)
    assert scorer.act(pairs[1]) == pytest.approx(scores[1])
    assert scorer.act("46") == pytest.approx(scorer([""], ["46"])[0])


def test_rlx_train_takes_the_data_file_as_its_env(files, tmp_path):
    """rlx.train("sft", FILE, model=...) trains on FILE, as llm.sft(model, FILE) does."""
    data = files["root"] / "sft.jsonl"
    rlx.train("sft", data, model=str(files["model"]), run_dir=tmp_path / "r", steps=2,
              eval_exact_match=False, **FAST)  # fmt: skip
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    assert config["config"]["data"] == str(data) and config["config"]["steps"] == 2


def test_steps_chosen_from_the_data_are_written_to_config(files, tmp_path):
    llm.sft(files["model"], files["root"] / "sft.jsonl", run_dir=tmp_path / "r",
            batch_size=16, eval_exact_match=False, **FAST)  # fmt: skip
    config = json.loads((tmp_path / "r" / "config.json").read_text())["config"]
    train_rows = 64 - round(0.1 * 64)
    assert config["epochs"] == 10.0  # 58 rows: the 10-pass cap
    assert config["steps"] == int(np.ceil(10 * train_rows / 16))


def test_interrupted_and_resumed_equals_uninterrupted(files, tmp_path, monkeypatch):
    data = files["root"] / "prefs.jsonl"
    common = {"steps": 6, "batch_size": 8, "eval_every": 100, "progress": False,
              "eval_exact_match": False}  # fmt: skip
    whole = llm.dpo(files["model"], data, run_dir=tmp_path / "whole", **common)
    # the same run stopped after step 3, exactly as Ctrl-C stops it, then resumed
    log = rlx.runs.Run.log

    def log_then_stop(self, step, metrics):
        values = log(self, step, metrics)
        self.stop_requested = step == 3
        return values

    with monkeypatch.context() as patch:
        patch.setattr(rlx.runs.Run, "log", log_then_stop)
        part = llm.dpo(files["model"], data, run_dir=tmp_path / "part", **common)
    assert part.status == "interrupted"
    assert not (tmp_path / "part" / "model").exists()  # saved only when training completes
    resumed = llm.dpo("", data, run_dir=tmp_path / "part", resume=True, progress=False)
    a = torch.load(whole.run_dir / "checkpoints" / "latest", weights_only=True)
    b = torch.load(resumed.run_dir / "checkpoints" / "latest", weights_only=True)
    assert a["step"] == b["step"] == 6
    for key, value in a["state"]["model"].items():
        torch.testing.assert_close(value, b["state"]["model"][key], rtol=0, atol=1e-6)


def test_reward_model_folder_loads_as_a_reward_function(files, tmp_path):
    result = llm.reward_model(files["model"], files["root"] / "prefs.jsonl",
                              run_dir=tmp_path / "rm", steps=3, **FAST)  # fmt: skip
    score = llm.load_reward_model(result.model_dir)
    rewards = score(["12+34=", "12+34="], ["46", "47"])
    assert len(rewards) == 2 and all(np.isfinite(rewards))
    from transformers import AutoModelForSequenceClassification

    assert AutoModelForSequenceClassification.from_pretrained(result.model_dir).num_labels == 1


def test_bag_of_words_reward_model_learns_which_tokens_win(tmp_path, files, train_seed):
    """Pairs where the chosen completion always holds a '7' and the rejected never: w('7')
    must end up the largest weight."""
    rows = [llm.PreferencePair(f"{i}+0=", f"7{i % 10}", f"{(i % 6) + 1}{i % 10}")
            for i in range(200)]  # fmt: skip
    rows = [r for r in rows if "7" not in r.rejected]
    llm.write_jsonl(tmp_path / "p.jsonl", rows)
    result = llm.reward_model(files["model"], tmp_path / "p.jsonl", run_dir=tmp_path / "bow",
                              kind="bow", steps=60, learning_rate=0.05, seed=train_seed,
                              **FAST)  # fmt: skip
    assert result.metrics["eval_pair_accuracy"] == 1.0
    scorer = llm.load_reward_model(result.model_dir)
    weights = scorer.module.weight.detach()
    assert int(weights.argmax()) == scorer.tokenizer.convert_tokens_to_ids("7")


# --- bad input ----------------------------------------------------------------------------------


def test_bad_input_is_one_clear_error(files, tmp_path, capsys):
    prefs = str(files["root"] / "prefs.jsonl")
    with pytest.raises(ConfigError, match="beta"):
        llm.dpo(files["model"], prefs, run_dir=tmp_path / "b", beta=0.0)
    sft_data = files["root"] / "sft.jsonl"
    with pytest.raises(ConfigError, match="does not exist"):
        llm.sft(tmp_path / "missing", sft_data, run_dir=tmp_path / "m")
    with pytest.raises(ConfigError, match=r"line 1: missing field 'completion'"):
        llm.sft(files["model"], prefs, run_dir=tmp_path / "w")
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ConfigError, match="empty"):
        llm.sft(files["model"], tmp_path / "empty.jsonl", run_dir=tmp_path / "e")
    with pytest.raises(ConfigError, match="grad_accum"):
        llm.sft(files["model"], sft_data, run_dir=tmp_path / "g", batch_size=8, grad_accum=3)
    with pytest.raises(ConfigError, match="kind"):
        llm.reward_model(files["model"], prefs, run_dir=tmp_path / "k", kind="tree")
    # nothing was left behind by the rejected runs
    assert not any((tmp_path / name).exists() for name in "bmwegk")
    code = cli.main(["align", "dpo", "--model", str(files["model"]), "--data", prefs,
                     "--beta", "-1", "--run-dir", str(tmp_path / "c")])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "beta" in err[0]


def test_cli_align_end_to_end(files, tmp_path, capsys):
    root = files["root"]
    assert cli.main(["align", "data", "arithmetic", "--out", str(tmp_path / "t.jsonl"),
                     "--n", "10"]) == 0  # fmt: skip
    assert cli.main(["align", "sft", "--model", str(files["model"]), "--data",
                     str(root / "sft.jsonl"), "--steps", "2", "--run-dir", str(tmp_path / "s"),
                     "--no-progress"]) == 0  # fmt: skip
    assert cli.main(["align", "eval", "--model", str(tmp_path / "s" / "model"), "--data",
                     str(tmp_path / "t.jsonl")]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "exact match" in out
    assert cli.main(["eval", str(tmp_path / "s")]) == 2  # points to `rlx align eval` instead
    assert "rlx align eval" in capsys.readouterr().err
    assert cli.main(["list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in ("sft", "rm", "dpo"))


# --- packed pairs -------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_packed_pairs_score_exactly_as_separate_rows(tmp_path, arch):
    """One row [prompt, chosen, rejected] with the rejected tokens blind to the chosen ones and
    positions restarting after the prompt: the same log-probabilities and rewards as two rows."""
    from rlx.llm import logprobs

    rows = [*llm.arithmetic_preferences(6, seed=3), llm.PreferencePair("1+1=", "2", "11111")]
    path = llm.make_tiny_lm(tmp_path / arch, texts=llm.task_texts(rows), arch=arch, **TINY)
    model, tokenizer = llm.load_model(path)
    encoded = pairs.encode_pairs(tokenizer, rows, 32)
    idx = np.arange(len(rows))
    pad = tokenizer.pad_token_id
    packed = pairs.packed_batch(encoded, idx, pad)
    separate = logprobs.sequence_logprobs(model, pairs.pair_batch(encoded, idx, pad))
    chosen, rejected = logprobs.packed_pair_logprobs(model, packed)
    torch.testing.assert_close(chosen, separate[0::2], rtol=0, atol=1e-4)
    torch.testing.assert_close(rejected, separate[1::2], rtol=0, atol=1e-4)
    assert packed.input_ids.shape[1] < pairs.pair_batch(encoded, idx, pad).input_ids.shape[1] * 2

    backbone, _ = rm_stage.sequence_classifier_from(path, 0, "cpu", None)
    scorer = rm_stage.ScalarHeadRewardModel(backbone).eval()
    with torch.no_grad():
        both = scorer(pairs.pair_batch(encoded, idx, pad))
        c, r = scorer.packed(packed)
    torch.testing.assert_close(c, both[0::2], rtol=0, atol=1e-4)
    torch.testing.assert_close(r, both[1::2], rtol=0, atol=1e-4)


def test_a_model_that_ignores_packing_falls_back_to_separate_rows():
    from rlx.llm import batching

    def broken(packed):  # e.g. an architecture that drops position_ids
        return torch.zeros(len(packed)), torch.ones(len(packed))

    seqs = [batching.EncodedSequence([1, 5, 6], [False, False, True], 2)] * 2
    assert not batching.packing_matches(broken, lambda b: torch.zeros(len(b)), seqs, seqs, 0)
    with pytest.raises(ConfigError, match="pack_pairs=False"):
        pairs.use_packing(True, broken, lambda b: torch.zeros(len(b)), seqs * 2, 0)


def test_dpo_gradient_vanishes_when_chosen_equals_rejected(files):
    """With y+ = y- the two log-ratios cancel for any policy: no gradient reaches the model
    (at pi = pi_ref the gradient is -beta/2 on log pi(y+) and +beta/2 on log pi(y-), which is
    what cancels; ``test_foundations`` checks those values)."""
    from rlx.llm import logprobs, losses

    model, tokenizer = llm.load_model(files["model"])
    rows = [llm.PreferencePair("12+30=", "42", "42"), llm.PreferencePair("5+5=", "10", "10")]
    encoded = pairs.encode_pairs(tokenizer, rows, 32)
    batch = pairs.pair_batch(encoded, np.arange(2), tokenizer.pad_token_id)
    logps = logprobs.sequence_logprobs(model, batch)
    loss, _ = losses.dpo_loss(logps[0::2], logps[1::2], logps[0::2] - 0.3, logps[1::2] - 0.3)
    loss.backward()
    assert loss.item() == pytest.approx(np.log(2))
    assert all(p.grad.abs().max() < 1e-7 for p in model.parameters() if p.grad is not None)


def test_exact_match_rests_on_the_whole_held_out_split_with_its_interval(files, tmp_path):
    """The summary's headline is measured on every held-out row (not a sample), says how many,
    and carries the Wilson interval of that share."""
    from rlx.core.intervals import proportion_interval
    from rlx.llm.generation import exact_match

    rows = llm.arithmetic_sft(600, seed=5)
    llm.write_jsonl(tmp_path / "big.jsonl", rows)
    llm.sft(files["model"], tmp_path / "big.jsonl", run_dir=tmp_path / "r", steps=2,
            eval_fraction=0.4, **FAST)  # fmt: skip
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    _, held_out = training.split_rows(rows, 0.4, 0)
    assert len(held_out) == 240 and summary["eval_rows"] == 240  # more than the old cap of 200
    share = exact_match(tmp_path / "r" / "model", held_out)
    assert summary["exact_match"] == pytest.approx(share)
    low, high = proportion_interval(round(share * 240), 240)
    assert (summary["eval_exact_match_low"], summary["eval_exact_match_high"]) == pytest.approx(
        (low, high)
    )
