"""Greedy decoding, sampling for the online stages, and the exact-match accuracy of a model
on prompt/answer rows.

Prompts are encoded as training encodes them (``[bos] + prompt``, :func:`encode_prompt`), so
a completion is generated exactly where training put it. Batches are *left* padded for
generation (every row's next token then sits in the last column); ``transformers``'
``generate`` derives the positions from the attention mask.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from rlx.errors import ConfigError
from rlx.llm.batching import encode_prompt
from rlx.llm.chat import completion_text
from rlx.llm.models import load_model
from rlx.llm.tasks import PreferencePair, load_verifier_jsonl

DEFAULT_BATCH = 256


def left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask)`` ``[B, L]`` with the padding on the left."""
    length = max(len(r) for r in rows)
    ids = torch.full((len(rows), length), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), length), dtype=torch.long)
    for i, row in enumerate(rows):
        if row:
            ids[i, length - len(row) :] = torch.as_tensor(row, dtype=torch.long)
            mask[i, length - len(row) :] = 1
    return ids, mask


@torch.no_grad()
def greedy(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    *,
    max_new_tokens: int = 16,
    batch_size: int = DEFAULT_BATCH,
) -> list[str]:
    """``argmax`` decoding of each prompt's completion, cut at eos (which is not returned)."""
    if max_new_tokens < 1:
        raise ConfigError(f"max_new_tokens={max_new_tokens} must be >= 1.")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    out: list[str] = []
    try:
        for start in range(0, len(prompts), batch_size):
            chunk = prompts[start : start + batch_size]
            ids, mask = left_pad(
                [encode_prompt(tokenizer, p) for p in chunk], tokenizer.pad_token_id
            )
            generated = model.generate(
                input_ids=ids.to(device),
                attention_mask=mask.to(device),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
            new = generated[:, ids.shape[1] :].tolist()
            out.extend(_decode(tokenizer, row) for row in new)
    finally:
        model.train(was_training)
    return out


def _decode(tokenizer: Any, ids: list[int]) -> str:
    eos = tokenizer.eos_token_id
    if eos is not None and eos in ids:
        ids = ids[: ids.index(eos)]
    return tokenizer.decode(ids, skip_special_tokens=True)


def answers_of(rows: Sequence[Any]) -> tuple[list[str], list[str]]:
    """Prompts and expected answers of verifier rows (``answer``) or SFT rows
    (``completion``)."""
    prompts, answers = [], []
    for row in rows:
        answer = getattr(row, "answer", None)
        if answer is None:
            answer = getattr(row, "completion", None)
        if answer is None:
            raise ConfigError(
                f"exact match needs rows with a prompt and an answer (or completion); got {row!r}."
            )
        prompts.append(row.prompt)
        answers.append(completion_text(answer))  # a conversational one: its message's text
    return prompts, answers


def exact_match(
    model: str | Path | tuple[Any, Any],
    data: str | Path | Sequence[Any],
    *,
    max_new_tokens: int | None = None,
    batch_size: int = DEFAULT_BATCH,
    device: str = "cpu",
) -> float:
    """Share of rows whose greedy completion, stripped, equals the answer, stripped.

    ``model`` is a model folder or a loaded ``(model, tokenizer)``; ``data`` a JSONL file of
    ``{"prompt", "answer"}`` rows or a list of rows with ``prompt`` and ``answer`` (or
    ``completion``). ``max_new_tokens`` defaults to the longest answer's tokens plus 2.
    """
    prompts, answers, completions = _greedy_answers(model, data, max_new_tokens, batch_size, device)
    if not prompts:
        raise ConfigError("exact_match needs at least one row.")
    hits = sum(c.strip() == a.strip() for c, a in zip(completions, answers, strict=True))
    return hits / len(prompts)


def held_out_exact_match(model: tuple[Any, Any], rows: Sequence[Any]) -> dict[str, float]:
    """A stage's evaluation figures on its held-out ``rows``, all of them: ``exact_match``,
    ``eval_rows`` (how many it rests on) and the 95% Wilson interval of the share
    (``eval_exact_match_low``, ``eval_exact_match_high``: :mod:`rlx.core.intervals`)."""
    from rlx import metrics as M
    from rlx.core.intervals import proportion_interval

    share = exact_match(model, rows)
    n = len(rows)
    low, high = proportion_interval(round(share * n), n)
    return {
        M.EXACT_MATCH: share,
        M.EVAL_ROWS: float(n),
        M.EVAL_EXACT_MATCH_LOW: low,
        M.EVAL_EXACT_MATCH_HIGH: high,
    }


def mistake_pairs(
    model: str | Path | tuple[Any, Any],
    data: str | Path | Sequence[Any],
    *,
    max_new_tokens: int | None = None,
    device: str = "cpu",
) -> list[Any]:
    """Preference pairs from a model's own mistakes on verifier rows: for every row its greedy
    completion gets wrong, ``chosen`` = the answer and ``rejected`` = that completion.

    On-policy preferences, as DPO is used in practice: the pairs push down exactly what the
    model would say, where offline pairs of someone else's mistakes may never touch it.
    """
    prompts, answers, completions = _greedy_answers(
        model, data, max_new_tokens, DEFAULT_BATCH, device
    )
    return [
        PreferencePair(prompt, answer, completion)
        for prompt, answer, completion in zip(prompts, answers, completions, strict=True)
        if completion.strip() != answer.strip()
    ]


def _greedy_answers(
    model: str | Path | tuple[Any, Any],
    data: str | Path | Sequence[Any],
    max_new_tokens: int | None,
    batch_size: int,
    device: str,
) -> tuple[list[str], list[str], list[str]]:
    """Prompts, answers and greedy completions of the rows in ``data`` (none: three empty
    lists); ``max_new_tokens`` None: the longest answer's tokens plus 2."""
    if isinstance(model, (str, Path)):
        lm, tokenizer = load_model(model, device=device)
    else:
        lm, tokenizer = model
    rows = load_verifier_jsonl(data) if isinstance(data, (str, Path)) else list(data)
    if not rows:
        return [], [], []
    prompts, answers = answers_of(rows)
    if max_new_tokens is None:
        lengths = tokenizer(answers, add_special_tokens=False)["input_ids"]
        max_new_tokens = max(len(ids) for ids in lengths) + 2
    completions = greedy(
        lm, tokenizer, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size
    )
    return prompts, answers, completions


@torch.no_grad()
def sample(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    *,
    n: int = 1,
    max_new_tokens: int = 16,
    temperature: float = 1.0,
    top_p: float = 1.0,
) -> list[list[int]]:
    """``n`` sampled completions per prompt (token ids, cut after eos), prompt-major:
    completions ``i * n .. i * n + n - 1`` belong to prompt ``i``.

    Each prompt is run through the model once and its key/value cache copied ``n`` times
    (``transformers``' ``generate`` with ``num_return_sequences=n`` runs every prompt ``n``
    times); then one batched decoding step per token, ``x_t ~ softmax(top_p(logits / T))``,
    with transformers' own temperature and top-p warpers and the same random draws as
    ``generate``, so a seed gives ``generate``'s very tokens. A model whose cache cannot be
    copied that way is sampled by ``generate`` itself. The eos stays in the completion, so the
    policy learns where to stop. The online RL stages (GRPO, RLHF-PPO) sample through this one
    function, the place a faster backend (e.g. vLLM on a GPU) plugs in.
    """
    if max_new_tokens < 1:
        raise ConfigError(f"max_new_tokens={max_new_tokens} must be >= 1.")
    ids, mask = left_pad([encode_prompt(tokenizer, p) for p in prompts], tokenizer.pad_token_id)
    device = next(model.parameters()).device
    ids, mask = ids.to(device), mask.to(device)
    was_training = model.training
    model.eval()
    try:
        tokens = _decode_from_shared_prompts(
            model, ids, mask, n, max_new_tokens, _warpers(temperature, top_p),
            tokenizer.pad_token_id, tokenizer.eos_token_id,
        )  # fmt: skip
        if tokens is None:
            tokens = model.generate(
                input_ids=ids, attention_mask=mask, do_sample=True, temperature=temperature,
                top_p=top_p, top_k=0, max_new_tokens=max_new_tokens, num_return_sequences=n,
                pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
            )[:, ids.shape[1] :]  # fmt: skip
    finally:
        model.train(was_training)
    eos = tokenizer.eos_token_id
    completions = []
    for row in tokens.tolist():
        if eos is not None and eos in row:
            row = row[: row.index(eos) + 1]
        completions.append(row)
    return completions


def truncated_share(
    completions: Sequence[Sequence[int]], eos_token_id: int | None, max_new_tokens: int
) -> float:
    """The share of ``completions`` (as :func:`sample` returns them) cut at ``max_new_tokens``
    before their eos: they are that long and do not end with the eos. Without an eos token
    every completion that long counts."""
    if not completions:
        return 0.0
    cut = sum(
        1
        for c in completions
        if len(c) >= max_new_tokens and (eos_token_id is None or c[-1] != eos_token_id)
    )
    return cut / len(completions)


def _warpers(temperature: float, top_p: float) -> Any:
    """transformers' logits warpers for ``generate(do_sample=True, temperature, top_p,
    top_k=0)``, in generate's order (it skips the ones that change nothing)."""
    from transformers.generation.logits_process import (
        LogitsProcessorList,
        TemperatureLogitsWarper,
        TopPLogitsWarper,
    )

    warpers = LogitsProcessorList()
    if temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(temperature))
    if top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p))
    return warpers


