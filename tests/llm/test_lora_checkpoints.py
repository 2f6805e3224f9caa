"""LoRA in the language-model stages: its default step size, checkpoints that hold the adapter
alone (and still resume exactly), and the checkpoint cadence fields of every stage."""

from __future__ import annotations

import dataclasses
import json

import pytest

pytest.importorskip("peft")

import torch

import rlx
from rlx import cli, llm
from rlx.errors import CheckpointError
from rlx.llm import stage_config, training
from rlx.llm.batching import forward_logits, pad_batch
from rlx.llm.losses import sft_loss
from rlx.llm.models import load_model
from rlx.llm.stages.grpo import GRPOConfig
from rlx.llm.stages.sft import SFTConfig, encode
from rlx.runs.checkpoints import list_checkpoints

# hidden 64: the base's weights outweigh a rank-2 adapter's many small tensors on disk
TINY = {"hidden_size": 64, "num_layers": 2, "num_heads": 2, "max_length": 32}
SFT_FAST = {"batch_size": 16, "eval_every": 100, "eval_exact_match": False, "progress": False}
GRPO_FAST = {"batch_size": 2, "group_size": 4, "max_new_tokens": 3, "eval_every": 100,
             "eval_exact_match": False, "progress": False}  # fmt: skip


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("lora")
    sft_rows = llm.arithmetic_sft(64, seed=0)
    prompts = llm.arithmetic(40, seed=1)
    llm.write_jsonl(root / "sft.jsonl", sft_rows)
    llm.write_jsonl(root / "prompts.jsonl", prompts)
    model = llm.make_tiny_lm(root / "tiny", texts=llm.task_texts(sft_rows + prompts), **TINY)
    return {"root": root, "model": model, "sft_rows": sft_rows}


def latest(run_dir):
    return torch.load(run_dir / "checkpoints" / "latest", weights_only=True)


# --- the default step size ----------------------------------------------------------------------


def test_the_default_step_size_is_ten_times_larger_with_lora_at_pretrained_scale_only():
    # GRPO's scale 0.2 on a 135M model: 1e-5 x 0.2 for every weight, ten times that for LoRA
    assert stage_config.default_learning_rate(135_000_000, 0.2) == pytest.approx(2e-6)
    assert stage_config.default_learning_rate(135_000_000, 0.2, lora=True) == pytest.approx(2e-5)
    # SFT (scale 1) on a 135M model: 1e-4 with LoRA, peft's and TRL's adapter step size
    assert stage_config.default_learning_rate(135_000_000, 1.0, lora=True) == pytest.approx(1e-4)
    # below pretrained scale the default is already at or above LoRA practice's 1e-4: no factor
    assert stage_config.default_learning_rate(50_000_000, 0.1) == pytest.approx(1e-5)
    assert stage_config.default_learning_rate(50_000_000, 0.1, lora=True) == pytest.approx(1e-5)
    assert stage_config.default_learning_rate(1_000_000, 1.0) == pytest.approx(1e-3)
    assert stage_config.default_learning_rate(1_000_000, 1.0, lora=True) == pytest.approx(1e-3)
    edge = stage_config.PRETRAINED_SCALE
    assert stage_config.default_learning_rate(edge - 1, 1.0, lora=True) == pytest.approx(1e-4)
    assert stage_config.default_learning_rate(edge, 1.0, lora=True) == pytest.approx(1e-4)
    assert stage_config.default_learning_rate(edge, 1.0) == pytest.approx(1e-5)
    assert stage_config.LORA_LR_FACTOR == 10.0


class _Run:
    """What complete_config needs of a run: somewhere to record the completed config."""

    def record_config(self, config, total=None):
        self.config = config


def test_complete_config_chooses_the_lora_step_size_and_keeps_a_given_one(tmp_path):
    def chosen(**fields):
        config = SFTConfig(steps=5, **fields)
        return training.complete_config(config, _Run(), 100, 135_000_000, 0.2, 1000)

    assert chosen().learning_rate == pytest.approx(2e-6)
    assert chosen(lora=True).learning_rate == pytest.approx(2e-5)
    assert chosen(lora=True, learning_rate=3e-4).learning_rate == 3e-4  # given: kept as is
    # an adapter folder as the start model trains its adapter: LoRA's step size too
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    assert training.trains_adapter(SFTConfig(model=str(adapter)))
    assert chosen(model=str(adapter)).learning_rate == pytest.approx(2e-5)


