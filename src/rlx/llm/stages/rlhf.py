"""RLHF-PPO (Ziegler et al., 2019; Ouyang et al., 2022), registered as ``rlhf-ppo``: the third
stage of RLHF (SFT, reward model, PPO), PPO against a learned reward model with a KL penalty.

The policy starts from the SFT model; a frozen copy of it is the reference ``pi_ref``; a value
head on the policy's last hidden state is the critic. Per step, one completion is sampled for
each of ``batch_size`` prompts and scored by the reward model ``R``. Each completion token
``t`` gets the reward

    r_t = -beta (log pi(y_t | x, y_<t) - log pi_ref(y_t | x, y_<t))  +  [t = T] R(x, y)

(the RLHF objective ``R(x, y) - beta KL(pi || pi_ref)`` spread over the tokens), and GAE over
the tokens (gamma 1, lambda 0.95; :func:`rlx.core.advantages.masked_gae`, each completion an
episode) gives the advantages and the value targets:

    delta_t = r_t + gamma V_{t+1} - V_t          (V_{T+1} = 0: the completion ends)
    A_t     = sum_l (gamma lambda)^l delta_{t+l},      R_t = A_t + V_t

The update is PPO's, on tokens: ``num_epochs`` passes of minibatches over the step's samples,
the clipped surrogate (:func:`rlx.core.policy_losses.clipped_surrogate`, every token weighing
the same) plus ``vf_coef`` times the clipped value loss
(:func:`rlx.core.policy_losses.value_loss`). With ``adaptive_kl`` the penalty follows a target
KL (Ziegler et al.'s controller):

    beta <- beta (1 + clip(KL / kl_target - 1, -0.2, 0.2) * n / kl_horizon)

Logged per step: ``reward`` (mean ``R - beta KL`` per completion, the quantity optimised),
``rm_score`` (mean ``R``), ``gold_reward`` (exact match of the answer, when rows carry one),
``kl_ref`` (the sequence ``KL(pi || pi_ref)`` per completion, ``sum_t exp(r_t) - 1 - r_t``
with ``r_t = log pi_ref(y_t | x, y_<t) - log pi(y_t | x, y_<t)``: k3 terms, each >= 0, unbiased
on samples from pi; the penalty in ``r_t`` above is the plain log-ratio, as in Ziegler et al.),
``beta``,
``response_length``, ``approx_kl``, ``clip_fraction``, ``entropy``, ``policy_loss``,
``value_loss``; held out, ``exact_match``. A warning is printed once when ``kl_ref`` passes
``kl_warning`` (5 by default): drift from the SFT model, where reward hacking starts.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from rlx import metrics as M
from rlx import registry
from rlx.core.advantages import explained_variance, masked_gae
from rlx.core.checks import at_least, in_range, positive
from rlx.core.fields import CheckedFields
from rlx.core.policy_losses import clipped_surrogate, k3, masked_mean, value_loss
from rlx.errors import ConfigError
from rlx.llm.batching import (
    EncodedSequence,
    SequenceTable,
    TokenBatch,
    encode_prompt,
)
from rlx.llm.generation import sample, truncated_share
from rlx.llm.logprobs import gathered_and_entropy, next_token_logprobs, tempered_log_softmax
from rlx.llm.online import (
    OnlineSetup,
    completions_for_rewards,
    row_columns,
    run_online,
    score,
)
from rlx.llm.parallel import DataParallel, average_gradients, mean_over_processes
from rlx.llm.precision import autocast
from rlx.llm.rewards import REWARDS, RewardSet, exact_match_reward, reward_set
from rlx.llm.stage_config import StageConfig
from rlx.llm.training import StageResult
from rlx.runs.handle import RunHandle

TARGET_ROWS = 9_600
"""Prompts a run sees when neither steps nor epochs is given: 150 steps of 64."""
LR_SCALE = 0.01
"""RLHF's default step size relative to SFT's: 1e-5 for a model under 10M parameters. PPO
moves a trained model with a noisy one-sample-per-prompt gradient, and a tenth of SFT's step
size already unlearns what SFT taught faster than the reward teaches anything new."""


@dataclass(frozen=True)
class TokenPPOFields(CheckedFields):
    """PPO over a language model's tokens with a value head and a KL penalty to a reference,
    declared and checked once for the stages that run it: ``rlhf`` (a sample is one
    completion) and ``ppo-episodes`` (a sample is one episode of a text env)."""

    beta: float = 0.05
    """weight of the per-token KL penalty to the reference (start) model, on the model's
    tokens (0.01 to 0.05 is usual; 0: no reference)"""
    adaptive_kl: bool = False
    """move beta toward kl_target with Ziegler et al.'s proportional controller"""
    kl_target: float = 6.0
    """the summed KL per sample (completion or episode) the adaptive controller aims at"""
    kl_horizon: int = 10_000
    """the controller's horizon in samples"""
    gamma: float = 1.0
    """discount over the model's tokens (an env's answer is no time step)"""
    gae_lambda: float = 0.95
    """GAE lambda over the model's tokens"""
    num_epochs: int = 4
    """K: passes over each step's samples"""
    minibatch_size: int = 8
    """samples (completions or episodes) per PPO minibatch"""
    clip_eps: float = 0.2
    """epsilon of the clipped ratio"""
    clip_value: float = 0.2
    """clip of the value prediction around the rollout's values"""
    vf_coef: float = 0.1
    """weight of the value loss"""

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least(self, "beta", 0.0)
        positive(self, "kl_target")
        at_least(self, "kl_horizon", 1)
        in_range(self, "gamma", 0.0, 1.0)
        in_range(self, "gae_lambda", 0.0, 1.0)
        at_least(self, "num_epochs", 1)
        at_least(self, "minibatch_size", 1)
        positive(self, "clip_eps")
        positive(self, "clip_value")
        at_least(self, "vf_coef", 0.0)


