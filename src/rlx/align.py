"""Training a language model, one call per stage: :func:`sft`, :func:`reward_model`,
:func:`dpo`, :func:`grpo` and :func:`rlhf` (``rlx.llm.sft`` and its siblings; ``rlx align``
on the command line).

Each is :func:`rlx.train` with the stage's registered name, the data as the run's "env" and
the model folder as a config field, so a stage gets what every run gets (its run folder,
``resume``, progress, TensorBoard, the live doctor and ``stop_on``). They are faces, beside
:mod:`rlx.api`: they call the stages (:mod:`rlx.llm.stages`) through the registry, and no
stage calls back up. In-memory data (a ``datasets.Dataset``, a list of dicts) and GRPO's
Python reward functions reach the run's ``train`` in a :class:`~rlx.llm.training.StageData`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rlx.api import train
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


__all__ = ["dpo", "grpo", "reward_model", "rlhf", "sft", "train_stage"]
