"""GRPO (Shao et al., 2024): policy optimisation from verifier rewards, with no value network.

Per step, for each of ``batch_size`` prompts, ``G`` completions are sampled and scored; each
completion's advantage is its reward standardised within its group,
``A_i = (r_i - mean_r) / std_r``, shared by all its tokens. The loss is PPO's clipped
surrogate per token (:func:`rlx.core.policy_losses.clipped_surrogate` on the padded
completions), plus a KL penalty to the frozen start model:

    r_t   = pi(y_t | x, y_<t) / pi_old(y_t | x, y_<t)
    L     = -mean[ min(r_t A, clip(r_t, 1 - eps, 1 + eps_high) A) - beta KL_t ]
    KL_t  = exp(log pi_ref - log pi) - (log pi_ref - log pi) - 1      (k3, >= 0)

averaged per sequence then over sequences (``loss_aggregation="sequence"``) or over all tokens
(``"token"``). A group whose rewards are all equal has zero advantage and gives no gradient:
``frac_zero_std_groups`` counts them. Logged per step: ``reward`` (mean) and ``group_reward_std``,
``frac_zero_std_groups``, ``kl_ref``, ``clip_fraction``, ``approx_kl``, ``response_length``,
``entropy``, ``generation_s`` and ``update_s``; held out, ``exact_match`` when the rows have
answers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from rlx import metrics as M
from rlx import registry
from rlx.core.checks import at_least, in_range, one_of, positive
from rlx.core.env_recipe import IN_PYTHON
from rlx.core.policy_losses import AGGREGATIONS, clipped_surrogate, k3, masked_mean
from rlx.errors import ConfigError
from rlx.llm.batching import (
    EncodedSequence,
    SequenceTable,
    encode_prompt,
    pack_groups,
)
from rlx.llm.generation import sample, truncated_share
from rlx.llm.logprobs import packed_group_logprobs, token_logprobs_and_entropy
from rlx.llm.online import (
    OnlineSetup,
    completions_for_rewards,
    row_columns,
    run_online,
    score,
)
from rlx.llm.parallel import DataParallel, average_gradients, mean_over_processes
from rlx.llm.precision import autocast
from rlx.llm.rewards import (
    REWARDS,
    VALID_REWARDS,
    RewardFunction,
    RewardSet,
    is_not_importable,
    is_reward_reference,
    load_reward,
    reward_set,
)
from rlx.llm.stage_config import StageConfig
from rlx.llm.training import StageData, StageResult
from rlx.runs.handle import RunHandle

TARGET_ROWS = 20_000
"""Prompts a run sees when neither steps nor epochs is given (at most 10 passes): GRPO's
accuracy keeps rising well past one pass over a small data set, so a small one is repeated."""
LR_SCALE = 0.2
"""GRPO's default step size relative to SFT's (it moves a trained model): 2e-4 for a tiny
model. A much smaller one barely moves the model within a run, a larger one collapses it."""


@dataclass(frozen=True)
class GRPOConfig(StageConfig):
    """GRPO on ``{"prompt", ...}`` rows (text or conversations; every other column reaches
    the reward functions by name) with verifier rewards. ``batch_size`` counts prompts per
    step; each gets ``group_size`` completions."""

    batch_size: int = 64
    """prompts per step (each sampled group_size times): the gradient of a few prompts is too
    noisy to raise accuracy"""
    warmup_ratio: float = 0.1
    """share of the steps with a linear learning-rate warm-up (linear decay to 0 after it).
    Adam's first steps move every weight by about the full step size whatever its gradient,
    so a short run at full size from its first step unlearns what SFT taught before the
    reward teaches anything"""
    reward: str = "exact-match"
    """the reward functions, several joined by commas: names of rlx.llm.REWARDS (exact-match,
    numeric, math, format, python-tests, ...) or package.module:function references to your
    own, imported only with --trust-env-code (trust_env_code=True in Python to resume a run
    that names one)"""
    reward_weights: tuple[float, ...] | None = None
    """one weight per reward function, r = sum_k w_k r_k (None: 1 each)"""
    group_size: int = 8
    """G: completions per prompt, at least 2 (a group of 1 has no spread to learn from; 8 to
    64 is standard; below 4 the advantages are noisy)"""
    max_new_tokens: int = 16
    """longest completion in tokens"""
    temperature: float = 1.0
    """sampling temperature; the policy, old-policy and reference log-probs are all taken at
    it, log softmax(logits / T), the distribution the samples came from"""
    top_p: float = 1.0
    """nucleus sampling: keep the smallest token set with this probability mass"""
    beta: float = 0.04
    """weight of the KL to the frozen start model (0: no reference model is kept)"""
    clip_eps: float = 0.2
    """epsilon of the clipped ratio (lower side, and upper unless clip_eps_high is set)"""
    clip_eps_high: float | None = None
    """a higher upper clip (DAPO's clip-higher, e.g. 0.28); None: clip_eps"""
    scale_rewards: bool = True
    """divide the group-centred rewards by the group's std (False: centre only)"""
    loss_aggregation: str = "sequence"
    """sequence: mean over each completion's tokens, then over completions; token: over all"""
    num_epochs: int = 1
    """optimisation passes over each batch of samples (1: on-policy, the ratio stays 1)"""
    length_normalize: bool = False
    """divide each reward by the completion's length in tokens (against length bias)"""
    eval_exact_match: bool = True
    """greedy exact match on held-out rows at each evaluation"""
    pack_groups: bool | None = None
    """score a prompt's G completions in one row that computes the prompt once (None: when the
    model gives the same log-probabilities that way, checked at the start)"""
    allow_unisolated: bool = False
    """run model-written code (the python-tests reward) even where the sandbox cannot isolate
    it (no root or no namespaces); the run then warns once, naming what is missing"""

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least(self, "group_size", 2)
        at_least(self, "max_new_tokens", 1)
        positive(self, "temperature")
        positive(self, "top_p")
        in_range(self, "top_p", 0.0, 1.0)
        at_least(self, "beta", 0.0)
        positive(self, "clip_eps")
        if self.clip_eps_high is not None:
            at_least(self, "clip_eps_high", self.clip_eps)
        one_of(self, "loss_aggregation", AGGREGATIONS)
        at_least(self, "num_epochs", 1)


def reward_function(item: str, data: Any = None) -> RewardFunction:
    """The reward function ``config.reward`` names as ``item``: a built-in of
    :data:`rlx.llm.rewards.REWARDS`, or the function a ``package.module:function`` reference
    names, imported only with the consent ``data`` (a :class:`~rlx.llm.training.StageData`)
    carries.

    A run folder is data, so a reference its ``config.json`` names imports nothing until the
    user consents (``trust_env_code=True``, ``--trust-env-code``) or gives the reward again; the
    mark of a Python function that had no reference (a lambda, a local function) asks for the
    function again. Each refusal is one ConfigError sentence, worded by the data's consent."""
    if item in REWARDS:
        return REWARDS[item]
    stage = data if isinstance(data, StageData) else None
    consent = stage.consent if stage is not None else IN_PYTHON
    again = consent.arg("reward", "NAME")
    if is_reward_reference(item):
        if stage is not None and stage.trust_code:
            return load_reward(item)
        if stage is None:  # rlx.train itself, a heal, a tuning trial: none of them consents
            raise ConfigError(
                f"reward {item!r} is code that rlx imports only when you give it to "
                "rlx.llm.grpo (reward=..., or trust_env_code=True to resume a run that names "
                "it) or to rlx align grpo with --trust-env-code."
            )
        raise ConfigError(
            f"reward {item!r} is code that rlx imports only with your consent: pass "
            f"{consent.allow} if you trust it, or give the reward yourself ({again})."
        )
    if is_not_importable(item):
        raise ConfigError(
            f"this run's reward {item!r} was a Python function without a package.module:function "
            f"reference (a lambda or a local function), so its run folder cannot name it: pass "
            f"it again ({again})."
        )
    raise ConfigError(f"reward {item!r} is not a known reward; {VALID_REWARDS}.")


def run_rewards(config: Any, data: Any = None) -> RewardSet:
    """The run's reward functions and weights: those ``data`` (a
    :class:`~rlx.llm.training.StageData`) carries, given with this call in the order of
    ``config.reward``, else each that ``config.reward`` names (:func:`reward_function`)."""
    given = data.rewards if isinstance(data, StageData) else ()
    if given:
        return reward_set(list(given), config.reward_weights)
    names = [n.strip() for n in config.reward.split(",") if n.strip()]
    return reward_set([reward_function(n, data) for n in names], config.reward_weights)


# ============================================================================ the math
def group_advantages(rewards: Tensor, group_size: int, scale: bool = True) -> Tensor:
    """``A_i = (r_i - mean_r) / std_r`` within each group of ``group_size`` consecutive
    rewards (``std`` the population std plus 1e-4, so an all-equal group gives exactly 0)."""
    groups = rewards.view(-1, group_size)
    centred = groups - groups.mean(dim=1, keepdim=True)
    if scale:
        centred = centred / (groups.std(dim=1, unbiased=False, keepdim=True) + 1e-4)
    return centred.reshape(-1)


def kl_k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """Per-token ``KL(pi || pi_ref)`` estimate ``exp(d) - d - 1`` with ``d = log pi_ref -
    log pi`` (:func:`rlx.core.policy_losses.k3`: unbiased for tokens sampled from pi, and
    >= 0)."""
    return k3(ref_logp - logp)


def grpo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    config: GRPOConfig,
    ref_logp: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """``L = -mean[min(r_t A, clip(r_t, 1 - eps, 1 + eps_high) A) - beta KL_t]`` over the
    completion tokens (``mask``), both terms averaged with ``config.loss_aggregation``.

    ``advantages`` is per completion ``[B]``; ``ref_logp`` None: no KL term (``beta = 0``).
    Metrics: those of the clipped surrogate, ``policy_loss`` the whole loss, and ``kl_ref``
    (the per-token mean of ``KL_t``) with a reference.
    """
    loss, metrics = clipped_surrogate(
        logp,
        old_logp,
        advantages,
        config.clip_eps,
        clip_eps_high=config.clip_eps_high,
        mask=mask,
        aggregation=config.loss_aggregation,
    )
    if ref_logp is None:
        return loss, metrics
    kl = kl_k3(logp, ref_logp)
    if config.beta > 0:
        loss = loss + config.beta * masked_mean(kl, mask, config.loss_aggregation)
        metrics[M.POLICY_LOSS] = loss.detach()
    with torch.no_grad():
        metrics[M.KL_REF] = masked_mean(kl, mask)
    return loss, metrics


def completion_scorer(
    tokenizer: Any, prompts: Sequence[str], completions: list[list[int]], device: str,
    packing: bool, temperature: float = 1.0,
) -> tuple[Callable[[Any], tuple[Tensor, Tensor]], Tensor]:  # fmt: skip
    """``(logps, mask)``: ``logps(model)`` gives the per-token log-probabilities (at the
    sampling ``temperature``) and entropy of the completions (each prompt's
    ``len(completions) // len(prompts)`` in a row), laid out like ``mask`` (True on completion
    tokens), packed or as separate rows."""
    prompt_ids = [encode_prompt(tokenizer, p) for p in prompts]
    if packing:
        packed = pack_groups(prompt_ids, completions, tokenizer.pad_token_id).to(device)
        return (lambda model: packed_group_logprobs(model, packed, temperature)), packed.mask
    G = len(completions) // len(prompts)
    seqs = [EncodedSequence.from_parts(prompt_ids[i // G], c) for i, c in enumerate(completions)]
    batch = SequenceTable(seqs, tokenizer.pad_token_id).batch(np.arange(len(seqs))).to(device)
    return (lambda model: token_logprobs_and_entropy(model, batch, temperature)), batch.target_mask


def use_group_packing(setting: bool | None, model: Any, tokenizer: Any, rows: list[Any]) -> bool:
    """``pack_groups`` resolved: None packs when packed groups give the log-probabilities of
    separate rows on a few of the data's own prompts and answers (an architecture that
    ignores explicit positions or 4D masks does not)."""
    if setting is False:
        return False
    probe = rows[:3]
    prompts = [r.prompt for r in probe]
    answers = [tokenizer(str(r.answer or "0"), add_special_tokens=False)["input_ids"]
               for r in probe]  # fmt: skip
    completions = [answers[(i + j) % len(probe)] or [tokenizer.eos_token_id or 0]
                   for i in range(len(probe)) for j in range(2)]  # fmt: skip
    device = next(model.parameters()).device
    try:
        with torch.no_grad():
            logps, mask = completion_scorer(tokenizer, prompts, completions, device, True)
            packed = logps(model)[0][mask]
            logps, mask = completion_scorer(tokenizer, prompts, completions, device, False)
            separate = logps(model)[0][mask]
        ok = bool(torch.allclose(packed, separate, atol=1e-3))
    except (RuntimeError, TypeError, ValueError):
        ok = False
    if setting and not ok:
        raise ConfigError(
            "pack_groups=True, but this model scores packed groups differently from separate "
            "rows (it ignores position ids or 4D attention masks); use pack_groups=False."
        )
    return ok


# ============================================================================ sampling
def sample_groups(
    model: Any, tokenizer: Any, prompts: Sequence[str], config: GRPOConfig
) -> list[list[int]]:
    """``G`` sampled completions per prompt (token ids, cut after eos), prompt-major:
    completions ``i * G .. i * G + G - 1`` belong to prompt ``i``."""
    return sample(
        model, tokenizer, prompts, n=config.group_size, max_new_tokens=config.max_new_tokens,
        temperature=config.temperature, top_p=config.top_p,
    )  # fmt: skip


# ============================================================================ the stage
@dataclass
class GRPOUpdate:
    """GRPO's half of the online loop (:func:`rlx.llm.online.run_online`): each step is
    :func:`grpo_step`; no state beyond the weights, and the model is saved only by a run
    that reached its last step."""

    lm: Any
    tokenizer: Any
    reference: Any
    reward: RewardSet
    config: GRPOConfig
    packing: bool
    save_when_stopped: bool = False

    @property
    def trained(self) -> Any:
        """What the optimizer steps: the policy itself (no value head)."""
        return self.lm

    @classmethod
    def build(cls, setup: OnlineSetup) -> GRPOUpdate:
        config, model, tokenizer = setup.config, setup.model, setup.tokenizer
        packing = use_group_packing(config.pack_groups, model, tokenizer, setup.train_rows)
        model.train()  # sampled and updated in training mode: LoRA's dropout acts
        return cls(model, tokenizer, setup.reference, setup.reward, config, packing)

    def step(
        self, rows: list[Any], optimizer: torch.optim.Optimizer, parallel: DataParallel | None
    ) -> dict[str, float]:
        return grpo_step(self.lm, self.reference, self.tokenizer, optimizer, rows, self.reward,
                         self.config, self.packing, parallel)  # fmt: skip

    def after_step(self, metrics: dict[str, float], step: int, prompts: int) -> None:
        return None

    def state(self) -> dict[str, Any]:
        return {}

    def load_state(self, state: Mapping[str, Any]) -> None:
        return None


def train(config: GRPOConfig, data: Any, run: RunHandle, *, parallel: Any = None) -> StageResult:
    """The registered ``train``: the online loop (:func:`rlx.llm.online.run_online`) with
    the rewards of :func:`run_rewards` (decided first, so a reward refused reads no data and
    loads no model), a reference when ``beta > 0``, and :class:`GRPOUpdate`."""
    rewards = run_rewards(config, data)
    return run_online(
        config, data, run, rewards=lambda config: rewards,
        build=GRPOUpdate.build, lr_scale=LR_SCALE, target_rows=TARGET_ROWS,
        reference=lambda config: config.beta > 0, parallel=parallel,
    )  # fmt: skip


def grpo_step(
    model: Any,
    reference: Any,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer,
    rows: list[Any],
    reward: RewardSet | RewardFunction,
    config: GRPOConfig,
    packing: bool = False,
    parallel: DataParallel | None = None,
) -> dict[str, float]:
    """Sample G completions per prompt, score them, and take ``num_epochs`` gradient
    steps on the clipped token loss (``packing``: each prompt's group in one row, see
    :class:`rlx.llm.batching.PackedGroups`). Returns the step's metrics."""
    G = config.group_size
    t0 = time.perf_counter()
    prompts = [r.prompt for r in rows]
    completions = sample_groups(model, tokenizer, prompts, config)
    generation_s = time.perf_counter() - t0
    texts = tokenizer.batch_decode(completions, skip_special_tokens=True)
    group_prompts = [p for p in prompts for _ in range(G)]
    rewards, reward_metrics = score(
        reward, group_prompts, completions_for_rewards(group_prompts, texts),
        row_columns(rows, G), completions,
    )  # fmt: skip
    lengths = torch.tensor([len(c) for c in completions], dtype=torch.float32)
    if config.length_normalize:
        rewards = rewards / lengths.clamp(min=1)
    advantages = group_advantages(rewards, G, config.scale_rewards)
    spread = rewards.view(-1, G).std(dim=1, unbiased=False)  # each group's std
    zero_spread = (spread < 1e-6).float().mean()

    logps, mask = completion_scorer(
        tokenizer, prompts, completions, config.device, packing, config.temperature
    )
    with torch.no_grad(), autocast(config.precision, config.device):
        # one pass per batch is on-policy: pi_old is the policy itself, so its log-probs are
        # the first pass's own, detached (no extra forward)
        old_logp = logps(model)[0] if config.num_epochs > 1 else None
        ref_logp = logps(reference)[0] if reference is not None else None
    params = [p for p in model.parameters() if p.requires_grad]
    rows_metrics: list[dict[str, Tensor]] = []
    for _ in range(config.num_epochs):
        with autocast(config.precision, config.device):
            logp, entropy = logps(model)
        on_policy = logp.detach() if old_logp is None else old_logp
        loss, metrics = grpo_loss(
            logp, on_policy, advantages.to(logp.device), mask, config, ref_logp
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        average_gradients(params, parallel)
        if config.max_grad_norm is not None:
            metrics[M.GRAD_NORM] = torch.nn.utils.clip_grad_norm_(
                params, config.max_grad_norm, foreach=True
            )
        optimizer.step()
        with torch.no_grad():
            metrics[M.ENTROPY] = masked_mean(entropy, mask)
        rows_metrics.append(metrics)
    out = {k: float(torch.stack([m[k] for m in rows_metrics]).mean()) for k in rows_metrics[0]}
    out.update(
        {
            M.REWARD: float(rewards.mean()),
            M.GROUP_REWARD_STD: float(spread.mean()),
            M.FRAC_ZERO_STD_GROUPS: float(zero_spread),
            M.RESPONSE_LENGTH: float(lengths.mean()),
            M.TRUNCATED_FRACTION: truncated_share(
                completions, tokenizer.eos_token_id, config.max_new_tokens
            ),
            M.GENERATION_S: generation_s,
            M.UPDATE_S: time.perf_counter() - t0 - generation_s,
        }
    )
    out.update(reward_metrics)  # each function's mean score, as reward/<name>
    return mean_over_processes(out, parallel)


def load(config: GRPOConfig, data_id: str, state: dict) -> Any:
    """The trained policy as a :class:`rlx.llm.agent.LoadedModel`."""
    from rlx.llm.agent import LoadedModel

    return LoadedModel.from_checkpoint(config, state)


ALGORITHM = registry.register(
    registry.Algorithm(
        name="grpo",
        config=GRPOConfig,
        train=train,
        load=load,
        budget_field="steps",
        unit="steps",
        renamed={"num_iterations": "num_epochs"},
    )
)

__all__ = [
    "GRPOConfig",
    "group_advantages",
    "grpo_loss",
    "kl_k3",
    "reward_function",
    "run_rewards",
]
