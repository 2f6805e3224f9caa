"""Rollouts for the on-policy loop, collected in this process or by env runners.

- :class:`Collector` steps ``num_envs`` copies of an env with the current policy into a
  :class:`~rlx.core.buffers.RolloutBuffer` (``T`` steps each), keeps the episode statistics,
  the observation normalisation and the env state for checkpoints.
- :class:`RolloutWorker` is a :class:`Collector` inside an env runner
  (:mod:`rlx.core.runners`), acting with a copy of the learner's policy for ``T`` vector
  steps a round; :class:`RunnerCollector` lays the runners' fragments
  (:class:`RolloutFragment`) side by side, as one collector of ``runners x num_envs`` copies.

Either way a collection fills the learner's rollout buffer and returns the env-step count
after it and the :class:`Episodes` that ended. A policy with state-dependent exploration
(gSDE, :mod:`rlx.core.sde`) gets new exploration matrices, one per env copy, at the start of
every collection and, with ``sde_sample_freq = n >= 1``, every ``n`` vector steps of it (SB3's
cadence: ``n`` steps of each copy). Steps count real transitions over all env
copies: under Gymnasium's NEXT_STEP autoreset the step after a done only resets that copy; its
row in the buffer is marked ``valid=False`` and is not counted. The off-policy side is laid
out alike (:mod:`rlx.core.transitions`).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import numpy as np

from rlx.core.buffers import RolloutBuffer
from rlx.core.env_state import env_state, restore_env_state
from rlx.core.envs import env_spaces, make_vec_env
from rlx.core.masks import mask_reader
from rlx.core.normalize import ObsNormalizer, RewardScaler
from rlx.core.observations import ObservationLayout
from rlx.core.policies import ActorCritic, action_kind, describe_action_space, mask_size
from rlx.core.runners import EnvRunners, RunnerGroup, numpy_state, torch_state
from rlx.core.sde import refuse_discrete_sde
from rlx.core.seeding import env_seed
from rlx.errors import ConfigError


# ---------------------------------------------------------------------------- what is collected
class Episodes(NamedTuple):
    """Training episodes that finished during one collection (arrays over episodes)."""

    steps: np.ndarray  # env steps (all copies) done when each ended
    returns: np.ndarray
    lengths: np.ndarray


_NO_EPISODES = Episodes(np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64))


# ---------------------------------------------------------------------------- in this process
class Collector:
    """``num_envs`` copies of an env, stepped together by the current policy.

    Args:
        env: a Gymnasium id or env object.
        num_envs: copies stepped as one vector env (Gymnasium's native vector mode if any).
        seed: seeds the envs' first reset.
        algo: for error messages.
        env_id: for error messages.
        normalize_obs: normalise observations by running mean and std (None: for ``Box``
            actions, where observation scales vary most, as SB3's zoo does for MuJoCo; never
            for observations with images, whose pixels the CNN scales by 1/255).
        reward_scale_gamma: scale rewards by the running std of the discounted return with
            this gamma (None: raw rewards).
        use_sde: the policy explores with gSDE; refused (:class:`ConfigError`) for actions
            other than a ``Box``.
        sde_sample_freq: with gSDE, new exploration matrices every this many vector steps
            of a collection too (-1: only at its start).

    The statistics stay fixed during a collection and are updated after it, so every row of a
    rollout, and the log-probabilities of the policy that chose its action, see one
    normalisation. Observations are flattened by an
    :class:`~rlx.core.observations.ObservationLayout` (a ``Dict`` key by key); a lone image
    stays uint8. Where the env gives action masks (:mod:`rlx.core.masks`) each step's are
    stored beside it and passed to the policy. Episode returns and lengths are summed once
    per rollout from its arrays (:meth:`_finished_episodes`), not per step: for a cheap env a
    per-step tracker (:class:`~rlx.core.envs.EpisodeTracker`, which the off-policy collectors
    use one step at a time) costs a good part of the env step itself.
    """

    def __init__(
        self,
        env: Any,
        num_envs: int,
        seed: int,
        *,
        algo: str,
        env_id: str,
        normalize_obs: bool | None = None,
        reward_scale_gamma: float | None = None,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
    ) -> None:
        self.vec = make_vec_env(env, num_envs)
        self.num_envs = num_envs
        self.sde_sample_freq = sde_sample_freq
        try:
            spaces = self.vec.single_observation_space, self.vec.single_action_space
            self.layout, self.actions, self.normalizer = collector_spaces(
                *spaces, algo, env_id, normalize_obs, use_sde=use_sde
            )
            self.raw_obs, infos = self.vec.reset(seed=seed)
            self.read_masks = mask_reader(self.vec, infos, mask_size(self.actions))
        except Exception:
            self.vec.close()
            raise
        self.obs_dim = self.layout.dim
        self.reward_scaler = (
            RewardScaler(num_envs, reward_scale_gamma) if reward_scale_gamma is not None else None
        )
        # the unfinished episode of each copy: return and length so far
        self.episode_return = np.zeros(num_envs, dtype=np.float64)
        self.episode_length = np.zeros(num_envs, dtype=np.int64)
        self.masks = None if self.read_masks is None else self.read_masks(infos)
        self.after_done = np.zeros(num_envs, dtype=bool)
        self.last_obs = self.observe(self.raw_obs)

    def new_buffer(self, steps: int) -> RolloutBuffer:
        return rollout_buffer(self, steps, masked=self.read_masks is not None)

    def observe(self, raw: Any) -> np.ndarray:
        """Observations as the policy sees them: flat, normalised if asked."""
        return self.normalized(self.layout.flatten(raw))

    def normalized(self, flat: np.ndarray) -> np.ndarray:
        """Flat observations normalised if asked; float32, but a lone image stays uint8."""
        if self.normalizer is not None:
            return self.normalizer(flat)
        return flat.astype(observation_dtype(self.layout), copy=False)

    def collect(
        self,
        policy: ActorCritic,
        buffer: RolloutBuffer,
        rng: np.random.Generator,
        step: int,
        *,
        until_every_copy_done: bool = False,
    ) -> tuple[int, Episodes]:
        """Fill ``buffer`` with ``T`` vector steps; returns the env-step count after them
        (``step`` is the count before) and the episodes that finished.

        With ``until_every_copy_done`` the collection stops early, once every copy has ended
        an episode in it (Monte Carlo methods need whole episodes); ``buffer.t`` says how many
        steps were filled. Env steps count transitions: the reset-only steps of NEXT_STEP
        autoreset are not counted (as Stable-Baselines3's same-step reset has none). A gSDE
        policy draws its exploration matrices from ``rng`` at the start and every
        ``sde_sample_freq`` vector steps (module docstring).
        """
        buffer.reset()
        raw_rows, raw_rewards = [], []
        ended = np.zeros(self.num_envs, dtype=bool)
        masked = {} if self.masks is None else {"masks": self.masks}
        if policy.use_sde:
            policy.reset_noise(rng, self.num_envs)
        while not buffer.full and not (until_every_copy_done and ended.all()):
            if policy.use_sde and _resample_due(buffer.t, self.sde_sample_freq):
                policy.reset_noise(rng, self.num_envs)
            flat = self.layout.flatten(self.raw_obs)
            obs = self.normalized(flat)
            raw_rows.append(flat)
            actions = policy.sample(obs, rng, self.masks)
            self.raw_obs, rewards, terminated, truncated, infos = self.vec.step(
                policy.env_action(actions)
            )
            valid = ~self.after_done  # False: this step only reset a copy that was done
            raw_rewards.append(rewards)
            if self.reward_scaler is not None:
                self.reward_scaler.update(rewards, terminated | truncated, valid)
                rewards = self.reward_scaler(rewards)
            buffer.add(
                obs=obs,
                actions=actions,
                rewards=rewards,
                terminated=terminated,
                truncated=truncated,
                valid=valid,
                **masked,
            )
            if self.read_masks is not None:
                self.masks = masked["masks"] = self.read_masks(infos)
            self.after_done = terminated | truncated
            if until_every_copy_done:
                ended |= self.after_done
        # the bootstrap observation, seen through the same statistics as the rollout
        self.last_obs = self.observe(self.raw_obs)
        if self.normalizer is not None:
            self.normalizer.update(np.concatenate(raw_rows).reshape(-1, self.obs_dim))
        T = buffer.t
        ends = (buffer.terminated[:T] | buffer.truncated[:T]) & buffer.valid[:T]
        return self._finished_episodes(np.stack(raw_rewards), buffer.valid[:T], ends, step)

    def _finished_episodes(
        self, rewards: np.ndarray, valid: np.ndarray, ends: np.ndarray, step: int
    ) -> tuple[int, Episodes]:
        """The episodes that ended in a rollout (``[T, N]`` arrays), in one vectorised pass.

        Per copy, running sums of reward and of steps start from the unfinished episode
        carried in; an episode's return is the sum at its end minus the sum at the copy's
        previous end in this rollout (or 0). What follows a copy's last end is carried out.
        """
        if not ends.any():  # common with short rollouts: only the running sums move
            self.episode_return = self.episode_return + np.where(valid, rewards, 0.0).sum(axis=0)
            self.episode_length = self.episode_length + valid.sum(axis=0)
            return step + int(valid.sum()), _NO_EPISODES
        counted = step + np.cumsum(valid.sum(axis=1))  # env steps done after each vector step
        ret = self.episode_return + np.cumsum(np.where(valid, rewards, 0.0), axis=0)
        length = self.episode_length + np.cumsum(valid, axis=0)
        t, n = np.nonzero(ends)  # in time order
        per_copy = np.lexsort((t, n))  # grouped by copy, each group in time order
        tc, nc = t[per_copy], n[per_copy]
        first = np.ones(len(nc), dtype=bool)
        first[1:] = nc[1:] != nc[:-1]
        ret_end, len_end = ret[tc, nc], length[tc, nc]
        returns = ret_end - np.where(first, 0.0, np.roll(ret_end, 1))
        lengths = len_end - np.where(first, 0, np.roll(len_end, 1))
        base_ret, base_len = np.zeros_like(self.episode_return), np.zeros_like(self.episode_length)
        base_ret[nc], base_len[nc] = ret_end, len_end  # the copy's last end wins
        self.episode_return, self.episode_length = ret[-1] - base_ret, length[-1] - base_len
        chronological_returns, chronological_lengths = (
            np.empty_like(returns),
            np.empty_like(lengths),
        )
        chronological_returns[per_copy], chronological_lengths[per_copy] = returns, lengths
        episodes = Episodes(counted[t], chronological_returns, chronological_lengths)
        return int(counted[-1]), episodes

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        return {
            "env": env_state(self.vec),
            "raw_obs": copied(self.raw_obs),
            "masks": None if self.masks is None else self.masks.copy(),
            "after_done": self.after_done.copy(),
            "episode_return": self.episode_return.copy(),
            "episode_length": self.episode_length.copy(),
            "normalizer": None if self.normalizer is None else self.normalizer.state_dict(),
            "reward_scaler": (
                None if self.reward_scaler is None else self.reward_scaler.state_dict()
            ),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["env"] is not None:
            restore_env_state(self.vec, state["env"])
            self.raw_obs = copied(state["raw_obs"])
            if state.get("masks") is not None:
                self.masks = state["masks"].copy()
            self.after_done = state["after_done"].copy()
            self.episode_return = state["episode_return"].copy()
            self.episode_length = state["episode_length"].copy()
        # else the env's state could not be saved: continue from the fresh reset
        if self.normalizer is not None:
            self.normalizer.load_state_dict(state["normalizer"])
        if self.reward_scaler is not None:
            self.reward_scaler.load_state_dict(state["reward_scaler"])
        self.last_obs = self.observe(self.raw_obs)

    def stats(self) -> dict[str, float]:
        """What the collection itself reports in an update's log row: nothing in one process
        (Ray env runners report their restarts)."""
        return {}

    def close(self) -> None:
        self.vec.close()


def _resample_due(t: int, sde_sample_freq: int) -> bool:
    """Whether gSDE draws new exploration matrices before vector step ``t`` (from 0) of a
    collection, beyond the draw at its start: every ``sde_sample_freq`` steps when that is
    >= 1, never with -1."""
    return sde_sample_freq > 0 and t > 0 and t % sde_sample_freq == 0


def collector_spaces(
    obs_space: Any,
    action_space: Any,
    algo: str,
    env_id: str,
    normalize_obs: bool | None,
    *,
    use_sde: bool = False,
) -> tuple[ObservationLayout, dict[str, Any], ObsNormalizer | None]:
    """The observation layout, the actions (:func:`describe_action_space`) and the
    observation normaliser a collector of these spaces uses (module docstring of
    :class:`Collector` for ``normalize_obs``); ``use_sde`` on actions other than a ``Box``
    is refused here, before anything runs."""
    layout = ObservationLayout.of_space(obs_space, algo, env_id)
    actions = describe_action_space(action_space, algo, env_id)
    if use_sde:
        refuse_discrete_sde(action_kind(actions), algo, env_id, action_space)
    if normalize_obs and layout.has_images:
        raise ConfigError(
            f"{algo}: normalize_obs is for vector observations; {env_id}'s "
            f"{', '.join(layout.image_keys())} are images (the CNN scales their pixels by "
            "1/255). Leave normalize_obs unset."
        )
    if normalize_obs is None:
        normalize_obs = action_kind(actions) == "gaussian" and not layout.has_images
    normalizer = ObsNormalizer((layout.dim,)) if normalize_obs else None
    return layout, actions, normalizer


def observation_dtype(layout: ObservationLayout) -> Any:
    """How a rollout stores flat observations: a lone image as its uint8 pixels (a quarter of
    float32's memory), everything else as float32."""
    return np.uint8 if layout.has_images and not layout.is_dict else np.float32


def rollout_buffer(collector: Any, steps: int, *, masked: bool) -> RolloutBuffer:
    """An empty rollout buffer of ``steps`` vector steps for a collector's spaces."""
    kind, actions = action_kind(collector.actions), collector.actions
    if kind == "categorical":
        shape: tuple[int, ...] = ()
    elif kind == "factored":
        shape = (len(actions["nvec"]),)
    else:
        shape = (int(actions["binary"]),) if kind == "binary" else (len(actions["low"]),)
    return RolloutBuffer(
        steps,
        collector.num_envs,
        (collector.obs_dim,),
        observation_dtype(collector.layout),
        action_shape=shape,
        action_dtype=np.int64 if kind in ("categorical", "factored") else np.float32,
        mask_size=mask_size(actions) if masked else None,
    )


def copied(obs: Any) -> Any:
    """A copy of a vector env's observations (a dict of arrays for a ``Dict`` space)."""
    if isinstance(obs, dict):
        return {key: np.array(value) for key, value in obs.items()}
    return np.array(obs)


# ---------------------------------------------------------------------------- in env runners
@dataclass
class RolloutFragment:
    """What one env runner returns: ``[T, N, ...]`` arrays, as its rollout buffer holds."""

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    valid: np.ndarray
    last_obs: np.ndarray  # [N, obs_dim]: the bootstrap observation, normalised as the rollout
    raw_obs: np.ndarray | None  # the raw observations, for the learner's running statistics
    episode_returns: np.ndarray  # episodes that ended, in the order of np.nonzero(ends)
    episode_lengths: np.ndarray
    masks: np.ndarray | None = None  # [T, N, n]: the valid actions, where the env gives them


class _BatchRecorder(ObsNormalizer):
    """A runner's observation normaliser: uses the learner's statistics, loaded each round,
    and keeps each collection's raw observations for the learner instead of merging them."""

    batch: np.ndarray | None = None

    def update(self, obs: np.ndarray) -> None:
        self.batch = obs


class RolloutWorker:
    """Inside an env runner: a :class:`Collector` of ``num_envs`` copies and a copy of the
    policy, rebuilt from ``architecture``; one ``num_steps`` fragment per round."""

    def __init__(
        self,
        seed_seq: np.random.SeedSequence,
        *,
        env: Any,
        num_envs: int,
        num_steps: int,
        architecture: dict[str, Any],
        **collector_options: Any,
    ) -> None:
        self.collector = Collector(env, num_envs, env_seed(seed_seq), **collector_options)
        if self.collector.normalizer is not None:
            self.collector.normalizer = _BatchRecorder((self.collector.obs_dim,))
        self.policy = ActorCritic(**architecture)
        self.rng = np.random.default_rng(seed_seq)
        self.buffer = self.collector.new_buffer(num_steps)

    def collect(self, weights: dict[str, Any]) -> RolloutFragment:
        """A fragment collected with ``weights`` (the policy's and the normaliser's)."""
        self.policy.load_state_dict(torch_state(weights["policy"]))
        # __init__ made it a _BatchRecorder
        normalizer = cast("_BatchRecorder | None", self.collector.normalizer)
        if normalizer is not None:
            normalizer.load_state_dict(weights["normalizer"])
        _, episodes = self.collector.collect(self.policy, self.buffer, self.rng, 0)
        b = self.buffer  # the arrays are copied out when they leave this process
        return RolloutFragment(
            b.obs, b.actions, b.rewards, b.terminated, b.truncated, b.valid,
            self.collector.last_obs, None if normalizer is None else normalizer.batch,
            episodes.returns, episodes.lengths, b.masks,
        )  # fmt: skip


class RunnerCollector:
    """:class:`Collector`'s interface, collected by ``runners`` env runners of ``num_envs``
    copies each (:mod:`rlx.core.runners`): to the learner it is one collector of
    ``runners x num_envs`` copies. Use it as a context manager (it stops the runners).

    Runner ``r``'s fragment fills columns ``r N .. (r + 1) N - 1`` of the rollout buffer, so
    with ``K`` runners the buffer is exactly that of one process with ``K N`` copies, and GAE
    and the update do not change. Log-probabilities and values are recomputed by the learner
    in one batched pass, as in one process (the policy did not change while the runners
    collected). A fragment that was dropped (its runner died) leaves its columns invalid;
    episodes are dated by the count over all columns.

    The observation statistics are the learner's: sent with the weights, merged from the
    runners' raw observations after each round. Reward scaling (``reward_scale_gamma``) runs
    in each runner on its own statistics, which restart with the runner. A checkpoint holds no
    env state (the envs live in the runners), so a resume starts fresh episodes and may use
    another number of runners.
    """

    def __init__(
        self,
        remote: EnvRunners,
        env: Any,
        num_envs: int,
        seed: int,
        *,
        runners: int,
        address: str | None,
        algo: str,
        env_id: str,
        normalize_obs: bool | None = None,
        reward_scale_gamma: float | None = None,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
    ) -> None:
        self.layout, self.actions, self.normalizer = collector_spaces(
            *env_spaces(env), algo, env_id, normalize_obs, use_sde=use_sde
        )
        self.obs_dim = self.layout.dim
        normalize_obs = self.normalizer is not None
        self.masked = False  # known from the first round's fragments
        self.remote, self.address = remote, address
        self.runners, self.envs_per_runner, self.seed = runners, num_envs, seed
        self.num_envs = runners * num_envs
        self.reward_scale_gamma = reward_scale_gamma
        self.last_obs = np.zeros((self.num_envs, self.obs_dim), dtype=np.float32)
        self.options = {
            "env": env, "num_envs": num_envs, "algo": algo, "env_id": env_id,
            "normalize_obs": normalize_obs, "reward_scale_gamma": reward_scale_gamma,
            "use_sde": use_sde, "sde_sample_freq": sde_sample_freq,
        }  # fmt: skip
        self.group: RunnerGroup | None = None
        self.assemble_s = 0.0  # the last round's assembly into the buffer (for benchmarks)

    def new_buffer(self, steps: int) -> RolloutBuffer:
        # whether the env gives masks is known once the runners have stepped it: a buffer
        # without masks takes them on the first fragment that has them (_assemble)
        return rollout_buffer(self, steps, masked=False)

    def collect(
        self,
        policy: ActorCritic,
        buffer: RolloutBuffer,
        rng: np.random.Generator,
        step: int,
        *,
        until_every_copy_done: bool = False,
    ) -> tuple[int, Episodes]:
        """Every runner's fragment with the current policy, in ``buffer``; returns the step
        count after them and the episodes that ended (``rng`` is unused: runners draw their
        actions, and gSDE's exploration matrices, from their own generators). The runners
        start on the first call."""
        if until_every_copy_done:
            raise ConfigError(
                "collecting whole episodes runs in one process; leave runners out (None)."
            )
        if self.group is None:
            options = {**self.options, "num_steps": buffer.steps}
            options["architecture"] = policy.architecture
            self.group = self.remote.start(
                RolloutWorker, options, count=self.runners, seed=self.seed, start_step=step,
                address=self.address,
            )  # fmt: skip
        normalizer = None if self.normalizer is None else self.normalizer.state_dict()
        payload = {"policy": numpy_state(policy.state_dict()), "normalizer": normalizer}
        fragments, _ = self.group.run_some(payload)
        t0 = time.perf_counter()
        out = self._assemble(fragments, buffer, step)
        self.assemble_s = time.perf_counter() - t0
        return out

    def _assemble(
        self, fragments: list[RolloutFragment | None], buffer: RolloutBuffer, step: int
    ) -> tuple[int, Episodes]:
        """Runner ``r``'s fragment into columns ``r N .. (r + 1) N - 1``."""
        T, N = buffer.steps, self.envs_per_runner
        buffer.reset()
        buffer.valid[:] = False
        buffer.terminated[:] = buffer.truncated[:] = False
        buffer.rewards[:] = 0.0
        ends = np.zeros((T, self.num_envs), dtype=bool)
        returns = np.zeros((T, self.num_envs))
        lengths = np.zeros((T, self.num_envs), dtype=np.int64)
        raw = []
        for r, fragment in enumerate(fragments):
            if fragment is None:
                continue
            cols = slice(r * N, (r + 1) * N)
            for name in ("obs", "actions", "rewards", "terminated", "truncated", "valid"):
                getattr(buffer, name)[:, cols] = getattr(fragment, name)
            if fragment.masks is not None:
                if buffer.masks is None:
                    buffer.masks = np.ones((T, self.num_envs, fragment.masks.shape[-1]), bool)
                buffer.masks[:, cols] = fragment.masks
            self.last_obs[cols] = fragment.last_obs
            t, n = np.nonzero((fragment.terminated | fragment.truncated) & fragment.valid)
            ends[t, r * N + n] = True
            returns[t, r * N + n] = fragment.episode_returns
            lengths[t, r * N + n] = fragment.episode_lengths
            if fragment.raw_obs is not None:
                raw.append(fragment.raw_obs)
        buffer.t = T
        if self.normalizer is not None and raw:
            self.normalizer.update(np.concatenate(raw))
        counted = step + np.cumsum(buffer.valid.sum(axis=1))
        t, c = np.nonzero(ends)
        return int(counted[-1]), Episodes(counted[t], returns[t, c], lengths[t, c])

    def stats(self) -> dict[str, float]:
        """For the update's log row: what the runners report (restarts, nodes)."""
        return {} if self.group is None else self.group.stats()

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """What a :class:`Collector` checkpoint holds, with no env state (``env`` None)."""
        scaler = None
        if self.reward_scale_gamma is not None:  # per runner; a fresh one for a local resume
            scaler = RewardScaler(self.envs_per_runner, self.reward_scale_gamma).state_dict()
        return {
            "env": None,
            "normalizer": None if self.normalizer is None else self.normalizer.state_dict(),
            "reward_scaler": scaler,
            "runners": self.runners,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.normalizer is not None and state.get("normalizer") is not None:
            self.normalizer.load_state_dict(state["normalizer"])

    def close(self) -> None:
        if self.group is not None:
            self.group.close()
            self.group = None

    def __enter__(self) -> RunnerCollector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_collector(
    config: Any, env: Any, env_id: str, algo: str, remote: EnvRunners | None = None
) -> contextlib.AbstractContextManager[Any]:
    """The collector a config asks for, as a context manager: a :class:`Collector` in this
    process, or with ``config.runners`` a :class:`RunnerCollector` on the env runners
    ``remote`` starts (they stop with the context)."""
    options = {
        "algo": algo,
        "env_id": env_id,
        "normalize_obs": config.normalize_obs,
        "reward_scale_gamma": config.gamma if getattr(config, "normalize_rewards", False) else None,
        "use_sde": getattr(config, "use_sde", False),
        "sde_sample_freq": getattr(config, "sde_sample_freq", -1),
    }
    if getattr(config, "runners", None) is None:
        return contextlib.nullcontext(Collector(env, config.num_envs, config.seed, **options))
    if remote is None:
        raise ConfigError(
            f"{algo}: runners={config.runners} needs the Ray env runners that rlx.train builds "
            "(rlx.distributed); train through rlx.train or rlx train, or leave runners out."
        )
    return RunnerCollector(
        remote, env, config.num_envs, config.seed, runners=config.runners,
        address=config.ray_address, **options,
    )  # fmt: skip


__all__ = [
    "Collector",
    "Episodes",
    "RolloutFragment",
    "RolloutWorker",
    "RunnerCollector",
    "collector_spaces",
    "make_collector",
    "rollout_buffer",
]
