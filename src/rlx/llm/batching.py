"""Tokenising, padding and packing shared by SFT, the reward model, DPO, GRPO and RLHF
(the log-probabilities of what they batch: :mod:`rlx.llm.logprobs`).

Conventions, fixed here once:

- A sequence is ``[bos] + prompt + completion + [eos]``. ``bos`` is prepended when the tokenizer
  has one; ``eos`` is appended to every completion so the model learns to stop (data files carry
  no end marker). Prompt and completion are tokenised *separately*, so the boundary between them
  is exact and matches generation, where the completion's tokens follow the prompt's.
- A conversation (a list of ``{"role", "content"}`` messages) is rendered by the tokenizer's
  chat template (:mod:`rlx.llm.chat`): the prompt with the generation prompt, the completion as
  the text the template adds for the assistant's turn, which ends at eos; the template places
  any bos itself.
- ``loss_mask[t]`` is over **target tokens**: it says whether token ``t`` is predicted and
  scored, i.e. it belongs to the completion or is its eos. The prediction of token ``t`` comes
  from the logits at ``t - 1``, so ``logits[:, :-1]`` pairs with ``input_ids[:, 1:]`` and
  ``loss_mask[:, 1:]`` (``TokenBatch.target_mask``); ``loss_mask[:, 0]`` is always False.
- Batches are **right padded**. With a causal mask a real token never attends to the padding
  after it, so padding changes no real token's logits, and masks come from sequence lengths,
  never from ``input_ids == pad_id`` (a pad id equal to eos is harmless).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from rlx.errors import ConfigError
from rlx.llm.chat import Prompt, is_conversation, render_completion, render_prompt, segments

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


@dataclass(frozen=True)
class EncodedSequence:
    """One tokenised ``[bos] + prompt + completion + [eos]``, not yet padded.

    ``loss_mask[t]`` is True where token ``t`` is a completion (or eos) token, the target of the
    loss; ``prompt_length`` counts the tokens before the completion (bos included).
    """

    input_ids: list[int]
    loss_mask: list[bool]
    prompt_length: int

    @classmethod
    def from_parts(
        cls, prompt_ids: Sequence[int], completion_ids: Sequence[int], max_length: int | None = None
    ) -> EncodedSequence:
        """Join token ids; with ``max_length``, cut the completion's tail to fit (see
        :func:`encode_prompt_completion`)."""
        prompt_ids, completion_ids = list(prompt_ids), list(completion_ids)
        if max_length is not None:
            if len(prompt_ids) >= max_length:
                raise ConfigError(
                    f"a prompt of {len(prompt_ids)} tokens leaves no room for its completion "
                    f"within max_length={max_length}; raise max_length or shorten the prompt."
                )
            completion_ids = completion_ids[: max_length - len(prompt_ids)]
        # token 0 has no context to be predicted from, so it is never a target
        mask = [False] * len(prompt_ids) + [True] * len(completion_ids)
        if mask:
            mask[0] = False
        return cls(prompt_ids + completion_ids, mask, len(prompt_ids))


@dataclass(frozen=True)
class TokenBatch:
    """Right-padded sequences: ``input_ids``, ``attention_mask`` (1 = real token) and
    ``loss_mask`` (True = target token), each ``[B, L]``."""

    input_ids: Tensor
    attention_mask: Tensor
    loss_mask: Tensor

    @property
    def target_mask(self) -> Tensor:
        """``loss_mask[:, 1:]``: aligned with ``logits[:, :-1]`` and :func:`token_logprobs`."""
        return self.loss_mask[:, 1:]

    def to(self, device: str | torch.device) -> TokenBatch:
        """The same batch on ``device``."""
        return TokenBatch(
            self.input_ids.to(device), self.attention_mask.to(device), self.loss_mask.to(device)
        )

    def __len__(self) -> int:
        return self.input_ids.shape[0]


def encode_prompt(tokenizer: PreTrainedTokenizerBase, prompt: Prompt) -> list[int]:
    """The prompt's token ids, what generation feeds in: ``[bos] + prompt`` for text (bos when
    the tokenizer has one), the chat template's rendering with the generation prompt for a
    conversation (the template places any bos itself)."""
    if is_conversation(prompt):
        return tokenizer(render_prompt(tokenizer, prompt), add_special_tokens=False)["input_ids"]
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    return _with_bos(tokenizer, ids)


def encode_prompt_completion(
    tokenizer: PreTrainedTokenizerBase, prompt: Prompt, completion: Any, max_length: int | None
) -> EncodedSequence:
    """Tokenise ``[bos] + prompt + completion + [eos]`` with its loss mask over target tokens.

    Too long a sequence loses tokens from its right end (the completion's tail, eos first); a
    prompt that leaves no room for one completion token within ``max_length`` is a ConfigError.
    """
    return encode_prompt_completions(tokenizer, [prompt], [completion], max_length)[0]


def encode_prompt_completions(
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[Prompt],
    completions: Sequence[Any],
    max_length: int | None,
) -> list[EncodedSequence]:
    """:func:`encode_prompt_completion` for many rows, with one tokenizer call per column.

    Prompt and completion are tokenised apart: the completion's tokens are those the model
    generates after the prompt's, where tokenising the joined text could merge tokens across
    the boundary (BPE turns ``"is " + "Paris"`` into ``"is" + " Paris"``). A conversation's
    completion is the text the chat template adds after the generation prompt, cut after the
    first eos (the end of the assistant's turn); a text completion gets eos appended. Rows cut
    to ``max_length`` are counted in one :class:`TruncationWarning`.
    """
    if len(prompts) != len(completions):
        raise ConfigError(f"got {len(prompts)} prompts but {len(completions)} completions.")
    if not prompts:
        return []
    prompt_texts, completion_texts, chats = [], [], []
    for prompt, completion in zip(prompts, completions, strict=True):
        chat = is_conversation(prompt)
        prompt_texts.append(render_prompt(tokenizer, prompt) if chat else prompt)
        completion_texts.append(
            render_completion(tokenizer, prompt, completion) if chat else completion
        )
        chats.append(chat)
    prompt_ids = tokenizer(prompt_texts, add_special_tokens=False)["input_ids"]
    completion_ids = tokenizer(completion_texts, add_special_tokens=False)["input_ids"]
    seqs, cut = [], 0
    for p, c, chat in zip(prompt_ids, completion_ids, chats, strict=True):
        prompt_tokens = p if chat else _with_bos(tokenizer, p)
        completion_tokens = ended(c, tokenizer.eos_token_id)
        seqs.append(EncodedSequence.from_parts(prompt_tokens, completion_tokens, max_length))
        cut += len(seqs[-1].input_ids) < len(prompt_tokens) + len(completion_tokens)
    warn_truncated(cut, len(seqs), max_length)
    return seqs


def encode_conversations(
    tokenizer: PreTrainedTokenizerBase, conversations: Sequence[list[Any]], max_length: int | None
) -> list[EncodedSequence]:
    """Whole conversations, rendered by the chat template, with the loss over the assistant's
    turns: each turn's text up to and including its eos (:func:`rlx.llm.chat.segments`).
    Every segment is tokenised on its own, so a turn's tokens are the ones generated after
    the text before it. Too long a conversation loses its tail (one warning counts them)."""
    out, cut = [], 0
    for messages in conversations:
        ids: list[int] = []
        mask: list[bool] = []
        for text, trained in segments(tokenizer, messages):
            part = tokenizer(text, add_special_tokens=False)["input_ids"]
            targets = len(ended(part, tokenizer.eos_token_id)) if trained else 0
            targets = min(targets, len(part))
            ids += part
            mask += [True] * targets + [False] * (len(part) - targets)
        if max_length is not None and len(ids) > max_length:
            ids, mask, cut = ids[:max_length], mask[:max_length], cut + 1
        if mask:
            mask[0] = False  # token 0 has no context to be predicted from
        first = mask.index(True) if True in mask else len(ids)
        out.append(EncodedSequence(ids, mask, first))
    warn_truncated(cut, len(out), max_length)
    return out


def ended(ids: Sequence[int], eos: int | None) -> list[int]:
    """A completion's tokens ending at eos: cut after its first eos, or eos appended."""
    ids = list(ids)
    if eos is None:
        return ids
    return ids[: ids.index(eos) + 1] if eos in ids else [*ids, eos]


class TruncationWarning(UserWarning):
    """Rows longer than ``max_length`` lost their tails."""


def warn_truncated(count: int, total: int, max_length: int | None) -> None:
    """The one warning of an encoding that cut ``count`` of ``total`` rows to ``max_length``."""
    if count:
        warnings.warn(
            f"{count} of {total} rows are longer than max_length={max_length} tokens and lose "
            "their tails (the completion's end, eos first); raise max_length to keep them whole.",
            TruncationWarning,
            stacklevel=3,
        )


def _with_bos(tokenizer: PreTrainedTokenizerBase, ids: list[int]) -> list[int]:
    bos = tokenizer.bos_token_id
    return list(ids) if bos is None else [bos, *ids]


def pad_batch(seqs: Sequence[EncodedSequence], pad_id: int) -> TokenBatch:
    """Right-pad sequences to the longest one: ``[B, L]`` LongTensors plus a bool loss mask."""
    if not seqs:
        raise ConfigError("pad_batch needs at least one sequence.")
    return SequenceTable(seqs, pad_id).batch(np.arange(len(seqs)))


class SequenceTable:
    """Encoded sequences padded once into ``[N, L_max]`` arrays, so a training step's batch is
    a row selection trimmed to its longest row, not a Python loop over rows."""

    def __init__(self, seqs: Sequence[EncodedSequence], pad_id: int) -> None:
        if pad_id is None:
            raise ConfigError("pad_id is None; load the tokenizer with rlx.llm.load_tokenizer.")
        self.lengths = np.array([len(s.input_ids) for s in seqs], dtype=np.int64)
        width = int(self.lengths.max()) if len(seqs) else 1
        self.ids = np.full((len(seqs), width), pad_id, dtype=np.int64)
        self.loss_mask = np.zeros((len(seqs), width), dtype=bool)
        for row, seq in enumerate(seqs):
            self.ids[row, : len(seq.input_ids)] = seq.input_ids
            self.loss_mask[row, : len(seq.loss_mask)] = seq.loss_mask

    def __len__(self) -> int:
        return len(self.lengths)

    def batch(self, idx: np.ndarray) -> TokenBatch:
        """Rows ``idx`` as a right-padded :class:`TokenBatch`."""
        width = int(self.lengths[idx].max())
        attention = np.arange(width)[None, :] < self.lengths[idx, None]
        return TokenBatch(
            torch.from_numpy(self.ids[idx, :width]),
            torch.from_numpy(attention.astype(np.int64)),
            torch.from_numpy(self.loss_mask[idx, :width]),
        )


def forward_logits(model: torch.nn.Module, batch: TokenBatch) -> Tensor:
    """The model's next-token logits ``[B, L, V]`` for a batch (no key/value cache)."""
    out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False)
    return out.logits


def completion_lengths(batch: TokenBatch) -> Tensor:
    """Target tokens per row (completion plus eos, after truncation): LongTensor ``[B]``."""
    return batch.loss_mask.sum(dim=-1)


__all__ = [
    "EncodedSequence",
    "TokenBatch",
    "TruncationWarning",
    "completion_lengths",
    "encode_conversations",
    "encode_prompt",
    "encode_prompt_completion",
    "encode_prompt_completions",
    "ended",
    "forward_logits",
    "pad_batch",
    "warn_truncated",
]


# --- preference pairs packed into one row -------------------------------------------------------


@dataclass(frozen=True)
class PackedRows:
    """Rows that pack several sequences behind one shared prompt: token ids, explicit
    positions, which query may attend to which key, and the position whose logits predict
    each token. :class:`PackedPairs` and :class:`PackedGroups` add what they score."""

    input_ids: Tensor
    position_ids: Tensor
    allowed: Tensor  # [B, L, L] bool: query t may attend to key k
    pred_index: Tensor

    def attention_mask(self, dtype: torch.dtype) -> Tensor:
        """The additive 4D mask ``[B, 1, L, L]`` (0 where allowed, the dtype's minimum not)."""
        mask = torch.zeros(self.allowed.shape, dtype=dtype, device=self.allowed.device)
        return mask.masked_fill_(~self.allowed, torch.finfo(dtype).min).unsqueeze(1)

    def to(self, device: str | torch.device) -> Any:
        """The same rows on ``device``."""
        return type(self)(*(getattr(self, f).to(device) for f in self.__dataclass_fields__))

    def __len__(self) -> int:
        return self.input_ids.shape[0]


@dataclass(frozen=True)
class PackedPairs(PackedRows):
    """Preference pairs as one row each: ``[prompt, chosen, rejected, pad...]``.

    The rejected tokens attend to the prompt and to each other but not to the chosen ones, and
    their positions continue from the prompt's end, so every token sees exactly the context it
    has in its own ``prompt + completion`` sequence: the logits equal those of two separate
    rows, while the prompt is computed once (for short completions most of a pair's tokens).

    ``pred_index[b, t]`` is the position whose logits predict token ``t`` (``t - 1``, except the
    first rejected token, predicted from the prompt's last position); ``chosen_mask`` and
    ``rejected_mask`` mark the scored tokens; ``chosen_last`` and ``rejected_last`` are each
    completion's last position (where a reward model reads its score).
    """

    chosen_mask: Tensor
    rejected_mask: Tensor
    chosen_last: Tensor
    rejected_last: Tensor


def can_pack(chosen: Sequence[EncodedSequence], rejected: Sequence[EncodedSequence]) -> bool:
    """Packing needs a non-empty shared prompt per pair (the first rejected token is predicted
    from its last position)."""
    return all(
        c.prompt_length >= 1
        and c.prompt_length == r.prompt_length
        and c.input_ids[: c.prompt_length] == r.input_ids[: r.prompt_length]
        for c, r in zip(chosen, rejected, strict=True)
    )


def pack_pairs(
    chosen: Sequence[EncodedSequence], rejected: Sequence[EncodedSequence], pad_id: int
) -> PackedPairs:
    """Pack each pair ``(chosen[i], rejected[i])`` (same prompt) into one right-padded row."""
    return PairTable(chosen, rejected, pad_id).packed(np.arange(len(chosen)))


class PairTable:
    """Preference pairs padded once: :meth:`packed` gives :class:`PackedPairs` and
    :meth:`separate` the interleaved rows ``[c_0, r_0, c_1, r_1, ...]`` of any selection."""

    def __init__(
        self, chosen: Sequence[EncodedSequence], rejected: Sequence[EncodedSequence], pad_id: int
    ) -> None:
        self.rows = SequenceTable([s for pair in zip(chosen, rejected, strict=True)
                                   for s in pair], pad_id)  # fmt: skip
        self.packable = bool(chosen) and can_pack(chosen, rejected)
        if not self.packable:
            return
        self.prompt = np.array([c.prompt_length for c in chosen], dtype=np.int64)
        self.n_chosen = np.array([len(c.input_ids) for c in chosen], dtype=np.int64)
        rejected_tail = [len(r.input_ids) - r.prompt_length for r in rejected]
        self.end = self.n_chosen + np.array(rejected_tail, dtype=np.int64)
        width = int(self.end.max())
        N = len(chosen)
        self.ids = np.full((N, width), pad_id, dtype=np.int64)
        self.chosen_mask = np.zeros((N, width), dtype=bool)
        self.rejected_mask = np.zeros((N, width), dtype=bool)
        for b, (c, r) in enumerate(zip(chosen, rejected, strict=True)):
            p, n_c, end = c.prompt_length, len(c.input_ids), int(self.end[b])
            self.ids[b, :end] = c.input_ids + r.input_ids[p:]
            self.chosen_mask[b, :n_c] = c.loss_mask
            self.rejected_mask[b, n_c:end] = r.loss_mask[p:]

    def separate(self, idx: np.ndarray) -> TokenBatch:
        return self.rows.batch(np.stack([2 * idx, 2 * idx + 1], axis=1).reshape(-1))

    def packed(self, idx: np.ndarray) -> PackedPairs:
        if not self.packable:
            raise ConfigError("these pairs cannot be packed (a pair without a shared prompt).")
        p, n_c, end = self.prompt[idx, None], self.n_chosen[idx, None], self.end[idx, None]
        width = int(end.max())
        t = np.arange(width)[None, :]
        # positions continue from the prompt's end for the rejected tokens
        positions = np.where(t < n_c, t, t - n_c + p)
        positions = np.where(t < end, positions, 0)
        # the first rejected token is predicted from the prompt's last position
        pred = np.where(t == n_c, p - 1, np.maximum(t - 1, 0))
        q, k = t[:, :, None], t[:, None, :]
        blocked = (q >= n_c[:, :, None]) & (q < end[:, :, None])
        blocked = blocked & (k >= p[:, :, None]) & (k < n_c[:, :, None])
        allowed = (k <= q) & ~blocked
        return PackedPairs(
            torch.from_numpy(self.ids[idx, :width]),
            torch.from_numpy(positions),
            torch.from_numpy(allowed),
            torch.from_numpy(pred),
            torch.from_numpy(self.chosen_mask[idx, :width]),
            torch.from_numpy(self.rejected_mask[idx, :width]),
            torch.from_numpy(n_c[:, 0] - 1),
            torch.from_numpy(end[:, 0] - 1),
        )


def packed_forward(model: torch.nn.Module, packed: PackedRows, **kwargs: Any) -> Any:
    """The model's output on packed pairs or groups (4D mask and explicit positions)."""
    dtype = next(model.parameters()).dtype
    return model(
        input_ids=packed.input_ids,
        attention_mask=packed.attention_mask(dtype),
        position_ids=packed.position_ids,
        use_cache=False,
        **kwargs,
    )


@torch.no_grad()
def packing_matches(
    score_packed: Any, score_separate: Any, chosen: Sequence[EncodedSequence],
    rejected: Sequence[EncodedSequence], pad_id: int, tol: float = 1e-3,
) -> bool:  # fmt: skip
    """Whether packed pairs score as separate rows do for this model, on a few pairs.

    ``score_packed(PackedPairs) -> (chosen, rejected)`` and ``score_separate(TokenBatch) -> [2B]``
    (chosen, rejected interleaved). An architecture that ignores explicit positions or custom
    4D masks fails here (or raises) and its stage falls back to separate rows.
    """
    chosen, rejected = list(chosen[:4]), list(rejected[:4])
    if not chosen or not can_pack(chosen, rejected):
        return False
    try:
        c, r = score_packed(pack_pairs(chosen, rejected, pad_id))
        both = score_separate(
            pad_batch([s for pair in zip(chosen, rejected, strict=True) for s in pair], pad_id)
        )
    except (RuntimeError, TypeError, ValueError):
        return False
    return bool(torch.allclose(c, both[0::2], atol=tol) and torch.allclose(r, both[1::2], atol=tol))


# --- groups of completions of one prompt packed into one row ------------------------------------


@dataclass(frozen=True)
class PackedGroups(PackedRows):
    """``G`` completions of each prompt as one row: ``[prompt, c_1, ..., c_G, pad...]``.

    Each completion attends to the prompt and to itself only, and its positions continue from
    the prompt's end, so every token sees exactly the context of its own ``prompt + c_j`` row
    while the prompt is computed once per group (GRPO: ``G`` times fewer prompt tokens).

    ``pred_index[b, t]`` is the position whose logits predict token ``t`` (``t - 1``, except a
    completion's first token, predicted from the prompt's last position). ``gather_row`` and
    ``gather_col`` ``[N, T]`` (``N = B * G`` sequences, ``T`` the longest completion) say where
    completion token ``i`` of sequence ``n`` sits in the packed rows; ``mask`` ``[N, T]`` marks
    the real ones. Log-probabilities come back in that ``[N, T]`` layout.
    """

    gather_row: Tensor
    gather_col: Tensor
    mask: Tensor


def pack_groups(
    prompts: Sequence[list[int]], completions: Sequence[list[int]], pad_id: int
) -> PackedGroups:
    """Pack ``completions`` (prompt-major: ``len(completions) // len(prompts)`` per prompt)
    behind their prompt's ids (each non-empty: ``[bos] + prompt``)."""
    B = len(prompts)
    G = len(completions) // max(B, 1)
    if B == 0 or len(completions) != G * B or any(len(p) < 1 for p in prompts):
        raise ConfigError("pack_groups needs non-empty prompts and G completions for each.")
    lengths = np.array([len(c) for c in completions], dtype=np.int64).reshape(B, G)
    prompt_len = np.array([len(p) for p in prompts], dtype=np.int64)
    starts = prompt_len[:, None] + np.cumsum(lengths, axis=1) - lengths  # [B, G]
    width = int((prompt_len + lengths.sum(axis=1)).max())
    ids = np.full((B, width), pad_id, dtype=np.int64)
    positions = np.zeros((B, width), dtype=np.int64)
    pred = np.zeros((B, width), dtype=np.int64)
    owner = np.full((B, width), -2, dtype=np.int64)  # -1 prompt, j completion j, -2 padding
    T = max(int(lengths.max()), 1)
    gather_row = np.zeros((B * G, T), dtype=np.int64)
    gather_col = np.zeros((B * G, T), dtype=np.int64)
    mask = np.zeros((B * G, T), dtype=bool)
    for b in range(B):
        p = int(prompt_len[b])
        ids[b, :p] = prompts[b]
        positions[b, :p] = np.arange(p)
        pred[b, :p] = np.maximum(np.arange(p) - 1, 0)
        owner[b, :p] = -1
        for j in range(G):
            n, s = int(lengths[b, j]), int(starts[b, j])
            cols = np.arange(s, s + n)
            ids[b, cols] = completions[b * G + j]
            positions[b, cols] = p + np.arange(n)
            pred[b, cols] = np.r_[p - 1, cols[:-1]] if n else cols
            owner[b, cols] = j
            gather_row[b * G + j, :n] = b
            gather_col[b * G + j, :n] = cols
            mask[b * G + j, :n] = True
    q, k = owner[:, :, None], owner[:, None, :]
    t = np.arange(width)
    causal = t[None, :, None] >= t[None, None, :]
    allowed = causal & (k != -2) & ((k == -1) | (k == q))
    allowed |= np.eye(width, dtype=bool)[None]  # padding attends to itself: no empty rows
    return PackedGroups(
        torch.from_numpy(ids),
        torch.from_numpy(positions),
        torch.from_numpy(allowed),
        torch.from_numpy(pred),
        torch.from_numpy(gather_row),
        torch.from_numpy(gather_col),
        torch.from_numpy(mask),
    )
