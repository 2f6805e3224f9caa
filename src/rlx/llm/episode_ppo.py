"""RLHF-PPO over multi-turn episodes: a language model with a value head trained to act in a
text environment, registered as ``ppo-episodes``.

Per step, one episode is played in each of ``batch_size`` env seeds
(:func:`rlx.llm.episodes.run_episodes`, the key/value cache kept across turns). An episode is
one token sequence, ``[obs_0] [reply_1] [obs_1] [reply_2] ... [reply_T]``; its **time steps
are the model's tokens only**: the env's tokens are context the model reads, never a step,
a target or a term of any mean. Each model token ``t`` gets the reward

    r_t = -beta (log pi(y_t | ...) - log pi_ref(y_t | ...))  +  [t ends reply k] r^env_k

(RLHF-PPO's per-token KL penalty, :func:`rlx.llm.stages.rlhf.per_token_rewards`, plus the
env's reward of turn ``k`` on the last token of reply ``k``; so the episode's reward is
``sum_k r^env_k``, :attr:`rlx.llm.episodes.Episode.reward`). GAE runs over the model's
tokens in their order, skipping the env's (:func:`episode_advantages`): with ``t + 1`` the
next *model* token,

    delta_t = r_t + gamma V(s_{t+1}) - V(s_t)        (V after the episode's last token = 0)
    A_t     = sum_l (gamma lambda)^l delta_{t+l},     R_t = A_t + V(s_t)

so the value that bootstraps a reply's last token is the value at the first token of the next
reply, read after the env's answer. ``V(s_t)`` is the value head on the last hidden state
before token ``t`` (:class:`rlx.llm.stages.rlhf.PolicyWithValueHead`). The advantages are
whitened over the model's tokens (``normalize_advantages``), and the update is RLHF-PPO's own
(:func:`rlx.llm.stages.rlhf.ppo_update`): ``num_epochs`` passes of minibatches of
``minibatch_size`` episodes over

    L = -E_t[min(rho_t A_t, clip(rho_t, 1 - eps, 1 + eps) A_t)]
        + vf_coef 1/2 E_t[max((V - R)^2, (V_old + clip(V - V_old, -eps_v, eps_v) - R)^2)]

with ``rho_t = pi(y_t | ...) / pi_old(y_t | ...)`` and ``E_t`` the mean over model tokens.
With ``adaptive_kl`` the penalty follows ``kl_target`` (Ziegler et al.'s controller,
:class:`rlx.llm.stages.rlhf.AdaptiveKLController`).

A whole episode ends the GAE sum whether the env ended it (``terminated``, or ``truncated`` at
its turn budget: the game's rules, its return is final) or the token budget cut it: no value
is bootstrapped past the last model token.

Written here, not taken from a library: no library runs PPO over multi-turn token episodes
with the env's tokens masked in a plain PyTorch process on a CPU. TRL's PPO trainer scores
single completions of prompts and knows no text environment; the frameworks with multi-turn
agent loops (OpenRLHF, verl) are built on Ray and vLLM on GPUs. What this module adds is only
that part: the turn rewards placed on the replies and the GAE that skips the env's tokens;
every other part is imported (the rollouts of :mod:`rlx.llm.episodes`, the env, seeds, evaluation
and checkpoint state of :mod:`rlx.llm.episode_grpo`, the value head, KL penalty, whitening
and PPO update of :mod:`rlx.llm.stages.rlhf`).

Held out: greedy episodes on env seeds ``0 .. eval_episodes - 1``, which training never plays:
the success rate and its Wilson interval (:func:`rlx.llm.episode_grpo.evaluate_episodes`).
Logged per step: ``reward`` (mean episode reward), ``kl_ref`` (per episode, summed k3 over the
model's tokens), ``beta``, ``explained_variance``, ``policy_loss``, ``value_loss``,
``clip_fraction``, ``approx_kl``, ``entropy``, ``grad_norm``, the episode figures of
:func:`rlx.llm.episodes.episode_metrics`, ``generation_s``, ``update_s`` and ``lr``.

A run is an ordinary rlx run: ``rlx.train("ppo-episodes", "hidden-number", model=...)``,
``rlx.llm.rlhf(model, env="hidden-number", steps=...)`` or
``rlx train ppo-episodes --env hidden-number --model DIR`` (the run folder, resuming,
progress, the live doctor as for ``grpo-episodes``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from rlx import metrics as M
from rlx import registry
from rlx.core.advantages import explained_variance
from rlx.core.checks import at_least, in_range, positive
from rlx.core.policy_losses import k3
from rlx.llm.episode_grpo import (
    EpisodeGRPOConfig,
    episode_batch,
    episode_budget,
    episode_state,
    evaluate_episodes,
    open_episode_run,
    restore_episode_state,
    training_seeds,
)
from rlx.llm.episodes import Episode, episode_metrics, run_episodes
from rlx.llm.logprobs import next_token_logprobs
from rlx.llm.precision import attention_for, autocast
from rlx.llm.stage_config import StageConfig, resolve_eval_every
from rlx.llm.stages.rlhf import (
    LR_SCALE,
    AdaptiveKLController,
    PolicyWithValueHead,
    RLHFConfig,
    ScoredCompletions,
    TokenPPOFields,
    per_token_rewards,
    ppo_update,
    token_advantages,
    whiten,
)
from rlx.llm.stages.rlhf import load as rlhf_load
from rlx.llm.text_env import TextEnv
from rlx.llm.training import (
    MODEL_DIR,
    StageResult,
    make_optimizer,
    set_learning_rate,
    trainable_share,
)
from rlx.runs.handle import RunHandle

ALGO = "ppo-episodes"
"""The run's algorithm name in ``config.json`` and ``summary.json``."""