def test_sft_with_lora_and_its_defaults_moves_the_adapter(tiny, tmp_path):
    """At the LoRA default step size a few steps already raise the likelihood of the training
    completions clearly (a step size that barely moves the adapter leaves it where it was)."""
    result = llm.sft(tiny["model"], tiny["root"] / "sft.jsonl", run_dir=tmp_path / "r",
                     lora=True, lora_r=2, steps=8, **SFT_FAST)  # fmt: skip
    config = json.loads((tmp_path / "r" / "config.json").read_text())["config"]
    assert config["learning_rate"] == pytest.approx(1e-3)  # tiny model: no LoRA factor

    def completion_nll(folder) -> float:
        model, tokenizer = load_model(folder, device="cpu")
        batch = pad_batch(encode(tokenizer, tiny["sft_rows"], 32), tokenizer.pad_token_id)
        with torch.no_grad():
            return float(sft_loss(forward_logits(model, batch), batch)[0])

    before, after = completion_nll(tiny["model"]), completion_nll(result.model_dir)
    assert after < before - 0.1, (before, after)


# --- adapter-sized checkpoints -----------------------------------------------------------------


def test_a_lora_checkpoint_holds_the_adapter_alone_and_loads(tiny, tmp_path):
    data = tiny["root"] / "sft.jsonl"
    full = llm.sft(tiny["model"], data, run_dir=tmp_path / "full", steps=2, **SFT_FAST)
    lora = llm.sft(tiny["model"], data, run_dir=tmp_path / "lora", steps=2, lora=True,
                   lora_r=2, **SFT_FAST)  # fmt: skip
    full_size, lora_size = ((r.run_dir / "checkpoints" / "latest").resolve().stat().st_size
                            for r in (full, lora))  # fmt: skip
    assert lora_size < full_size / 5, (lora_size, full_size)
    state = latest(lora.run_dir)["state"]
    weights = state["model"]
    assert weights and all(".lora_A." in k or ".lora_B." in k for k in weights), sorted(weights)
    base_names = set(latest(full.run_dir)["state"]["model"])
    assert not any(k.replace("base_model.model.", "", 1) in base_names for k in weights)
    # AdamW's moments for the adapter's tensors alone; sampler and RNG as before
    assert len(state["optimizer"]["state"]) == len(weights)
    assert {"sampler", "torch_rng"} <= set(state)
    # rlx.load rebuilds the base from the config's model folder and answers as RUN_DIR/model
    agent = rlx.load(lora.run_dir)
    merged, tokenizer = load_model(lora.model_dir, device="cpu")
    batch = pad_batch(encode(tokenizer, tiny["sft_rows"][:8], 32), tokenizer.pad_token_id)
    with torch.no_grad():
        torch.testing.assert_close(forward_logits(agent.model, batch),
                                   forward_logits(merged, batch))  # fmt: skip


