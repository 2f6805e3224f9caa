"""The reward model (stage 2 of RLHF): a scalar score trained on preference pairs with the
Bradley-Terry loss

    L = -E[log sigma(R(x, y+) - R(x, y-))]

Two kinds, the same loss:

- ``kind="lm"``: a scalar head on the causal LM's backbone, initialised from the SFT model
  (``AutoModelForSequenceClassification`` with one label), read at the sequence's last real
  token. Saved as a normal Hugging Face folder.
- ``kind="bow"``: the simplest one, ``R(x, y) = dot(w, bag(y))`` over the completion's token
  counts: fast, transparent (``w`` says which tokens it rewards), and a handy proxy in tests.

Chosen and rejected completions go through the model in one forward pass. Logged per step:
``loss``, ``pair_accuracy``, ``reward_margin``, ``chosen_reward``, ``rejected_reward``; held
out: the same with an ``eval_`` prefix.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from rlx import registry
from rlx.core.checks import one_of
from rlx.errors import ConfigError
from rlx.llm.batching import (
    PackedPairs,
    PairTable,
    TokenBatch,
    encode_prompt_completions,
    packed_forward,
    pad_batch,
)
from rlx.llm.losses import bradley_terry_loss
from rlx.llm.pairs import pair_tables
from rlx.llm.stage_config import StageConfig
from rlx.llm.training import (
    Loaded,
    Prepared,
    StageResult,
    load_model_state,
    run_stage,
    split_rows,
    stage_rows,
)
from rlx.runs.handle import RunHandle

KINDS = ("lm", "bow")
BOW_CONFIG = "rlx_reward_model.json"
BOW_WEIGHTS = "bow_weights.pt"

TARGET_ROWS = 20_000
"""Rows (pairs) a run sees when neither steps nor epochs is given."""
LR_SCALE = 0.1
"""The reward model's default step size relative to SFT's (1e-4 for a model under 10M
parameters): it fine-tunes the SFT model's trained backbone under a fresh head, and at SFT's
step size it ranks its own training pairs worse than at a tenth of it."""


@dataclass(frozen=True)
class RewardModelConfig(StageConfig):
    """Bradley-Terry reward model on ``{"prompt", "chosen", "rejected"}`` rows."""

    kind: str = "lm"
    """lm: scalar head on the model's backbone; bow: linear bag-of-words over completion tokens"""
    pack_pairs: bool | None = None
    """score chosen and rejected in one row that shares the prompt (None: when the model
    gives the same scores that way, checked on a few pairs at the start)"""

    def __post_init__(self) -> None:
        super().__post_init__()
        one_of(self, "kind", KINDS)


# ============================================================================ the models
class BagOfWordsRewardModel(nn.Module):
    """``R(x, y) = dot(w, bag(y))``: one weight per vocabulary token, summed over the
    completion's tokens (its eos included)."""

    weight: nn.Parameter

    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, batch: TokenBatch) -> Tensor:
        return (self.weight[batch.input_ids] * batch.loss_mask).sum(dim=-1)

    def packed(self, packed: PackedPairs) -> tuple[Tensor, Tensor]:
        w = self.weight[packed.input_ids]
        return (w * packed.chosen_mask).sum(dim=-1), (w * packed.rejected_mask).sum(dim=-1)


class ScalarHeadRewardModel(nn.Module):
    """A sequence-classification LM read at each row's last real token: ``[B]`` rewards.

    With LoRA, ``model`` is the LM inside the adapter's wrapper (its LoRA layers injected)
    and ``adapted`` the ``peft`` wrapper, which saves the adapter and merges it; the wrapper
    is kept outside the module tree, so the state dict holds each weight once."""

    adapted: Any

    def __init__(self, model: Any, adapted: Any = None) -> None:
        super().__init__()
        self.model: Any = model  # a Hugging Face sequence classifier
        object.__setattr__(self, "adapted", adapted)  # not a submodule: see above

    def packed(self, packed: PackedPairs) -> tuple[Tensor, Tensor]:
        """Chosen and rejected rewards of packed pairs, read at each completion's end."""
        hidden = packed_forward(self.model.base_model, packed).last_hidden_state
        rows = torch.arange(len(packed), device=hidden.device)
        chosen = self.model.score(hidden[rows, packed.chosen_last]).squeeze(-1).float()
        rejected = self.model.score(hidden[rows, packed.rejected_last]).squeeze(-1).float()
        return chosen, rejected

    def forward(self, batch: TokenBatch) -> Tensor:
        head = getattr(self.model, "score", None)
        last = batch.attention_mask.sum(dim=-1) - 1
        rows = torch.arange(len(last), device=last.device)
        if head is None:  # an architecture without `score`: its own pooling (needs a pad id)
            out = self.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask)
            return out.logits.squeeze(-1)
        hidden = self.model.base_model(
            input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False
        ).last_hidden_state
        return head(hidden[rows, last]).squeeze(-1).float()


