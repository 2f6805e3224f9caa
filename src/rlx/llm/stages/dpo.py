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

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from rlx import metrics as M
from rlx import registry
from rlx.core.checks import at_least, positive
from rlx.llm.batching import PackedPairs, PairTable, TokenBatch
from rlx.llm.logprobs import packed_pair_logprobs, sequence_logprobs
from rlx.llm.losses import dpo_loss
from rlx.llm.pairs import pair_logprobs, pair_tables, reference_pair_logprobs
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


def prepare(config: DPOConfig, data: Any = None) -> Prepared:
    """Rows read and split, the model loaded (and sharded with ``fsdp``): what sizes the
    config's defaults; :class:`DPOStage` is built once the config is complete."""
    from rlx.llm.data import preference_pairs
    from rlx.llm.lora import load_for_training
    from rlx.llm.models import count_parameters
    from rlx.llm.sharding import shard_model

    rows = preference_pairs(stage_rows(config, data))
    train_rows, held_out = split_rows(rows, config.eval_fraction, config.seed)
    # with LoRA the adapter starts at B = 0, so the model scored before any step is the
    # adapter-disabled model: the reference costs no copy of the weights
    model, tokenizer = load_for_training(config)
    num_params = count_parameters(model)
    if config.fsdp:
        model = shard_model(model)
    loaded = Loaded(model, tokenizer, train_rows, held_out)
    return Prepared(len(train_rows), num_params, functools.partial(DPOStage, loaded))


class DPOStage:
    """DPO as the offline loop (:func:`rlx.llm.training.train_loop`) trains it: the pairs
    encoded once and scored by the start model (the reference) before any step, the loss
    over pair indices, the held-out evaluation, the saved model."""

    def __init__(self, loaded: Loaded, config: DPOConfig) -> None:
        self.model, self.tokenizer, self.config = loaded.model, loaded.tokenizer, config
        self.held_out = loaded.held_out
        self.packing, self.train_table, self.held_table = pair_tables(
            self.tokenizer, loaded.train_rows, loaded.held_out, config.max_length,
            config.pack_pairs, self._packed, self._separate,
        )  # fmt: skip
        # the start model is the reference: score every pair with it before any step
        self.reference = reference_pair_logprobs(self.model, self.train_table, config.device,
                                                 self.packing)  # fmt: skip
        self.held_reference = (reference_pair_logprobs(self.model, self.held_table,
                                                       config.device, self.packing)
                               if self.held_out else None)  # fmt: skip
        self.units = np.ones(len(loaded.train_rows))

    def _packed(self, packed: PackedPairs) -> tuple[Tensor, Tensor]:
        return packed_pair_logprobs(self.model, packed)

    def _separate(self, batch: TokenBatch) -> Tensor:
        return sequence_logprobs(self.model, batch)

    def pair_loss(
        self, table: PairTable, idx: np.ndarray, ref_c: Tensor, ref_r: Tensor
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """The mean DPO loss (plus RPO's NLL term) of pairs ``idx`` of ``table``."""
        config = self.config
        chosen, rejected, chosen_len = pair_logprobs(self.model, table, idx, config.device,
                                                     self.packing)  # fmt: skip
        key = torch.from_numpy(idx)
        loss, metrics = dpo_loss(chosen, rejected, ref_c[key], ref_r[key], config.beta)
        if config.rpo_alpha > 0:
            # per-token NLL of the chosen completion: L += alpha * -log pi(y+|x) / |y+|
            nll = -(chosen / chosen_len).mean()
            loss = loss + config.rpo_alpha * nll
            metrics[M.LOSS] = loss.detach()
            metrics[M.NLL_CHOSEN] = nll.detach()
        return loss, metrics

    def loss(self, idx: np.ndarray) -> tuple[Tensor, dict[str, Tensor]]:
        mean, metrics = self.pair_loss(self.train_table, idx, *self.reference)
        return mean * len(idx), metrics

    def evaluate(self) -> dict[str, float]:
        if self.held_reference is None:
            return {}
        held_out, totals = self.held_out, dict[str, float]()
        for start in range(0, len(held_out), 128):
            idx = np.arange(start, min(start + 128, len(held_out)))
            _, metrics = self.pair_loss(self.held_table, idx, *self.held_reference)
            for k, v in metrics.items():
                totals[f"eval_{k}"] = totals.get(f"eval_{k}", 0.0) + float(v) * len(idx)
        out = {k: v / len(held_out) for k, v in totals.items()}
        if self.config.eval_exact_match:
            from rlx.llm.generation import held_out_exact_match
            from rlx.llm.tasks import SFTExample

            rows = [SFTExample(r.prompt, r.chosen) for r in held_out]
            if all(r.prompt for r in rows):  # an empty prompt has no answer to match
                out.update(held_out_exact_match((self.model, self.tokenizer), rows))
        return out

    def save_model(self, out: Path) -> None:
        save_stage_model(self.model, self.tokenizer, out, self.config.fsdp)


def train(config: DPOConfig, data: Any, run: RunHandle, *, parallel: Any = None) -> StageResult:
    """The registered ``train``; ``parallel``: this process's part of a data-parallel run
    (:class:`rlx.llm.parallel.DataParallel`), handed in from above; with ``fsdp`` it also
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