@dataclass(frozen=True)
class RLHFConfig(TokenPPOFields, StageConfig):
    """PPO against a reward model on ``{"prompt", ...}`` rows, text or conversations (an
    ``"answer"`` adds the gold reward). ``batch_size`` counts prompts per step, one completion
    each. The PPO fields are :class:`TokenPPOFields`."""

    reward_model: str = ""
    """the reward model folder (``rlx align rm``'s RUN_DIR/model), or built-in reward names
    (exact-match, numeric, math, format, arithmetic-gold; several joined by commas) to run PPO
    on a verifier"""
    batch_size: int = 64
    """prompts per step, one sampled completion each"""
    max_new_tokens: int = 16
    """longest completion in tokens"""
    temperature: float = 1.0
    """sampling temperature; the policy, old-policy and reference log-probs are all taken at
    it, log softmax(logits / T), the distribution the samples came from"""
    top_p: float = 1.0
    """nucleus sampling: keep the smallest token set with this probability mass"""
    normalize_advantages: bool = False
    """normalise the advantages over the step's tokens (off by default: once every sample
    earns the same reward, whitening blows noise up to unit scale and the policy unlearns a
    reward it had mastered)"""
    length_normalize: bool = False
    """divide the reward model's score by the completion's length (against length bias)"""
    kl_warning: float = 5.0
    """print a warning once kl_ref passes this (drift, where reward hacking starts)"""
    eval_exact_match: bool = True
    """greedy exact match on held-out rows at each evaluation (rows with answers)"""
    allow_unisolated: bool = False
    """run model-written code (reward_model=python-tests) even where the sandbox cannot
    isolate it (no root or no namespaces); the run then warns once, naming what is missing"""

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least(self, "max_new_tokens", 1)
        positive(self, "temperature")
        positive(self, "top_p")
        in_range(self, "top_p", 0.0, 1.0)


# ============================================================================ the math
def per_token_rewards(
    logp: Tensor, ref_logp: Tensor, scores: Tensor, mask: Tensor, beta: float
) -> Tensor:
    """``r_t = -beta (log pi - log pi_ref)`` on the completion tokens (``mask``), plus the
    reward model's score on each row's last completion token; 0 elsewhere."""
    maskf = mask.to(logp.dtype)
    rewards = -beta * (logp - ref_logp) * maskf
    last = last_token_index(mask)
    rewards[torch.arange(len(scores)), last] += scores.to(rewards.dtype)
    return rewards


def last_token_index(mask: Tensor) -> Tensor:
    """The position of each row's last True in ``mask`` ``[B, T]``."""
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    return torch.where(mask.bool(), positions, -1).max(dim=1).values


def whiten(x: Tensor, mask: Tensor) -> Tensor:
    """``(x - mean) / sqrt(var + 1e-8)`` over the masked entries (the population variance), 0
    off the mask."""
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask)
    return (x - mean) * torch.rsqrt(var + 1e-8) * mask.to(x.dtype)