def sequence_classifier_from(path: str | Path, seed: int, device: str, dtype: str | None) -> Any:
    """``AutoModelForSequenceClassification`` (one label) from a causal LM folder: the
    backbone's weights, a fresh head seeded by ``seed``."""
    from transformers import AutoModelForSequenceClassification
    from transformers.utils import logging as hf_logging

    from rlx.llm.models import causal_lm_folder, load_tokenizer, no_progress_bars, torch_dtype

    folder = causal_lm_folder(path)
    tokenizer = load_tokenizer(folder)
    torch.manual_seed(seed)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # "score.weight newly initialized" is the point here
    try:
        with no_progress_bars():
            model = AutoModelForSequenceClassification.from_pretrained(
                folder, num_labels=1, dtype=torch_dtype(dtype), local_files_only=True
            )
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot build a reward model from {folder}: {err}") from err
    finally:
        hf_logging.set_verbosity(verbosity)
    model.config.pad_token_id = tokenizer.pad_token_id
    return model.to(device), tokenizer


@dataclass
class RewardScorer:
    """A trained reward model: a reward function ``(prompts, completions, **kw) -> floats``,
    and what ``rlx.load`` returns for a reward model's run.

    As an agent (:class:`rlx.core.agent.Agent`) it scores texts: ``act(observation)`` is the
    score of one ``(prompt, completion)`` pair, or of a plain text (the completion of an empty
    prompt), and ``act_batch`` scores several; ``deterministic`` changes nothing, a score is
    never sampled. ``config`` and ``run_dir`` are the run's (None for a model folder loaded
    with :func:`load_reward_model`).
    """

    module: nn.Module
    tokenizer: Any
    max_length: int = 256
    device: str = "cpu"
    config: Any = None
    run_dir: Path | None = None

    @torch.no_grad()
    def __call__(self, prompts: list[str], completions: list[str], **_: Any) -> list[float]:
        encoded = encode_prompt_completions(self.tokenizer, prompts, completions, self.max_length)
        out: list[float] = []
        for start in range(0, len(encoded), 256):
            batch = pad_batch(encoded[start : start + 256], self.tokenizer.pad_token_id)
            out.extend(self.module(batch.to(self.device)).float().tolist())
        return out

    def act(self, observation: str | tuple[str, str], deterministic: bool = True) -> float:
        """The score of one ``(prompt, completion)`` pair or text."""
        return self.act_batch([observation], deterministic)[0]

    def act_batch(
        self, observations: Sequence[str | tuple[str, str]], deterministic: bool = True
    ) -> list[float]:
        """The scores of several ``(prompt, completion)`` pairs or texts, in order."""
        pairs = [("", text) if isinstance(text, str) else text for text in observations]
        return self([prompt for prompt, _ in pairs], [completion for _, completion in pairs])


def load_reward_model(path: str | Path, *, device: str = "cpu") -> RewardScorer:
    """The reward model saved in ``path`` (either kind) as a reward function."""
    from rlx.llm.models import load_tokenizer, model_folder

    folder = model_folder(path)
    tokenizer = load_tokenizer(folder)
    module: nn.Module
    if (folder / BOW_CONFIG).exists():
        meta = json.loads((folder / BOW_CONFIG).read_text())
        module = BagOfWordsRewardModel(int(meta["vocab_size"]))
        module.load_state_dict(torch.load(folder / BOW_WEIGHTS, weights_only=True))
    else:
        from transformers import AutoModelForSequenceClassification

        from rlx.llm.models import no_progress_bars

        with no_progress_bars():
            model = AutoModelForSequenceClassification.from_pretrained(
                folder, local_files_only=True
            )
        if model.config.num_labels != 1:
            raise ConfigError(
                f"{folder} holds a classifier with {model.config.num_labels} labels, not a "
                "reward model (one scalar)."
            )
        module = ScalarHeadRewardModel(model)
    return RewardScorer(module.to(device).eval(), tokenizer, device=device)


def save_reward_model(module: nn.Module, tokenizer: Any, out: Path) -> None:
    from rlx.llm.lora import save_trained
    from rlx.llm.models import save_pretrained

    if isinstance(module, ScalarHeadRewardModel):
        if module.adapted is not None:  # RUN_DIR/adapter and the merged RUN_DIR/model
            save_trained(module.adapted, tokenizer, out.parent, out.name)
        else:
            save_pretrained(module.model, tokenizer, out)
        return
    assert isinstance(module, BagOfWordsRewardModel), type(module)  # the other kind
    from rlx.runs.files import atomic_file, real_folder, write_atomic

    real_folder(out, root=out.parent)  # the tokenizer writes by name: a real folder, no link
    tokenizer.save_pretrained(out)
    with atomic_file(out / BOW_WEIGHTS, root=out.parent) as handle:
        torch.save(module.state_dict(), handle)
    config = json.dumps({"kind": "bow", "vocab_size": int(module.weight.numel())}) + "\n"
    write_atomic(out / BOW_CONFIG, config, root=out.parent)


