"""Greedy decoding and the exact-match accuracy of a model on prompt/answer rows.

Prompts are encoded as training encodes them (``[bos] + prompt``, :func:`encode_prompt`), so
a completion is generated exactly where training put it. Batches are *left* padded for
generation (every row's next token then sits in the last column); ``transformers``'
``generate`` derives the positions from the attention mask.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from rlx.errors import ConfigError
from rlx.llm.batching import encode_prompt

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
        answers.append(answer)
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
    from rlx.llm.models import load_model
    from rlx.llm.tasks import load_verifier_jsonl

    if isinstance(model, (str, Path)):
        model, tokenizer = load_model(model, device=device)
    else:
        model, tokenizer = model
    rows = load_verifier_jsonl(data) if isinstance(data, (str, Path)) else list(data)
    if not rows:
        raise ConfigError("exact_match needs at least one row.")
    prompts, answers = answers_of(rows)
    if max_new_tokens is None:
        lengths = tokenizer(answers, add_special_tokens=False)["input_ids"]
        max_new_tokens = max(len(ids) for ids in lengths) + 2
    completions = greedy(
        model, tokenizer, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size
    )
    hits = sum(c.strip() == a.strip() for c, a in zip(completions, answers, strict=True))
    return hits / len(rows)


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
    from rlx.llm.models import load_model
    from rlx.llm.tasks import PreferencePair, load_verifier_jsonl

    if isinstance(model, (str, Path)):
        model, tokenizer = load_model(model, device=device)
    else:
        model, tokenizer = model
    rows = load_verifier_jsonl(data) if isinstance(data, (str, Path)) else list(data)
    prompts, answers = answers_of(rows)
    if max_new_tokens is None:
        lengths = tokenizer(answers, add_special_tokens=False)["input_ids"]
        max_new_tokens = max(len(ids) for ids in lengths) + 2
    completions = greedy(model, tokenizer, prompts, max_new_tokens=max_new_tokens)
    return [
        PreferencePair(prompt, answer, completion)
        for prompt, answer, completion in zip(prompts, answers, completions, strict=True)
        if completion.strip() != answer.strip()
    ]


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

    One batched ``generate`` with the key/value cache, temperature and nucleus (top-p)
    sampling; the eos stays in the completion, so the policy learns where to stop. The online
    RL stages (GRPO, RLHF-PPO) sample through this one function, the place a faster backend
    (e.g. vLLM on a GPU) plugs in.
    """
    encoded = [encode_prompt(tokenizer, p) for p in prompts]
    ids, mask = left_pad(encoded, tokenizer.pad_token_id)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        out = model.generate(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            do_sample=True,
            temperature=temperature,
            top_p=top_p,
            top_k=0,
            max_new_tokens=max_new_tokens,
            num_return_sequences=n,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
    finally:
        model.train(was_training)
    eos = tokenizer.eos_token_id
    completions = []
    for row in out[:, ids.shape[1] :].tolist():
        if eos is not None and eos in row:
            row = row[: row.index(eos) + 1]
        completions.append(row)
    return completions