@dataclass(frozen=True)
class EpisodePPOConfig(TokenPPOFields, StageConfig):
    """PPO with a value head over episodes of a text env. ``batch_size`` counts episodes per
    step (one per env seed); ``max_length`` caps an episode's whole sequence (the model's
    context when smaller); ``steps`` must be given (no data sizes the run); ``data`` is unused
    (the env is the data). The PPO fields are RLHF-PPO's, names and defaults
    (:class:`rlx.llm.stages.rlhf.TokenPPOFields`); a sample is one episode."""

    batch_size: int = 32
    """episodes per step, one per env seed"""
    max_new_tokens: int = 16
    """longest reply of one turn, in tokens"""
    temperature: float = 1.0
    """sampling temperature; the policy, old-policy and reference log-probs are taken at it"""
    warmup_ratio: float = 0.1
    """share of the steps with a linear learning-rate warm-up (as grpo-episodes')"""
    normalize_advantages: bool = True
    """whiten the advantages over the step's model tokens (zero mean, unit variance)"""
    length_normalize: bool = False
    """divide each turn's reward by the tokens the model said in its episode (against length
    bias, as grpo-episodes' length_normalize)"""
    eval_episodes: int = 32
    """held-out episodes, env seeds 0 .. eval_episodes - 1, played greedily"""
    train_seed_start: int = 1_000_000
    """the first env seed training plays (seeds count up from it; none is held out)"""

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least(self, "max_new_tokens", 1)
        positive(self, "temperature")
        in_range(self, "warmup_ratio", 0.0, 1.0)
        at_least(self, "eval_episodes", 0)
        at_least(self, "train_seed_start", self.eval_episodes)

    def update_config(self) -> RLHFConfig:
        """The fields :func:`rlx.llm.stages.rlhf.ppo_update` reads, as RLHF-PPO's config."""
        return RLHFConfig(
            num_epochs=self.num_epochs, minibatch_size=self.minibatch_size,
            clip_eps=self.clip_eps, clip_value=self.clip_value, vf_coef=self.vf_coef,
            max_grad_norm=self.max_grad_norm, precision=self.precision, device=self.device,
            temperature=self.temperature,
        )  # fmt: skip

    def episode_config(self) -> EpisodeGRPOConfig:
        """The fields the episode helpers of :mod:`rlx.llm.episode_grpo` read (the seeds of a
        step, an episode's token budget, the held-out evaluation), as grpo-episodes' config."""
        return EpisodeGRPOConfig(
            batch_size=self.batch_size, max_new_tokens=self.max_new_tokens,
            temperature=self.temperature, max_length=self.max_length,
            eval_episodes=self.eval_episodes, train_seed_start=self.train_seed_start,
            precision=self.precision, device=self.device,
        )  # fmt: skip


