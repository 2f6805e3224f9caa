"""RLHF in three stages as one call: SFT -> reward model -> PPO, each a run folder inside one.

    RUN_DIR/base/   the start model (a tiny one is built when none is given)
    RUN_DIR/sft/    stage 1: supervised fine-tuning on demonstrations
    RUN_DIR/rm/     stage 2: a Bradley-Terry reward model on preference pairs
    RUN_DIR/ppo/    stage 3: RLHF-PPO against the reward model, KL penalty to the SFT model

The built-in tasks generate their data in code:

- ``arithmetic``: two-digit sums. The reward model learns from the SFT model's own mistakes
  (chosen: the right sum; rejected: the SFT model's wrong answer to the same problem), as a
  labeller would rank the model's samples. Its gold reward is exact match.
- ``length-biased``: the same problems, but the preference labels favour longer answers in a
  share of the rows (:func:`rlx.llm.tasks.length_biased_preferences`): the proxy reward model
  pays for padding, and PPO against it shows length bias and reward hacking (``rm_score`` and
  ``response_length`` up, ``gold_reward`` down), which the doctor then names.

With ``sft_model`` and ``reward_model`` given, the first two stages are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlx.errors import ConfigError

TASKS = ("arithmetic", "length-biased")
QUIET = {"eval_every": 10**6, "eval_exact_match": False}


@dataclass
class PipelineResult:
    """The three stages' results and the exact match of the SFT and PPO models."""

    run_dir: Path
    sft_model: Path
    reward_model: Path
    ppo: Any
    sft_exact_match: float
    ppo_exact_match: float


def rlhf_pipeline(
    task: str,
    run_dir: str | Path,
    *,
    model: str | Path | None = None,
    sft_model: str | Path | None = None,
    reward_model: str | Path | None = None,
    sft_steps: int = 300,
    rm_steps: int = 300,
    progress: bool | None = None,
    seed: int = 0,
    **ppo_overrides: Any,
) -> PipelineResult:
    """Run SFT -> reward model -> RLHF-PPO on a built-in ``task`` inside ``run_dir``."""
    from rlx import llm

    if task not in TASKS:
        raise ConfigError(f"unknown rlhf task {task!r}; valid tasks: {', '.join(TASKS)}.")
    root = Path(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    test = llm.arithmetic(300, seed=99)
    prompts = root / "prompts.jsonl"
    llm.write_jsonl(prompts, llm.arithmetic(2000, seed=seed + 11))
    if sft_model is None:
        sft_rows = llm.arithmetic_sft(4000, seed=seed)
        llm.write_jsonl(root / "sft.jsonl", sft_rows)
        texts = [*llm.task_texts(sft_rows), "!"]  # the filler of length-biased answers
        base = model or llm.make_tiny_lm(root / "base", texts=texts, hidden_size=160)
        sft = llm.sft(base, root / "sft.jsonl", run_dir=root / "sft", steps=sft_steps,
                      progress=progress, seed=seed, **QUIET)  # fmt: skip
        sft_model = sft.model_dir
    if reward_model is None:
        pairs = _preferences(task, sft_model, seed)
        llm.write_jsonl(root / "prefs.jsonl", pairs)
        rm = llm.reward_model(sft_model, root / "prefs.jsonl", run_dir=root / "rm",
                              steps=rm_steps, batch_size=32, learning_rate=1e-4,
                              progress=progress, eval_every=10**6, seed=seed)  # fmt: skip
        reward_model = rm.model_dir
    ppo = llm.rlhf(sft_model, prompts, reward_model=reward_model, run_dir=root / "ppo",
                   progress=progress, seed=seed, **ppo_overrides)  # fmt: skip
    return PipelineResult(
        root, Path(sft_model), Path(reward_model), ppo,
        llm.exact_match(sft_model, test), llm.exact_match(ppo.model_dir, test),
    )  # fmt: skip


def _preferences(task: str, sft_model: str | Path, seed: int) -> list[Any]:
    from rlx import llm

    if task == "length-biased":
        return llm.length_biased_preferences(2000, seed=seed + 1)
    return llm.mistake_pairs(sft_model, llm.arithmetic(3000, seed=seed + 5))