# ============================================================================ the stage
def prepare(config: RewardModelConfig, data: Any = None) -> Prepared:
    """Rows read and split, the reward model built: what sizes the config's defaults;
    :class:`RewardModelStage` is built once the config is complete."""
    from rlx.llm.data import preference_pairs
    from rlx.llm.models import count_parameters

    rows = preference_pairs(stage_rows(config, data))
    train_rows, held_out = split_rows(rows, config.eval_fraction, config.seed)
    module, tokenizer = reward_module(config)
    loaded = Loaded(module, tokenizer, train_rows, held_out)
    return Prepared(len(train_rows), count_parameters(module),
                    functools.partial(RewardModelStage, loaded))  # fmt: skip


class RewardModelStage:
    """The reward model as the offline loop (:func:`rlx.llm.training.train_loop`) trains it:
    the pairs encoded once (packed when the model allows), the Bradley-Terry loss over pair
    indices, the held-out evaluation, the saved model."""

    def __init__(self, loaded: Loaded, config: RewardModelConfig) -> None:
        self.model, self.tokenizer, self.config = loaded.model, loaded.tokenizer, config
        self.held_out = loaded.held_out
        self.packing, self.train_table, self.held_table = pair_tables(
            self.tokenizer, loaded.train_rows, loaded.held_out, config.max_length,
            config.pack_pairs, self.model.packed, self._separate,
        )  # fmt: skip
        self.units = np.ones(len(loaded.train_rows))

    def _separate(self, batch: TokenBatch) -> Tensor:
        return self.model(batch.to(self.config.device))

    def rewards_of(self, table: PairTable, idx: np.ndarray) -> tuple[Tensor, Tensor]:
        """``R(x, y+)`` and ``R(x, y-)`` of pairs ``idx`` of ``table``: one forward pass."""
        if self.packing:
            return self.model.packed(table.packed(idx).to(self.config.device))
        r = self.model(table.separate(idx).to(self.config.device))
        return r[0::2], r[1::2]

    def loss(self, idx: np.ndarray) -> tuple[Tensor, dict[str, Tensor]]:
        mean, metrics = bradley_terry_loss(*self.rewards_of(self.train_table, idx))
        return mean * len(idx), metrics  # a sum over pairs: the loop divides by the batch

    def evaluate(self) -> dict[str, float]:
        if not self.held_out:
            return {}
        chosen, rejected = [], []
        for start in range(0, len(self.held_out), 128):
            idx = np.arange(start, min(start + 128, len(self.held_out)))
            c, r = self.rewards_of(self.held_table, idx)
            chosen.append(c)
            rejected.append(r)
        _, metrics = bradley_terry_loss(torch.cat(chosen), torch.cat(rejected))
        return {f"eval_{k}": float(v) for k, v in metrics.items()}

    def save_model(self, out: Path) -> None:
        save_reward_model(self.model, self.tokenizer, out)


def reward_module(config: RewardModelConfig) -> tuple[nn.Module, Any]:
    """The reward model a run trains, and its tokenizer: a scalar head on the LM (LoRA on
    the backbone and a trained head with ``lora``), or the bag of words."""
    from rlx.llm.models import load_tokenizer

    if config.kind != "lm":
        if config.lora:
            raise ConfigError("lora applies to kind='lm'; the bag-of-words model has no layers.")
        tokenizer = load_tokenizer(config.model)
        return BagOfWordsRewardModel(len(tokenizer)).to(config.device), tokenizer
    from rlx.llm.lora import enable_gradient_checkpointing, peft_config

    backbone, tokenizer = sequence_classifier_from(
        config.model, config.seed, config.device, config.dtype
    )
    if config.lora:
        from peft import get_peft_model

        adapted = get_peft_model(backbone, peft_config(config, "SEQ_CLS"))
        if config.gradient_checkpointing:
            enable_gradient_checkpointing(adapted)
        return ScalarHeadRewardModel(adapted.base_model.model, adapted), tokenizer
    if config.gradient_checkpointing:
        enable_gradient_checkpointing(backbone)
    return ScalarHeadRewardModel(backbone), tokenizer


def train(
    config: RewardModelConfig, data: Any, run: RunHandle, *, parallel: Any = None
) -> StageResult:
    """The registered ``train``; ``parallel``: this process's part of a data-parallel run
    (:class:`rlx.llm.parallel.DataParallel`), handed in from above."""
    return run_stage(
        config,
        run,
        prepare,
        lr_scale=LR_SCALE,
        target_rows=TARGET_ROWS,
        data=data,
        parallel=parallel,
    )


def load(config: RewardModelConfig, data_id: str, state: dict) -> RewardScorer:
    module, tokenizer = reward_module(config)
    load_model_state(module, state["model"])  # with LoRA: the adapter and head alone
    if isinstance(module, ScalarHeadRewardModel) and module.adapted is not None:  # config.lora
        module = ScalarHeadRewardModel(module.adapted.merge_and_unload())
    return RewardScorer(
        module.to(config.device).eval(), tokenizer, config.max_length, config.device, config
    )


ALGORITHM = registry.register(
    registry.Algorithm(
        name="rm",
        config=RewardModelConfig,
        train=train,
        load=load,
        budget_field="steps",
        unit="steps",
    )
)
