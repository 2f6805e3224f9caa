"""Soft Actor-Critic (registered as ``sac``), read top to bottom: config, collect, targets,
critic update, actor update, temperature, Polyak, log.

SAC (Haarnoja et al., 2018) learns a stochastic policy that maximises reward plus entropy.
Every gradient step, on a uniform replay minibatch:

    a' ~ pi(.|s'),   y = r + gamma (1 - terminated) (min_k Q_k'(s', a') - alpha log pi(a'|s'))
    L_Q(phi)     = sum_k mean (Q_k(s, a) - y)**2                          (twin critics)
    L_pi(theta)  = mean [alpha log pi(a~|s) - min_k Q_k(s, a~)],   a~ ~ pi(.|s) reparameterised
    L(alpha)     = -mean [log alpha (log pi(a~|s) + H_target)],      H_target = -dim(A)
    phi'        <- tau phi + (1 - tau) phi'                               (Polyak)

The policy is a tanh-squashed Gaussian ``a = tanh(u)``, ``u ~ N(mu(s), sigma(s)**2)``, with the
change-of-variables correction in its log-prob
(:func:`rlx.core.continuous.squashed_gaussian_sample`);
actions live in ``[-1, 1]^d`` and are rescaled to the env's bounds only when stepping it. The
twin critics are one :class:`rlx.core.critics.EnsembleQ`: one batched pass and one optimizer
step for both. ``autotune=False`` keeps alpha fixed at ``alpha``.

With ``use_sde`` the exploration is state-dependent (gSDE, :mod:`rlx.core.sde`; Raffin et
al., 2021): ``u = mu(s) + z(s) theta_eps``, ``z(s)`` the actor's last hidden layer (not
detached: as SB3's SAC, the losses train the features through the noise too),
``theta_eps ~ N(0, sigma**2)`` a ``[latent_dim, dim(A)]`` matrix per env copy, drawn at the
start of each collection phase (the env steps between two rounds of gradient steps) and every
``sde_sample_freq`` vector steps within it, ``log sigma`` one learned matrix; the mean is
clipped to ``[-2, 2]`` before the tanh, as SB3 does (``clip_mean``). Its log-probability is
that of ``N(mu(s), v(s))``, ``v_k = sum_j z_j**2 sigma_jk**2``, with the tanh correction
(:func:`rlx.core.continuous.squashed_sde_sample`).

Logged every ``log_every`` env steps: ``critic_loss``, ``q_mean``, ``td_error``,
``actor_loss``, ``entropy`` (``-mean log pi``), ``alpha`` (means over the gradient steps since
the last log); ``episode_return``, ``episode_length``; and, for the overestimation check,
``q_start`` (``min_k Q_k(s_0, a_0)`` at each finished episode's first state and action, read
when the action was taken) against ``mc_return`` (the discounted return that followed). A soft
Q value also counts the entropy bonus still to come, so ``q_start`` sits somewhat above
``mc_return`` even without overestimation.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from rlx import metrics as M
from rlx import registry
from rlx.core.checks import check_off_policy_fields, positive
from rlx.core.continuous import (
    polyak_update,
    sac_actor_loss,
    sac_target,
    squashed_gaussian_sample,
    squashed_sde_sample,
    temperature_loss,
    twin_critic_loss,
)
from rlx.core.critics import EnsembleQ
from rlx.core.fields import ReplayFields
from rlx.core.nets import MLP, mlp
from rlx.core.off_policy import (
    ContinuousAgent,
    ContinuousLearner,
    ContinuousMethod,
    ReplayBatch,
    load_continuous,
    train_off_policy,
)
from rlx.core.optim import Adam, gradient_step
from rlx.core.sde import check_sde_fields, sample_exploration_matrices, sde_noise
from rlx.runs.handle import RunHandle

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0  # keep sigma in [2e-9, 7.4]: finite log-probs
SDE_CLIP_MEAN = 2.0  # gSDE: mu(s) clipped to [-2, 2] before the tanh (SB3's clip_mean)


# ============================================================================ config
@dataclass(frozen=True)
class SACConfig(ReplayFields):
    """SAC hyperparameters (defaults: Stable-Baselines3's and CleanRL's common choices)."""

    eval_episodes: int = 10
    actor_learning_rate: float = 3e-4
    """Adam's step size for the policy"""
    critic_learning_rate: float = 1e-3
    """Adam's step size for the twin critics (and for the temperature)"""
    gamma: float = 0.99
    """discount factor, in [0, 1]"""
    tau: float = 0.005
    """Polyak step of the target critics, phi' <- tau phi + (1 - tau) phi', in (0, 1]"""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """hidden layer widths of the actor and of each critic"""
    alpha: float = 0.2
    """entropy temperature: fixed when autotune is off, else its starting value"""
    autotune: bool = True
    """tune alpha toward target_entropy; False: keep alpha fixed"""
    target_entropy: float | None = None
    """entropy the temperature aims at (None: -dim(A))"""
    log_std_init: float = -3.0
    """with use_sde: initial log std of each entry of gSDE's sigma matrix (SB3's -3)"""
    use_sde: bool = False
    """state-dependent exploration (gSDE): noise z(s) theta, z the actor's last hidden layer"""
    sde_sample_freq: int = -1
    """with use_sde: new exploration matrices every this many vector steps (-1: per collection)"""
    use_expln: bool = False
    """with use_sde: sigma = expln(log_std) (log1p(x) + 1 above 0) instead of exp(log_std)"""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_off_policy_fields(self)
        check_sde_fields(self)
        positive(self, "actor_learning_rate")
        positive(self, "critic_learning_rate")
        positive(self, "alpha")