def _forward_names(model: Any) -> tuple[str, bool]:
    """The name ``model.forward`` takes its key/value cache under (``cache`` since
    transformers 5.x, ``past_key_values`` before) and whether it takes ``logits_to_keep``."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft
    params = inspect.signature(inner.forward).parameters
    return ("cache" if "cache" in params else "past_key_values"), "logits_to_keep" in params


def _decode_from_shared_prompts(
    model: Any, ids: Tensor, mask: Tensor, n: int, max_new_tokens: int, warpers: Any,
    pad_id: int, eos_id: int | None,
) -> Tensor | None:  # fmt: skip
    """``[B * n, steps]`` sampled tokens (``pad_id`` after a row's eos), or None when the
    model's cache cannot be repeated per row (then nothing was drawn from the generator)."""
    cache_name, keeps_logits = _forward_names(model)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    extra = {"logits_to_keep": 1} if keeps_logits else {}
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True,
                **extra)  # fmt: skip
    cache = out.get("cache")
    if cache is None:
        cache = out.get("past_key_values")
    if not hasattr(cache, "batch_repeat_interleave"):
        return None
    cache.batch_repeat_interleave(n)
    logits = out.logits[:, -1].float().repeat_interleave(n, dim=0)
    mask = mask.repeat_interleave(n, dim=0)
    position = positions[:, -1:].repeat_interleave(n, dim=0)
    unfinished = torch.ones(len(mask), dtype=torch.bool, device=mask.device)
    steps: list[Tensor] = []
    for t in range(max_new_tokens):
        scores = warpers(None, logits) if warpers else logits
        token = torch.multinomial(torch.softmax(scores, dim=-1), 1).squeeze(1)
        token = torch.where(unfinished, token, torch.full_like(token, pad_id))
        steps.append(token)
        if eos_id is not None:
            unfinished &= token != eos_id
        if t == max_new_tokens - 1 or not unfinished.any():
            break
        mask = torch.cat([mask, mask.new_ones(len(mask), 1)], dim=1)
        position = position + 1
        out = model(input_ids=token[:, None], attention_mask=mask, position_ids=position,
                    use_cache=True, **{cache_name: cache})  # fmt: skip
        logits = out.logits[:, -1].float()
    return torch.stack(steps, dim=1)
