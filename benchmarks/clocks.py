"""What a language-model benchmark imports before any clock starts, on both sides.

``import trl`` is lazy: its trainer modules (and with them ``datasets`` and much of
``transformers``) load when a trainer is first touched, so a clock started after ``import trl``
but before ``trl.DPOTrainer`` pays for them; rlx's stages import ``peft`` only when a run asks
for LoRA. Each benchmark's child process calls :func:`import_everything` first, whichever library
it measures, so both clocks start with the same modules loaded and the memory baseline is taken
above the same imports. (Written here, not borrowed: it is the benchmarks' own bookkeeping.)
"""

from __future__ import annotations

import importlib

MODULES = (
    "torch",
    "torch._dynamo",  # torch.optim imports it on first use
    "transformers",
    "datasets",
    "peft",
    "accelerate",
    "trl",
    "trl.trainer.sft_trainer",
    "trl.trainer.dpo_trainer",
    "trl.trainer.reward_trainer",
    "trl.trainer.grpo_trainer",
    "rlx.llm",
    "rlx.llm.lora",
    "rlx.llm.stages.sft",
    "rlx.llm.stages.dpo",
    "rlx.llm.stages.reward_model",
    "rlx.llm.stages.grpo",
    "rlx.llm.stages.rlhf",
)
"""Every module either side may import while it trains (a missing optional one is skipped)."""


def import_everything() -> list[str]:
    """Import :data:`MODULES` (and touch TRL's trainer classes, which its lazy ``__init__``
    resolves on first access); returns the modules that were not installed."""
    missing = []
    for name in MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError:
            missing.append(name)
    try:
        import trl

        for name in ("SFTTrainer", "DPOTrainer", "RewardTrainer", "GRPOTrainer"):
            getattr(trl, name)
    except (ImportError, AttributeError):
        missing.append("trl trainers")
    return missing
