"""GRPO over multi-turn episodes: a language model trained to act in a text environment.

Per step, ``batch_size`` tasks (env seeds) are played ``G`` times each
(:func:`rlx.llm.episodes.rollout_groups`); an episode's return ``R_i = sum_t r_t`` is scored
against its group's, and the advantage is shared by every token the model said in it:

    A_i   = (R_i - mean_group R) / std_group R                    (group_advantages)
    L     = -mean_{model tokens}[ min(r_t A_i, clip(r_t, 1 - eps, 1 + eps_high) A_i)
                                  - beta KL_t ]                   (grpo_loss)
    KL_t  = exp(log pi_ref - log pi) - (log pi_ref - log pi) - 1  (kl_k3)

The math is GRPO's own, imported from :mod:`rlx.llm.stages.grpo`; what differs is the mask:
the environment's tokens are context for the model's but never targets, so they get no
advantage, no KL and no gradient (``loss_mask`` of :class:`~rlx.llm.episodes.Episode`).
One advantage per episode: the group baseline, not a critic, tells a good episode from a bad
one, so no value of a half-played episode is needed; a per-turn shaping reward only adds to
the return.

Held out: greedy episodes on env seeds ``0 .. eval_episodes - 1``, which training never plays
(its seeds start at ``train_seed_start``): the success rate and its interval. Logged per step:
``reward``, ``group_reward_std``, ``frac_zero_std_groups``, ``kl_ref``, ``clip_fraction``,
``approx_kl``, ``policy_loss``, ``entropy``, ``grad_norm``, the episode figures of
:func:`rlx.llm.episodes.episode_metrics` (turns, truncated share, reward per turn, invalid
actions, tool errors, success), ``generation_s``, ``update_s`` and ``lr``.

A run is an ordinary rlx run of the registered algorithm ``grpo-episodes``:
``rlx.llm.grpo(model, env=...)``, ``rlx.train("grpo-episodes", "hidden-number", model=...)``,
``rlx align grpo --env ...`` and ``rlx train grpo-episodes --env ...`` all reach :func:`train`
through rlx's launcher, which gives it the run folder (``config.json``, ``metrics.jsonl``,
``summary.json``, checkpoints, ``RUN_DIR/model``), resuming, progress, the live doctor,
``stop_on`` and TensorBoard. The env is a text env's factory, an entry point, or a built-in
name (:func:`text_env_factory`).

The loop is its own rather than :func:`rlx.llm.online.run_online`'s: that one draws prompt
rows from a data set and scores completions with reward functions, where here an env factory
plays seeds and scores itself; it shares that loop's parts (the config completed, the
schedule, the checkpointed weights, the saved model).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
from torch import Tensor

from rlx import metrics as M
from rlx import registry
from rlx.core.checks import at_least, in_range, one_of, positive
from rlx.core.policy_losses import AGGREGATIONS, masked_mean
from rlx.errors import ConfigError
from rlx.llm.batching import SequenceTable, TokenBatch, forward_logits
from rlx.llm.episodes import (
    EVAL_EPISODE_REWARD,
    EVAL_EPISODE_TURNS,
    EVAL_EPISODES,
    EVAL_SUCCESS_HIGH,
    EVAL_SUCCESS_LOW,
    EVAL_SUCCESS_RATE,
    Episode,
    context_length,
    episode_metrics,
    rollout_groups,
    run_episodes,
)
from rlx.llm.logprobs import token_logprobs_and_entropy
from rlx.llm.losses import sft_loss
from rlx.llm.precision import attention_for, autocast
from rlx.llm.stage_config import StageConfig, resolve_eval_every
from rlx.llm.stages.grpo import LR_SCALE, GRPOConfig, group_advantages, grpo_loss
from rlx.llm.text_env import TEXT_ENVS, TextEnv, builtin_text_env
from rlx.llm.training import (
    MODEL_DIR,
    StageResult,
    complete_config,
    load_model_state,
    make_optimizer,
    model_state,
    resolved,
    set_learning_rate,
    trainable_share,
)
from rlx.runs.handle import RunHandle

ALGO = "grpo-episodes"
ConfigT = TypeVar("ConfigT", bound=StageConfig)
"""The run's algorithm name in ``config.json`` and ``summary.json``."""