# ============================================================================ the math
def reply_ends(mask: Tensor) -> Tensor:
    """True on the last token of each reply: a model token (``mask``) whose next column is
    not one (an env token, padding or the end)."""
    after = torch.cat([mask[:, 1:], torch.zeros_like(mask[:, :1])], dim=1)
    return mask & ~after


def turn_rewards_on_tokens(episodes: Sequence[Episode], mask: Tensor) -> Tensor:
    """Each turn's env reward ``r^env_k`` on the last token of reply ``k``, 0 elsewhere:
    ``[B, L-1]`` like ``mask`` (a batch's ``target_mask``). Should an env answer have no
    tokens (two replies then read as one), the episode's reward goes on its last token."""
    ends = reply_ends(mask.bool()).cpu()
    placed = torch.zeros(mask.shape, dtype=torch.float32)
    for row, episode in enumerate(episodes):
        columns = ends[row].nonzero().squeeze(-1)
        turns = torch.tensor(episode.turn_rewards, dtype=torch.float32)
        if len(columns) == len(turns):
            placed[row, columns] = turns
        elif len(columns):
            placed[row, columns[-1]] = turns.sum()
    return placed.to(mask.device)


def episode_token_rewards(
    episodes: Sequence[Episode],
    logp: Tensor,
    ref_logp: Tensor,
    mask: Tensor,
    beta: float,
    length_normalize: bool = False,
) -> Tensor:
    """``r_t = -beta (log pi - log pi_ref) + [t ends reply k] r^env_k`` on the model's tokens,
    0 on the env's and on padding: RLHF-PPO's KL penalty
    (:func:`rlx.llm.stages.rlhf.per_token_rewards`, with no score of its own) plus
    :func:`turn_rewards_on_tokens`; with ``length_normalize`` each ``r^env_k`` divided by
    the number of the model's tokens in the episode."""
    penalty = per_token_rewards(logp, ref_logp, torch.zeros(len(episodes)), mask, beta)
    placed = turn_rewards_on_tokens(episodes, mask).to(penalty.dtype)
    if length_normalize:
        placed = placed / mask.sum(-1, keepdim=True).clamp(min=1).to(placed.dtype)
    return penalty + placed


def episode_advantages(
    rewards: Tensor, values: Tensor, mask: Tensor, gamma: float, lam: float
) -> tuple[Tensor, Tensor]:
    """GAE over each episode's model tokens in their order, the env's tokens skipped:
    ``delta_t = r_t + gamma V_{t'} - V_t`` with ``t'`` the next model token (across the env's
    answer; ``V = 0`` after the last), ``A_t = sum_l (gamma lambda)^l delta_{t+l}``. Returns
    ``(advantages, returns = A + V)``, ``[B, L-1]`` like ``values``, 0 off ``mask``.

    Each row's model tokens are moved to its front, in order (a stable sort on the mask), so
    that they form one run GAE reads as one episode
    (:func:`rlx.llm.stages.rlhf.token_advantages`), and put back where they were."""
    order = torch.sort((~mask.bool()).to(torch.uint8), dim=1, stable=True).indices
    packed_mask = mask.bool().gather(1, order)
    advantages, returns = token_advantages(
        rewards.gather(1, order), values.gather(1, order), packed_mask, gamma, lam
    )
    return (
        torch.zeros_like(advantages).scatter(1, order, advantages),
        torch.zeros_like(returns).scatter(1, order, returns),
    )


