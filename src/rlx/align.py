"""Training a language model, one call per stage: :func:`sft`, :func:`reward_model`,
:func:`dpo`, :func:`grpo` and :func:`rlhf` (``rlx.llm.sft`` and its siblings; ``rlx align``
on the command line).

Each is :func:`rlx.train` with the stage's registered name, the data as the run's "env" and
the model folder as a config field, so a stage gets what every run gets (its run folder,
``resume``, progress, TensorBoard, the live doctor and ``stop_on``). They are faces, beside
:mod:`rlx.api`: they call the stages (:mod:`rlx.llm.stages`) through the registry, and no
stage calls back up. In-memory data (a ``datasets.Dataset``, a list of dicts) and GRPO's
Python reward functions reach the run's ``train`` in a :class:`~rlx.llm.training.StageData`.

:func:`rlhf_pipeline` chains three of them in one call (``rlx align rlhf --task``):
RLHF in three stages as one call: SFT -> reward model -> PPO, each a run folder inside one.

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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlx.api import train
from rlx.errors import ConfigError
from rlx.llm.data import describe
from rlx.llm.lora import lora_fields
from rlx.llm.rewards import RewardFunction, reward_name
from rlx.llm.stages.grpo import CALLABLE_REWARD
from rlx.llm.training import StageData, StageResult


def sft(
    model: str | Path,
    data: Any,
    *,
    run_dir: str | Path | None = None,
    resume: bool = False,
    progress: bool | None = None,
    tensorboard: bool = False,
    **overrides: Any,
) -> StageResult:
    """Fine-tune the causal LM in ``model`` on ``data`` (a file, a saved or in-memory
    ``datasets`` data set, or a list of dicts); the result's ``model_dir`` is a Hugging Face
    folder (``RUN_DIR/model``). ``overrides`` are :class:`~rlx.llm.stages.sft.SFTConfig` fields."""
    return train_stage(
        "sft",
        model,
        data,
        run_dir=run_dir,
        resume=resume,
        progress=progress,
        tensorboard=tensorboard,
        overrides=overrides,
    )


def reward_model(
    model: str | Path,
    data: Any,
    *,
    run_dir: str | Path | None = None,
    resume: bool = False,
    progress: bool | None = None,
    tensorboard: bool = False,
    **overrides: Any,
) -> StageResult:
    """Train a reward model from the causal LM in ``model`` on preference rows in ``data``;
    ``RUN_DIR/model`` loads back with :func:`~rlx.llm.stages.reward_model.load_reward_model`."""
    return train_stage(
        "rm",
        model,
        data,
        run_dir=run_dir,
        resume=resume,
        progress=progress,
        tensorboard=tensorboard,
        overrides=overrides,
    )


def dpo(
    model: str | Path,
    data: Any,
    *,
    run_dir: str | Path | None = None,
    resume: bool = False,
    progress: bool | None = None,
    tensorboard: bool = False,
    **overrides: Any,
) -> StageResult:
    """Align the causal LM in ``model`` to the preference rows in ``data`` with DPO; the
    result's ``model_dir`` is a Hugging Face folder."""
    return train_stage(
        "dpo",
        model,
        data,
        run_dir=run_dir,
        resume=resume,
        progress=progress,
        tensorboard=tensorboard,
        overrides=overrides,
    )


def grpo(
    model: str | Path,
    data: Any,
    *,
    reward: str | RewardFunction | Sequence[str | RewardFunction] | None = None,
    run_dir: str | Path | None = None,
    resume: bool = False,
    progress: bool | None = None,
    tensorboard: bool = False,
    **overrides: Any,
) -> StageResult:
    """Improve the causal LM in ``model`` on the prompt rows in ``data`` with GRPO.

    ``reward`` is a name in :data:`rlx.llm.rewards.REWARDS`, a callable
    ``fn(prompts, completions, **columns) -> list[float | None]`` (TRL's), or a list of
    them, weighted by ``reward_weights=``; None: ``"exact-match"``, or, with ``resume``, the
    run's own. A callable is not recorded in ``config.json``, so a run trained with one
    resumes with ``reward=`` given again.
    """
    env = None
    rewards = list(reward) if isinstance(reward, (list, tuple)) else [reward]
    if any(callable(r) for r in rewards):
        overrides["reward"] = ",".join(
            f"{CALLABLE_REWARD}{reward_name(r)}" if callable(r) else str(r) for r in rewards
        )
        env = StageData(str(data), reward=[r for r in rewards if callable(r)])
    elif reward is not None or not resume:
        overrides["reward"] = ",".join(str(r) for r in rewards) if reward else "exact-match"
    if isinstance(overrides.get("reward_weights"), list):
        overrides["reward_weights"] = tuple(overrides["reward_weights"])
    return train_stage(
        "grpo",
        model,
        data,
        run_dir=run_dir,
        resume=resume,
        progress=progress,
        tensorboard=tensorboard,
        overrides=overrides,
        env=env,
    )


