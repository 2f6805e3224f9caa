"""Training a language model, one call per stage: :func:`sft`, :func:`reward_model`,
:func:`dpo`, :func:`grpo` and :func:`rlhf` (``rlx.llm.sft`` and its siblings; ``rlx align``
on the command line).

Each is :func:`rlx.train` with the stage's registered name, the data as the run's "env" and
the model folder as a config field, so a stage gets what every run gets (its run folder,
``resume``, progress, TensorBoard, the live doctor and ``stop_on``). They are faces, beside
:mod:`rlx.api`: they call the stages (:mod:`rlx.llm.stages`) through the registry, and no
stage calls back up.

The data is named once, as the run's env (:func:`stage_env`): a file reaches the run as its
name, which ``config.json`` records (``env``, and the config's ``data``); in-memory data (a
``datasets.Dataset``, a list of dicts) and GRPO's reward functions given in Python reach the
run's ``train`` in a :class:`~rlx.llm.training.StageData` (:func:`reward_env`), the data
described by :func:`rlx.llm.data.describe` as the run's env. :func:`grpo` given a text env
(``env=``) instead of data trains ``grpo-episodes``, GRPO over multi-turn episodes, with that
env as the run's env; :func:`rlhf` given one instead of data and a reward model trains
``ppo-episodes``, PPO with a value head over such episodes.

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
from rlx.core.env_recipe import IN_PYTHON, Consent
from rlx.errors import ConfigError, RLXError
from rlx.llm.data import describe
from rlx.llm.lora import lora_fields
from rlx.llm.rewards import (
    RewardFunction,
    get_reward,
    is_not_importable,
    is_reward_reference,
    load_reward,
    reward_reference,
)
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
    data: Any = None,
    *,
    env: Any = None,
    env_kwargs: dict[str, Any] | None = None,
    reward: str | RewardFunction | Sequence[str | RewardFunction] | None = None,
    run_dir: str | Path | None = None,
    resume: bool = False,
    trust_env_code: bool = False,
    progress: bool | None = None,
    tensorboard: bool = False,
    **overrides: Any,
) -> StageResult:
    """Improve the causal LM in ``model`` on the prompt rows in ``data`` with GRPO, or, given
    ``env`` instead, over multi-turn episodes of a text env (the algorithm ``grpo-episodes``,
    :mod:`rlx.llm.episode_grpo`).

    ``env`` is a function or class that returns a text env (:class:`rlx.llm.text_env.TextEnv`),
    an entry point ``"package.module:factory"`` to one, or a built-in name
    (:data:`rlx.llm.text_env.TEXT_ENVS`: ``"hidden-number"``); ``env_kwargs`` are its keyword
    arguments. The env scores its own episodes, so it takes no ``reward``; ``steps`` is
    needed, and ``overrides`` are :class:`~rlx.llm.episode_grpo.EpisodeGRPOConfig` fields.
    Resuming such a run needs neither (its folder names its env).

    ``reward`` is a name in :data:`rlx.llm.rewards.REWARDS`, a callable
    ``fn(prompts, completions, **columns) -> list[float | None]`` (TRL's), a reference
    ``"package.module:function"`` to one, or a list of them, weighted by ``reward_weights=``;
    None: ``"exact-match"``, or, with ``resume``, the run's own. ``config.json`` records a
    callable by its reference when it has one (a function at a module's top level), so the
    run resumes from its folder; a lambda or a local function has none, so a run trained with
    one resumes with ``reward=`` given again.

    A reference given here is imported here (it is your code). One that the run folder
    names, resuming without ``reward=``, is data from whoever wrote the folder: it is imported
    only with ``trust_env_code=True``, as the run folder's env code is.
    """
    if (
        env is not None
        or env_kwargs is not None
        or _plays_episodes(data, resume, run_dir, EPISODES)
    ):
        return grpo_episodes(
            model, data, env, env_kwargs, reward, run_dir=run_dir, resume=resume,
            trust_env_code=trust_env_code, progress=progress, tensorboard=tensorboard,
            overrides=overrides,
        )  # fmt: skip
    functions: list[RewardFunction] = []
    if reward is not None:
        items = _reward_items(reward)
        found = [_reward_given(item) for item in items]  # a bad one stops the call here
        if any(not isinstance(item, str) or is_reward_reference(item) for item in items):
            functions = found  # code given with this call: it reaches this run alone
        overrides["reward"] = ",".join(reward_reference(item) for item in items)
    if isinstance(overrides.get("reward_weights"), list):
        overrides["reward_weights"] = tuple(overrides["reward_weights"])
    env = reward_env(
        data, functions=functions, reward=overrides.get("reward"), resume=resume,
        run_dir=run_dir, trust_env_code=trust_env_code, consent=IN_PYTHON,
    )  # fmt: skip
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
        trust_env_code=trust_env_code,
    )


def _plays_episodes(data: Any, resume: bool, run_dir: str | Path | None, algo: str) -> bool:
    """Whether a ``grpo`` (``rlhf``) call without ``env`` continues a run over episodes:
    resumed, no data given, and its folder records ``algo``, ``grpo-episodes`` (or
    ``ppo-episodes``)."""
    if not resume or data is not None or run_dir is None:
        return False
    recorded = _recorded(run_dir)
    return recorded is not None and recorded.algo == algo


def grpo_episodes(
    model: str | Path,
    data: Any,
    env: Any,
    env_kwargs: dict[str, Any] | None,
    reward: Any,
    *,
    run_dir: str | Path | None,
    resume: bool,
    trust_env_code: bool,
    progress: bool | None,
    tensorboard: bool,
    overrides: Mapping[str, Any],
) -> StageResult:
    """:func:`grpo` with a text env: the run of ``grpo-episodes``, its env named once, as the
    run's env (an entry point is the caller's own code, imported as given)."""
    if data is not None:
        raise ConfigError(
            "env=... trains over episodes of a text env and data=... over prompt rows; pass "
            "one of them."
        )
    if reward is not None:
        raise ConfigError(
            f"reward={reward!r} scores completions of prompt rows, while a text env scores its "
            "own episodes; leave reward out when you give env."
        )
    if env_kwargs is not None and env is None:
        raise ConfigError("env_kwargs=... are the keyword arguments of env=...; pass env too.")
    return train_stage(
        EPISODES, model, None, run_dir=run_dir, resume=resume, progress=progress,
        tensorboard=tensorboard, overrides=overrides, env=env, env_kwargs=env_kwargs,
        trust_env_code=trust_env_code,
    )  # fmt: skip


def _reward_items(reward: Any) -> list[str | RewardFunction]:
    """``reward=`` as one item per function: a list's items, names joined by commas apart."""
    given = list(reward) if isinstance(reward, (list, tuple)) else [reward]
    items: list[str | RewardFunction] = []
    for one in given:
        if isinstance(one, str):
            items.extend(part.strip() for part in one.split(",") if part.strip())
        else:
            items.append(one)
    return items


def _reward_given(item: str | RewardFunction) -> RewardFunction:
    """A reward given in Python as the function it is: a callable itself, a built-in by its
    name, a reference imported (the caller's own code); ConfigError for anything else."""
    if isinstance(item, str) and is_reward_reference(item):
        return load_reward(item)
    return get_reward(item)


def reward_env(
    data: Any,
    *,
    functions: Sequence[RewardFunction] = (),
    reward: str | None = None,
    resume: bool = False,
    run_dir: str | Path | None = None,
    trust_env_code: bool = False,
    consent: Consent = IN_PYTHON,
) -> Any:
    """The env of a GRPO run (``rlx.llm.grpo``, ``rlx align grpo``): its data as
    :func:`stage_env` names it, in a :class:`~rlx.llm.training.StageData` where the run's
    ``train`` must know more of its rewards than ``config.json`` holds.

    That is where ``functions`` are given (every reward of this call, in the order of
    ``config.reward``), or where the rewards named (``reward``, else, resuming, those the run
    folder records) include code: a ``package.module:function`` reference, which the run
    imports only with ``trust_env_code``, or the mark of a function without one. ``consent``
    words the refusals for where the user is. Resumed without ``data``, the run's data is the
    one its folder records. Other runs get their data as it is, so a file stays the run's env
    id and its recipe, and the run folder resumes without the data given again."""
    recorded = _recorded(run_dir) if resume and run_dir is not None else None
    if reward is None and recorded is not None:
        reward = recorded.config.get("reward")
    if not functions and not _names_code(reward):
        return stage_env(data)
    if data is None and recorded is not None:
        data = recorded.env  # the run's own data, as its folder names it
    if data is None:
        return None  # the run's own env, or the refusal of a folder that has none
    name = describe(data)
    source = str(data) if isinstance(data, Path) else data
    return StageData(name, source, tuple(functions), trust_env_code, consent)


def _names_code(reward: Any) -> bool:
    """Whether a run's ``reward`` text names code: a reference, or the mark of a Python
    function without one."""
    if not isinstance(reward, str):
        return False
    items = [item.strip() for item in reward.split(",")]
    return any(is_reward_reference(item) or is_not_importable(item) for item in items)


def _recorded(run_dir: str | Path) -> Any:
    """The record of the run folder a resume continues (:func:`rlx.runs.read_record`); None
    when there is none to read, which planning the run then reports."""
    from rlx.runs import read_record

    try:
        return read_record(run_dir)
    except (RLXError, OSError, ValueError):
        return None


def stage_env(data: Any) -> Any:
    """The run's env of a stage's ``data``, named once: a file or a saved data set as its
    name (``config.json`` records it as the env and the config's ``data``), in-memory data
    in a :class:`~rlx.llm.training.StageData` described by :func:`rlx.llm.data.describe`,
    None as None (a resumed run's own)."""
    if data is None or isinstance(data, str):
        return data
    if isinstance(data, Path):
        return str(data)
    return StageData(describe(data), data)


def rlhf(
    model: str | Path,
    data: Any = None,
    *,
    reward_model: str | Path | None = None,
    env: Any = None,
    env_kwargs: dict[str, Any] | None = None,
    run_dir: str | Path | None = None,
    resume: bool = False,
    trust_env_code: bool = False,
    progress: bool | None = None,
    tensorboard: bool = False,
    stop_on: tuple[str, ...] | list[str] = (),
    **overrides: Any,
) -> StageResult:
    """PPO on the SFT model in ``model`` against the reward model in ``reward_model``, on the
    prompts of ``data`` (JSONL rows ``{"prompt"}``, optionally ``"answer"`` for the gold
    reward). ``stop_on`` names doctor rules that end the run when they fire, e.g.
    ``("reward-hacking", "kl-ref-drift")``; ``RUN_DIR/model`` is then the policy at the stop.

    Given ``env`` instead of ``data`` and ``reward_model``: PPO over multi-turn episodes of a
    text env (the algorithm ``ppo-episodes``, :mod:`rlx.llm.episode_ppo`), the env as
    :func:`grpo` takes it (a factory, ``"package.module:factory"`` or a built-in name, with
    ``env_kwargs``); the env scores its own episodes, ``steps`` is needed, and ``overrides``
    are :class:`~rlx.llm.episode_ppo.EpisodePPOConfig` fields. Resuming such a run needs
    neither (its folder names its env)."""
    if (
        env is not None
        or env_kwargs is not None
        or _plays_episodes(data, resume, run_dir, PPO_EPISODES)
    ):
        if data is not None or reward_model:
            raise ConfigError(
                "env=... trains over episodes of a text env, which scores them itself, and "
                "data=... with reward_model=... over prompt rows; pass one of them."
            )
        if env_kwargs is not None and env is None:
            raise ConfigError("env_kwargs=... are the keyword arguments of env=...; pass env too.")
        return train_stage(
            PPO_EPISODES, model, None, run_dir=run_dir, resume=resume, progress=progress,
            tensorboard=tensorboard, overrides=overrides, stop_on=stop_on, env=env,
            env_kwargs=env_kwargs, trust_env_code=trust_env_code,
        )  # fmt: skip
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
    env_kwargs: dict[str, Any] | None = None,
    trust_env_code: bool = False,
) -> StageResult:
    """``sft(model, data, ...)`` and its siblings: :func:`rlx.train` with the stage's name,
    the data as the run's "env" (:func:`stage_env`, or ``env`` when the face built it, as
    :func:`grpo` does, with ``env_kwargs``), and the model folder as a config field. The data
    is named there only: ``rlx.train`` records a file as the config's ``data`` too.

    ``lora`` may be a dict of ``LoraConfig`` fields or a ``peft.LoraConfig``
    (:func:`rlx.llm.lora.lora_fields`)."""
    fields = lora_fields(dict(overrides))
    if not resume or model:
        fields["model"] = str(model)
    return train(
        name,
        stage_env(data) if env is None else env,
        env_kwargs=env_kwargs,
        run_dir=run_dir,
        resume=resume,
        progress=progress,
        tensorboard=tensorboard,
        stop_on=tuple(stop_on),
        trust_env_code=trust_env_code,
        **fields,
    )


EPISODES = "grpo-episodes"
"""The algorithm :func:`grpo` trains when given a text env instead of data."""
PPO_EPISODES = "ppo-episodes"
"""The algorithm :func:`rlhf` trains when given a text env instead of data."""

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
    "grpo_episodes",
    "reward_env",
    "reward_model",
    "rlhf",
    "rlhf_pipeline",
    "sft",
    "stage_env",
    "train_stage",
]
