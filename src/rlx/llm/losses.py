"""Language-model losses as small pure functions: each returns ``(loss, metrics)``.

As in :mod:`rlx.core.policy_losses`, the metrics are detached 0-d tensors named from
:mod:`rlx.metrics`: callers keep them as tensors inside the micro-batch loop and
read them once per update (``float(v)``, or the run logger), with no host round trip per step.
Sequence-level inputs are ``[B]`` tensors, one value per preference pair.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from rlx import metrics as M
from rlx.errors import ConfigError
from rlx.llm.batching import TokenBatch

TOKEN_ACCURACY = M.TOKEN_ACCURACY
"""Share of target tokens whose argmax prediction is the target (SFT)."""


def bradley_terry_loss(r_chosen: Tensor, r_rejected: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """The reward model's loss ``L = -E[log sigma(r(x, y+) - r(x, y-))]``.

    Bradley-Terry models ``P(y+ preferred to y-) = sigma(r+ - r-)``; ``F.logsigmoid`` keeps
    ``log sigma`` finite for large negative margins.

    Metrics: ``loss``, ``pair_accuracy`` (share of pairs with ``r+ > r-``), ``reward_margin``
    (mean ``r+ - r-``), ``chosen_reward`` and ``rejected_reward`` (means).
    """
    _pair_shapes(r_chosen, r_rejected)
    margin = r_chosen - r_rejected
    loss = -F.logsigmoid(margin).mean()
    with torch.no_grad():
        metrics = {
            M.LOSS: loss.detach(),
            M.PAIR_ACCURACY: (margin > 0).float().mean(),
            M.REWARD_MARGIN: margin.mean(),
            M.CHOSEN_REWARD: r_chosen.mean(),
            M.REJECTED_REWARD: r_rejected.mean(),
        }
    return loss, metrics


def dpo_loss(
    policy_chosen_logps: Tensor,
    policy_rejected_logps: Tensor,
    ref_chosen_logps: Tensor,
    ref_rejected_logps: Tensor,
    beta: float = 0.1,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Direct Preference Optimisation,
    ``L = -E[log sigma(beta * [(log pi(y+|x) - log pi_ref(y+|x))
    - (log pi(y-|x) - log pi_ref(y-|x))])]``.

    Inputs are sequence log-probabilities ``[B]`` (:func:`rlx.llm.logprobs.sequence_logprobs`);
    the reference's carry no gradient. The implicit reward of a completion is
    ``beta * (log pi(y|x) - log pi_ref(y|x))``. When ``pi == pi_ref`` the loss is ``log 2`` and
    its gradient is ``-beta / 2`` on the chosen and ``+beta / 2`` on the rejected log-probability
    (per pair, over ``B``): descent raises ``y+`` and lowers ``y-``.

    Metrics: ``loss``, ``chosen_reward`` and ``rejected_reward`` (mean implicit rewards),
    ``reward_margin`` (their mean difference), ``pair_accuracy`` (share of pairs whose chosen
    implicit reward is higher) and ``log_ratio_ref``, the mean of ``log pi(y|x) - log pi_ref(y|x)``
    over chosen and rejected completions: how far the policy's likelihood of the preference data
    has moved from the reference's. It is no KL estimate (the completions were not sampled from
    ``pi``) and takes either sign: DPO commonly lowers both likelihoods, which makes it negative.
    """
    _check_beta(beta)
    _pair_shapes(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps)
    chosen_logratio = policy_chosen_logps - ref_chosen_logps.detach()
    rejected_logratio = policy_rejected_logps - ref_rejected_logps.detach()
    loss = -F.logsigmoid(beta * (chosen_logratio - rejected_logratio)).mean()
    with torch.no_grad():
        chosen_reward = beta * chosen_logratio
        rejected_reward = beta * rejected_logratio
        metrics = {
            M.LOSS: loss.detach(),
            M.CHOSEN_REWARD: chosen_reward.mean(),
            M.REJECTED_REWARD: rejected_reward.mean(),
            M.REWARD_MARGIN: (chosen_reward - rejected_reward).mean(),
            M.PAIR_ACCURACY: (chosen_reward > rejected_reward).float().mean(),
            M.LOG_RATIO_REF: torch.cat([chosen_logratio, rejected_logratio]).mean(),
        }
    return loss, metrics


def sft_loss(
    logits: Tensor, batch: TokenBatch, *, num_target_tokens: int | Tensor | None = None
) -> tuple[Tensor, dict[str, Tensor]]:
    """Token cross-entropy over target tokens, ``L = -(1/N) sum_t m_t log pi(x_t | x_<t)``.

    ``m_t`` is ``batch.loss_mask`` (completion and eos tokens) and ``N`` is by default this
    batch's number of target tokens, so every token weighs the same. For gradient accumulation
    pass ``num_target_tokens`` = the target tokens of the *whole* batch over all micro-batches:
    the micro-batch losses then sum to the whole batch's loss, and so do their gradients (a
    per-micro-batch mean would weigh a token of a short micro-batch more).

    Only the target positions' logits are gathered before the cross-entropy. Metrics: ``loss``
    and ``token_accuracy`` (share of target tokens that are the argmax prediction).
    """
    mask = batch.target_mask
    if logits.shape[:2] != batch.input_ids.shape:
        raise ValueError(
            f"logits {tuple(logits.shape)} do not match input_ids {tuple(batch.input_ids.shape)}."
        )
    target_logits = logits[:, :-1][mask]  # [N, V]
    targets = batch.input_ids[:, 1:][mask]  # [N]
    if target_logits.dtype in (torch.float16, torch.bfloat16):
        target_logits = target_logits.float()
    total = F.cross_entropy(target_logits, targets, reduction="sum")
    denominator: Tensor | int
    if num_target_tokens is None:
        denominator = mask.sum().clamp(min=1)  # a batch with no targets gives 0, not NaN
    elif isinstance(num_target_tokens, int) and num_target_tokens < 1:
        raise ConfigError(f"num_target_tokens={num_target_tokens} must be >= 1.")
    else:
        denominator = num_target_tokens
    loss = total / denominator
    with torch.no_grad():
        hits = (target_logits.argmax(dim=-1) == targets).float()
        accuracy = hits.mean() if hits.numel() else hits.new_tensor(math.nan)
        metrics = {M.LOSS: loss.detach(), TOKEN_ACCURACY: accuracy}
    return loss, metrics


def _check_beta(beta: float) -> None:
    if not isinstance(beta, (int, float)) or not math.isfinite(beta) or beta <= 0:
        raise ConfigError(f"beta={beta!r} must be a number > 0 (DPO commonly uses 0.1).")


def _pair_shapes(*tensors: Tensor) -> None:
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) != 1 or len(next(iter(shapes))) != 1:
        raise ValueError(f"expected [B] tensors of one shape, one per pair, got {sorted(shapes)}.")


__all__ = ["TOKEN_ACCURACY", "bradley_terry_loss", "dpo_loss", "sft_loss"]