@dataclass(frozen=True)
class EpisodeGRPOConfig(StageConfig):
    """GRPO over episodes of a text env. ``batch_size`` counts tasks (env seeds) per step,
    each played ``group_size`` times; ``max_length`` caps an episode's whole sequence (the
    model's context when smaller); ``steps`` must be given (no data sizes the run); ``data`` is
    unused (the env is the data; planning records a named env there, as it records a stage's
    data file)."""

    batch_size: int = 8
    """tasks (env seeds) per step, each played group_size times"""
    group_size: int = 8
    """G: episodes per task, at least 2 (a group of one has no spread to learn from)"""
    max_new_tokens: int = 16
    """longest reply of one turn, in tokens"""
    temperature: float = 1.0
    """sampling temperature; the policy, old-policy and reference log-probs are taken at it"""
    warmup_ratio: float = 0.1
    """share of the steps with a linear learning-rate warm-up (as GRPO's)"""
    beta: float = 0.04
    """weight of the KL to the frozen start model, on the model's tokens (0: no reference)"""
    clip_eps: float = 0.2
    """epsilon of the clipped ratio (lower side, and upper unless clip_eps_high is set)"""
    clip_eps_high: float | None = None
    """a higher upper clip (DAPO's clip-higher); None: clip_eps"""
    scale_rewards: bool = True
    """divide the group-centred returns by the group's std (False: centre only)"""
    length_normalize: bool = False
    """divide each episode's return by the tokens the model said in it (against length bias,
    as GRPO's length_normalize)"""
    loss_aggregation: str = "sequence"
    """sequence: mean over each episode's model tokens, then over episodes; token: over all"""
    num_epochs: int = 1
    """optimisation passes over each batch of episodes (1: on-policy)"""
    eval_episodes: int = 32
    """held-out episodes, env seeds 0 .. eval_episodes - 1, played greedily"""
    train_seed_start: int = 1_000_000
    """the first env seed training plays (seeds count up from it; none is held out)"""

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least(self, "group_size", 2)
        at_least(self, "max_new_tokens", 1)
        positive(self, "temperature")
        at_least(self, "beta", 0.0)
        positive(self, "clip_eps")
        if self.clip_eps_high is not None:
            at_least(self, "clip_eps_high", self.clip_eps)
        one_of(self, "loss_aggregation", AGGREGATIONS)
        at_least(self, "num_epochs", 1)
        at_least(self, "eval_episodes", 0)
        at_least(self, "train_seed_start", self.eval_episodes)
        in_range(self, "warmup_ratio", 0.0, 1.0)

    def loss_config(self) -> GRPOConfig:
        """The fields :func:`rlx.llm.stages.grpo.grpo_loss` reads, as GRPO's config."""
        return GRPOConfig(
            group_size=self.group_size, clip_eps=self.clip_eps, clip_eps_high=self.clip_eps_high,
            beta=self.beta, loss_aggregation=self.loss_aggregation,
            scale_rewards=self.scale_rewards, temperature=self.temperature,
        )  # fmt: skip


# ============================================================================ one step
def episode_batch(episodes: Sequence[Episode], pad_id: int, device: Any) -> TokenBatch:
    """The episodes as one right-padded batch; ``target_mask`` is True on the model's tokens."""
    table = SequenceTable([e.sequence() for e in episodes], pad_id)
    return table.batch(np.arange(len(episodes))).to(device)


