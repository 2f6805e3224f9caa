"""GRPO over multi-turn episodes on the real pretrained chat model (SmolLM2-135M-Instruct, made
by ``make real-model``): the conversation goes through the model's own chat template turn
after turn (its tokens kept, the environment's masked), LoRA trains, the checkpoints hold the
adapter alone, and a stopped run resumes.

Slow (``make test-slow``), one torch thread; skipped when the model folder is missing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("peft")

import torch

from rlx import llm
from rlx import metrics as M
from rlx.llm.text_env import HiddenNumberEnv

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MODEL = Path(os.environ.get("RLX_REAL_MODEL", ROOT / "models" / "smollm2-135m-instruct"))
SETTINGS = {"lora": True, "batch_size": 2, "group_size": 2, "max_new_tokens": 4,
            "eval_episodes": 2, "progress": False}  # fmt: skip


class ChatHiddenNumber:
    """The hidden-number task as a chat: the question and each reply as a user message."""

    def __init__(self) -> None:
        self.game = HiddenNumberEnv(1, 7, max_turns=2)

    def reset(self, seed: int):
        self.game.reset(seed)
        text = "I am thinking of a number from 1 to 7. Reply with just your guess."
        return [{"role": "user", "content": text}]

    def step(self, action: str):
        reply, reward, terminated, truncated, info = self.game.step(action)
        return [{"role": "user", "content": reply}], reward, terminated, truncated, info


def chat_hidden_number() -> ChatHiddenNumber:
    return ChatHiddenNumber()


@pytest.fixture(scope="module")
def model_dir() -> Path:
    if not (MODEL / "config.json").is_file():
        pytest.skip(f"no real model in {MODEL}: `make real-model` makes it (SmolLM2-135M-Instruct)")
    return MODEL


def test_episodes_through_the_chat_template_train_an_adapter_and_resume(model_dir, tmp_path):
    torch.set_num_threads(1)

    class StopAt1:
        def on_update(self, step, metrics):
            return step < 1

    run = tmp_path / "run"
    first = llm.grpo(model_dir, env=chat_hidden_number, run_dir=run, steps=2,
                     callbacks=[StopAt1()], **SETTINGS)  # fmt: skip
    assert first.status == "stopped"
    weights = torch.load(run / "checkpoints" / "latest", weights_only=True)["state"]["model"]
    names = list(weights)
    assert names and all("lora" in k for k in names), names[:5]  # the adapter alone
    # the folder names code (this module's factory): resuming it asks for consent
    done = llm.grpo("", run_dir=run, resume=True, trust_env_code=True, progress=False)
    assert done.status == "completed"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(1 <= r[M.EPISODE_TURNS] <= 2 for r in rows)
    summary = json.loads((run / "summary.json").read_text())
    assert summary[M.EVAL_EPISODES] == 2 and 0 <= summary[M.EVAL_SUCCESS_RATE] <= 1
    assert (run / "adapter").is_dir() or (run / "model").is_dir()