def token_advantages(
    rewards: Tensor, values: Tensor, mask: Tensor, gamma: float, lam: float
) -> tuple[Tensor, Tensor]:
    """GAE over each completion's tokens (:func:`rlx.core.advantages.masked_gae`): the
    advantages and value targets ``A + V``, ``[B, T]`` like ``values``, 0 off the mask."""
    advantages, returns = masked_gae(
        rewards.double().cpu().numpy(), values.double().cpu().numpy(), mask.cpu().numpy(),
        gamma, lam,
    )  # fmt: skip

    def as_values(x: np.ndarray) -> Tensor:
        return torch.from_numpy(x).to(dtype=values.dtype, device=values.device)

    return as_values(advantages), as_values(returns)


class AdaptiveKLController:
    """``beta <- beta (1 + clip(KL / target - 1, -0.2, 0.2) * n / horizon)``."""

    def __init__(self, beta: float, target: float, horizon: int) -> None:
        self.beta, self.target, self.horizon = beta, target, horizon

    def update(self, kl: float, n: int) -> float:
        error = float(np.clip(kl / self.target - 1.0, -0.2, 0.2))
        self.beta *= 1.0 + error * n / self.horizon
        return self.beta


# ============================================================================ the networks
class PolicyWithValueHead(nn.Module):
    """The causal LM and a linear value head on its last hidden state (one shared trunk)."""

    def __init__(self, lm: Any, temperature: float = 1.0) -> None:
        super().__init__()
        self.lm = lm
        self.temperature = temperature  # pi is the sampled distribution, softmax(logits / T)
        self.value_head = nn.Linear(lm.config.hidden_size, 1)
        nn.init.zeros_(self.value_head.weight)  # V = 0 at first: no bias in the first updates
        nn.init.zeros_(self.value_head.bias)

    def forward(self, batch: TokenBatch) -> tuple[Tensor, Tensor, Tensor]:
        """``(log pi of each next token [B, L-1], entropy [B, L-1], V [B, L-1])``; position
        ``j`` is the state before token ``j + 1``."""
        out = self.lm(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                      output_hidden_states=True, use_cache=False)  # fmt: skip
        log_probs = tempered_log_softmax(out.logits[:, :-1], self.temperature)
        token, entropy = gathered_and_entropy(log_probs, batch.input_ids[:, 1:])
        hidden = out.hidden_states[-1][:, :-1].float()
        with torch.autocast(hidden.device.type, enabled=False):  # V in float32 under bf16-mixed
            values = self.value_head(hidden).squeeze(-1)
        return token, entropy, values


# ============================================================================ the stage
@dataclass
class ScoredCompletions:
    """One step's sampled completions, scored, and everything PPO needs of them (old log-probs,
    values, advantages, returns), computed without gradients."""

    batch: TokenBatch
    mask: Tensor
    old_logp: Tensor
    old_values: Tensor
    advantages: Tensor
    returns: Tensor
    metrics: dict[str, float]


RENAMED = {
    "ppo_epochs": "num_epochs",
    "lam": "gae_lambda",
    "value_clip": "clip_value",
    "whiten_advantages": "normalize_advantages",
}
"""Fields renamed to the names PPO uses for the same ideas (old run folders still load)."""


@dataclass
class RLHFUpdate:
    """RLHF-PPO's half of the online loop (:func:`rlx.llm.online.run_online`): each step
    :func:`collect` then :func:`ppo_update`, after it the adaptive KL coefficient (kept in the
    checkpoint) and the one drift warning. A run the doctor stopped still saves its policy:
    the one before the harm."""

    trained: PolicyWithValueHead
    lm: Any
    tokenizer: Any
    reference: Any
    reward: RewardSet
    config: RLHFConfig
    controller: AdaptiveKLController
    warned: bool = False
    save_when_stopped: bool = True

    @classmethod
    def build(cls, setup: OnlineSetup) -> RLHFUpdate:
        config = setup.config
        policy = PolicyWithValueHead(setup.model, config.temperature).to(config.device)
        controller = AdaptiveKLController(config.beta, config.kl_target, config.kl_horizon)
        return cls(policy, setup.model, setup.tokenizer, setup.reference, setup.reward, config,
                   controller)  # fmt: skip

    def step(
        self, rows: list[Any], optimizer: torch.optim.Optimizer, parallel: DataParallel | None
    ) -> dict[str, float]:
        rollout = collect(self.trained, self.reference, self.tokenizer, self.reward, rows,
                          self.config, self.controller.beta)  # fmt: skip
        update = ppo_update(self.trained, optimizer, rollout, self.config, parallel)
        return mean_over_processes({**rollout.metrics, **update}, parallel)

    def after_step(self, metrics: dict[str, float], step: int, prompts: int) -> None:
        if self.config.adaptive_kl:
            self.controller.update(metrics[M.KL_REF], prompts)
        if not self.warned and metrics[M.KL_REF] > self.config.kl_warning:
            self.warned = True
            warn_drift(metrics[M.KL_REF], self.config.kl_warning, step)

    def state(self) -> dict[str, Any]:
        return {"beta": self.controller.beta}

    def load_state(self, state: Mapping[str, Any]) -> None:
        self.controller.beta = float(state.get("beta", self.config.beta))


