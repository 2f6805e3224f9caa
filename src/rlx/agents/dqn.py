"""DQN and Double DQN (registered as ``dqn``), read top to bottom: config, the epsilon-greedy
policy, targets and update, the agent.

Q-learning with a neural network, a replay buffer and a target network (Mnih et al., 2015).
Each gradient step minimises, over a uniform replay minibatch,

    L(theta) = E[ (y - Q(s, a; theta))**2 ]     (or the Huber loss of y - Q, ``loss="huber"``)
    y = r + gamma * (1 - terminated) * max_a' Q(s', a'; theta^-)                  (double=False)
    y = r + gamma * (1 - terminated) * Q(s', argmax_a' Q(s', a'; theta); theta^-)  (double=True)

``theta^-`` follows ``theta`` every ``sync_every`` env steps: ``theta^- <- tau theta +
(1 - tau) theta^-`` (``tau=1``: a copy). Double DQN is the default, the answer to "Q values
too high"; the target net and the replay buffer are kept against "DQN diverges" (the deadly
triad; ``docs/reference/troubleshooting.md``). Exploration is epsilon-greedy, epsilon
decaying linearly from ``epsilon_start`` to ``epsilon_end`` over the first
``exploration_fraction`` of training. A time limit (truncation) bootstraps from the true
final observation; termination does not. With ``n_step > 1`` the target sums ``n``
discounted rewards before it bootstraps (``docs/concepts/value-formulas.md``).

The loop (collect, store, every ``train_freq`` env steps ``gradient_steps`` updates, log,
checkpoint) is the off-policy loop SAC and TD3 use too
(:func:`rlx.core.off_policy.train_off_policy`); with ``runners=K`` (extra ``ray``) the
transitions come from K Ray env runners of ``num_envs`` copies each, acting with the
learner's latest network for ``runner_steps`` vector steps per round, and the update is the
same.

Logged every ``log_every`` env steps (names from :mod:`rlx.metrics`):

- ``loss``, ``td_error`` (mean ``|y - Q(s, a)|``), ``q_mean`` (mean ``Q(s, a)`` of the replay
  actions), ``grad_norm`` (before clipping): means over the gradient steps since the last log;
  ``gradient_steps`` (so far);
- ``epsilon``, ``episode_return``, ``episode_length`` (training episodes finished since the
  last log);
- ``mc_return`` and ``q_start``, for measuring overestimation: for every training episode
  finished since the last log, ``q_start`` is the online network's ``Q(s_0, a_0)`` for the
  first state and the action taken there, computed when that action was chosen, and
  ``mc_return`` is the discounted return that actually followed,
  ``G_0 = sum_{t < T} gamma**t r_t`` (rewards after clipping, before scaling; ``q_start`` is
  divided by the reward scale, so both are in reward units). Both are means over those
  episodes. For an episode cut by a time limit after ``T`` steps the unobserved tail is at most
  ``gamma**T * max|Q|``. ``q_start - mc_return`` well above 0 is overestimation.

A checkpoint holds the networks, the optimiser, the step (hence the epsilon and learning-rate
schedule positions), the observation statistics, the random generators and, where the env's
state is plain data (:mod:`rlx.core.env_state`), the episodes in progress; with
``save_replay_buffer`` also the replay buffer. With both, a resumed run continues exactly as
the uninterrupted one would have; without the buffer, learning resumes once it holds
``learning_starts`` new transitions.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rlx import metrics as M
from rlx import registry
from rlx.core.buffers import ReplaySample
from rlx.core.checks import at_least, check_off_policy_fields, in_range, one_of, positive
from rlx.core.envs import require_discrete_actions
from rlx.core.fields import ReplayFields, RunnerFields
from rlx.core.masks import legal_or_all
from rlx.core.nets import MLP, QNetwork, is_image_space
from rlx.core.normalize import ObsNormalizer, RewardScaler
from rlx.core.observations import ObservationLayout, observation_encoder
from rlx.core.off_policy import ReplayLearner, train_off_policy
from rlx.core.optim import Adam, gradient_step
from rlx.core.policies import FACTORED_ACTIONS, NumpyForward
from rlx.core.runners import EnvRunners, numpy_state, torch_state
from rlx.core.schedules import LinearSchedule
from rlx.core.targets import double_q_target, mask_q, q_learning_target
from rlx.core.transitions import ReplayLayout, Transitions, clipped_rewards
from rlx.errors import ConfigError, EnvError
from rlx.runs.handle import RunHandle


# ============================================================================ config
@dataclass(frozen=True)
class DQNConfig(RunnerFields, ReplayFields):
    """DQN / Double DQN hyperparameters (defaults: ``docs/reference/defaults.md``, then
    common practice)."""

    buffer_size: int = 100_000
    batch_size: int = 64
    learning_starts: int = 1_000
    train_freq: int = 4
    learning_rate: float = 1e-4
    """Adam's step size"""
    learning_rate_end: float | None = None
    """step size reached linearly at the end of training (None: constant learning_rate)"""
    gamma: float = 0.99
    """discount factor, in [0, 1]"""
    sync_every: int = 1_000
    """env steps between target-network updates"""
    tau: float = 1.0
    """target update theta^- <- tau theta + (1 - tau) theta^- (1.0: copy), in (0, 1]"""
    double: bool = True
    """Double DQN target (argmax by the online net, value by the target net); False: vanilla"""
    dueling: bool = False
    """dueling head Q = V + A - mean(A)"""
    loss: Literal["huber", "mse"] = "mse"
    """TD loss: mse (the squared TD error) or huber (smooth L1, robust to outliers)"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layer widths of the Q network's MLP"""
    epsilon_start: float = 1.0
    """exploration rate at the start"""
    epsilon_end: float = 0.01
    """exploration rate after the decay"""
    exploration_fraction: float = 0.1
    """share of total_steps over which epsilon decays linearly"""
    max_grad_norm: float = 10.0
    """gradient norm clip (0: no clipping)"""
    n_step: int = 1
    """n-step returns: sum of n discounted rewards, then bootstrap"""
    reward_clip: float | None = None
    """clip rewards to [-reward_clip, reward_clip] before storing (Nature DQN: 1.0)"""
    normalize_obs: bool = False
    """normalise observations by running mean/std (saved in checkpoints)"""
    scale_rewards: bool = False
    """divide rewards by the running std of the discounted return"""
    compile: bool = False
    """torch.compile the Q network (compiling takes a while: it pays off on long runs)"""
    runner_steps: int = 16
    """with runners: vector steps each runner collects per round, between weight broadcasts"""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_off_policy_fields(self)
        positive(self, "learning_rate")
        if self.learning_rate_end is not None:
            at_least(self, "learning_rate_end", 0)
        for name in ("sync_every", "n_step", "runner_steps"):
            at_least(self, name, 1)
        for name in ("epsilon_start", "epsilon_end", "exploration_fraction"):
            in_range(self, name, 0.0, 1.0)
        at_least(self, "max_grad_norm", 0)
        if self.reward_clip is not None:
            positive(self, "reward_clip")
        one_of(self, "loss", ("huber", "mse"))
        if self.runners is not None and self.scale_rewards:
            raise ConfigError(
                f"scale_rewards=True is not supported with runners={self.runners} (the running "
                "return is tracked per step in one process); use reward_clip, or no runners."
            )