def test_lora_reward_model_and_rlhf_runs_load_from_their_adapter_checkpoints(tiny, tmp_path):
    """The reward model's checkpoint holds its adapter and trained head, RLHF-PPO's the
    policy's adapter and the value head; rlx.load answers as the saved model folders do."""
    prefs = tiny["root"] / "prefs.jsonl"
    llm.write_jsonl(prefs, llm.arithmetic_preferences(32, seed=2))
    rm = llm.reward_model(tiny["model"], prefs, run_dir=tmp_path / "rm", steps=2, lora=True,
                          lora_r=2, batch_size=8, eval_every=100, progress=False)  # fmt: skip
    weights = latest(rm.run_dir)["state"]["model"]
    assert all(".lora_" in k or "score" in k for k in weights), sorted(weights)
    prompts, completions = ["12+34=", "12+34=", "5+5="], ["46", "47", "10"]
    from_checkpoint = rlx.load(rm.run_dir)(prompts, completions)
    from_folder = llm.load_reward_model(rm.model_dir)(prompts, completions)
    torch.testing.assert_close(torch.tensor(from_checkpoint), torch.tensor(from_folder))
    ppo = llm.rlhf(tiny["model"], tiny["root"] / "prompts.jsonl", reward_model="exact-match",
                   run_dir=tmp_path / "ppo", steps=2, lora=True, lora_r=2, batch_size=2,
                   max_new_tokens=3, eval_every=100, eval_exact_match=False,
                   progress=False)  # fmt: skip
    weights = latest(ppo.run_dir)["state"]["model"]
    assert all(".lora_" in k or k.startswith("value_head.") for k in weights), sorted(weights)
    agent = rlx.load(ppo.run_dir)
    merged, tokenizer = load_model(ppo.model_dir, device="cpu")
    batch = pad_batch(encode(tokenizer, tiny["sft_rows"][:8], 32), tokenizer.pad_token_id)
    with torch.no_grad():
        torch.testing.assert_close(forward_logits(agent.model, batch),
                                   forward_logits(merged, batch))  # fmt: skip


def test_a_checkpoint_of_another_model_is_refused_in_one_sentence(tiny, tmp_path):
    lora = llm.sft(tiny["model"], tiny["root"] / "sft.jsonl", run_dir=tmp_path / "lora",
                   steps=1, lora=True, lora_r=2, **SFT_FAST)  # fmt: skip
    weights = latest(lora.run_dir)["state"]["model"]
    config = dataclasses.replace(SFTConfig(model=str(tiny["model"]), lora=True, lora_r=4),
                                 device="cpu")  # fmt: skip
    from rlx.llm.lora import load_for_training

    model, _ = load_for_training(config)  # rank 4: the rank-2 adapter does not fit
    with pytest.raises(
        CheckpointError, match=r"does not fit the model \(size mismatch .*lora_B.*lora_\* fields"
    ) as error:
        training.load_model_state(model, weights)
    assert "\n" not in str(error.value)
    full, _ = load_for_training(dataclasses.replace(config, lora=False))
    with pytest.raises(CheckpointError, match="lacks 21 trainable weights"):
        training.load_model_state(full, weights)  # the adapter alone: the model's own missing


def stop_at(step):
    """Run.log that asks the run to stop after ``step``, as Ctrl-C does."""
    log = rlx.runs.Run.log

    def log_then_stop(self, at, metrics):
        values = log(self, at, metrics)
        self.stop_requested = self.stop_requested or at == step
        return values

    return log_then_stop


@pytest.mark.parametrize("stage", ["sft", "grpo"])
def test_a_lora_run_interrupted_and_resumed_equals_an_uninterrupted_one(
    tiny, tmp_path, monkeypatch, stage
):
    """The resumed run rebuilds the frozen base from the model folder, loads the adapter, its
    optimizer state, sampler and RNG from the adapter-sized checkpoint, and ends where the
    uninterrupted run ends: same adapter, same merged model, same last metrics."""
    train = getattr(llm, stage)
    data = tiny["root"] / ("sft.jsonl" if stage == "sft" else "prompts.jsonl")
    fast = SFT_FAST if stage == "sft" else GRPO_FAST
    common = {**fast, "steps": 6, "lora": True, "lora_r": 2, "lora_dropout": 0.1,
              "eval_every": 3}  # fmt: skip
    whole = train(tiny["model"], data, run_dir=tmp_path / "whole", **common)
    with monkeypatch.context() as patch:
        patch.setattr(rlx.runs.Run, "log", stop_at(3))
        part = train(tiny["model"], data, run_dir=tmp_path / "part", **common)
    assert part.status == "interrupted"
    assert all(".lora_" in k for k in latest(part.run_dir)["state"]["model"])
    resumed = train("", data, run_dir=tmp_path / "part", resume=True, progress=False)
    assert resumed.status == "completed"
    a, b = latest(whole.run_dir), latest(resumed.run_dir)
    assert a["step"] == b["step"] == 6
    assert a["state"]["model"].keys() == b["state"]["model"].keys()
    for key, value in a["state"]["model"].items():
        torch.testing.assert_close(value, b["state"]["model"][key], rtol=0, atol=1e-6)
    assert resumed.metrics == pytest.approx(whole.metrics, rel=1e-5, abs=1e-6)
    merged_a, _ = load_model(whole.model_dir, device="cpu")
    merged_b, _ = load_model(resumed.model_dir, device="cpu")
    for (name, x), (_, y) in zip(merged_a.state_dict().items(), merged_b.state_dict().items(),
                                 strict=True):  # fmt: skip
        torch.testing.assert_close(x, y, rtol=0, atol=1e-6, msg=name)