def episode_loss(
    model: Any, batch: TokenBatch, advantages: Tensor, old_logp: Tensor | None,
    ref_logp: Tensor | None, config: EpisodeGRPOConfig,
) -> tuple[Tensor, dict[str, Tensor]]:  # fmt: skip
    """:func:`~rlx.llm.stages.grpo.grpo_loss` on the episodes' model tokens (``old_logp``
    None: on-policy, the ratio's denominator is the policy itself, detached), with the
    policy's entropy there."""
    mask = batch.target_mask
    with autocast(config.precision, config.device):
        logp, entropy = token_logprobs_and_entropy(model, batch, config.temperature)
    on_policy = logp.detach() if old_logp is None else old_logp
    loss, metrics = grpo_loss(
        logp, on_policy, advantages.to(logp.device), mask, config.loss_config(), ref_logp
    )
    with torch.no_grad():
        metrics[M.ENTROPY] = masked_mean(entropy, mask)
    return loss, metrics


def episode_step(
    model: Any,
    reference: Any,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer,
    make_env: Callable[[], TextEnv],
    seeds: Sequence[int],
    config: EpisodeGRPOConfig,
) -> tuple[dict[str, float], list[Episode]]:
    """Play G episodes of each seed, score each against its group, and take ``num_epochs``
    gradient steps on the model's tokens. The step's metrics and its episodes."""
    G = config.group_size
    t0 = time.perf_counter()
    episodes = rollout_groups(
        model, tokenizer, make_env, seeds, G, max_new_tokens=config.max_new_tokens,
        max_episode_tokens=episode_budget(model, config), temperature=config.temperature,
    )  # fmt: skip
    generation_s = time.perf_counter() - t0
    returns = torch.tensor([e.reward for e in episodes], dtype=torch.float32)
    if config.length_normalize:
        said = torch.tensor([e.model_tokens for e in episodes], dtype=torch.float32)
        returns = returns / said.clamp(min=1)
    advantages = group_advantages(returns, G, config.scale_rewards)
    spread = returns.view(-1, G).std(dim=1, unbiased=False)
    batch = episode_batch(episodes, tokenizer.pad_token_id, config.device)
    with torch.no_grad(), autocast(config.precision, config.device):
        old_logp = None
        if config.num_epochs > 1:
            old_logp = token_logprobs_and_entropy(model, batch, config.temperature)[0]
        ref_logp = None
        if reference is not None:
            ref_logp = token_logprobs_and_entropy(reference, batch, config.temperature)[0]
    params = [p for p in model.parameters() if p.requires_grad]
    passes: list[dict[str, Tensor]] = []
    for _ in range(config.num_epochs):
        loss, metrics = episode_loss(model, batch, advantages, old_logp, ref_logp, config)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if config.max_grad_norm is not None:
            metrics[M.GRAD_NORM] = torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
        optimizer.step()
        passes.append(metrics)
    out = {k: float(torch.stack([m[k] for m in passes]).mean()) for k in passes[0]}
    out.update(episode_metrics(episodes))
    out.update(
        {
            M.REWARD: float(returns.mean()),
            M.GROUP_REWARD_STD: float(spread.mean()),
            M.FRAC_ZERO_STD_GROUPS: float((spread < 1e-6).float().mean()),
            M.GENERATION_S: generation_s,
            M.UPDATE_S: time.perf_counter() - t0 - generation_s,
        }
    )
    return out, episodes


def episode_budget(model: Any, config: EpisodeGRPOConfig) -> int:
    """Tokens an episode may hold: ``max_length``, or the model's context when smaller."""
    context = context_length(model)
    return min(config.max_length, context) if context else config.max_length


def training_seeds(config: EpisodeGRPOConfig, step: int) -> list[int]:
    """The env seeds of ``step`` (1-based): ``batch_size`` new ones, above every held-out
    seed."""
    first = config.train_seed_start + (step - 1) * config.batch_size
    return list(range(first, first + config.batch_size))