# Tuned per environment, as rl-baselines3-zoo keeps them; explicit flags override these.
PRESETS: dict[str, dict[str, Any]] = {
    # the zoo's budget and learning rate; small networks (cheaper per gradient step than
    # SB3's 256x256), a short warm-up, a faster target (tau) and a shorter horizon (gamma)
    # reach the solved return in a fraction of the budget. The seeds tuning looked at are
    # listed in benchmarks/seen_seeds.json; benchmarks/bench_continuous.py scores it on others
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
    },
}


# ============================================================================ networks
class SquashedGaussianActor(nn.Module):
    """``pi(.|s)``: ``a = tanh(u)``, ``u ~ N(mu(s), sigma(s)**2)``, both from one MLP; with
    ``use_sde``, ``u = mu(s) + z(s) theta_eps`` (gSDE, module docstring): the MLP gives
    ``mu`` and ``z``, and ``log sigma`` is a learned ``[latent_dim, act_dim]`` matrix."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden_sizes: tuple[int, ...],
        *,
        use_sde: bool = False,
        log_std_init: float = -3.0,
        use_expln: bool = False,
    ) -> None:
        super().__init__()
        self.use_sde, self.use_expln = use_sde, use_expln
        self.body = mlp(obs_dim, act_dim if use_sde else 2 * act_dim, hidden_sizes)
        if use_sde:
            shape = (hidden_sizes[-1], act_dim)
            self.log_std = nn.Parameter(torch.full(shape, float(log_std_init)))

    def forward(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """``(mu(s), log sigma(s))``, the log std clamped to keep log-probs finite."""
        mean, log_std = self.body(obs).chunk(2, dim=-1)
        return mean, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)

    def latent_and_mean(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """gSDE: ``(z(s), mu(s))``, the last hidden layer and the mean clipped to
        ``[-SDE_CLIP_MEAN, SDE_CLIP_MEAN]``."""
        body: MLP = self.body
        latent, mean = body.latent_and_output(obs)
        return latent, mean.clamp(-SDE_CLIP_MEAN, SDE_CLIP_MEAN)

    def sample(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """A reparameterised ``a ~ pi(.|s)`` in ``[-1, 1]^d`` and ``log pi(a|s)`` (gSDE: with
        one fresh exploration matrix for the batch)."""
        if self.use_sde:
            latent, mean = self.latent_and_mean(obs)
            return squashed_sde_sample(mean, latent, self.log_std, use_expln=self.use_expln)
        return squashed_gaussian_sample(*self(obs))

    def explore(self, obs: Tensor, matrices: Tensor) -> Tensor:
        """gSDE's exploring action ``tanh(mu(s) + z(s) theta_eps)`` with the given exploration
        matrices (one ``[latent_dim, act_dim]``, or one per row)."""
        latent, mean = self.latent_and_mean(obs)
        return torch.tanh(mean + sde_noise(latent, matrices))

    def mode(self, obs: Tensor) -> Tensor:
        """The deterministic action ``tanh(mu(s))`` (no noise, with gSDE too)."""
        if self.use_sde:
            return torch.tanh(self.latent_and_mean(obs)[1])
        return torch.tanh(self(obs)[0])


# ============================================================================ the learner
class SACLearner(ContinuousLearner):
    """The actor, twin critics, their targets, the temperature and their optimisers."""

    def __init__(
        self, config: SACConfig, obs_dim: int, act_dim: int, device: torch.device | None = None
    ) -> None:
        super().__init__(config, act_dim, device)
        self.actor = SquashedGaussianActor(
            obs_dim, act_dim, config.hidden_sizes, use_sde=config.use_sde,
            log_std_init=config.log_std_init, use_expln=config.use_expln,
        ).to(self.device)  # fmt: skip
        self.critic = EnsembleQ(obs_dim, act_dim, config.hidden_sizes, n_critics=2)
        self.critic = self.critic.to(self.device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.log_alpha = torch.tensor(
            float(np.log(config.alpha)), requires_grad=config.autotune, device=self.device
        )
        self.target_entropy = (
            -float(act_dim) if config.target_entropy is None else float(config.target_entropy)
        )
        self.actor_opt = Adam(self.actor.parameters(), lr=config.actor_learning_rate, eps=1e-8)
        self.critic_opt = Adam(self.critic.parameters(), lr=config.critic_learning_rate, eps=1e-8)
        self.alpha_opt = None
        if config.autotune:
            self.alpha_opt = Adam([self.log_alpha], lr=config.critic_learning_rate, eps=1e-8)
        self._critic_params = list(self.critic.parameters())
        self._target_params = list(self.critic_target.parameters())
        # gSDE: the env copies' exploration matrices and where the cadence stands
        self.exploration_matrices: Tensor | None = None
        self.sde_phase = -1  # the collection phase (step // train_freq) they were drawn in
        self.sde_steps = 0  # vector steps collected in that phase so far
        self.sde_due = False

    # ------------------------------------------------------------------ acting
    def begin_collection(self, step: int) -> None:
        """gSDE: new exploration matrices are due at the start of each collection phase
        (``step // train_freq``) and every ``sde_sample_freq`` vector steps within it."""
        super().begin_collection(step)
        if not self.config.use_sde:
            return
        phase, freq = step // self.config.train_freq, self.config.sde_sample_freq
        if phase != self.sde_phase:
            self.sde_phase, self.sde_steps, self.sde_due = phase, 0, True
        elif freq > 0 and self.sde_steps % freq == 0:
            self.sde_due = True
        self.sde_steps += 1

    def explore(
        self,
        obs: np.ndarray,
        starts: np.ndarray,
        rng: np.random.Generator,
        masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        if self.sde_due:  # gSDE: drawn from the loop's generator, one per env copy
            self.exploration_matrices = self._draw_matrices(len(obs), rng)
            self.sde_due = False
        return super().explore(obs, starts, rng, masks)

    def _draw_matrices(self, count: int, rng: np.random.Generator) -> Tensor:
        matrices = sample_exploration_matrices(
            self.actor.log_std, count, rng, self.config.use_expln
        )
        return torch.from_numpy(matrices).to(self.device)

    @torch.inference_mode()
    def act(self, obs: np.ndarray, deterministic: bool, rng: np.random.Generator) -> np.ndarray:
        """Actions in ``[-1, 1]^d``: ``tanh(mu(s))`` if deterministic, else ``a ~ pi(.|s)``
        (gSDE: with the env copies' exploration matrices; a batch of another size draws its
        own from ``rng`` for this call)."""
        x = torch.from_numpy(obs).to(self.device)
        if deterministic:
            return self.actor.mode(x).cpu().numpy()
        if not self.config.use_sde:
            return self.actor.sample(x)[0].cpu().numpy()
        matrices = self.exploration_matrices
        if matrices is None or len(matrices) != len(obs):
            matrices = self._draw_matrices(len(obs), rng)
        return self.actor.explore(x, matrices).cpu().numpy()

    @torch.inference_mode()
    def start_value(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``min_k Q_k(s, a)``, recorded at episode starts for the overestimation check."""
        q = self.critic(*(torch.from_numpy(x).to(self.device) for x in (obs, actions)))
        return q.amin(dim=0).cpu().numpy()

    # ------------------------------------------------------------------ one gradient step
    def update(self, batch: ReplayBatch) -> dict[str, Tensor]:
        """One gradient step of critics, actor and temperature; its metrics, as tensors."""
        cfg = self.config
        alpha = self.log_alpha.detach().exp()

        # ---- targets: y = r + gamma (1 - d) (min_k Q_k'(s', a') - alpha log pi(a'|s'))
        with torch.no_grad():
            next_action, next_log_prob = self.actor.sample(batch.next_obs)
            next_q = self.critic_target(batch.next_obs, next_action)
            y = sac_target(
                batch.rewards, batch.discounts, batch.terminated, next_q, next_log_prob, alpha
            )

        # ---- critic update: both critics in one batched pass, one optimizer step
        critic_loss, metrics = twin_critic_loss(self.critic(batch.obs, batch.actions), y)
        gradient_step(self.critic_opt, critic_loss)

        # ---- actor update through the reparameterised action; the critics are held fixed
        action, log_prob = self.actor.sample(batch.obs)
        q_new = self.critic(batch.obs, action, frozen=True)
        actor_loss, actor_metrics = sac_actor_loss(log_prob, q_new, alpha)
        gradient_step(self.actor_opt, actor_loss)
        metrics.update(actor_metrics)

        # ---- temperature: raise alpha when entropy is below -dim(A), lower it above
        if self.alpha_opt is not None:
            alpha_loss, alpha_metrics = temperature_loss(
                self.log_alpha, log_prob, self.target_entropy
            )
            gradient_step(self.alpha_opt, alpha_loss)
            metrics.update(alpha_metrics)
        else:
            metrics[M.ALPHA] = alpha

        # ---- Polyak: phi' <- tau phi + (1 - tau) phi'
        polyak_update(self._target_params, self._critic_params, cfg.tau)
        return metrics

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        state = {
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "critic_target": self.critic_target.state_dict(),
            "log_alpha": self.log_alpha.detach().clone(),
            "actor_opt": self.actor_opt.state_dict(),
            "critic_opt": self.critic_opt.state_dict(),
            "alpha_opt": None if self.alpha_opt is None else self.alpha_opt.state_dict(),
        }
        if self.config.use_sde:  # log sigma is in the actor's state
            matrices = self.exploration_matrices
            state["sde"] = {
                "matrices": None if matrices is None else matrices.detach().cpu().clone(),
                "phase": self.sde_phase,
                "steps": self.sde_steps,
                "due": self.sde_due,
            }
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.critic_target.load_state_dict(state["critic_target"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.actor_opt.load_state_dict(state["actor_opt"])
        self.critic_opt.load_state_dict(state["critic_opt"])
        if self.alpha_opt is not None:
            self.alpha_opt.load_state_dict(state["alpha_opt"])
        sde = state.get("sde")
        if self.config.use_sde and sde is not None:
            matrices = sde["matrices"]
            self.exploration_matrices = None if matrices is None else matrices.to(self.device)
            self.sde_phase, self.sde_steps = int(sde["phase"]), int(sde["steps"])
            self.sde_due = bool(sde["due"])


# ============================================================================ training
METHOD = ContinuousMethod("sac", SACLearner)


def train(config: SACConfig, env: Any, run: RunHandle) -> ContinuousAgent:
    """Train SAC on ``env`` inside an open :class:`rlx.runs.Run` (the shared loop of
    :func:`rlx.core.off_policy.train_off_policy` around :class:`SACLearner`)."""
    return train_off_policy(METHOD, config, env, run)


def load(config: SACConfig, env_id: str, state: dict) -> ContinuousAgent:
    """The agent of a checkpoint (``rlx.load``), acting deterministically."""
    return load_continuous("sac", SACLearner, config, env_id, state)


registry.register(
    registry.Algorithm(
        name="sac",
        config=SACConfig,
        train=train,
        load=load,
        presets=PRESETS,
        renamed={"actor_lr": "actor_learning_rate", "critic_lr": "critic_learning_rate"},
    )
)
