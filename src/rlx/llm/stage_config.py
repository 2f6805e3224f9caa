"""The fields every language-model stage's config shares, and the defaults read from the data
and the model when a run leaves them out (how many passes, steps, evaluations, and the step
size, larger for a LoRA adapter than for full fine-tuning)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeVar

from rlx.core.checks import at_least, positive
from rlx.core.fields import CheckedFields, CheckpointFields
from rlx.errors import ConfigError
from rlx.llm.precision import PRECISIONS


@dataclass(frozen=True)
class _StageBasics(CheckedFields):
    """The fields of :class:`StageConfig` ahead of the checkpoint fields in ``--help``: the
    model, the data, the optimisation, the device and LoRA."""

    model: str = ""
    """the model folder to start from: a local Hugging Face causal LM (nothing is downloaded)"""
    data: str = ""
    """the data: a file (JSONL, JSON, Parquet, CSV) or a folder saved by datasets, with TRL's
    columns (rlx.llm.data); from Python also a datasets.Dataset or a list of dicts. It is the
    run's env (rlx.train(stage, FILE), --data FILE), which config.json records as the env; a
    file named that way is recorded here too"""
    split: str | None = None
    """the split of a DatasetDict or of a saved one (None: train)"""
    seed: int = 0
    """seeds the split, the shuffles and any new weights"""
    steps: int | None = None
    """optimizer steps (None: `epochs` passes over the training rows)"""
    epochs: float | None = None
    """passes over the training rows when `steps` is None (None: enough to see the stage's
    `TARGET_ROWS` rows, between 1 and 10 passes)"""
    batch_size: int = 64
    """rows per optimizer step (pairs for preference data)"""
    grad_accum: int = 1
    """micro-batches per optimizer step (same gradient, less memory); must divide batch_size"""
    learning_rate: float | None = None
    """AdamW step size (None: from the model size, see `default_learning_rate`; with LoRA
    ten times that, as adapters train at about ten times full fine-tuning's step size: 1e-4
    to 2e-4 in the LoRA paper (Hu et al. 2021) and peft's and TRL's LoRA examples against
    1e-5 to 2e-5 for full fine-tuning, and TRL's "LoRA Without Regret" guide)"""
    warmup_ratio: float = 0.05
    """share of the steps with a linear learning-rate warm-up; linear decay to 0 after it"""
    weight_decay: float = 0.0
    """AdamW weight decay"""
    max_grad_norm: float | None = 1.0
    """clip the global gradient norm (None: no clipping)"""
    max_length: int = 256
    """longest sequence in tokens; longer completions lose their tail"""
    eval_fraction: float = 0.1
    """share of the rows held out for evaluation (at most 500 rows)"""
    eval_every: int | None = None
    """optimizer steps between evaluations (None: about 10 per run)"""
    device: str = "auto"
    """auto (CUDA, then MPS, then the CPU), cpu, cuda, cuda:N or mps"""
    dtype: str | None = None
    """model weights: float32, bfloat16 or float16 (None: as saved)"""
    precision: str = "auto"
    """training forward passes: auto (bf16-mixed on a GPU that has bfloat16, fp32
    elsewhere), fp32, or bf16-mixed (matmuls in bfloat16 under torch.autocast;
    weights, gradients, optimizer and losses stay float32; pays on CPUs with AVX512-BF16 or AMX
    and on recent GPUs; on a CPU without them PyTorch emulates bfloat16, far slower than fp32:
    rlx warns there)"""
    num_threads: int | None = None
    """torch CPU threads (None: RLX_NUM_THREADS, default 1; more only pays on big models)"""
    gradient_checkpointing: bool = False
    """recompute activations in the backward pass instead of keeping them: less memory for
    long sequences, one more forward pass of compute"""
    lora: bool = False
    """train a LoRA adapter (peft) instead of every weight; the reference of DPO, GRPO and
    RLHF-PPO is then the same model with the adapter disabled, and checkpoints hold the
    adapter alone (the frozen base is rebuilt from `model`)"""
    lora_r: int = 16
    """LoRA rank"""
    lora_alpha: int = 32
    """LoRA scaling numerator: the update is (lora_alpha / lora_r) B A"""
    lora_dropout: float = 0.0
    """dropout on the LoRA branch's input"""
    lora_target_modules: tuple[str, ...] | None = None
    """module names LoRA adapts (None: every linear layer but the output head, peft's
    all-linear)"""

    def __post_init__(self) -> None:
        super().__post_init__()
        name = type(self).__name__
        at_least(self, "batch_size", 1)
        at_least(self, "grad_accum", 1)
        if self.batch_size % self.grad_accum:
            raise ConfigError(
                f"{name}: grad_accum={self.grad_accum} must divide batch_size={self.batch_size}."
            )
        for count in ("steps", "eval_every", "num_threads"):  # None: chosen by rlx
            if getattr(self, count) is not None:
                at_least(self, count, 1)
        for amount in ("epochs", "learning_rate"):
            if getattr(self, amount) is not None:
                positive(self, amount)
        at_least(self, "max_length", 2)
        at_least(self, "lora_r", 1)
        positive(self, "lora_alpha")
        if not 0 <= self.lora_dropout < 1:
            raise ConfigError(f"{name}: lora_dropout={self.lora_dropout} must be in [0, 1).")
        for share in ("warmup_ratio", "eval_fraction"):
            if not 0 <= getattr(self, share) < 1:
                raise ConfigError(f"{name}: {share}={getattr(self, share)} must be in [0, 1).")
        if self.precision not in PRECISIONS:
            raise ConfigError(
                f"{name}: precision={self.precision!r} must be one of {', '.join(PRECISIONS)}."
            )


@dataclass(frozen=True)
class StageConfig(CheckpointFields, _StageBasics):
    """Fields every language-model stage takes. ``None`` means "chosen from the model and the
    data"; the chosen value is written into the run's ``config.json``. The checkpoint fields
    (:class:`rlx.core.fields.CheckpointFields`) count optimizer steps."""


Config = TypeVar("Config", bound=StageConfig)
"""A stage's own config class (each stage's loop functions take and keep its type)."""


LORA_LR_FACTOR = 10.0
"""How much larger the default step size is when a LoRA adapter trains than when every weight
does. An adapter's update ``(alpha / r) B A`` starts from ``B = 0`` and moves in a rank-``r``
subspace, so at full fine-tuning's step size it barely moves within a run; LoRA practice
trains it at about ten times that step size: the LoRA paper (Hu et al., 2021) trains GPT-2's
adapters at 2e-4, peft's and TRL's LoRA examples use 1e-4 to 2e-4 where full fine-tuning
uses 1e-5 to 2e-5, and Schulman et al.'s "LoRA Without Regret" (2025, reproduced in TRL's
guide of that name) finds LoRA's best step size about ten times full fine-tuning's.

The factor applies only at pretrained scale (:data:`PRETRAINED_SCALE` parameters and up), where
the full fine-tuning default is the 1e-5 band those findings start from. Below it the default
step size is already at LoRA practice's 1e-4 or above (1e-3 for tiny models trained from
scratch): ten times that overshoots, and a small model's DPO with LoRA fell below its SFT start."""

PRETRAINED_SCALE = 100_000_000
"""Parameters from which a model is taken for a pretrained one being fine-tuned: the default
step size drops to the fine-tuning band (1e-5) there, and LoRA's factor lifts it back."""


def default_learning_rate(num_params: int, scale: float = 1.0, lora: bool = False) -> float:
    """The step size a stage uses when none is given: ``scale`` times 1e-3 below 10M
    parameters (tiny models trained from scratch), 1e-4 below :data:`PRETRAINED_SCALE`
    (100M), 1e-5 from there (fine-tuning pretrained models, as TRL's defaults of 1e-5 to 2e-5
    do); from :data:`PRETRAINED_SCALE` on, ``LORA_LR_FACTOR`` (10) times that when ``lora`` (a
    LoRA adapter trains, the base is frozen)."""
    if num_params < 10_000_000:
        return 1e-3 * scale
    if num_params < PRETRAINED_SCALE:
        return 1e-4 * scale
    return 1e-5 * scale * (LORA_LR_FACTOR if lora else 1.0)


def resolve_epochs(config: StageConfig, train_rows: int, target_rows: int) -> float:
    """``epochs``, or, when it is None, the passes that show the model about ``target_rows``
    rows: many passes over a small data set, one over a large one (clamped to 1..10)."""
    if config.epochs is not None:
        return config.epochs
    return round(min(10.0, max(1.0, target_rows / max(train_rows, 1))), 2)


def resolve_steps(config: StageConfig, train_rows: int) -> int:
    """``steps``, or ``ceil(epochs * rows / batch_size)`` when it is None."""
    if config.steps is not None:
        return config.steps
    assert config.epochs is not None, "resolve_epochs first"
    return max(1, math.ceil(config.epochs * train_rows / config.batch_size))


def resolve_eval_every(config: StageConfig, steps: int) -> int:
    return config.eval_every or max(1, steps // 10)