# ============================================================================ held out
def evaluate_episodes(
    model: Any, tokenizer: Any, make_env: Callable[[], TextEnv], config: EpisodeGRPOConfig
) -> dict[str, float]:
    """Greedy episodes on the held-out seeds ``0 .. eval_episodes - 1``: the success rate
    with its 95% interval (Wilson's), how many episodes, their mean reward and turns."""
    from rlx.core.intervals import proportion_interval

    n = config.eval_episodes
    if n == 0:
        return {}
    episodes = run_episodes(
        model, tokenizer, [make_env() for _ in range(n)], list(range(n)), greedy=True,
        max_new_tokens=config.max_new_tokens, max_episode_tokens=episode_budget(model, config),
        temperature=config.temperature,
    )  # fmt: skip
    hits = sum(e.success for e in episodes)
    low, high = proportion_interval(hits, n)
    return {
        EVAL_SUCCESS_RATE: hits / n,
        EVAL_SUCCESS_LOW: low,
        EVAL_SUCCESS_HIGH: high,
        EVAL_EPISODES: float(n),
        EVAL_EPISODE_REWARD: sum(e.reward for e in episodes) / n,
        EVAL_EPISODE_TURNS: sum(e.turns for e in episodes) / n,
    }


# ============================================================================ the env
def text_env_factory(
    env: Any, env_kwargs: Mapping[str, Any] | None = None
) -> Callable[[], TextEnv]:
    """The run's env as a maker of fresh text envs, one per episode.

    ``env`` is a function or class that returns a text env (called with ``env_kwargs``), a
    built-in name of :data:`rlx.llm.text_env.TEXT_ENVS` (``env_kwargs`` over its defaults), or
    the recipe planning made of a name or an entry point ``"package.module:factory"``
    (:class:`rlx.core.env_recipe.EnvRecipe`), or an entry point planning handed over, cleared by
    the user's consent. A string is imported only where the consent rule
    (:func:`rlx.core.env_recipe.module_of_id`) counts it as code; one it reads as a board
    game's id (``openspiel:...``) only ever names a built-in text env. One env
    is built here, so a factory that fails or returns something else stops the run before a
    model is loaded."""
    from rlx.core.env_recipe import (
        EnvRecipe,
        is_entry_point,
        is_env_factory,
        load_entry_point,
        module_of_id,
    )

    kwargs = dict(env_kwargs or {})
    if isinstance(env, EnvRecipe):
        if env.kind not in ("id", "entry_point"):
            raise ConfigError(
                f"{ALGO} cannot build a text env from {env.label!r} ({env.reason or env.kind}); "
                f"give a built-in name ({', '.join(TEXT_ENVS)}) or package.module:factory."
            )
        if env.kind == "entry_point" and not env.trusted:
            env.cleared()  # a run folder's code runs only with consent: raises without it
        if env.kind == "id":  # a name is a built-in's, never code to import, whatever it looks like
            factory, defaults = builtin_text_env(env.target)
            kwargs = {**defaults, **env.kwargs, **kwargs}
            make = functools.partial(factory, **kwargs) if kwargs else factory
            _check_made(make, env.target, kwargs, factory)
            return make
        env, kwargs = env.target, {**env.kwargs, **kwargs}
    if isinstance(env, Path):
        env = str(env)
    if isinstance(env, str):
        if is_entry_point(env) and module_of_id(env) is not None:
            # code the consent rule counts as code (planning cleared it before this point)
            factory, label = load_entry_point(env), env
        else:  # a name, even one the consent rule reads as a board game's (openspiel:...)
            factory, defaults = builtin_text_env(env)
            kwargs, label = {**defaults, **kwargs}, env
    elif is_env_factory(env):
        factory, label = env, getattr(env, "__name__", type(env).__name__)
    elif env is not None and hasattr(env, "step"):
        raise ConfigError(
            f"a {type(env).__name__} is one env, and {ALGO} plays a fresh env per episode: "
            "pass its class or a function that returns one."
        )
    else:
        raise ConfigError(
            f"{ALGO} trains in a text env, not a {type(env).__name__}: pass a function or class "
            f"that returns one, package.module:factory, or a built-in ({', '.join(TEXT_ENVS)})."
        )
    make = functools.partial(factory, **kwargs) if kwargs else factory
    _check_made(make, label, kwargs, factory)
    return make


