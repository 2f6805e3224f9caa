"""Log-probabilities of tokens under a causal LM, the one place every stage reads them from.

    log pi(x_t | x_<t) = log softmax(logits_{t-1} / T)[x_t]      (T: the sampling temperature)
    H_t                = -sum_v pi(v | x_<t) log pi(v | x_<t)

The prediction of token ``t`` comes from the logits at ``t - 1``: ``logits[:, :-1]`` pairs with
``input_ids[:, 1:]`` (:mod:`rlx.llm.batching`'s conventions). Everything is computed in float32
at least, so bf16 models keep the small differences DPO and KL estimates live on.

- per token: :func:`logprobs_from_logits`, :func:`token_logprobs` (masked to the targets),
  :func:`next_token_logprobs` (at a temperature: the reference of online RL),
  :func:`token_logprobs_and_entropy` (the policy of online RL);
- per sequence: :func:`sequence_logprobs` (SFT-style rows), :func:`packed_pair_logprobs`
  (DPO's packed pairs);
- per completion token of packed groups: :func:`packed_group_logprobs` (GRPO).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from rlx.llm.batching import PackedGroups, PackedPairs, TokenBatch, forward_logits, packed_forward


def tempered_log_softmax(logits: Tensor, temperature: float = 1.0) -> Tensor:
    """``log softmax(logits / T)`` in float32: the distribution a sampler drew from at
    temperature ``T``. Online RL scores its samples under this one, so that the PPO ratio
    ``pi_theta / pi_old`` compares the distribution that was sampled (as TRL does too)."""
    logits = logits.float()
    return F.log_softmax(logits if temperature == 1.0 else logits / temperature, dim=-1)


ENTROPY_ROWS = 1024
"""Distributions per chunk of the entropy: its ``[rows, V]`` temporaries stay small."""


def gathered_and_entropy(log_probs: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
    """``log_probs [..., V]`` read at ``targets [...]``, and the entropy of each distribution.

    The entropy is a figure to log, never a term of a loss here: it is computed without a
    gradient, a chunk of rows at a time, so neither autograd nor the arithmetic holds more
    ``[..., V]`` tensors than ``log_probs`` itself (with a large vocabulary and long
    completions those are gigabytes each)."""
    token = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    with torch.no_grad():
        flat = log_probs.detach().reshape(-1, log_probs.shape[-1])
        entropy = (
            torch.cat([-(chunk.exp() * chunk).sum(-1) for chunk in flat.split(ENTROPY_ROWS)])
            if len(flat)
            else flat.new_zeros(0)
        )
    return token, entropy.reshape(log_probs.shape[:-1])


def logprobs_from_logits(logits: Tensor, input_ids: Tensor) -> Tensor:
    """``log pi(x_t | x_<t)`` for ``t = 1 .. L-1``, shape ``[B, L-1]``, unmasked.

    ``log_softmax(logits[:, :-1])`` gathered at the targets ``input_ids[:, 1:]``: only the
    target token's value leaves the function, never a ``[B, L, V]`` tensor."""
    shifted = logits[:, :-1]
    if shifted.dtype in (torch.float16, torch.bfloat16):
        shifted = shifted.float()
    log_probs = F.log_softmax(shifted, dim=-1)
    return log_probs.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)


def token_logprobs(model: torch.nn.Module, batch: TokenBatch) -> Tensor:
    """Per-token ``log pi(x_t | x_<t)`` at target tokens, 0 elsewhere: ``[B, L-1]``.

    Column ``t - 1`` holds token ``t``'s log-probability; ``batch.target_mask`` marks the
    columns that count."""
    logp = logprobs_from_logits(forward_logits(model, batch), batch.input_ids)
    return logp * batch.target_mask


def sequence_logprobs(model: torch.nn.Module, batch: TokenBatch) -> Tensor:
    """``log pi(y | x) = sum_t loss_mask_t * log pi(x_t | x_<t)``, one value per row: ``[B]``."""
    return token_logprobs(model, batch).sum(dim=-1)


def next_token_logprobs(model: Any, batch: TokenBatch, temperature: float = 1.0) -> Tensor:
    """``log pi(x_t | x_<t)`` of every next token ``[B, L-1]``, unmasked, with ``pi`` at the
    sampling ``temperature``: the reference's side of online RL's KL penalty (it compares like
    with like)."""
    logits = forward_logits(model, batch)[:, :-1]
    return (
        tempered_log_softmax(logits, temperature)
        .gather(-1, batch.input_ids[:, 1:].unsqueeze(-1))
        .squeeze(-1)
    )


def token_logprobs_and_entropy(
    model: Any, batch: TokenBatch, temperature: float = 1.0
) -> tuple[Tensor, Tensor]:
    """``log pi(x_t | x_<t)`` ``[B, L-1]`` at every position and the policy's entropy at
    each, from one forward pass (``pi`` at the sampling ``temperature``)."""
    logits = forward_logits(model, batch)[:, :-1]
    return gathered_and_entropy(tempered_log_softmax(logits, temperature), batch.input_ids[:, 1:])


def packed_pair_logprobs(model: torch.nn.Module, packed: PackedPairs) -> tuple[Tensor, Tensor]:
    """``log pi(y+|x)`` and ``log pi(y-|x)`` ``[B]`` from one forward pass over packed pairs."""
    logits = packed_forward(model, packed).logits
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    log_probs = F.log_softmax(logits, dim=-1)
    rows = torch.arange(len(packed), device=logits.device).unsqueeze(-1)
    # log pi(token t | its context) read from the logits at pred_index[t]
    token = log_probs[rows, packed.pred_index, packed.input_ids]
    chosen = (token * packed.chosen_mask).sum(dim=-1)
    rejected = (token * packed.rejected_mask).sum(dim=-1)
    return chosen, rejected


def packed_group_logprobs(
    model: torch.nn.Module, packed: PackedGroups, temperature: float = 1.0
) -> tuple[Tensor, Tensor]:
    """``log pi(token | context)`` and the policy's entropy there, ``[N, T]`` per completion
    token, from one forward pass over the packed groups (``pi`` at the sampling
    ``temperature``, see :func:`tempered_log_softmax`)."""
    logits = packed_forward(model, packed).logits
    rows, cols = packed.gather_row, packed.gather_col
    # the logits that predict each completion token, then that token's log-probability
    log_probs = tempered_log_softmax(logits[rows, packed.pred_index[rows, cols]], temperature)
    return gathered_and_entropy(log_probs, packed.input_ids[rows, cols])


__all__ = [
    "gathered_and_entropy",
    "logprobs_from_logits",
    "next_token_logprobs",
    "packed_group_logprobs",
    "packed_pair_logprobs",
    "sequence_logprobs",
    "tempered_log_softmax",
    "token_logprobs",
    "token_logprobs_and_entropy",
]