def rlhf(
    model: str | Path,
    data: Any,
    *,
    reward_model: str | Path,
    run_dir: str | Path | None = None,
    resume: bool = False,
    progress: bool | None = None,
    tensorboard: bool = False,
    stop_on: tuple[str, ...] | list[str] = (),
    **overrides: Any,
) -> StageResult:
    """PPO on the SFT model in ``model`` against the reward model in ``reward_model``, on the
    prompts of ``data`` (JSONL rows ``{"prompt"}``, optionally ``"answer"`` for the gold
    reward). ``stop_on`` names doctor rules that end the run when they fire, e.g.
    ``("reward-hacking", "kl-ref-drift")``; ``RUN_DIR/model`` is then the policy at the stop."""
    if reward_model:
        overrides["reward_model"] = str(reward_model)
    return train_stage(
        "rlhf-ppo",
        model,
        data,
        run_dir=run_dir,
        resume=resume,
        progress=progress,
        tensorboard=tensorboard,
        overrides=overrides,
        stop_on=stop_on,
    )


def train_stage(
    name: str,
    model: str | Path,
    data: Any,
    *,
    run_dir: str | Path | None,
    resume: bool,
    progress: bool | None,
    tensorboard: bool,
    overrides: Mapping[str, Any],
    stop_on: tuple[str, ...] | list[str] = (),
    env: Any = None,
) -> StageResult:
    """``sft(model, data, ...)`` and its siblings: :func:`rlx.train` with the stage's name,
    the data file as the run's "env", and the model folder as a config field.

    ``data`` may be in memory (a ``datasets.Dataset``, a list of dicts): it then reaches the
    stage in a :class:`StageData`, as does ``env.reward`` (GRPO's Python reward functions).
    ``lora`` may be a dict of ``LoraConfig`` fields or a ``peft.LoraConfig``
    (:func:`rlx.llm.lora.lora_fields`)."""
    fields = lora_fields(dict(overrides))
    if not resume or model:
        fields["model"] = str(model)
    in_memory = data is not None and not isinstance(data, (str, Path))
    name_of_data = describe(data) if in_memory else str(data)
    if in_memory or env is not None:
        reward = getattr(env, "reward", None)
        env = StageData(name_of_data, reward, data if in_memory else None)
    return train(
        name,
        name_of_data if env is None else env,
        run_dir=run_dir,
        resume=resume,
        progress=progress,
        tensorboard=tensorboard,
        stop_on=tuple(stop_on),
        data=name_of_data,
        **fields,
    )


PIPELINE_TASKS = ("arithmetic", "length-biased")
PIPELINE_QUIET = {"eval_every": 10**6, "eval_exact_match": False}


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
    import rlx.llm as llm  # the faces (this module's own) and the task builders

    if task not in PIPELINE_TASKS:
        raise ConfigError(f"unknown rlhf task {task!r}; valid tasks: {', '.join(PIPELINE_TASKS)}.")
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
                      progress=progress, seed=seed, **PIPELINE_QUIET)  # fmt: skip
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
    import rlx.llm as llm

    if task == "length-biased":
        return llm.length_biased_preferences(2000, seed=seed + 1)
    return llm.mistake_pairs(sft_model, llm.arithmetic(3000, seed=seed + 5))


__all__ = [
    "PipelineResult",
    "dpo",
    "grpo",
    "reward_model",
    "rlhf",
    "rlhf_pipeline",
    "sft",
    "train_stage",
]
