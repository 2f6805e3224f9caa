"""Supervised fine-tuning (stage 1 of RLHF): learn the demonstrations' completions.

    L_SFT = -(1 / N) sum_rows sum_t m_t log pi(x_t | x_<t)

``m_t`` marks the completion's tokens and its eos (the prompt is context, never a target) and
``N`` is the batch's number of such tokens, so every completion token weighs the same however
the batch is split into micro-batches. Logged per step: ``loss``, ``token_accuracy``; held out:
``eval_loss``, ``eval_token_accuracy`` and, with ``eval_exact_match``, ``exact_match``: the
share of held-out prompts whose greedy completion equals the demonstration.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlx import metrics as M
from rlx import registry
from rlx.llm.batching import (
    EncodedSequence,
    SequenceTable,
    encode_conversations,
    encode_prompt_completions,
    forward_logits,
    pad_batch,
)
from rlx.llm.data import ChatExample
from rlx.llm.losses import sft_loss
from rlx.llm.sharding import check_fsdp
from rlx.llm.stage_config import StageConfig
from rlx.llm.training import (
    Loaded,
    Prepared,
    StageResult,
    run_stage,
    save_stage_model,
    split_rows,
    stage_rows,
    trains_adapter,
)
from rlx.runs.handle import RunHandle

TARGET_ROWS = 20_000
"""Rows (pairs) a run sees when neither steps nor epochs is given."""


@dataclass(frozen=True)
class SFTConfig(StageConfig):
    """Supervised fine-tuning on rows ``{"text"}``, ``{"prompt", "completion"}`` or
    ``{"messages"}`` (TRL's shapes, :mod:`rlx.llm.data`)."""

    eval_exact_match: bool = True
    """report the greedy exact-match accuracy on held-out prompts at each evaluation"""
    fsdp: bool = False
    """under torchrun, shard the weights, gradients and optimizer state over the processes
    (torch FSDP2, each decoder layer then the whole model) instead of keeping them whole on
    each: for models that do not fit one device; checkpoints and the model are written
    whole (not with LoRA)"""


def prepare(config: SFTConfig, data: Any = None) -> Prepared:
    """Rows read and split, the model loaded (and sharded with ``fsdp``): what sizes the
    config's defaults; :class:`SFTStage` is built once the config is complete."""
    from rlx.llm.data import sft_examples
    from rlx.llm.lora import load_for_training
    from rlx.llm.models import count_parameters
    from rlx.llm.sharding import shard_model

    rows = sft_examples(stage_rows(config, data))
    train_rows, held_out = split_rows(rows, config.eval_fraction, config.seed)
    model, tokenizer = load_for_training(config)
    num_params = count_parameters(model)
    if config.fsdp:
        model = shard_model(model)
    loaded = Loaded(model, tokenizer, train_rows, held_out)
    return Prepared(len(train_rows), num_params, functools.partial(SFTStage, loaded))


class SFTStage:
    """SFT as the offline loop (:func:`rlx.llm.training.train_loop`) trains it: the rows
    tokenised once, the loss over row indices, the held-out evaluation, the saved model."""

    def __init__(self, loaded: Loaded, config: SFTConfig) -> None:
        self.model, self.tokenizer, self.config = loaded.model, loaded.tokenizer, config
        self.held_out = loaded.held_out
        encoded = encode(self.tokenizer, loaded.train_rows, config.max_length)
        self.held = encode(self.tokenizer, loaded.held_out, config.max_length)
        self.units = np.array([sum(e.loss_mask) for e in encoded], dtype=np.float64)
        self.table = SequenceTable(encoded, self.tokenizer.pad_token_id)

    def loss(self, idx: np.ndarray) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The summed token loss of rows ``idx`` (the loop divides by the batch's count)."""
        batch = self.table.batch(idx).to(self.config.device)
        loss_sum, metrics = sft_loss(forward_logits(self.model, batch), batch, num_target_tokens=1)
        metrics[M.LOSS] = loss_sum.detach() / batch.target_mask.sum().clamp(min=1)
        return loss_sum, metrics

    def evaluate(self) -> dict[str, float]:
        return evaluate_sft(self.model, self.tokenizer, self.held, self.held_out, self.config)

    def save_model(self, out: Path) -> None:
        save_stage_model(self.model, self.tokenizer, out, self.config.fsdp)


def encode(tokenizer: Any, rows: list[Any], max_length: int) -> list[EncodedSequence]:
    """Prompt-completion rows (a ``text`` row is a completion after an empty prompt) and
    whole conversations (the loss on the assistant's turns), in the rows' order."""
    chats = [i for i, r in enumerate(rows) if isinstance(r, ChatExample)]
    pairs = [i for i, r in enumerate(rows) if not isinstance(r, ChatExample)]
    out: list[Any] = [None] * len(rows)
    encoded_pairs = encode_prompt_completions(
        tokenizer, [rows[i].prompt for i in pairs], [rows[i].completion for i in pairs], max_length
    )
    encoded_chats = encode_conversations(tokenizer, [rows[i].messages for i in chats], max_length)
    for i, seq in zip(pairs + chats, encoded_pairs + encoded_chats, strict=True):
        out[i] = seq
    return out


def evaluate_sft(
    model: Any, tokenizer: Any, held: list[EncodedSequence], rows: list[Any], config: SFTConfig
) -> dict[str, float]:
    """Held-out token loss and accuracy, and greedy exact match on every held-out prompt
    (with how many and its interval)."""
    if not held:
        return {}
    totals = {"loss": 0.0, "token_accuracy": 0.0}
    tokens = 0
    for start in range(0, len(held), 256):
        batch = pad_batch(held[start : start + 256], tokenizer.pad_token_id).to(config.device)
        n = int(batch.target_mask.sum())
        _, metrics = sft_loss(forward_logits(model, batch), batch)
        for key in totals:
            totals[key] += float(metrics[key]) * n
        tokens += n
    out = {f"eval_{k}": v / max(tokens, 1) for k, v in totals.items()}
    prompted = [r for r in rows if not isinstance(r, ChatExample) and r.prompt]
    if config.eval_exact_match and prompted:
        from rlx.llm.generation import held_out_exact_match

        out.update(held_out_exact_match((model, tokenizer), prompted))
    return out


def train(config: SFTConfig, data: Any, run: RunHandle, *, parallel: Any = None) -> StageResult:
    """The registered ``train``; ``parallel``: this process's part of a data-parallel run
    (:class:`rlx.llm.parallel.DataParallel`), handed in from above; with ``fsdp`` it also
    shards the model over those processes (:mod:`rlx.llm.sharding`)."""
    check_fsdp(config, parallel, "sft", adapter=trains_adapter(config))
    return run_stage(
        config, run, prepare, lr_scale=1.0, target_rows=TARGET_ROWS, data=data, parallel=parallel
    )


def load(config: SFTConfig, data_id: str, state: dict) -> Any:
    """The trained model as a :class:`rlx.llm.agent.LoadedModel`."""
    from rlx.llm.agent import LoadedModel

    return LoadedModel.from_checkpoint(config, state)


ALGORITHM = registry.register(
    registry.Algorithm(
        name="sft",
        config=SFTConfig,
        train=train,
        load=load,
        budget_field="steps",
        unit="steps",
    )
)