def train(config: RLHFConfig, data: Any, run: RunHandle, *, parallel: Any = None) -> StageResult:
    """The registered ``train``: the online loop (:func:`rlx.llm.online.run_online`) with the
    reward model (or built-in rewards) named by ``reward_model``, the frozen SFT model as the
    reference, and :class:`RLHFUpdate`."""
    if not config.reward_model:
        raise ConfigError("rlhf-ppo needs reward_model=, the folder of a trained reward model.")
    return run_online(
        config, data, run, rewards=_scorer, build=RLHFUpdate.build, lr_scale=LR_SCALE,
        target_rows=TARGET_ROWS, parallel=parallel,
    )  # fmt: skip


def warn_drift(kl_ref: float, threshold: float, step: int) -> None:
    """The one warning of a run whose ``kl_ref`` passed ``threshold``."""
    print(f"rlx rlhf-ppo: kl_ref {kl_ref:.2f} passed {threshold} at step {step}: the policy "
          "drifts from the SFT model and reward hacking may start; raise beta or stop "
          "earlier.", file=sys.stderr)  # fmt: skip


def _scorer(config: RLHFConfig) -> RewardSet:
    """The reward model in ``config.reward_model``, or built-in rewards named there (e.g.
    ``exact-match``: PPO on a verifier, a check that the algorithm itself learns)."""
    from rlx.llm.stages.reward_model import load_reward_model

    names = [n.strip() for n in config.reward_model.split(",")]
    if all(name in REWARDS for name in names):
        return reward_set(names)
    return reward_set([load_reward_model(config.reward_model, device=config.device)])