# Tuned per environment, as rl-baselines3-zoo keeps them; explicit flags override these.
# CartPole-v1: 3-step returns and the MSE loss learn values fast, normalised observations and
# a learning rate decayed to 0 keep the policy at 500 once found; 8 copies and one gradient
# step of 128 per 4 env steps keep the wall time low. The seeds tuning looked at are listed in
# benchmarks/seen_seeds.json; benchmarks/bench_dqn.py scores it only on others.
PRESETS: dict[str, dict[str, Any]] = {
    "CartPole-v1": {
        "total_steps": 80_000,
        "num_envs": 8,
        "learning_rate": 1e-3,
        "learning_rate_end": 0.0,
        "buffer_size": 50_000,
        "batch_size": 128,
        "learning_starts": 1_000,
        "train_freq": 4,
        "gradient_steps": 1,
        "sync_every": 1_000,
        "n_step": 3,
        "normalize_obs": True,
        "hidden_sizes": (64, 64),
    },
    # every Atari game: the Nature DQN's settings as rl-baselines3-zoo keeps them (Mnih et al.,
    # 2015), with rlx's Double DQN target kept on; the env's preprocessing already clips rewards
    "ALE/*": {
        "total_steps": 10_000_000,
        "num_envs": 1,
        "buffer_size": 100_000,
        "learning_rate": 1e-4,
        "batch_size": 32,
        "learning_starts": 100_000,
        "train_freq": 4,
        "gradient_steps": 1,
        "sync_every": 1_000,
        "exploration_fraction": 0.1,
        "epsilon_end": 0.01,
        "loss": "huber",
        "gamma": 0.99,
    },
}


