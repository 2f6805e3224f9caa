"""A2C, advantage actor-critic (Mnih et al., 2016, synchronous): one gradient step per rollout.

    N parallel envs x T steps (T = 5 by default)  ->  rollout buffer
    n-step returns, or GAE with lambda < 1:  A_t = sum_l (gamma lambda)^l delta_{t+l}
    L = -E[A_t log pi(a_t|s_t)] + c_v 1/2 E[(V(s_t) - R_t)^2] - c_e H,  c_v = 0.5, c_e = 0.01
    one RMSprop step on the whole rollout, gradient norm clipped
    diagnostics once per update: approx_kl (old vs updated policy on the rollout), entropy,
    policy_loss, value_loss, explained_variance, lr, grad_norm, and the finished episodes.

With ``gae_lambda = 1`` (the default) the advantage is the n-step return minus ``V``: the
rewards to the end of the rollout plus the discounted value of where it stopped.
Collection, GAE, the losses and checkpoints are shared with PPO (:mod:`rlx.core`); with
``runners=K`` the rollouts come from K Ray env runners (:mod:`rlx.distributed.env_runners`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import Tensor

from rlx import registry
from rlx.core.on_policy import (
    Batch,
    PolicyAgent,
    annealed,
    build_policy,
    check_config,
    end_training,
    episode_metrics,
    gradient_step,
    make_collector,
    policy_shift,
    prepare_batch,
    restore_training,
    training_state,
)
from rlx.core.optim import RMSprop
from rlx.core.policies import ActorCritic
from rlx.core.policy_losses import entropy_bonus, normalize, policy_gradient_loss, value_loss
from rlx.core.seeding import seed_everything
from rlx.diagnostics import metrics as M


# ============================================================================ config
@dataclass(frozen=True)
class A2CConfig:
    """A2C's knobs; defaults from the cheat sheet (c_v 0.5, c_e 0.01, gamma 0.99) and
    Stable-Baselines3 (T = 5, RMSprop with lr 7e-4)."""

    total_steps: int = 500_000
    """env steps to train for (transitions, over all env copies)"""
    seed: int = 0
    """seeds the networks, the envs and the actions"""
    num_envs: int = 8
    """N: env copies stepped together"""
    num_steps: int = 5
    """T: steps per env copy per update (the n of the n-step returns)"""
    gamma: float = 0.99
    """discount"""
    gae_lambda: float = 1.0
    """1: n-step returns; below 1: GAE"""
    vf_coef: float = 0.5
    """c_v: weight of the value loss"""
    ent_coef: float = 0.01
    """c_e: weight of the entropy bonus"""
    max_grad_norm: float | None = 0.5
    """clip the global gradient norm (None: no clipping)"""
    learning_rate: float = 7e-4
    """RMSprop's step size"""
    rmsprop_alpha: float = 0.99
    """RMSprop's smoothing constant"""
    anneal_lr: bool = False
    """decay the learning rate linearly to 0 over total_steps"""
    normalize_advantages: bool = False
    """normalise advantages per rollout to zero mean and unit std"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layers of the policy and the critic; () for linear ones"""
    activation: str = "tanh"
    """between hidden layers: tanh or relu"""
    normalize_obs: bool | None = None
    """normalise observations by running statistics (None: for Box actions only)"""
    normalize_rewards: bool = False
    """scale rewards by the running std of the discounted return"""
    log_std_init: float = 0.0
    """initial log std of a Gaussian policy"""
    eval_episodes: int = 20
    """evaluation episodes at the end, deterministic policy (0: none)"""
    runners: int | None = None
    """Ray env runners collecting in parallel, num_envs copies each, so an update learns from
    runners x num_envs x num_steps samples (None: collect in this process; extra ray)"""
    ray_address: str | None = None
    """with runners: join the Ray cluster at HOST:PORT (None: start a local Ray for the run)"""

    def __post_init__(self) -> None:
        check_config(self)


# ============================================================================ the loss
def a2c_loss(
    policy: ActorCritic, batch: Batch, config: A2CConfig
) -> tuple[Tensor, dict[str, Tensor]]:
    """``L = -E[A log pi(a|s)] + c_v L_V - c_e H`` on the whole rollout."""
    log_prob, entropy, value = policy.evaluate(batch.obs, batch.actions)
    advantages = normalize(batch.advantages) if config.normalize_advantages else batch.advantages
    pg_loss, pg_metrics = policy_gradient_loss(log_prob, advantages)
    v_loss, v_metrics = value_loss(value, batch.returns)
    ent_loss, ent_metrics = entropy_bonus(entropy)
    loss = pg_loss + config.vf_coef * v_loss + config.ent_coef * ent_loss
    return loss, {**pg_metrics, **v_metrics, **ent_metrics}


# ============================================================================ training
def train(config: A2CConfig, env: Any, run: Any) -> PolicyAgent:
    """Train A2C on ``env`` inside an open :class:`rlx.runs.Run`; returns the agent."""
    rng = seed_everything(config.seed)
    with make_collector(config, env, run.env_id, algo="A2C") as collector:
        policy = build_policy(config, collector)
        params = list(policy.parameters())
        optimizer = RMSprop(params, config.learning_rate, alpha=config.rmsprop_alpha)
        buffer = collector.new_buffer(config.num_steps)
        step = 0
        if run.resumed_state is not None:
            step = restore_training(run.resumed_state, policy, optimizer, collector, rng)

        def save() -> None:
            state = training_state(step, policy, optimizer, collector, rng)
            run.save_checkpoint(step, state)

        while step < config.total_steps and not run.stop_requested:
            lr = annealed(config.learning_rate, step, config.total_steps, config.anneal_lr)
            optimizer.lr = lr
            # 1. collect N x T steps with the current policy (in this process, or on K runners)
            step, episodes = collector.collect(policy, buffer, rng, step)
            if len(episodes.returns):  # logged as they end, before the update
                run.log_episodes(episodes.steps, episodes.returns, episodes.lengths)
            # 2. V, log pi_old and n-step (or GAE) advantages
            batch = prepare_batch(
                buffer, policy, collector.last_obs, config.gamma, config.gae_lambda
            )
            # 3. one gradient step on the whole rollout
            loss, metrics = a2c_loss(policy, batch, config)
            metrics[M.GRAD_NORM] = gradient_step(optimizer, loss, params, config.max_grad_norm)
            # 4. diagnostics, read once per update
            metrics[M.APPROX_KL] = policy_shift(policy, batch)
            run.log(
                step,
                {
                    **metrics,
                    M.EXPLAINED_VARIANCE: batch.explained_variance,
                    M.LR: lr,
                    **episode_metrics(episodes),
                    **collector.stats(),
                },
            )
            if run.checkpoint_due():
                save()
        save()
        return end_training("a2c", run, env, config, step, policy, collector)


# ============================================================================ load, register
def load(config: A2CConfig, env_id: str, state: dict) -> PolicyAgent:
    """The trained policy of a checkpoint (``rlx.load(run_dir)``)."""
    return PolicyAgent("a2c", config, env_id, state["agent"])


PRESETS: dict[str, dict[str, Any]] = {
    # rl-baselines3-zoo's CartPole-v1 settings (8 envs, no entropy bonus)
    "CartPole-v1": {"num_envs": 8, "ent_coef": 0.0},
}

registry.register(
    registry.Algorithm(
        name="a2c",
        config=A2CConfig,
        train=train,
        load=load,
        summary="A2C: one step of -A log pi + c_v (V - R)^2 / 2 - c_e H per N x T rollout",
        presets=PRESETS,
    )
)