def _check_made(
    make: Callable[[], Any], label: str, kwargs: Mapping[str, Any], factory: Any
) -> None:
    """Build one env: EnvError for keyword arguments the factory refuses, ConfigError for a
    factory that returns no text env."""
    from rlx.core.env_recipe import KWARG_ERRORS, kwargs_error

    try:
        made = make()
    except KWARG_ERRORS as exc:
        if not kwargs:
            raise
        raise kwargs_error(label, kwargs, exc, factory) from exc
    if not (callable(getattr(made, "reset", None)) and callable(getattr(made, "step", None))):
        raise ConfigError(
            f"{label} returned a {type(made).__name__}, not a text env (reset(seed) -> "
            "observation and step(reply) -> (observation, reward, terminated, truncated, info))."
        )


# ============================================================================ the run
def episode_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer, step: int) -> dict:
    """What a checkpoint holds: the weights that train (the adapter alone with LoRA:
    :func:`rlx.llm.training.model_state`), the optimizer, the step and torch's RNG. The env
    seeds of a step follow from the step (:func:`training_seeds`), so nothing else is needed
    for a resumed run to play what an uninterrupted one would."""
    return {
        "model": model_state(model),
        "optimizer": optimizer.state_dict(),
        "step": step,
        "torch_rng": torch.get_rng_state(),
    }


def restore_episode_state(
    state: Mapping[str, Any], model: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> None:
    """Put an :func:`episode_state` back into a model built from the run's config."""
    load_model_state(model, state["model"])
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["torch_rng"])


def open_episode_run(
    config: ConfigT, env: Any, run: RunHandle, lr_scale: float, algo: str = ALGO
) -> tuple[Callable[[], TextEnv], ConfigT, Any, Any, int]:
    """What every algorithm over episodes does first: the text env (:func:`text_env_factory`,
    so a bad one loads no model), the step budget, threads and seed, then the model (LoRA as
    every stage has it) and the config completed (:func:`rlx.llm.training.complete_config`:
    the step size from the model at ``lr_scale``). ``(make_env, config, model, tokenizer,
    steps)``."""
    from rlx.core.threads import set_torch_threads
    from rlx.llm.lora import load_for_training
    from rlx.llm.models import count_parameters

    make_env = text_env_factory(env)
    if config.steps is None:
        raise ConfigError(f"{algo} needs steps, the number of optimizer steps (no data sizes it).")
    steps: int = config.steps
    set_torch_threads(config.num_threads)
    torch.manual_seed(config.seed)
    opened = config
    config = resolved(config)
    model, tokenizer = load_for_training(config)
    config = complete_config(config, run, 0, count_parameters(model), lr_scale, 0, opened)
    return make_env, config, model, tokenizer, steps


def train(config: EpisodeGRPOConfig, env: Any, run: RunHandle) -> StageResult:
    """The registered ``train`` of ``grpo-episodes``: the text env first
    (:func:`text_env_factory`, so a bad one loads no model), then the policy (LoRA as every
    stage has it), the config completed (:func:`rlx.llm.training.complete_config`: the step
    size from the model), the reference when ``beta > 0``; then per step play, score, update
    and log, evaluate every ``eval_every`` steps and at the last, checkpoint at the config's
    cadence and at the end (a resumed run continues from its checkpoint); the model is saved
    to ``RUN_DIR/model`` once the last step is done."""
    from rlx.llm.lora import reference_of, save_trained

    make_env, config, model, tokenizer, steps = open_episode_run(config, env, run, LR_SCALE)
    run.add_to_summary(**trainable_share(model))
    reference = reference_of(model, config.model) if config.beta > 0 else None
    assert config.learning_rate is not None  # completed above
    optimizer = make_optimizer(model, config.learning_rate, config.weight_decay)
    step = 0
    if run.resumed_state is not None:
        restore_episode_state(run.resumed_state, model, optimizer)
        step = int(run.resumed_step or 0)
    elif run.start_checkpoint_due():
        run.save_checkpoint(0, episode_state(model, optimizer, 0))
    model.train()
    with attention_for(model, config.precision), attention_for(reference, config.precision):
        step, last_eval = episode_steps(
            model, reference, tokenizer, optimizer, make_env, config, run, step
        )
        run.save_checkpoint(step, episode_state(model, optimizer, step))
        if step >= steps and not last_eval:  # resumed at its end: evaluate what trained
            last_eval = evaluate_episodes(model, tokenizer, make_env, config)
    if step >= steps and run.writer:
        save_trained(model, tokenizer, run.dir, MODEL_DIR)
    summary = run.finish(step, last_eval)
    return StageResult(
        run.dir, run.dir / MODEL_DIR, last_eval, float(summary["wall_s"]), summary["status"]
    )


