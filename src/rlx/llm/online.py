"""The online loop of the language-model stages (GRPO, RLHF-PPO) and what they share: they
sample completions of the policy, score them with a reward function, and keep the policy near a
frozen reference.

- :func:`run_online`: the registered ``train`` of both: load and split the prompts, load the
  model and its reference, complete the config, then per step draw prompts, let the algorithm
  (an :class:`OnlineUpdate`) sample, score and update, log, evaluate and checkpoint;
- :func:`guarded_reward`: the reward functions, run in the sandbox when they execute
  model-written code (``python-tests``), the sandbox's protections recorded in the run;
- :func:`score`: their weighted sum for a batch of completions, checked (one finite number or
  None each), with the data's other columns passed by name (:func:`row_columns`);
- :func:`check_prompt_lengths`: every prompt plus ``max_new_tokens`` fits the model's context;
- :func:`evaluate`: greedy exact match on held-out rows that carry answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor

from rlx import metrics as M
from rlx.errors import ConfigError
from rlx.llm.batching import encode_prompt
from rlx.llm.chat import completion_message, is_conversation
from rlx.llm.parallel import DataParallel
from rlx.llm.precision import attention_for
from rlx.llm.rewards import RewardFunction, RewardFunctionError, RewardSet
from rlx.llm.stage_config import StageConfig, resolve_eval_every
from rlx.llm.training import (
    MODEL_DIR,
    EpochSampler,
    StageResult,
    complete_config,
    data_name,
    make_optimizer,
    resolved,
    restore_state,
    set_learning_rate,
    split_rows,
    stage_rows,
    stage_state,
    trainable_share,
)
from rlx.runs.handle import RunHandle


def guarded_reward(
    reward: RewardSet, config: Any, run: RunHandle, rows: Sequence[Any] = ()
) -> RewardSet:
    """``reward``'s functions as the run calls them: sandboxed when they run model-written
    code (refused where the sandbox cannot isolate it, unless ``config.allow_unisolated``),
    with the sandbox's protections written into the run's summary. A function that can check
    its data (``check_data``: the code rewards' test code or stdin/stdout cases) checks every
    row of ``rows`` first, so a bad row stops the run at its start, naming the row."""
    from rlx.sandbox import prepare_for_run

    protections: list[Any] = []
    if rows:
        prompts, columns = [row.prompt for row in rows], row_columns(rows)
        for function in reward.functions:
            check = getattr(function, "check_data", None)
            if check is not None:
                check(prompts, **columns)

    def guard(function: RewardFunction) -> RewardFunction:
        guarded, sandbox = prepare_for_run(function, config.allow_unisolated)
        if sandbox is not None:
            protections.append(sandbox)
        return guarded

    out = reward.map(guard)
    if protections:
        run.add_to_summary(sandbox=protections[0])
    return out


def score(
    reward: RewardSet | RewardFunction,
    prompts: Sequence[Any],
    completions: Sequence[Any],
    columns: Mapping[str, Sequence[Any]] | None = None,
    completion_ids: Sequence[Sequence[int]] | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """The combined reward ``[N]`` of the completions and each function's mean as
    ``reward/<name>`` (:meth:`rlx.llm.rewards.RewardSet.score`); a bare function is a set
    of one. Raises :class:`~rlx.llm.rewards.RewardFunctionError` naming a function that
    fails."""
    rewards = reward if isinstance(reward, RewardSet) else RewardSet([reward], [1.0])
    return rewards.score(prompts, completions, columns, completion_ids)


def completions_for_rewards(prompts: Sequence[Any], texts: Sequence[str]) -> list[Any]:
    """Decoded completions as reward functions receive them (TRL's form): the text for a
    text prompt, one assistant message for a conversational one."""
    return [completion_message(t) if is_conversation(p) else t
            for p, t in zip(prompts, texts, strict=True)]  # fmt: skip


def row_columns(rows: Sequence[Any], repeat: int = 1) -> dict[str, list[Any]]:
    """The extra columns of prompt rows (:class:`rlx.llm.data.PromptRow`), each value
    repeated ``repeat`` times so they line up with ``repeat`` completions per prompt."""
    names = {name for row in rows for name in getattr(row, "columns", {})}
    return {name: [row.columns.get(name) for row in rows for _ in range(repeat)]
            for name in sorted(names)}  # fmt: skip


def check_prompt_lengths(
    tokenizer: Any, model: Any, rows: list[Any], config: Any, data: str | None = None
) -> None:
    """Every prompt plus ``config.max_new_tokens`` must fit the model's context; ``data``
    names the rows in the error (None: ``config.data``)."""
    context = getattr(model.config, "max_position_embeddings", None) or getattr(
        model.config, "n_positions", None
    )
    if context is None:
        return
    for row in rows:
        n = len(encode_prompt(tokenizer, row.prompt))
        if n + config.max_new_tokens > context:
            raise ConfigError(
                f"{data or config.data}: a prompt of {n} tokens (row {row.prompt[:40]!r}...) plus "
                f"max_new_tokens={config.max_new_tokens} exceeds the model's context of "
                f"{context} tokens; shorten the prompt or lower max_new_tokens."
            )


def evaluate(model: Any, tokenizer: Any, rows: list[Any], config: Any) -> dict[str, float]:
    """``exact_match`` of the greedy completions of every held-out row, with how many and its
    interval (:func:`rlx.llm.generation.held_out_exact_match`); nothing when there are none,
    they carry no answers, or ``config.eval_exact_match`` is off."""
    if not rows or not config.eval_exact_match or getattr(rows[0], "answer", None) is None:
        return {}
    from rlx.llm.generation import held_out_exact_match

    return held_out_exact_match((model, tokenizer), rows)


# ============================================================================ the online loop
@dataclass(frozen=True)
class OnlineSetup:
    """What :func:`run_online` hands an algorithm to build its update from: the completed
    config, the loaded policy ``model`` and its ``tokenizer``, the frozen ``reference``
    (None when the algorithm needs none), the training prompts and the guarded reward."""

    config: Any
    model: Any
    tokenizer: Any
    reference: Any
    train_rows: list[Any]
    reward: RewardSet


class OnlineUpdate(Protocol):
    """An online algorithm's half of a step; :func:`run_online` owns the rest (the prompts
    drawn, the step size, logging, evaluation, checkpoints, the saved model).

    Attributes:
        trained: the module the optimizer steps and a checkpoint holds (the policy, or the
            policy with a value head).
        lm: the language model that samples, is evaluated and is saved.
        tokenizer: its tokenizer.
        save_when_stopped: whether a run stopped before its last step still saves ``lm`` as
            the run's model (RLHF-PPO: a doctor's stop leaves the policy before the harm).
    """

    @property
    def trained(self) -> torch.nn.Module: ...

    @property
    def lm(self) -> Any: ...

    @property
    def tokenizer(self) -> Any: ...

    @property
    def save_when_stopped(self) -> bool: ...

    def step(
        self, rows: list[Any], optimizer: torch.optim.Optimizer, parallel: DataParallel | None
    ) -> dict[str, float]:
        """Sample completions of ``rows``' prompts, score them, update: the step's metrics,
        averaged over the processes."""
        ...

    def after_step(self, metrics: dict[str, float], step: int, prompts: int) -> None:
        """React to a step's metrics (RLHF-PPO moves its KL coefficient)."""
        ...

    def state(self) -> dict[str, Any]:
        """What a checkpoint holds besides the weights, optimizer, sampler and RNG."""
        ...

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Put :meth:`state` back from a checkpoint."""
        ...


def run_online(
    config: StageConfig,
    data: Any,
    run: RunHandle,
    *,
    rewards: Callable[[Any], RewardSet],
    build: Callable[[OnlineSetup], OnlineUpdate],
    lr_scale: float,
    target_rows: int,
    reference: Callable[[Any], bool] = lambda config: True,
    parallel: DataParallel | None = None,
) -> StageResult:
    """The registered ``train`` of an online stage: load and split the prompts (``data``, the
    run's env: :func:`rlx.llm.training.stage_rows`), guard the ``rewards(config)``, load the
    policy, complete the config (:func:`rlx.llm.training.complete_config`),
    freeze the reference when ``reference(config)``, ``build`` the algorithm's update, then
    the steps; the model is saved at the end.

    ``parallel`` (:class:`rlx.llm.parallel.DataParallel`, handed in from above): each process
    samples and scores its shard of every step's prompts, and the gradients are averaged over
    the processes."""
    from rlx.core.threads import set_torch_threads
    from rlx.llm.data import prompt_rows
    from rlx.llm.lora import load_for_training, reference_of
    from rlx.llm.models import count_parameters

    set_torch_threads(config.num_threads)
    # each process samples its own completions: its own random stream
    torch.manual_seed(config.seed + (parallel.rank if parallel is not None else 0))
    opened = config
    config = resolved(config)
    rows = prompt_rows(stage_rows(config, data))
    train_rows, held_out = split_rows(rows, config.eval_fraction, config.seed)
    reward = guarded_reward(rewards(config), config, run, train_rows + held_out)
    model, tokenizer = load_for_training(config)
    check_prompt_lengths(tokenizer, model, train_rows + held_out, config, data_name(config, data))
    config = complete_config(
        config, run, len(train_rows), count_parameters(model), lr_scale, target_rows, opened
    )
    run.add_to_summary(**trainable_share(model))
    # LoRA: the reference is the policy with its adapter off, no second copy of the weights
    frozen = reference_of(model, config.model) if reference(config) else None
    assert config.steps is not None and config.learning_rate is not None  # completed above
    update = build(OnlineSetup(config, model, tokenizer, frozen, train_rows, reward))
    optimizer = make_optimizer(update.trained, config.learning_rate, config.weight_decay)
    sampler = EpochSampler(len(train_rows), config.batch_size, config.seed)
    step = 0
    if run.resumed_state is not None:
        restore_state(run.resumed_state, update.trained, optimizer, sampler)
        update.load_state(run.resumed_state)
        step = int(run.resumed_step or 0)
    with attention_for(model, config.precision), attention_for(frozen, config.precision):
        step, last_eval = online_steps(
            update, optimizer, sampler, train_rows, held_out, config, run, step, parallel
        )
    run.save_checkpoint(step, {**stage_state(update.trained, optimizer, sampler), **update.state()})
    finished = step >= config.steps or (update.save_when_stopped and step > 0)
    if finished and run.writer:
        from rlx.llm.lora import save_trained

        save_trained(update.lm, tokenizer, run.dir, MODEL_DIR)
    summary = run.finish(step, last_eval)
    return StageResult(
        run.dir, run.dir / MODEL_DIR, last_eval, float(summary["wall_s"]), summary["status"]
    )


def online_steps(
    update: OnlineUpdate,
    optimizer: torch.optim.Optimizer,
    sampler: EpochSampler,
    train_rows: list[Any],
    held_out: list[Any],
    config: Any,
    run: RunHandle,
    step: int,
    parallel: DataParallel | None = None,
) -> tuple[int, dict[str, float]]:
    """The steps from ``step`` to ``config.steps`` (or a stop request): the step reached and
    the last evaluation (every ``eval_every`` steps and at the last)."""
    eval_every = resolve_eval_every(config, config.steps)
    last_eval: dict[str, float] = {}
    while step < config.steps and not run.stop_requested:
        lr = set_learning_rate(
            optimizer, config.learning_rate, step, config.steps, config.warmup_ratio
        )
        batch = sampler.next()
        mine = batch if parallel is None else parallel.shard(batch)
        metrics = update.step([train_rows[i] for i in mine], optimizer, parallel)
        step += 1
        update.after_step(metrics, step, len(batch))
        metrics[M.LR] = lr
        if step % eval_every == 0 or step == config.steps:
            last_eval = evaluate(update.lm, update.tokenizer, held_out, config)
            metrics.update(last_eval)
        run.log(step, metrics)
        # the last step's checkpoint is written once, after the loop
        if step < config.steps and run.checkpoint_due():
            state = {**stage_state(update.trained, optimizer, sampler), **update.state()}
            run.save_checkpoint(step, state)
    return step, last_eval


__all__ = [
    "OnlineSetup",
    "OnlineUpdate",
    "RewardFunctionError",
    "check_prompt_lengths",
    "completions_for_rewards",
    "evaluate",
    "guarded_reward",
    "online_steps",
    "row_columns",
    "run_online",
    "score",
]
