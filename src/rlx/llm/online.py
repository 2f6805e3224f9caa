"""What the online stages (GRPO, RLHF-PPO) share: they sample completions of the policy, score
them with a reward function, and keep the policy near a frozen reference.

- :func:`guarded_reward`: the reward functions, run in the sandbox when they execute
  model-written code (``python-tests``), the sandbox's protections recorded in the run;
- :func:`score`: their weighted sum for a batch of completions, checked (one finite number or
  None each), with the data's other columns passed by name (:func:`row_columns`);
- :func:`check_prompt_lengths`: every prompt plus ``max_new_tokens`` fits the model's context;
- :func:`frozen_copy`: the reference ``pi_ref``, a copy of the start model without gradients;
- :func:`evaluate`: greedy exact match on held-out rows that carry answers.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from rlx import metrics as M
from rlx.errors import ConfigError
from rlx.llm.batching import encode_prompt
from rlx.llm.chat import completion_message, is_conversation
from rlx.llm.rewards import RewardFunction, RewardFunctionError, RewardSet

EVAL_ROWS = 200
"""Held-out rows decoded per evaluation: greedy decoding is the slow part of one."""


def guarded_reward(reward: RewardSet, config: Any, run: Any, rows: Sequence[Any] = ()) -> RewardSet:
    """``reward``'s functions as the run calls them: sandboxed when they run model-written
    code (refused where the sandbox cannot isolate it, unless ``config.allow_unisolated``),
    with the sandbox's protections written into the run's summary. A function that can check
    its data (``check_data``: the code rewards' test code or stdin/stdout cases) checks every
    row of ``rows`` first, so a bad row stops the run at its start, naming the row."""
    from rlx.llm.sandbox import prepare_for_run

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


def check_prompt_lengths(tokenizer: Any, model: Any, rows: list[Any], config: Any) -> None:
    """Every prompt plus ``config.max_new_tokens`` must fit the model's context."""
    context = getattr(model.config, "max_position_embeddings", None) or getattr(
        model.config, "n_positions", None
    )
    if context is None:
        return
    for row in rows:
        n = len(encode_prompt(tokenizer, row.prompt))
        if n + config.max_new_tokens > context:
            raise ConfigError(
                f"{config.data}: a prompt of {n} tokens (row {row.prompt[:40]!r}...) plus "
                f"max_new_tokens={config.max_new_tokens} exceeds the model's context of "
                f"{context} tokens; shorten the prompt or lower max_new_tokens."
            )


def frozen_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``model`` in eval mode whose parameters take no gradient: the reference
    (:func:`rlx.llm.lora.reference_of` gives a LoRA model's without a copy)."""
    return copy.deepcopy(model).eval().requires_grad_(False)


def evaluate(model: Any, tokenizer: Any, rows: list[Any], config: Any) -> dict[str, float]:
    """``exact_match`` of the greedy completions of up to :data:`EVAL_ROWS` held-out rows;
    nothing when there are none, they carry no answers, or ``config.eval_exact_match`` is
    off."""
    if not rows or not config.eval_exact_match or getattr(rows[0], "answer", None) is None:
        return {}
    from rlx.llm.generation import exact_match

    return {M.EXACT_MATCH: exact_match((model, tokenizer), rows[:EVAL_ROWS])}


__all__ = [
    "EVAL_ROWS",
    "RewardFunctionError",
    "check_prompt_lengths",
    "completions_for_rewards",
    "evaluate",
    "frozen_copy",
    "guarded_reward",
    "row_columns",
    "score",
]