def episode_steps(
    model: Any,
    reference: Any,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer,
    make_env: Callable[[], TextEnv],
    config: EpisodeGRPOConfig,
    run: RunHandle,
    step: int,
) -> tuple[int, dict[str, float]]:
    """The steps from ``step`` to ``config.steps`` (or a stop request): the step reached and
    the last evaluation. The learning rate warms up and decays as GRPO's
    (:func:`rlx.llm.training.set_learning_rate`); the last step's checkpoint is the caller's."""
    steps, peak = config.steps, config.learning_rate
    assert steps is not None and peak is not None  # completed by train
    eval_every = resolve_eval_every(config, steps)
    last_eval: dict[str, float] = {}
    while step < steps and not run.stop_requested:
        lr = set_learning_rate(optimizer, peak, step, steps, config.warmup_ratio)
        metrics, _ = episode_step(model, reference, tokenizer, optimizer, make_env,
                                  training_seeds(config, step + 1), config)  # fmt: skip
        step += 1
        metrics[M.LR] = lr
        if step % eval_every == 0 or step == steps:
            last_eval = evaluate_episodes(model, tokenizer, make_env, config)
            metrics.update(last_eval)
        run.log(step, metrics)
        if step < steps and run.checkpoint_due():
            run.save_checkpoint(step, episode_state(model, optimizer, step))
    return step, last_eval


def load(config: EpisodeGRPOConfig, env_id: str, state: dict) -> Any:
    """The trained policy as a :class:`rlx.llm.agent.LoadedModel` (``rlx.load``)."""
    from rlx.llm.agent import LoadedModel

    return LoadedModel.from_checkpoint(config, state)


# ============================================================================ warm-up
def imitate(
    model: Any,
    tokenizer: Any,
    episodes: Sequence[Episode],
    *,
    steps: int,
    learning_rate: float = 1e-3,
    batch_size: int = 32,
    seed: int = 0,
) -> float:
    """A warm-up before GRPO: ``steps`` of token cross-entropy on the model's tokens of
    ``episodes`` (e.g. :func:`rlx.llm.episodes.scripted_episodes` of well-formed replies),
    ``L = -(1/N) sum_t m_t log pi(x_t | x_<t)`` (:func:`rlx.llm.losses.sft_loss`), the env's
    tokens context only. Returns the last step's loss."""
    if steps < 1 or batch_size < 1 or not episodes:
        raise ConfigError(
            f"imitate needs steps >= 1, batch_size >= 1 and episodes; got steps={steps}, "
            f"batch_size={batch_size} and {len(episodes)} episodes."
        )
    device = next(model.parameters()).device
    table = SequenceTable([e.sequence() for e in episodes], tokenizer.pad_token_id)
    optimizer = make_optimizer(model, learning_rate, 0.0)
    rng = np.random.default_rng(seed)
    model.train()
    loss = torch.zeros(())
    for _ in range(steps):
        batch = table.batch(rng.choice(len(table), size=min(batch_size, len(table)), replace=False))
        batch = batch.to(device)
        loss, _ = sft_loss(forward_logits(model, batch), batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return float(loss.detach())


ALGORITHM = registry.register(
    registry.Algorithm(
        name=ALGO,
        config=EpisodeGRPOConfig,
        train=train,
        load=load,
        budget_field="steps",
        unit="steps",
    )
)

__all__ = [
    "ALGO",
    "EpisodeGRPOConfig",
    "episode_batch",
    "episode_loss",
    "episode_state",
    "episode_step",
    "episode_steps",
    "evaluate_episodes",
    "imitate",
    "load",
    "text_env_factory",
    "train",
    "training_seeds",
]