def pearson(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson's correlation of ``a`` and ``b``; 0 when either does not vary."""
    a, b = a - a.mean(), b - b.mean()
    denominator = float(np.sqrt((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / denominator) if denominator > 1e-12 else 0.0


def collect(
    policy: PolicyWithValueHead,
    reference: Any,
    tokenizer: Any,
    scorer: RewardSet,
    rows: list[Any],
    config: RLHFConfig,
    beta: float,
) -> ScoredCompletions:
    """Sample a completion per prompt, score it, and compute the per-token rewards, values,
    advantages and returns."""
    t0 = time.perf_counter()
    prompts = [r.prompt for r in rows]
    completions = sample(policy.lm, tokenizer, prompts, max_new_tokens=config.max_new_tokens,
                         temperature=config.temperature, top_p=config.top_p)  # fmt: skip
    generation_s = time.perf_counter() - t0
    texts = tokenizer.batch_decode(completions, skip_special_tokens=True)
    scores, _ = score(scorer, prompts, completions_for_rewards(prompts, texts),
                      row_columns(rows), completions)  # fmt: skip
    lengths = torch.tensor([max(len(c), 1) for c in completions], dtype=torch.float32)
    rm_scores = scores / lengths if config.length_normalize else scores
    seqs = [EncodedSequence.from_parts(encode_prompt(tokenizer, p), c)
            for p, c in zip(prompts, completions, strict=True)]  # fmt: skip
    batch = SequenceTable(seqs, tokenizer.pad_token_id).batch(np.arange(len(seqs)))
    batch = batch.to(config.device)
    mask = batch.target_mask
    with torch.no_grad(), autocast(config.precision, config.device):
        old_logp, _, old_values = policy(batch)
        ref_logp = next_token_logprobs(reference, batch, config.temperature)
        rewards = per_token_rewards(old_logp, ref_logp, rm_scores.to(old_logp.device), mask,
                                    beta)  # fmt: skip
        advantages, returns = token_advantages(
            rewards, old_values, mask, config.gamma, config.gae_lambda
        )
        if config.normalize_advantages:
            advantages = whiten(advantages, mask)
        # the penalty the rewards carry (summed log-ratio), and the KL it estimates, reported
        # with k3 terms: the same expectation, but never negative
        penalty = ((old_logp - ref_logp) * mask).sum(-1)
        kl = (k3(ref_logp - old_logp) * mask).sum(-1)
    metrics = {
        M.REWARD: float((rm_scores.to(penalty.device) - beta * penalty).mean()),
        M.RM_SCORE: float(scores.mean()),
        M.KL_REF: float(kl.mean()),
        M.BETA: beta,
        M.RESPONSE_LENGTH: float(lengths.mean()),
        M.TRUNCATED_FRACTION: truncated_share(
            completions, tokenizer.eos_token_id, config.max_new_tokens
        ),
        M.REWARD_LENGTH_CORR: pearson(scores.float().numpy(), lengths.numpy()),
        # how much of the returns' variance the value head predicted before this update
        M.EXPLAINED_VARIANCE: explained_variance(
            old_values[mask.bool()].float().cpu().numpy(),
            returns[mask.bool()].float().cpu().numpy(),
        ),
        M.GENERATION_S: generation_s,
    }
    if all(getattr(r, "answer", None) is not None for r in rows):
        gold = exact_match_reward(prompts, texts, answer=[str(r.answer) for r in rows])
        metrics[M.GOLD_REWARD] = float(np.mean(gold))
    return ScoredCompletions(batch, mask, old_logp, old_values, advantages, returns, metrics)


def ppo_update(
    policy: PolicyWithValueHead,
    optimizer: torch.optim.Optimizer,
    rollout: ScoredCompletions,
    config: RLHFConfig,
    parallel: DataParallel | None = None,
) -> dict[str, float]:
    """``num_epochs`` passes of minibatches: clipped surrogate + ``vf_coef`` clipped value
    loss. Returns the means of the minibatch metrics."""
    t0 = time.perf_counter()
    n = len(rollout.batch)
    generator = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    params = [p for p in policy.parameters() if p.requires_grad]
    totals: dict[str, list[Tensor]] = {}
    for _ in range(config.num_epochs):
        order = torch.randperm(n, generator=generator)
        for start in range(0, n, config.minibatch_size):
            idx = order[start : start + config.minibatch_size]
            sub = _rows(rollout.batch, idx)
            cols = slice(0, sub.input_ids.shape[1] - 1)  # the per-token tensors, trimmed alike
            mask = rollout.mask[idx, cols]
            with autocast(config.precision, config.device):
                logp, entropy, values = policy(sub)
            policy_loss, metrics = clipped_surrogate(
                logp, rollout.old_logp[idx, cols], rollout.advantages[idx, cols],
                config.clip_eps, mask=mask,
            )  # fmt: skip
            critic_loss, critic_metrics = value_loss(
                values, rollout.returns[idx, cols], rollout.old_values[idx, cols],
                config.clip_value, mask=mask,
            )  # fmt: skip
            loss = policy_loss + config.vf_coef * critic_loss
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
            metrics.update(critic_metrics)
            for key, value in metrics.items():
                totals.setdefault(key, []).append(value.detach().float())
    out = {key: float(torch.stack(values).mean()) for key, values in totals.items()}
    out[M.UPDATE_S] = time.perf_counter() - t0
    return out


def _rows(batch: TokenBatch, idx: Tensor) -> TokenBatch:
    """Rows ``idx`` of a right-padded batch, trimmed to their longest row."""
    width = int(batch.attention_mask[idx].sum(-1).max())
    return TokenBatch(batch.input_ids[idx, :width], batch.attention_mask[idx, :width],
                      batch.loss_mask[idx, :width])  # fmt: skip


def load(config: RLHFConfig, data_id: str, state: dict) -> Any:
    """The trained policy (without its value head) as a :class:`rlx.llm.agent.LoadedModel`."""
    from rlx.llm.agent import LoadedModel

    lm_state = {k[len("lm.") :]: v for k, v in state["model"].items() if k.startswith("lm.")}
    return LoadedModel.from_checkpoint(config, {**state, "model": lm_state})


ALGORITHM = registry.register(
    registry.Algorithm(
        name="rlhf-ppo",
        config=RLHFConfig,
        train=train,
        load=load,
        budget_field="steps",
        unit="steps",
        renamed=RENAMED,
    )
)

__all__ = [
    "AdaptiveKLController",
    "RLHFConfig",
    "per_token_rewards",
    "token_advantages",
    "whiten",
]
