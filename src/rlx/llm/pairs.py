"""Preference pairs as the reward model and DPO train on them: encoded side by side, padded
once into a table, packed (a pair's two completions after one copy of the prompt) when the
model scores packed pairs as it scores separate rows, and scored with the policy's or the
reference's sequence log-probabilities.

    log pi(y|x) = sum_t log pi(y_t | x, y_<t)      over the completion's tokens (and eos)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from rlx.errors import ConfigError
from rlx.llm.batching import (
    EncodedSequence,
    PackedPairs,
    PairTable,
    TokenBatch,
    completion_lengths,
    encode_prompt_completions,
    pack_pairs,
    packing_matches,
    pad_batch,
)
from rlx.llm.logprobs import packed_pair_logprobs, sequence_logprobs


def encode_pairs(tokenizer: Any, rows: list[Any], max_length: int) -> list[EncodedSequence]:
    """``[chosen_0, rejected_0, chosen_1, rejected_1, ...]``: a pair's two sequences side by
    side, so one padded batch holds both and one forward pass scores them."""
    prompts = [r.prompt for r in rows for _ in (0, 1)]
    completions = [c for r in rows for c in (r.chosen, r.rejected)]
    return encode_prompt_completions(tokenizer, prompts, completions, max_length)


def pair_table(encoded: list[EncodedSequence], pad_id: int) -> PairTable:
    """The pairs of :func:`encode_pairs`, padded once for fast batches."""
    return PairTable(encoded[0::2], encoded[1::2], pad_id)


def pair_batch(encoded: list[EncodedSequence], idx: np.ndarray, pad_id: int) -> TokenBatch:
    """Pairs ``idx`` of :func:`encode_pairs` as interleaved padded rows."""
    return pad_batch([encoded[2 * i + k] for i in idx for k in (0, 1)], pad_id)


def packed_batch(encoded: list[EncodedSequence], idx: np.ndarray, pad_id: int) -> PackedPairs:
    """Pairs ``idx`` of :func:`encode_pairs` packed, one row per pair."""
    return pack_pairs([encoded[2 * i] for i in idx], [encoded[2 * i + 1] for i in idx], pad_id)


def use_packing(
    setting: bool | None, packed: Any, separate: Any, encoded: list[EncodedSequence], pad_id: int
) -> bool:
    """``pack_pairs`` resolved: None packs when :func:`packing_matches` on the first pairs."""
    if setting is False:
        return False
    ok = packing_matches(packed, separate, encoded[0::2], encoded[1::2], pad_id)
    if setting and not ok:
        raise ConfigError(
            "pack_pairs=True, but this model scores packed pairs differently from separate "
            "rows (it ignores position ids or 4D attention masks); use pack_pairs=False."
        )
    return ok


def pair_tables(
    tokenizer: Any, train_rows: list[Any], held_out: list[Any], max_length: int,
    pack: bool | None, packed: Any, separate: Any,
) -> tuple[bool, PairTable, PairTable]:  # fmt: skip
    """The training and held-out pairs encoded and padded once, and whether they are packed
    (``pack`` resolved by :func:`use_packing` on the training pairs, scored by ``packed`` and
    ``separate``): what the reward model and DPO build before their first step."""
    pad_id = tokenizer.pad_token_id
    encoded = encode_pairs(tokenizer, train_rows, max_length)
    held = encode_pairs(tokenizer, held_out, max_length)
    packing = use_packing(pack, packed, separate, encoded, pad_id)
    return packing, pair_table(encoded, pad_id), pair_table(held, pad_id)


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
def reference_pair_logprobs(
    model: Any, table: PairTable, device: str, packing: bool, chunk: int = 128
) -> tuple[Tensor, Tensor]:
    """``log pi_ref(y+|x)`` and ``log pi_ref(y-|x)`` of every pair, ``[P]`` each, in
    batches, with ``model`` in eval mode: the reference's whole contribution to DPO."""
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


__all__ = [
    "encode_pairs",
    "packed_batch",
    "pair_batch",
    "pair_logprobs",
    "pair_table",
    "pair_tables",
    "reference_pair_logprobs",
    "use_packing",
]
