"""What ``rlx.load`` returns for a language-model run: :class:`LoadedModel`, the trained causal
LM as a :class:`rlx.core.agent.TextAgent`, whose observations are prompts and whose actions
are their completions.

(The reward model's run loads as :class:`rlx.llm.stages.reward_model.RewardScorer`, whose
actions are scores.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlx.llm.generation import greedy, sample

DEFAULT_MAX_NEW_TOKENS = 16
"""Longest completion ``act`` writes when the run's config names none (SFT, DPO)."""


@dataclass
class LoadedModel:
    """A trained stage's causal LM: ``model``, ``tokenizer``, the run's ``config`` and
    ``run_dir``.

    ``act(prompt)`` is the prompt's completion (the text after it, without eos): the greedy
    one with ``deterministic=True``, else one sampled at the run's ``temperature`` and
    ``top_p`` (1.0 each for a stage that does not sample). Completions are at most the run's
    ``max_new_tokens`` long (16 for a stage without one).
    """

    model: Any
    tokenizer: Any
    config: Any = None
    run_dir: Path | None = None

    @classmethod
    def from_checkpoint(cls, config: Any, state: dict[str, Any]) -> LoadedModel:
        """The start model of ``config.model`` with the checkpoint's weights (with LoRA the
        checkpoint holds the adapter alone, on the base rebuilt from ``config.model``)."""
        from rlx.llm.lora import load_for_training, merged
        from rlx.llm.training import load_model_state

        # the trained structure, LoRA included, on the CPU whatever device it trained on
        on_cpu = dataclasses.replace(config, device="cpu", gradient_checkpointing=False)
        model, tokenizer = load_for_training(on_cpu)
        load_model_state(model, state["model"])
        return cls(merged(model).eval(), tokenizer, config)

    @property
    def max_new_tokens(self) -> int:
        """The longest completion ``act`` writes."""
        return int(getattr(self.config, "max_new_tokens", DEFAULT_MAX_NEW_TOKENS))

    def act(self, observation: str, deterministic: bool = True) -> str:
        """The completion of one prompt."""
        return self.act_batch([observation], deterministic)[0]

    def act_batch(self, observations: Sequence[str], deterministic: bool = True) -> list[str]:
        """The completions of several prompts, in order, decoded in batches."""
        prompts = list(observations)
        if deterministic:
            return self.greedy(prompts, self.max_new_tokens)
        completions = sample(
            self.model,
            self.tokenizer,
            prompts,
            max_new_tokens=self.max_new_tokens,
            temperature=float(getattr(self.config, "temperature", 1.0)),
            top_p=float(getattr(self.config, "top_p", 1.0)),
        )
        return self.tokenizer.batch_decode(completions, skip_special_tokens=True)

    def greedy(self, prompts: list[str], max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS) -> list[str]:
        """The greedy completions of ``prompts``, at most ``max_new_tokens`` tokens each."""
        return greedy(self.model, self.tokenizer, prompts, max_new_tokens=max_new_tokens)


__all__ = ["LoadedModel"]