# ============================================================================ one step
def collect_episodes(
    policy: PolicyWithValueHead,
    reference: Any,
    tokenizer: Any,
    make_env: Callable[[], TextEnv],
    seeds: Sequence[int],
    config: EpisodePPOConfig,
    beta: float,
) -> tuple[ScoredCompletions, list[Episode]]:
    """Play one episode per seed and compute, without gradients, what PPO needs of them: old
    log-probs and values, the per-token rewards, the advantages and returns over the model's
    tokens; with the step's figures so far."""
    t0 = time.perf_counter()
    episodes = run_episodes(
        policy.lm, tokenizer, [make_env() for _ in seeds], list(seeds),
        max_new_tokens=config.max_new_tokens, temperature=config.temperature,
        max_episode_tokens=episode_budget(policy.lm, config.episode_config()),
    )  # fmt: skip
    generation_s = time.perf_counter() - t0
    batch = episode_batch(episodes, tokenizer.pad_token_id, config.device)
    mask = batch.target_mask
    with torch.no_grad(), autocast(config.precision, config.device):
        old_logp, _, old_values = policy(batch)
        ref_logp = old_logp
        if reference is not None:
            ref_logp = next_token_logprobs(reference, batch, config.temperature)
        rewards = episode_token_rewards(
            episodes, old_logp, ref_logp, mask, beta, config.length_normalize
        )
        advantages, returns = episode_advantages(
            rewards, old_values, mask, config.gamma, config.gae_lambda
        )
        if config.normalize_advantages:
            advantages = whiten(advantages, mask)
        kl = (k3(ref_logp - old_logp) * mask).sum(-1)  # per episode, over its model tokens
    metrics = {
        M.REWARD: sum(e.reward for e in episodes) / len(episodes),
        M.KL_REF: float(kl.mean()),
        M.BETA: beta,
        # how much of the returns' variance the value head predicted before this update
        M.EXPLAINED_VARIANCE: explained_variance(
            old_values[mask].float().cpu().numpy(), returns[mask].float().cpu().numpy()
        ),
        M.GENERATION_S: generation_s,
        **episode_metrics(episodes),
    }
    rollout = ScoredCompletions(batch, mask, old_logp, old_values, advantages, returns, metrics)
    return rollout, episodes


def episode_ppo_step(
    policy: PolicyWithValueHead,
    reference: Any,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer,
    make_env: Callable[[], TextEnv],
    seeds: Sequence[int],
    config: EpisodePPOConfig,
    beta: float,
) -> tuple[dict[str, float], list[Episode]]:
    """Play, score (:func:`collect_episodes`) and update
    (:func:`rlx.llm.stages.rlhf.ppo_update`): the step's metrics and its episodes."""
    t0 = time.perf_counter()
    rollout, episodes = collect_episodes(
        policy, reference, tokenizer, make_env, seeds, config, beta
    )
    update = ppo_update(policy, optimizer, rollout, config.update_config())
    metrics = {**rollout.metrics, **update}
    metrics[M.UPDATE_S] = time.perf_counter() - t0 - metrics[M.GENERATION_S]
    return metrics, episodes


