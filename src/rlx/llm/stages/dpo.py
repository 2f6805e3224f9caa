"""Direct Preference Optimisation (Rafailov et al., 2023): the first method to try for alignment
from preferences (``docs/reference/choose-a-method.md``), with no reward model and no sampling.

    L_DPO = -E[log sigma(beta [(log pi(y+|x) - log pi_ref(y+|x))
                                - (log pi(y-|x) - log pi_ref(y-|x))])]
          + alpha E[-log pi(y+|x) / |y+|]          (rpo_alpha; 0 by default)

``pi_ref`` is the start model, frozen. Its sequence log-probabilities never change, so they
are computed once for every pair before training and the reference model is not kept: each
step runs only the policy, on chosen and rejected completions in one forward pass. Logged per
step: ``loss``, ``chosen_reward`` and ``rejected_reward`` (``beta (log pi - log pi_ref)``),
``reward_margin``, ``pair_accuracy``, ``log_ratio_ref`` (the mean ``log pi - log pi_ref`` of
the pairs' completions: a log-ratio of fixed data, not a KL); held out: the same with
``eval_`` and, with ``eval_exact_match``, ``exact_match``: the share of held-out prompts whose
greedy completion is the chosen one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from rlx import metrics as M
from rlx import registry
from rlx.core.checks import at_least, positive
from rlx.llm.batching import (
    PairTable,
    completion_lengths,
    packed_pair_logprobs,
    sequence_logprobs,
)
from rlx.llm.losses import dpo_loss
from rlx.llm.sharding import check_fsdp
from rlx.llm.stages.reward_model import encode_pairs, pair_table, use_packing
from rlx.llm.training import (
    Prepared,
    Stage,
    StageConfig,
    StageResult,
    run_stage,
    split_rows,
    stage_entry,
    stage_rows,
    trains_adapter,
)

EVAL_ROWS_GENERATED = 200
LR_SCALE = 0.1
"""DPO's default step size relative to SFT's: it moves a trained model, and TRL's default is
lower still (5e-7 against SFT's 2e-5)."""

TARGET_ROWS = 4_000
"""Rows (pairs) a run sees when neither steps nor epochs is given."""


@dataclass(frozen=True)
class DPOConfig(StageConfig):
    """DPO on ``{"prompt", "chosen", "rejected"}`` rows (text or conversations, or the
    implicit-prompt form, :mod:`rlx.llm.data`), from a (usually SFT) model."""

    beta: float = 0.1
    """strength of the implicit KL to the reference: small lets the policy move further"""
    pack_pairs: bool | None = None
    """run chosen and rejected in one row that shares the prompt (None: when the model gives
    the same log-probabilities that way, checked on a few pairs at the start)"""
    rpo_alpha: float = 0.0
    """weight of an NLL term on the chosen completion (RPO, Pang et al. 2024): 1.0 keeps the
    correct answers likely on verifier tasks, where plain DPO can lower chosen and rejected
    together; 0: the DPO loss alone"""
    eval_exact_match: bool = True
    """report the share of held-out prompts whose greedy completion is the chosen one"""
    fsdp: bool = False
    """under torchrun, shard the weights, gradients and optimizer state over the processes
    (torch FSDP2, each decoder layer then the whole model) instead of keeping them whole on
    each: for models that do not fit one device; checkpoints and the model are written
    whole (not with LoRA)"""

    def __post_init__(self) -> None:
        super().__post_init__()
        positive(self, "beta")
        at_least(self, "rpo_alpha", 0.0)


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
    return stage_entry(
        "dpo",
        model,
        data,
        run_dir=run_dir,
        resume=resume,
        progress=progress,
        tensorboard=tensorboard,
        overrides=overrides,
    )


def pair_logprobs(
    model: Any, table: PairTable, idx: np.ndarray, device: str, packing: bool
) -> tuple[Tensor, Tensor, Tensor]:
    """``log pi(y+|x)``, ``log pi(y-|x)`` and the chosen completions' lengths of pairs ``idx``:
    one forward pass, packed or as interleaved rows."""
    if packing:
        packed = table.packed(idx).to(device)
        chosen, rejected = packed_pair_logprobs(model, packed)
        return chosen, rejected, packed.chosen_mask.sum(dim=-1)
    batch = table.separate(idx).to(device)
    logps = sequence_logprobs(model, batch)
    return logps[0::2], logps[1::2], completion_lengths(batch)[0::2]


@torch.no_grad()
def reference_logprobs(
    model: Any, table: PairTable, device: str, packing: bool, chunk: int = 128
) -> tuple[Tensor, Tensor]:
    """``log pi_ref(y+|x)`` and ``log pi_ref(y-|x)`` of every pair, ``[P]`` each, in
    batches: the reference's whole contribution to training."""
    was_training = model.training
    model.eval()
    pairs = len(table.rows) // 2
    chosen, rejected = [], []
    for start in range(0, pairs, chunk):
        idx = np.arange(start, min(start + chunk, pairs))
        c, r, _ = pair_logprobs(model, table, idx, device, packing)
        chosen.append(c)
        rejected.append(r)
    model.train(was_training)
    return torch.cat(chosen), torch.cat(rejected)


def prepare(config: DPOConfig, data: Any = None) -> Prepared:
    from rlx.llm.data import preference_pairs
    from rlx.llm.lora import load_for_training, save_trained
    from rlx.llm.models import count_parameters
    from rlx.llm.sharding import save_full_model, shard_model

    rows = preference_pairs(stage_rows(config, data))
    train_rows, held_out = split_rows(rows, config.eval_fraction, config.seed)
    # with LoRA the adapter starts at B = 0, so the model scored below before any step is
    # the adapter-disabled model: the reference costs no copy of the weights
    model, tokenizer = load_for_training(config)
    num_params = count_parameters(model)
    if config.fsdp:
        model = shard_model(model)

    def build(config: DPOConfig) -> Stage:
        pad_id = tokenizer.pad_token_id
        encoded = encode_pairs(tokenizer, train_rows, config.max_length)
        held = encode_pairs(tokenizer, held_out, config.max_length)
        packing = use_packing(
            config.pack_pairs,
            lambda packed: packed_pair_logprobs(model, packed),
            lambda batch: sequence_logprobs(model, batch),
            encoded,
            pad_id,
        )
        train_table, held_table = pair_table(encoded, pad_id), pair_table(held, pad_id)
        # the start model is the reference: score every pair with it before any step
        ref_chosen, ref_rejected = reference_logprobs(model, train_table, config.device, packing)
        held_ref = reference_logprobs(model, held_table, config.device, packing) if held else None

        def pair_loss(
            table: PairTable, idx: np.ndarray, ref_c: Tensor, ref_r: Tensor
        ) -> tuple[Tensor, dict[str, Tensor]]:
            chosen, rejected, chosen_len = pair_logprobs(model, table, idx, config.device, packing)
            key = torch.from_numpy(idx)
            loss, metrics = dpo_loss(chosen, rejected, ref_c[key], ref_r[key], config.beta)
            if config.rpo_alpha > 0:
                # per-token NLL of the chosen completion: L += alpha * -log pi(y+|x) / |y+|
                nll = -(chosen / chosen_len).mean()
                loss = loss + config.rpo_alpha * nll
                metrics[M.LOSS] = loss.detach()
                metrics["nll_chosen"] = nll.detach()
            return loss, metrics

        def loss(idx: np.ndarray) -> tuple[Tensor, dict[str, Tensor]]:
            mean, metrics = pair_loss(train_table, idx, ref_chosen, ref_rejected)
            return mean * len(idx), metrics

        def evaluate() -> dict[str, float]:
            if held_ref is None:
                return {}
            totals: dict[str, float] = {}
            for start in range(0, len(held_out), 128):
                idx = np.arange(start, min(start + 128, len(held_out)))
                _, metrics = pair_loss(held_table, idx, *held_ref)
                for k, v in metrics.items():
                    totals[f"eval_{k}"] = totals.get(f"eval_{k}", 0.0) + float(v) * len(idx)
            out = {k: v / len(held_out) for k, v in totals.items()}
            if config.eval_exact_match:
                from rlx.llm.generation import exact_match
                from rlx.llm.tasks import SFTExample

                rows = [SFTExample(r.prompt, r.chosen) for r in held_out[:EVAL_ROWS_GENERATED]]
                if all(r.prompt for r in rows):  # an empty prompt has no answer to match
                    out[M.EXACT_MATCH] = exact_match((model, tokenizer), rows)
            return out

        def save(out: Path) -> None:
            if config.fsdp:  # every process gathers, rank 0 writes
                save_full_model(model, tokenizer, out)
            else:
                save_trained(model, tokenizer, out.parent, out.name)

        return Stage(model, loss, np.ones(len(train_rows)), evaluate, save)

    return Prepared(len(train_rows), num_params, build)


def train(config: DPOConfig, data: Any, run: Any, *, parallel: Any = None) -> StageResult:
    """The registered ``train``; ``parallel``: this process's part of a data-parallel run
    (:class:`rlx.llm.training.DataParallel`), handed in from above; with ``fsdp`` it also
    shards the model over those processes (:mod:`rlx.llm.sharding`)."""
    check_fsdp(config, parallel, "dpo", adapter=trains_adapter(config))
    return run_stage(
        config,
        run,
        prepare,
        lr_scale=LR_SCALE,
        target_rows=TARGET_ROWS,
        data=data,
        parallel=parallel,
    )


def load(config: DPOConfig, data_id: str, state: dict) -> Any:
    """The trained policy as a :class:`rlx.llm.agent.LoadedModel`."""
    from rlx.llm.agent import LoadedModel

    return LoadedModel.from_checkpoint(config, state)


ALGORITHM = registry.register(
    registry.Algorithm(
        name="dpo",
        config=DPOConfig,
        train=train,
        load=load,
        budget_field="steps",
        unit="steps",
    )
)
