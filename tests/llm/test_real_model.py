"""GRPO with LoRA on a real pretrained chat model (SmolLM2-135M-Instruct, made by
``make real-model``): at the default LoRA step size a few steps move the model, the
checkpoints hold the adapter alone, and an interrupted run resumes exactly.

Slow (``make test-slow``), one torch thread; skipped when the model folder is missing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("peft")

import torch

import rlx
from rlx import llm
from rlx.llm import batching, logprobs, stage_config

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MODEL = Path(os.environ.get("RLX_REAL_MODEL", ROOT / "models" / "smollm2-135m-instruct"))
PAIRS = [(3, 4), (5, 2), (6, 3), (2, 7), (8, 1), (4, 4), (9, 5), (7, 6)]
MB = 1024 * 1024


def question(a: int, b: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"What is {a} plus {b}? Reply with just the number."}]


ROWS = [{"prompt": question(a, b), "answer": str(a + b)} for a, b in PAIRS]


@pytest.fixture(scope="module")
def model_dir() -> Path:
    if not (MODEL / "config.json").is_file():
        pytest.skip(f"no real model in {MODEL}: `make real-model` makes it (SmolLM2-135M-Instruct)")
    return MODEL


def latest(run_dir: Path) -> dict:
    return torch.load(run_dir / "checkpoints" / "latest", weights_only=True)


def reply_logprobs(folder: Path, replies: list[str]) -> torch.Tensor:
    """``log pi(reply | prompt)`` of each training prompt's reply under the model in
    ``folder``."""
    model, tokenizer = llm.load_model(folder, device="cpu")
    seqs = batching.encode_prompt_completions(
        tokenizer, [row["prompt"] for row in ROWS], replies, max_length=128
    )
    batch = batching.pad_batch(seqs, tokenizer.pad_token_id)
    model.eval()
    with torch.no_grad():
        return logprobs.sequence_logprobs(model, batch)


def test_grpo_with_lora_at_the_default_step_size_moves_the_real_model(model_dir, tmp_path):
    """(a) four GRPO steps with the numeric reward and the LoRA default step size change the
    log-probabilities of the base model's own greedy replies clearly; (b) the checkpoint is
    the adapter and its AdamW moments: under 50 MB, no base tensor."""
    run = llm.grpo(model_dir, ROWS, reward="numeric", lora=True, lora_r=8, steps=4,
                   batch_size=4, group_size=4, max_new_tokens=12, eval_fraction=0.0,
                   run_dir=tmp_path / "grpo", progress=False)  # fmt: skip
    config = json.loads((run.run_dir / "config.json").read_text())["config"]
    summary = json.loads((run.run_dir / "summary.json").read_text())
    full = stage_config.default_learning_rate(summary["total_parameters"], 0.2)
    assert config["learning_rate"] == pytest.approx(stage_config.LORA_LR_FACTOR * full)
    rows = [json.loads(line) for line in (run.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert any(row["group_reward_std"] > 0 for row in rows)  # some groups had a signal

    base, tokenizer = llm.load_model(model_dir, device="cpu")
    replies = llm.greedy(base, tokenizer, [row["prompt"] for row in ROWS], max_new_tokens=12)
    before = reply_logprobs(model_dir, replies)
    after = reply_logprobs(run.model_dir, replies)
    change = (after - before).abs()
    # the adapter moved: most replies' log-probabilities by a clear amount, not by float noise
    assert float(change.mean()) > 0.02, change.tolist()
    assert int((change > 0.01).sum()) >= len(ROWS) * 3 // 4, change.tolist()

    # (b) the checkpoint: the adapter alone with its optimizer state, a few MB, not the base's
    checkpoint = (run.run_dir / "checkpoints" / "latest").resolve()
    size = checkpoint.stat().st_size
    assert size < 50 * MB, size
    state = latest(run.run_dir)["state"]
    weights = state["model"]
    assert weights and all(".lora_A." in k or ".lora_B." in k for k in weights), sorted(weights)
    base_names = set(base.state_dict())
    assert not any(k.replace("base_model.model.", "", 1) in base_names for k in weights)
    adapter = sum(v.numel() * v.element_size() for v in weights.values())
    assert adapter < summary["total_parameters"] * 4 / 20  # far below the fp32 base
    assert size < 3.2 * adapter  # weights plus AdamW's two moments, nothing more


def reply_length(prompts, completions, **kwargs):
    """A reward with spread in every group, so that each step has a gradient to resume."""
    return [len(c[0]["content"]) / 10 for c in completions]


def test_an_interrupted_lora_run_on_the_real_model_resumes_exactly(model_dir, tmp_path,
                                                                   monkeypatch):  # fmt: skip
    """(c) stopped after step 1 and resumed, the run ends with the uninterrupted run's
    adapter, rebuilt on the base from the model folder."""
    common = {"reward": reply_length, "lora": True, "lora_r": 4, "lora_dropout": 0.1,
              "steps": 2, "batch_size": 2, "group_size": 2, "max_new_tokens": 6,
              "eval_fraction": 0.0, "progress": False}  # fmt: skip
    whole = llm.grpo(model_dir, ROWS, run_dir=tmp_path / "whole", **common)
    log = rlx.runs.Run.log

    def log_then_stop(self, at, metrics):
        values = log(self, at, metrics)
        self.stop_requested = self.stop_requested or at == 1
        return values

    with monkeypatch.context() as patch:
        patch.setattr(rlx.runs.Run, "log", log_then_stop)
        part = llm.grpo(model_dir, ROWS, run_dir=tmp_path / "part", **common)
    assert part.status == "interrupted" and latest(part.run_dir)["step"] == 1
    resumed = llm.grpo("", ROWS, reward=reply_length, run_dir=tmp_path / "part", resume=True,
                       progress=False)  # fmt: skip
    assert resumed.status == "completed"
    a, b = latest(whole.run_dir), latest(resumed.run_dir)
    assert a["step"] == b["step"] == 2
    assert a["state"]["model"].keys() == b["state"]["model"].keys()
    moved = 0
    for key, value in a["state"]["model"].items():
        torch.testing.assert_close(value, b["state"]["model"][key], rtol=0, atol=1e-6, msg=key)
        moved += ".lora_B." in key and bool(value.abs().max() > 0)
    assert moved > 0  # the adapter trained: equal weights are not two untouched adapters
