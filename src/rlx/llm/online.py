"""What the online stages (GRPO, RLHF-PPO) share: they sample completions of the policy, score
them with a reward function, and keep the policy near a frozen reference.

- :func:`guarded_reward`: the reward function, run in the sandbox when it executes
  model-written code (``python-tests``), the sandbox's protections recorded in the run;
- :func:`score`: its values for a batch of completions, checked (one finite number each);
- :func:`check_prompt_lengths`: every prompt plus ``max_new_tokens`` fits the model's context;
- :func:`frozen_copy`: the reference ``pi_ref``, a copy of the start model without gradients;
- :func:`evaluate`: greedy exact match on held-out rows that carry answers.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from rlx import metrics as M
from rlx.errors import ConfigError, RLXError
from rlx.llm.batching import encode_prompt
from rlx.llm.tasks import RewardFunction

EVAL_ROWS = 200
"""Held-out rows decoded per evaluation: greedy decoding is the slow part of one."""


class RewardFunctionError(RLXError):
    """A reward function raised, or returned something other than one finite number per
    completion."""


def guarded_reward(reward: RewardFunction, config: Any, run: Any) -> RewardFunction:
    """``reward`` as the run calls it: sandboxed when it runs model-written code (refused
    where the sandbox cannot isolate it, unless ``config.allow_unisolated``), with the
    sandbox's protections written into the run's summary."""
    from rlx.llm.sandbox import prepare_for_run

    guarded, sandbox = prepare_for_run(reward, config.allow_unisolated)
    if sandbox is not None:
        run.add_to_summary(sandbox=sandbox)
    return guarded


def score(
    reward: RewardFunction, prompts: list[str], texts: list[str], answers: list[str]
) -> Tensor:
    """The reward function's values as a float32 tensor, or a RewardFunctionError that names
    the function."""
    name = getattr(reward, "__name__", repr(reward))
    try:
        values = reward(prompts, texts, answers=answers)
    except Exception as exc:
        raise RewardFunctionError(
            f"the reward function {name} raised {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(values, Sequence) or len(values) != len(texts):
        got = len(values) if isinstance(values, Sequence) else type(values).__name__
        raise RewardFunctionError(
            f"the reward function {name} must return one number per completion "
            f"({len(texts)}), got {got}."
        )
    out = torch.tensor([float(v) for v in values], dtype=torch.float32)
    if not torch.isfinite(out).all():
        raise RewardFunctionError(f"the reward function {name} returned NaN or inf.")
    return out


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
    """A copy of ``model`` in eval mode whose parameters take no gradient: the reference."""
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
    "evaluate",
    "frozen_copy",
    "guarded_reward",
    "score",
]