# ============================================================================ the policy
class EpsilonGreedy:
    """``a = argmax_a Q(s, a)`` with probability ``1 - epsilon``, else a uniform action.

    ``q`` maps observations (normalised by ``obs_norm`` first, when given) to ``Q(s, .)``.
    The learner explores with one over its online network; an env runner acts with a copy,
    loaded with the learner's :meth:`DQNLearner.acting_state` every round.
    """

    def __init__(
        self,
        q: Callable[[Tensor], Tensor],
        n_actions: int,
        obs_norm: ObsNormalizer | None,
        device: torch.device | None = None,
    ) -> None:
        self.q, self.n_actions, self.obs_norm = q, n_actions, obs_norm
        self.device = torch.device("cpu") if device is None else device
        self.epsilon = 1.0
        self._numpy_q: NumpyForward | None = None

    def q_values(self, obs: np.ndarray) -> np.ndarray:
        """``Q(s, .)`` of a batch of observations, as numpy. A plain MLP on the CPU runs in
        numpy on views of its parameters (:class:`rlx.core.policies.NumpyForward`): on the
        one observation of a step torch's per-call dispatch costs more than the arithmetic."""
        numpy_q = self._numpy_forward()
        if numpy_q is None:
            return self.q(self.network_input(obs)).cpu().numpy()
        if self.obs_norm is not None:
            obs = self.obs_norm(obs)
        x = np.ascontiguousarray(obs, dtype=np.float32).reshape(len(obs), -1)
        return numpy_q(x)

    def _numpy_forward(self) -> NumpyForward | None:
        q = self.q
        if (
            self._numpy_q is None
            and self.device.type == "cpu"
            and isinstance(q, QNetwork)
            and q.flat
            and not q.dueling
            and isinstance(q.body, MLP)
        ):
            forward = NumpyForward(q.body)
            self._numpy_q = forward if forward.layers is not None else None
        return self._numpy_q

    def network_input(self, obs: np.ndarray) -> Tensor:
        """Observations as the network's input (normalised if configured), on its device."""
        if self.obs_norm is not None:
            obs = self.obs_norm(obs)
        return torch.from_numpy(np.ascontiguousarray(obs)).to(self.device)

    @torch.inference_mode()
    def act(
        self,
        obs: np.ndarray,
        epsilon: float,
        rng: np.random.Generator,
        masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Epsilon-greedy actions for a batch of observations, and ``Q(s, a)`` of those actions.

        With ``masks`` the greedy action is the best valid one and the exploring action is
        uniform over the valid ones.
        """
        q = self.q_values(obs)
        if masks is not None:
            return self._act_masked(q, epsilon, rng, legal_or_all(masks))
        actions = q.argmax(axis=1)
        explore = rng.random(len(actions)) < epsilon
        actions = np.where(explore, rng.integers(0, self.n_actions, size=len(actions)), actions)
        return actions, q[np.arange(len(actions)), actions]

    @staticmethod
    def _act_masked(
        q: np.ndarray, epsilon: float, rng: np.random.Generator, legal: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        actions = np.where(legal, q, -np.inf).argmax(axis=1)
        explore = rng.random(len(actions)) < epsilon
        # a uniform valid action: the largest of one uniform key per valid action
        uniform = np.where(legal, rng.random(legal.shape), -1.0).argmax(axis=1)
        actions = np.where(explore, uniform, actions)
        return actions, q[np.arange(len(actions)), actions]

    def explore(
        self,
        obs: np.ndarray,
        starts: np.ndarray,
        rng: np.random.Generator,
        masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`act` at the current ``epsilon``, with ``Q(s, a)`` of every copy (the greedy
        choice computed it anyway)."""
        return self.act(obs, self.epsilon, rng, masks)

    def load_acting_state(self, state: dict[str, Any]) -> None:
        """Act as the learner's :meth:`DQNLearner.acting_state` says (an env runner's copy)."""
        assert isinstance(self.q, nn.Module)
        self.q.load_state_dict(torch_state(state["online"]))
        if self.obs_norm is not None:
            self.obs_norm.load_state_dict(state["obs_norm"])
        self.epsilon = state["epsilon"]


@dataclass(frozen=True)
class RunnerPolicy:
    """What builds an env runner's :class:`EpsilonGreedy` (sent to the runners)."""

    config: DQNConfig
    spec: dict[str, Any]

    def __call__(self) -> EpsilonGreedy:
        q = q_network(self.config, self.spec)
        obs_norm = (
            ObsNormalizer(tuple(self.spec["obs_shape"])) if self.config.normalize_obs else None
        )
        return EpsilonGreedy(q, self.spec["n_actions"], obs_norm)


def q_network(config: DQNConfig, spec: dict[str, Any]) -> QNetwork:
    """The Q network of a :attr:`DQNLearner.spec`: an MLP, a Nature CNN for images, or the
    per-key encoder of a ``Dict`` observation (:mod:`rlx.core.observations`) and an MLP."""
    obs_shape, dtype = tuple(spec["obs_shape"]), np.dtype(spec["obs_dtype"])
    encoder = None
    if spec.get("observation") is not None:
        encoder = observation_encoder(ObservationLayout.of_spec(spec["observation"], obs_shape[0]))
    return QNetwork(
        obs_shape, dtype, spec["n_actions"], config.hidden_sizes, config.dueling, encoder
    )


# ============================================================================ the learner
class DQNLearner(ReplayLearner):
    """The online and target networks, the optimiser, the statistics and the schedules of
    DQN; its gradient step and the hooks of the off-policy loop."""

    def __init__(
        self,
        config: DQNConfig,
        obs_shape: tuple[int, ...],
        obs_dtype: Any,
        n_actions: int,
        device: torch.device | None = None,
        observation: list[dict[str, Any]] | None = None,
    ) -> None:
        self.config, self.n_actions = config, n_actions
        self.obs_shape, self.obs_dtype = tuple(obs_shape), np.dtype(obs_dtype)
        self.device = torch.device("cpu") if device is None else device
        # a Dict observation's layout (None: observations are stored as the env gives them)
        self.observation = None
        if observation is not None:
            self.observation = ObservationLayout.of_spec(observation, self.obs_shape[0])
        if config.normalize_obs and (
            is_image_space(obs_shape, obs_dtype)
            or (self.observation is not None and self.observation.has_images)
        ):
            raise ConfigError("normalize_obs is for vector observations, not uint8 images.")
        self.online = q_network(config, self.spec).to(self.device)
        self.target = copy.deepcopy(self.online).requires_grad_(False)
        self.params = list(self.online.parameters())
        self.optimizer = Adam(self.params, config.learning_rate, eps=1e-8)
        self.obs_norm = ObsNormalizer(obs_shape) if config.normalize_obs else None
        self.reward_scaler = (
            RewardScaler(config.num_envs, config.gamma) if config.scale_rewards else None
        )
        end = config.learning_rate_end
        self.learning_rate = LinearSchedule(
            config.learning_rate, config.learning_rate if end is None else end, config.total_steps
        )
        self.exploration = LinearSchedule(
            config.epsilon_start,
            config.epsilon_end,
            int(config.exploration_fraction * config.total_steps),
        )
        self._online_fn = torch.compile(self.online) if config.compile else self.online
        self._target_fn = torch.compile(self.target) if config.compile else self.target
        self.policy = EpsilonGreedy(self._online_fn, n_actions, self.obs_norm, self.device)

    @property
    def spec(self) -> dict[str, Any]:
        """What rebuilding the networks needs: the observations' shape and dtype, the actions
        (and a ``Dict`` observation's layout)."""
        spec = {
            "obs_shape": list(self.obs_shape),
            "obs_dtype": str(self.obs_dtype),
            "n_actions": self.n_actions,
        }
        if self.observation is not None:
            spec["observation"] = self.observation.spec
        return spec

    # ------------------------------------------------------------------ acting
    def begin_collection(self, step: int) -> None:
        """``epsilon`` decays linearly over the first ``exploration_fraction`` of training."""
        self.policy.epsilon = self.exploration(step)

    def explore(
        self,
        obs: np.ndarray,
        starts: np.ndarray,
        rng: np.random.Generator,
        masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        return self.policy.explore(obs, starts, rng, masks)

    def act(
        self,
        obs: np.ndarray,
        epsilon: float,
        rng: np.random.Generator,
        masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Epsilon-greedy actions and their ``Q(s, a)`` (:meth:`EpsilonGreedy.act`)."""
        return self.policy.act(obs, epsilon, rng, masks)

    def network_input(self, obs: np.ndarray) -> Tensor:
        """Observations as the network's input (normalised if configured)."""
        return self.policy.network_input(obs)

    def acting_state(self) -> dict[str, Any]:
        """The online network, the observation statistics and epsilon, for env runners."""
        norm = self.obs_norm
        return {
            "online": numpy_state(self.online.state_dict()),
            "obs_norm": None if norm is None else norm.state_dict(),
            "epsilon": self.policy.epsilon,
        }

    def update_statistics(self, transitions: Transitions) -> None:
        """The running statistics of what was stored: observations, discounted returns."""
        stored = transitions.stored
        if self.obs_norm is not None:
            self.obs_norm.update(transitions.obs[stored])
        if self.reward_scaler is not None:
            for t in range(len(stored)):
                done = transitions.terminated[t] | transitions.truncated[t]
                self.reward_scaler.update(transitions.rewards[t], done, stored[t])

    @property
    def value_scale(self) -> float:
        return self.reward_scaler.scale if self.reward_scaler is not None else 1.0

    def log_values(self) -> dict[str, float]:
        return {M.EPSILON: self.policy.epsilon}

    # ------------------------------------------------------------------ targets and update
    def begin_updates(self, step: int) -> None:
        """The step size decays linearly to ``learning_rate_end`` over training."""
        self.optimizer.lr = self.learning_rate(step)

    def minibatches(self, sample: ReplaySample, count: int) -> list[dict[str, Tensor]]:
        """Split one large replay sample into ``count`` minibatch tensors (one conversion)."""
        rewards = sample.rewards
        if self.reward_scaler is not None:
            rewards = self.reward_scaler(rewards)
        arrays = {
            "actions": sample.actions.astype(np.int64),
            "rewards": rewards,
            "discounts": sample.discounts,
            "terminated": sample.terminated,
        }
        if sample.next_masks is not None:
            arrays["next_masks"] = sample.next_masks
        whole = {
            "obs": self.network_input(sample.obs),
            "next_obs": self.network_input(sample.next_obs),
            **{k: torch.from_numpy(v).to(self.device) for k, v in arrays.items()},
        }
        size = self.config.batch_size
        return [{k: v[i * size : (i + 1) * size] for k, v in whole.items()} for i in range(count)]

    def update(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        """One gradient step on ``(y - Q(s, a; theta))**2`` (or its Huber loss); with masks
        the max over next actions (or the online argmax) takes only the valid ones."""
        cfg = self.config
        n = batch["obs"].shape[0]
        next_masks = batch.get("next_masks")
        if cfg.double:
            # one online pass over s and s' (cheaper than two small ones); s' only picks a'
            q_both = self._online_fn(torch.cat([batch["obs"], batch["next_obs"]]))
            q_all, next_q_online = q_both[:n], q_both[n:].detach()
        else:
            q_all = self._online_fn(batch["obs"])
        with torch.no_grad():
            next_q_target = self._target_fn(batch["next_obs"])
            if cfg.double:
                y = double_q_target(
                    batch["rewards"], batch["discounts"], mask_q(next_q_online, next_masks),
                    next_q_target, batch["terminated"],
                )  # fmt: skip
            else:
                y = q_learning_target(
                    batch["rewards"], batch["discounts"], mask_q(next_q_target, next_masks),
                    batch["terminated"],
                )  # fmt: skip
        q = q_all.gather(1, batch["actions"][:, None]).squeeze(1)
        loss = F.smooth_l1_loss(q, y) if cfg.loss == "huber" else F.mse_loss(q, y)
        grad_norm = gradient_step(self.optimizer, loss, self.params, cfg.max_grad_norm or None)
        with torch.no_grad():
            return {
                M.LOSS: loss.detach(),
                M.TD_ERROR: (y - q).abs().mean(),
                M.Q_MEAN: q.mean(),
                M.GRAD_NORM: grad_norm,
            }

    def end_step(self, previous: int, step: int) -> None:
        """Sync the target network each time the count passes a multiple of ``sync_every``."""
        if step // self.config.sync_every > previous // self.config.sync_every:
            self.sync_target()

    def sync_target(self) -> None:
        """``theta^- <- tau theta + (1 - tau) theta^-``."""
        with torch.no_grad():
            online: list[Tensor] = list(self.online.parameters())
            target: list[Tensor] = list(self.target.parameters())
            if self.config.tau >= 1.0:
                torch._foreach_copy_(target, online)
            else:
                torch._foreach_lerp_(target, online, self.config.tau)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "online": self.online.state_dict(),
            "target": self.target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "spec": self.spec,
        }
        if self.obs_norm is not None:
            state["obs_norm"] = self.obs_norm.state_dict()
        if self.reward_scaler is not None:
            state["reward_scaler"] = self.reward_scaler.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.online.load_state_dict(state["online"])
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.obs_norm is not None:
            self.obs_norm.load_state_dict(state["obs_norm"])
        if self.reward_scaler is not None:
            self.reward_scaler.load_state_dict(state["reward_scaler"])


# ============================================================================ the loop's view
@dataclass(frozen=True)
class DQNMethod:
    """DQN as :func:`rlx.core.off_policy.train_off_policy` sees it: discrete actions stored
    as integers, observations as the env gives them (uint8 images stay uint8), n-step
    windows, clipped rewards."""

    name: str = "dqn"

    def layout(
        self, config: DQNConfig, obs_space: Any, action_space: Any, env_id: str
    ) -> ReplayLayout:
        import gymnasium as gym

        if isinstance(action_space, (gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
            raise EnvError(
                f"DQN needs Discrete actions; {env_id} has {action_space}; try {FACTORED_ACTIONS}."
            )
        n_actions = require_discrete_actions(action_space, "DQN", env_id, "SAC, TD3 or PPO")
        flatten = None
        if isinstance(obs_space, gym.spaces.Dict):  # stored as one float vector
            observation = ObservationLayout.of_space(obs_space, "DQN", env_id)
            obs_shape, obs_dtype = (observation.dim,), np.dtype(np.float32)
            flatten = observation.flatten
        else:
            obs_shape, obs_dtype = tuple(obs_space.shape), np.dtype(obs_space.dtype)
        spec = {"obs_shape": list(obs_shape), "obs_dtype": str(obs_dtype), "n_actions": n_actions}
        if flatten is not None:
            spec["observation"] = observation.spec
        return ReplayLayout(
            obs_shape, obs_dtype, n_step=config.n_step,
            rewards=functools.partial(clipped_rewards, bound=config.reward_clip), spec=spec,
            flatten=flatten,
        )  # fmt: skip

    def learner(self, config: DQNConfig, layout: ReplayLayout, device: torch.device) -> DQNLearner:
        spec = layout.spec
        return DQNLearner(
            config, layout.obs_shape, layout.obs_dtype, spec["n_actions"], device,
            spec.get("observation"),
        )  # fmt: skip

    def agent(
        self, learner: DQNLearner, layout: ReplayLayout, env_id: str, config: DQNConfig
    ) -> DQNAgent:
        return DQNAgent(learner, env_id, config.seed)

    def actor(self, config: DQNConfig, layout: ReplayLayout) -> RunnerPolicy:
        return RunnerPolicy(config, layout.spec)


METHOD = DQNMethod()


# ============================================================================ the agent
class DQNAgent:
    """A trained DQN: greedy in its Q network, or epsilon_end-greedy with deterministic=False.

    ``action_mask`` (True: valid; ``[B, n]`` for a batch) restricts the choice to valid
    actions (``Q = -inf`` elsewhere)."""

    def __init__(self, learner: DQNLearner, env_id: str, seed: int = 0) -> None:
        self.learner, self.env_id, self.config = learner, env_id, learner.config
        self.rng = np.random.default_rng(seed)
        self.run_dir = None

    def q_values(self, obs: np.ndarray) -> np.ndarray:
        """``Q(s, .)`` for a batch of observations ``[B, *obs_shape]`` -> ``[B, A]``."""
        with torch.inference_mode():
            x = self.learner.network_input(self.stored(obs))
            return self.learner.online(x).cpu().numpy()

    def stored(self, obs: Any) -> np.ndarray:
        """Observations as the replay stored them (a ``Dict`` flattened into one vector)."""
        if self.learner.observation is not None:
            return self.learner.observation.flatten(obs)
        return np.asarray(obs, dtype=self.learner.obs_dtype)

    def act_batch(
        self, obs: Any, deterministic: bool = True, action_mask: np.ndarray | None = None
    ) -> np.ndarray:
        """Actions for a batch of observations (one forward pass)."""
        epsilon = 0.0 if deterministic else self.config.epsilon_end
        masks = None if action_mask is None else np.asarray(action_mask, dtype=bool)
        actions, _ = self.learner.act(self.stored(obs), epsilon, self.rng, masks)
        return actions

    def act(
        self, obs: Any, deterministic: bool = True, action_mask: np.ndarray | None = None
    ) -> int:
        """The action for one observation."""
        if self.learner.observation is not None:
            batch = self.learner.observation.batch_of_one(obs)
        else:
            batch = np.asarray(obs, dtype=self.learner.obs_dtype)[None]
        mask = None if action_mask is None else np.asarray(action_mask, dtype=bool)[None]
        return int(self.act_batch(batch, deterministic, mask)[0])

    def __repr__(self) -> str:
        return f"DQNAgent(env={self.env_id}, double={self.config.double})"


# ============================================================================ train, load, register
def train(
    config: DQNConfig, env: Any, run: RunHandle, *, remote: EnvRunners | None = None
) -> DQNAgent:
    """Train DQN on ``env`` inside an open :class:`rlx.runs.Run` (the off-policy loop of
    :func:`rlx.core.off_policy.train_off_policy` around :class:`DQNLearner`); returns the
    agent. ``remote``: the Ray env runners of ``config.runners`` (built by rlx.train)."""
    return train_off_policy(METHOD, config, env, run, remote)


def load(config: DQNConfig, env_id: str, state: dict) -> DQNAgent:
    """The greedy agent of a checkpoint (``rlx.load(run_dir)``), acting on the CPU (the
    checkpoint was read there, whatever device trained it)."""
    spec = state["learner"]["spec"]
    learner = DQNLearner(
        config, tuple(spec["obs_shape"]), np.dtype(spec["obs_dtype"]), int(spec["n_actions"]),
        observation=spec.get("observation"),
    )  # fmt: skip
    learner.load_state_dict(state["learner"])
    return DQNAgent(learner, env_id, config.seed)


registry.register(
    registry.Algorithm(
        name="dqn",
        config=DQNConfig,
        train=train,
        load=load,
        presets=PRESETS,
        renamed={"lr": "learning_rate", "lr_end": "learning_rate_end"},
        remote="env-runners",
    )
)