# ============================================================================ the run
def train(config: EpisodePPOConfig, env: Any, run: RunHandle) -> StageResult:
    """The registered ``train`` of ``ppo-episodes``: the text env first
    (:func:`rlx.llm.episode_grpo.text_env_factory`, so a bad one loads no model), then the
    policy with its value head (LoRA as every stage has it), the config completed (the step
    size from the model, RLHF-PPO's scale), the reference when ``beta > 0``; then per step
    play, score, update and log, evaluate every ``eval_every`` steps and at the last,
    checkpoint at the config's cadence and at the end (weights and value head, optimizer,
    step, RNG, the KL coefficient: a resumed run continues exactly); the model is saved to
    ``RUN_DIR/model`` once the last step is done."""
    from rlx.llm.lora import reference_of, save_trained

    make_env, config, lm, tokenizer, steps = open_episode_run(config, env, run, LR_SCALE, ALGO)
    policy = PolicyWithValueHead(lm, config.temperature).to(config.device)
    run.add_to_summary(**trainable_share(policy))
    reference = reference_of(lm, config.model) if config.beta > 0 else None
    assert config.learning_rate is not None  # completed above
    optimizer = make_optimizer(policy, config.learning_rate, config.weight_decay)
    controller = AdaptiveKLController(config.beta, config.kl_target, config.kl_horizon)
    step = 0
    if run.resumed_state is not None:
        restore_episode_state(run.resumed_state, policy, optimizer)
        controller.beta = float(run.resumed_state.get("beta", config.beta))
        step = int(run.resumed_step or 0)
    elif run.start_checkpoint_due():
        run.save_checkpoint(0, ppo_state(policy, optimizer, 0, controller))
    policy.train()
    with attention_for(lm, config.precision), attention_for(reference, config.precision):
        step, last_eval = episode_ppo_steps(
            policy, reference, tokenizer, optimizer, make_env, config, run, step, controller
        )
        run.save_checkpoint(step, ppo_state(policy, optimizer, step, controller))
        if step >= steps and not last_eval:  # resumed at its end: evaluate what trained
            last_eval = evaluate_episodes(lm, tokenizer, make_env, config.episode_config())
    if step >= steps and run.writer:
        save_trained(lm, tokenizer, run.dir, MODEL_DIR)
    summary = run.finish(step, last_eval)
    return StageResult(
        run.dir, run.dir / MODEL_DIR, last_eval, float(summary["wall_s"]), summary["status"]
    )


def ppo_state(
    policy: PolicyWithValueHead,
    optimizer: torch.optim.Optimizer,
    step: int,
    controller: AdaptiveKLController,
) -> dict[str, Any]:
    """grpo-episodes' checkpoint (:func:`rlx.llm.episode_grpo.episode_state`) of the policy
    with its value head (``lm.*`` and ``value_head.*``, as RLHF-PPO's), and the KL coefficient
    the adaptive controller moved."""
    return {**episode_state(policy, optimizer, step), "beta": controller.beta}


def episode_ppo_steps(
    policy: PolicyWithValueHead,
    reference: Any,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer,
    make_env: Callable[[], TextEnv],
    config: EpisodePPOConfig,
    run: RunHandle,
    step: int,
    controller: AdaptiveKLController,
) -> tuple[int, dict[str, float]]:
    """The steps from ``step`` to ``config.steps`` (or a stop request): the step reached and
    the last evaluation. The learning rate warms up and decays as grpo-episodes'; with
    ``adaptive_kl`` beta moves after each step; the last step's checkpoint is the caller's."""
    steps, peak = config.steps, config.learning_rate
    assert steps is not None and peak is not None  # completed by train
    episodes_config = config.episode_config()
    eval_every = resolve_eval_every(config, steps)
    last_eval: dict[str, float] = {}
    while step < steps and not run.stop_requested:
        lr = set_learning_rate(optimizer, peak, step, steps, config.warmup_ratio)
        seeds = training_seeds(episodes_config, step + 1)
        metrics, _ = episode_ppo_step(policy, reference, tokenizer, optimizer, make_env, seeds,
                                      config, controller.beta)  # fmt: skip
        if config.adaptive_kl and reference is not None:
            controller.update(metrics[M.KL_REF], len(seeds))
        step += 1
        metrics[M.LR] = lr
        if step % eval_every == 0 or step == steps:
            last_eval = evaluate_episodes(policy.lm, tokenizer, make_env, episodes_config)
            metrics.update(last_eval)
        run.log(step, metrics)
        if step < steps and run.checkpoint_due():
            run.save_checkpoint(step, ppo_state(policy, optimizer, step, controller))
    return step, last_eval


ALGORITHM = registry.register(
    registry.Algorithm(
        name=ALGO,
        config=EpisodePPOConfig,
        train=train,
        # the checkpoint holds RLHF-PPO's layout (lm.* and value_head.*): its load reads it
        load=rlhf_load,
        budget_field="steps",
        unit="steps",
    )
)

__all__ = [
    "ALGO",
    "EpisodePPOConfig",
    "collect_episodes",
    "episode_advantages",
    "episode_ppo_step",
    "episode_ppo_steps",
    "episode_token_rewards",
    "ppo_state",
    "reply_ends",
    "train",
    "turn_rewards_on_tokens",
]