# --- the checkpoint cadence of the stages ---------------------------------------------------


def written_steps(monkeypatch):
    """The steps of every checkpoint a run writes, in order."""
    steps: list[int] = []
    save = rlx.runs.Run.save_checkpoint

    def recording(self, step, state):
        steps.append(step)
        return save(self, step, state)

    monkeypatch.setattr(rlx.runs.Run, "save_checkpoint", recording)
    return steps


def test_every_stage_config_takes_the_checkpoint_fields():
    from rlx.core.fields import CheckpointFields
    from rlx.registry import get

    for name in ("sft", "rm", "dpo", "grpo", "rlhf-ppo"):
        config = get(name).config(checkpoint_every_steps=10, checkpoints_kept=2)
        assert isinstance(config, CheckpointFields), name
        assert (config.checkpoint_every_steps, config.checkpoints_kept) == (10, 2)
    names = [f.name for f in dataclasses.fields(GRPOConfig)]
    assert names.index("lora_target_modules") < names.index("checkpoint_every_s")  # --help order


def test_sft_checkpoints_at_the_asked_steps_from_python_and_the_cli(tiny, tmp_path, monkeypatch):
    steps = written_steps(monkeypatch)
    rlx.train("sft", str(tiny["root"] / "sft.jsonl"), model=str(tiny["model"]),
              run_dir=tmp_path / "py", steps=7, checkpoint_every_steps=2, checkpoints_kept=0,
              **SFT_FAST)  # fmt: skip
    assert steps == [2, 4, 6, 7]
    assert [s for s, _ in list_checkpoints(tmp_path / "py")] == [2, 4, 6, 7]  # 0: all kept
    steps.clear()
    code = cli.main(["align", "sft", "--model", str(tiny["model"]), "--data",
                     str(tiny["root"] / "sft.jsonl"), "--steps", "7", "--batch-size", "16",
                     "--checkpoint-every-steps", "3", "--checkpoints-kept", "2",
                     "--no-eval-exact-match", "--run-dir", str(tmp_path / "cli"),
                     "--no-progress"])  # fmt: skip
    assert code == 0 and steps == [3, 6, 7]
    assert [s for s, _ in list_checkpoints(tmp_path / "cli")] == [6, 7]  # the newest 2
    config = json.loads((tmp_path / "cli" / "config.json").read_text())["config"]
    assert (config["checkpoint_every_steps"], config["checkpoints_kept"]) == (3, 2)


def test_grpo_checkpoints_at_the_asked_steps_and_keeps_the_asked_count(tiny, tmp_path,
                                                                       monkeypatch):  # fmt: skip
    steps = written_steps(monkeypatch)
    llm.grpo(tiny["model"], tiny["root"] / "prompts.jsonl", run_dir=tmp_path / "g", steps=5,
             checkpoint_every_steps=2, checkpoints_kept=2, **GRPO_FAST)  # fmt: skip
    assert steps == [2, 4, 5]
    assert [s for s, _ in list_checkpoints(tmp_path / "g")] == [4, 5]


def test_bad_checkpoint_fields_are_one_clear_error(tiny, tmp_path):
    from rlx.errors import ConfigError

    data = tiny["root"] / "sft.jsonl"
    with pytest.raises(ConfigError, match="checkpoint_every_steps=0"):
        llm.sft(tiny["model"], data, run_dir=tmp_path / "a", checkpoint_every_steps=0)
    with pytest.raises(ConfigError, match="checkpoints_kept=-1"):
        llm.grpo(tiny["model"], data, run_dir=tmp_path / "b", checkpoints_kept=-1)
