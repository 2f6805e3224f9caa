"""TD3, Twin Delayed DDPG (registered as ``td3``), read top to bottom: config, collect,
targets, critic update, delayed actor update, Polyak, log.

TD3 (Fujimoto et al., 2018) learns a deterministic policy ``mu(s)`` with three fixes to DDPG's
overestimation. Every gradient step, on a uniform replay minibatch:

    a~' = clip(mu'(s') + clip(eps, -c, c), -1, 1),   eps ~ N(0, policy_noise**2)  (smoothing)
    y   = r + gamma (1 - terminated) min(Q_1'(s', a~'), Q_2'(s', a~'))          (twin minimum)
    L_Q(phi) = sum_k mean (Q_k(s, a) - y)**2

and every ``policy_delay``-th step (delayed actor and target updates):

    L_mu(theta) = -mean Q_1(s, mu(s))
    phi' <- tau phi + (1 - tau) phi',   theta' <- tau theta + (1 - tau) theta'

Exploration adds Gaussian noise ``N(0, exploration_noise**2)`` to ``mu(s)``, clipped into the
box. Actions live in ``[-1, 1]^d`` (noise scales are in half-widths of the env's action box)
and are rescaled to the env's bounds only when stepping it. The twin critics are one
:class:`rlx.core.critics.EnsembleQ`: one batched pass and one optimizer step for both.

Logged every ``log_every`` env steps: ``critic_loss``, ``q_mean``, ``td_error``, ``actor_loss``
(means over the gradient steps since the last log); ``episode_return``, ``episode_length``;
``q_start`` (``min_k Q_k(s_0, a_0)`` at each finished episode's first state and action) against
``mc_return`` (the discounted return that followed), for the overestimation check.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from rlx import registry
from rlx.core.checks import at_least, check_off_policy_fields, positive
from rlx.core.continuous import (
    deterministic_actor_loss,
    polyak_update,
    smoothed_target_action,
    td3_target,
    twin_critic_loss,
)
from rlx.core.critics import EnsembleQ
from rlx.core.fields import ReplayFields
from rlx.core.nets import mlp
from rlx.core.off_policy import (
    ContinuousAgent,
    ContinuousLearner,
    ContinuousMethod,
    ReplayBatch,
    load_continuous,
    train_off_policy,
)
from rlx.core.optim import Adam, gradient_step
from rlx.errors import ConfigError
from rlx.runs.handle import RunHandle


# ============================================================================ config
@dataclass(frozen=True)
class TD3Config(ReplayFields):
    """TD3 hyperparameters (defaults: the TD3 paper's, as CleanRL and SB3 keep them)."""

    eval_episodes: int = 10
    learning_starts: int = 10_000
    actor_learning_rate: float = 3e-4
    """Adam's step size for the policy"""
    critic_learning_rate: float = 3e-4
    """Adam's step size for the twin critics"""
    gamma: float = 0.99
    """discount factor, in [0, 1]"""
    tau: float = 0.005
    """Polyak step of the target networks, phi' <- tau phi + (1 - tau) phi', in (0, 1]"""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """hidden layer widths of the actor and of each critic"""
    exploration_noise: float = 0.1
    """std of the Gaussian noise added to mu(s) when collecting, in half-widths of the box"""
    policy_noise: float = 0.2
    """std of the target policy smoothing noise, in half-widths of the box"""
    noise_clip: float = 0.5
    """the smoothing noise is clipped to [-noise_clip, noise_clip]"""
    policy_delay: int = 2
    """critic updates per actor and target update"""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_off_policy_fields(self)
        positive(self, "actor_learning_rate")
        positive(self, "critic_learning_rate")
        for field in ("exploration_noise", "policy_noise", "noise_clip"):
            at_least(self, field, 0)
        if self.policy_delay < 1:
            raise ConfigError(
                f"TD3Config: policy_delay={self.policy_delay} must be >= 1 (2 in the paper)."
            )


# Tuned per environment, as rl-baselines3-zoo keeps them; explicit flags override these.
PRESETS: dict[str, dict[str, Any]] = {
    # the zoo's budget, learning rate and gamma; small networks (cheaper per gradient step
    # than SB3's 400x300), a short warm-up instead of 10,000 random steps, a faster target
    # (tau) and wider exploration noise reach the solved return in a fraction of the budget.
    # The seeds tuning looked at are listed in benchmarks/seen_seeds.json;
    # benchmarks/bench_continuous.py scores it only on others
    "Pendulum-v1": {
        "total_steps": 20_000,
        "actor_learning_rate": 1e-3,
        "critic_learning_rate": 1e-3,
        "gamma": 0.98,
        "tau": 0.02,
        "buffer_size": 20_000,
        "batch_size": 256,
        "learning_starts": 500,
        "hidden_sizes": (64, 64),
        "exploration_noise": 0.2,
    },
}


# ============================================================================ networks
class DeterministicActor(nn.Module):
    """``mu(s) = tanh(MLP(s))`` in ``[-1, 1]^d``."""

    def __init__(self, obs_dim: int, act_dim: int, hidden_sizes: tuple[int, ...]) -> None:
        super().__init__()
        self.body = mlp(obs_dim, act_dim, hidden_sizes)

    def forward(self, obs: Tensor) -> Tensor:
        return torch.tanh(self.body(obs))


# ============================================================================ the learner
class TD3Learner(ContinuousLearner):
    """The actor, twin critics, their targets and optimisers."""

    def __init__(
        self, config: TD3Config, obs_dim: int, act_dim: int, device: torch.device | None = None
    ) -> None:
        super().__init__(config, act_dim, device)
        self.actor = DeterministicActor(obs_dim, act_dim, config.hidden_sizes).to(self.device)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic = EnsembleQ(obs_dim, act_dim, config.hidden_sizes, n_critics=2)
        self.critic = self.critic.to(self.device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.actor_opt = Adam(self.actor.parameters(), lr=config.actor_learning_rate, eps=1e-8)
        self.critic_opt = Adam(self.critic.parameters(), lr=config.critic_learning_rate, eps=1e-8)
        self.critic_updates = 0
        self._online = [*self.critic.parameters(), *self.actor.parameters()]
        self._targets = [*self.critic_target.parameters(), *self.actor_target.parameters()]

    # ------------------------------------------------------------------ acting
    @torch.inference_mode()
    def act(self, obs: np.ndarray, deterministic: bool, rng: np.random.Generator) -> np.ndarray:
        """``mu(s)``; unless deterministic, plus ``N(0, exploration_noise**2)``, clipped."""
        mu = self.actor(torch.from_numpy(obs).to(self.device)).cpu().numpy()
        if deterministic:
            return mu
        noise = rng.normal(0.0, self.config.exploration_noise, mu.shape)
        return np.clip(mu + noise, -1.0, 1.0).astype(np.float32)

    @torch.inference_mode()
    def start_value(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``min_k Q_k(s, a)``, recorded at episode starts for the overestimation check."""
        q = self.critic(*(torch.from_numpy(x).to(self.device) for x in (obs, actions)))
        return q.amin(dim=0).cpu().numpy()

    # ------------------------------------------------------------------ one gradient step
    def update(self, batch: ReplayBatch) -> dict[str, Tensor]:
        """One critic step (and every policy_delay-th, an actor step); metrics as tensors."""
        cfg = self.config

        # ---- targets: y = r + gamma (1 - d) min_k Q_k'(s', clip(mu'(s') + clip(eps), -1, 1))
        with torch.no_grad():
            target_action = self.actor_target(batch.next_obs)
            noise = torch.randn_like(target_action) * cfg.policy_noise
            next_action = smoothed_target_action(target_action, noise, cfg.noise_clip)
            next_q = self.critic_target(batch.next_obs, next_action)
            y = td3_target(batch.rewards, batch.discounts, batch.terminated, next_q)

        # ---- critic update: both critics in one batched pass, one optimizer step
        critic_loss, metrics = twin_critic_loss(self.critic(batch.obs, batch.actions), y)
        gradient_step(self.critic_opt, critic_loss)
        self.critic_updates += 1

        # ---- delayed actor update (-Q_1, critics held fixed), then Polyak for all targets
        if self.critic_updates % cfg.policy_delay == 0:
            q1 = self.critic(batch.obs, self.actor(batch.obs), frozen=True, first=1)[0]
            actor_loss, actor_metrics = deterministic_actor_loss(q1)
            gradient_step(self.actor_opt, actor_loss)
            metrics.update(actor_metrics)
            polyak_update(self._targets, self._online, cfg.tau)
        return metrics

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        return {
            "actor": self.actor.state_dict(),
            "actor_target": self.actor_target.state_dict(),
            "critic": self.critic.state_dict(),
            "critic_target": self.critic_target.state_dict(),
            "actor_opt": self.actor_opt.state_dict(),
            "critic_opt": self.critic_opt.state_dict(),
            "critic_updates": self.critic_updates,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.actor.load_state_dict(state["actor"])
        self.actor_target.load_state_dict(state["actor_target"])
        self.critic.load_state_dict(state["critic"])
        self.critic_target.load_state_dict(state["critic_target"])
        self.actor_opt.load_state_dict(state["actor_opt"])
        self.critic_opt.load_state_dict(state["critic_opt"])
        self.critic_updates = int(state["critic_updates"])


# ============================================================================ training
METHOD = ContinuousMethod("td3", TD3Learner)


def train(config: TD3Config, env: Any, run: RunHandle) -> ContinuousAgent:
    """Train TD3 on ``env`` inside an open :class:`rlx.runs.Run` (the shared loop of
    :func:`rlx.core.off_policy.train_off_policy` around :class:`TD3Learner`)."""
    return train_off_policy(METHOD, config, env, run)


def load(config: TD3Config, env_id: str, state: dict) -> ContinuousAgent:
    """The agent of a checkpoint (``rlx.load``), acting deterministically."""
    return load_continuous("td3", TD3Learner, config, env_id, state)


registry.register(
    registry.Algorithm(
        name="td3",
        config=TD3Config,
        train=train,
        load=load,
        presets=PRESETS,
        renamed={"actor_lr": "actor_learning_rate", "critic_lr": "critic_learning_rate"},
    )
)
