"""Env runners as Ray actors: collect in parallel, learn in one place.

Each runner is a Ray actor holding a vector env of ``num_envs`` copies and a copy of the policy.
Once per update the learner puts its weights in Ray's object store (``ray.put``, once) and hands
every runner the reference; each runner collects a fragment and returns it:

- **on-policy** (PPO, A2C): ``T = num_steps`` vector steps of ``(s, a, r, terminated,
  truncated, valid)``, the bootstrap observation and the episodes that ended.
  :class:`RemoteCollector` writes runner ``r``'s fragment into columns ``r N .. (r + 1) N - 1``
  of the learner's rollout buffer, so with ``K`` runners the buffer is exactly that of one
  process with ``K N`` env copies, and GAE and the update do not change. Log-probabilities and
  values are recomputed by the learner in one batched pass, as in one process (the policy did
  not change while the runners collected).
- **off-policy** (DQN): ``fragment_steps`` epsilon-greedy vector steps of transitions for the
  replay buffer (:class:`TransitionCollector`).

Steps are exact: only valid transitions count, and an episode's step is the learner's count
at the vector step it ended, over all runners' copies, as in one process.

**Seeds.** Runner ``i`` gets child ``i`` of ``numpy.random.SeedSequence((seed, start_step))``:
its env seed and its action generator come from that child, so no two runners collect the same
episodes and the same run seed repeats the same data. A resumed run (``start_step > 0``) draws a
fresh family, so it does not replay the episodes of the run's start.

**Faults.** A runner that dies (``RayActorError``: killed, out of memory, node lost) is
replaced by a new actor seeded with the next child of the same sequence; its partial fragment
is dropped (its buffer columns are marked invalid for that update), one line goes to stderr and
the learner logs the run's ``runner_restarts`` so far. A runner that dies
:data:`MAX_CONSECUTIVE_DEATHS` times in a row ends the run with a :class:`TrainingError`.
"""

from __future__ import annotations

import dataclasses
import pickle
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx.core.envs import FinishedEpisodes, make_env, make_vec_env
from rlx.core.normalize import ObsNormalizer, RewardScaler
from rlx.core.on_policy import Collector, Episodes
from rlx.core.policies import ActorCritic, describe_action_space, observation_dim
from rlx.core.threads import set_torch_threads
from rlx.distributed.ray_runtime import RaySession, require_ray
from rlx.errors import ConfigError, TrainingError

RUNNER_RESTARTS = "runner_restarts"
"""Metric: runners restarted since the run (or its resume) began."""
RUNNER_NODES = "runner_nodes"
"""Metric: the Ray nodes the runners are on now (1 on one machine; more on a cluster)."""
MAX_CONSECUTIVE_DEATHS = 3
READY_TIMEOUT_S = 120.0
"""How long new runners may take to be placed and started before the run gives up."""


# ============================================================================ seeds
def seed_root(seed: int, start_step: int = 0) -> np.random.SeedSequence:
    """The seed sequence whose children seed a run's runners (a resume starts a new family)."""
    return np.random.SeedSequence((seed % 2**64, start_step))


def runner_seeds(seed: int, count: int, start_step: int = 0) -> list[np.random.SeedSequence]:
    """The seeds of runners ``0 .. count - 1`` of a run, one independent child each."""
    return seed_root(seed, start_step).spawn(count)


def env_seed(seed_seq: np.random.SeedSequence) -> int:
    """The integer a runner's envs are reset with, from its seed sequence."""
    return int(seed_seq.generate_state(1)[0])


def numpy_state(state: dict[str, Any]) -> dict[str, np.ndarray]:
    """A network's state as numpy arrays: Ray stores those without pickling (half the time of
    tensors for a small policy here)."""
    return {name: value.detach().numpy() for name, value in state.items()}


def torch_state(state: dict[str, np.ndarray]) -> dict[str, Any]:
    """:func:`numpy_state` back to tensors (copies: Ray's arrays are read-only views)."""
    import torch

    return {name: torch.tensor(value) for name, value in state.items()}


# ============================================================================ the pool
class RunnerActor:
    """What runs inside each Ray actor: a worker built from its seed, called once per update."""

    def __init__(self, worker_class: type, kwargs: dict[str, Any], seed_seq: Any) -> None:
        set_torch_threads(1)  # a runner is one core's work
        self.worker = worker_class(seed_seq, **kwargs)

    def ready(self) -> str:
        """The id of the Ray node this runner was placed on."""
        import ray

        return ray.get_runtime_context().get_node_id()

    def collect(self, boxed: list[Any], *args: Any) -> tuple[Any, float, float]:
        """The worker's result for the payload whose reference is ``boxed[0]`` (fetched here,
        so that the fetch can be timed), the fetch's seconds and the work's seconds."""
        import ray

        t0 = time.perf_counter()
        payload = ray.get(boxed[0])
        t1 = time.perf_counter()
        result = self.worker.collect(payload, *args)
        return result, t1 - t0, time.perf_counter() - t1


@dataclass
class RoundTiming:
    """Where the wall time of one round went (seconds; runner figures: the slowest one's)."""

    put_s: float = 0.0  # ray.put of the payload by the learner
    fetch_s: float = 0.0  # the runners' fetch of it from the object store
    work_s: float = 0.0  # the runners' own collection
    round_s: float = 0.0  # from the calls until every result is back

    @property
    def broadcast_s(self) -> float:
        """The weight broadcast: put once, fetched by every runner."""
        return self.put_s + self.fetch_s

    @property
    def return_s(self) -> float:
        """The calls and the fragments' return: dispatch, serialisation and transfer."""
        return max(self.round_s - self.fetch_s - self.work_s, 0.0)


class RunnerPool:
    """``count`` Ray actors, each running ``worker_class(seed_seq, **kwargs)``.

    :meth:`run` puts the payload in the object store once, calls every runner's worker with
    its reference and returns the results in runner order; a runner that died gives None and
    is replaced (see the module docstring). ``note`` says on stderr what became of the dead
    runner's work.
    """

    def __init__(
        self,
        worker_class: type,
        kwargs: dict[str, Any],
        count: int,
        seed: int,
        *,
        start_step: int = 0,
        label: str = "env runner",
        note: str = "its partial fragment was dropped",
    ) -> None:
        self.ray = require_ray(f"{label}s")
        self.worker_class, self.kwargs, self.label, self.note = worker_class, kwargs, label, note
        self.root = seed_root(seed, start_step)
        self.remote_class = self.ray.remote(num_cpus=1, scheduling_strategy="SPREAD")(RunnerActor)
        self.actors = [self._start(child) for child in self.root.spawn(count)]
        self.nodes = self._await_ready(self.actors)
        self.deaths = [0] * count
        self.restarts = 0
        self.timing = RoundTiming()

    def _start(self, seed_seq: np.random.SeedSequence) -> Any:
        try:
            return self.remote_class.remote(self.worker_class, self.kwargs, seed_seq)
        except (TypeError, AttributeError, pickle.PicklingError) as exc:
            raise ConfigError(
                f"cannot send the env to Ray {self.label}s ({type(exc).__name__}: {exc}); give "
                "the env as a Gymnasium id, or an env object that can be pickled."
            ) from exc

    def _await_ready(self, actors: Sequence[Any]) -> list[str]:
        """Wait for ``actors`` to start; the ids of the nodes they run on."""
        pending = [actor.ready.remote() for actor in actors]
        ready, late = self.ray.wait(pending, num_returns=len(pending), timeout=READY_TIMEOUT_S)
        if late:
            cpus = self.ray.cluster_resources().get("CPU", 0)
            self.close()
            raise ConfigError(
                f"only {len(ready)} of {len(pending)} Ray {self.label}s started within "
                f"{READY_TIMEOUT_S:.0f} s; each needs one CPU and the cluster has {cpus:g}: use "
                "fewer --runners, or add nodes."
            )
        try:
            return self.ray.get(pending)
        except self.ray.exceptions.RayError as exc:
            self.close()
            raise TrainingError(f"a Ray {self.label} could not start: {exc}") from exc

    def run(
        self,
        payload: Any,
        args: Sequence[tuple[Any, ...]] | None = None,
        slots: Sequence[int] | None = None,
    ) -> list[Any | None]:
        """Every runner's (or those in ``slots``) result for ``payload`` (an object or a
        reference from an earlier round) and its own ``args``; None where a runner died."""
        t0 = time.perf_counter()
        ref = payload if isinstance(payload, self.ray.ObjectRef) else self.ray.put(payload)
        t1 = time.perf_counter()
        slots = range(len(self.actors)) if slots is None else slots
        calls = [self.actors[i].collect.remote([ref], *(args[i] if args else ())) for i in slots]
        results: list[Any | None] = []
        fetch, work = [0.0], [0.0]
        for slot, call in zip(slots, calls, strict=True):
            try:
                result, fetch_s, work_s = self.ray.get(call)
            except self.ray.exceptions.RayActorError as exc:
                self._restart(slot, exc)
                results.append(None)
                continue
            self.deaths[slot] = 0
            results.append(result)
            fetch.append(fetch_s)
            work.append(work_s)
        self.timing = RoundTiming(t1 - t0, max(fetch), max(work), time.perf_counter() - t1)
        return results

    def _restart(self, slot: int, exc: Exception) -> None:
        self.deaths[slot] += 1
        self.restarts += 1
        self.ray.kill(self.actors[slot], no_restart=True)
        if self.deaths[slot] > MAX_CONSECUTIVE_DEATHS:
            raise TrainingError(
                f"Ray {self.label} {slot} died {self.deaths[slot]} times in a row (last: "
                f"{type(exc).__name__}); the last checkpoint is kept. Check the env and the "
                "nodes' memory."
            ) from exc
        self.actors[slot] = self._start(self.root.spawn(1)[0])
        self.nodes[slot] = self._await_ready([self.actors[slot]])[0]
        print(
            f"rlx: Ray {self.label} {slot} died ({type(exc).__name__}); restarted it with a "
            f"fresh seed ({self.restarts} restart(s) so far); {self.note}.",
            file=sys.stderr,
            flush=True,
        )

    def run_some(self, payload: Any) -> tuple[list[Any | None], set[int]]:
        """:meth:`run`, again while no runner at all came back (each round replaces the dead
        ones); also returns the runners replaced on the way."""
        results = self.run(payload)
        dropped = {i for i, r in enumerate(results) if r is None}
        while all(r is None for r in results):
            results = self.run(payload)
            dropped |= {i for i, r in enumerate(results) if r is None}
        return results, dropped

    def stats(self) -> dict[str, float]:
        """``runner_restarts`` so far and ``runner_nodes`` (distinct nodes of the runners)."""
        return {RUNNER_RESTARTS: float(self.restarts), RUNNER_NODES: float(len(set(self.nodes)))}

    def kill(self, slot: int) -> None:
        """Kill runner ``slot`` now, as a crash would (for tests and drills)."""
        self.ray.kill(self.actors[slot], no_restart=True)

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor, no_restart=True)
        self.actors = []


# ============================================================================ on-policy
@dataclass
class RolloutFragment:
    """What one on-policy runner returns: ``[T, N, ...]`` arrays, as its rollout buffer holds."""

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


class _BatchRecorder(ObsNormalizer):
    """A runner's observation normaliser: uses the learner's statistics, loaded each update,
    and keeps each collection's raw observations for the learner instead of merging them."""

    batch: np.ndarray | None = None

    def update(self, obs: np.ndarray) -> None:
        self.batch = obs


class OnPolicyWorker:
    """Inside a runner: a :class:`Collector` of ``num_envs`` copies and a copy of the policy."""

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
        self.policy.load_state_dict(torch_state(weights["policy"]))
        normalizer = self.collector.normalizer
        if normalizer is not None:
            normalizer.load_state_dict(weights["normalizer"])
        _, episodes = self.collector.collect(self.policy, self.buffer, self.rng, 0)
        b = self.buffer  # Ray copies the arrays out when this method returns
        return RolloutFragment(
            b.obs, b.actions, b.rewards, b.terminated, b.truncated, b.valid,
            self.collector.last_obs, None if normalizer is None else normalizer.batch,
            episodes.returns, episodes.lengths,
        )  # fmt: skip


def env_spaces(env: Any) -> tuple[Any, Any]:
    """The single-copy observation and action spaces of an env id or env object."""
    if not isinstance(env, str):
        return env.observation_space, env.action_space
    probe = make_env(env)
    try:
        return probe.observation_space, probe.action_space
    finally:
        probe.close()


class RemoteCollector:
    """:class:`rlx.core.on_policy.Collector`'s interface, collected by ``runners`` Ray env
    runners of ``num_envs`` copies each: to the learner it is one collector of
    ``runners x num_envs`` copies. Use it as a context manager (it owns the Ray session).

    The observation statistics are the learner's: sent with the weights, merged from the
    runners' raw observations after each update. Reward scaling (``reward_scale_gamma``) runs
    in each runner on its own statistics, which restart with the runner. A checkpoint holds no
    env state (the envs live in the runners), so a resume starts fresh episodes and may use
    another number of runners.
    """

    def __init__(
        self,
        env: Any,
        num_envs: int,
        seed: int,
        *,
        runners: int,
        ray_address: str | None,
        algo: str,
        env_id: str,
        normalize_obs: bool | None = None,
        reward_scale_gamma: float | None = None,
    ) -> None:
        obs_space, action_space = env_spaces(env)
        self.obs_dim = observation_dim(obs_space, env_id)
        self.actions = describe_action_space(action_space, algo, env_id)
        if normalize_obs is None:
            normalize_obs = "n" not in self.actions
        self.normalizer = ObsNormalizer((self.obs_dim,)) if normalize_obs else None
        self.runners, self.envs_per_runner, self.seed = runners, num_envs, seed
        self.num_envs = runners * num_envs
        self.reward_scale_gamma = reward_scale_gamma
        self.last_obs = np.zeros((self.num_envs, self.obs_dim), dtype=np.float32)
        self.options = {
            "env": env, "num_envs": num_envs, "algo": algo, "env_id": env_id,
            "normalize_obs": normalize_obs, "reward_scale_gamma": reward_scale_gamma,
        }  # fmt: skip
        self.session = RaySession(ray_address, runners, f"runners={runners}").start()
        self.pool: RunnerPool | None = None
        self.assemble_s = 0.0  # the last round's assembly into the buffer (for benchmarks)

    # ------------------------------------------------------------------ Collector's interface
    def new_buffer(self, steps: int) -> Any:
        return Collector.new_buffer(self, steps)  # the same layout, runners x num_envs wide

    def collect(
        self, policy: ActorCritic, buffer: Any, rng: np.random.Generator, step: int
    ) -> tuple[int, Episodes]:
        """Every runner's fragment with the current policy, in ``buffer``; returns the step
        count after them and the episodes that ended (``rng`` is unused: runners draw their
        actions from their own generators)."""
        if self.pool is None:
            options = {**self.options, "num_steps": buffer.steps}
            options["architecture"] = policy.architecture
            self.pool = RunnerPool(OnPolicyWorker, options, self.runners, self.seed,
                                   start_step=step)  # fmt: skip
        normalizer = None if self.normalizer is None else self.normalizer.state_dict()
        payload = {"policy": numpy_state(policy.state_dict()), "normalizer": normalizer}
        fragments, _ = self.pool.run_some(payload)
        t0 = time.perf_counter()
        out = self._assemble(fragments, buffer, step)
        self.assemble_s = time.perf_counter() - t0
        return out

    def _assemble(
        self, fragments: list[RolloutFragment | None], buffer: Any, step: int
    ) -> tuple[int, Episodes]:
        """Runner ``r``'s fragment into columns ``r N .. (r + 1) N - 1``; a dropped one leaves
        its columns invalid. Episodes are dated by the count over all columns."""
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
        """For the update's log row: the runners restarted so far, and their nodes."""
        if self.pool is None:
            return {RUNNER_RESTARTS: 0.0}
        return self.pool.stats()

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
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        self.session.close()

    def __enter__(self) -> RemoteCollector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ============================================================================ off-policy
@dataclass
class TransitionFragment:
    """What one DQN runner returns: ``[T, N, ...]`` transitions and the episodes that ended."""

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray  # as the learner stores them (clipped if asked)
    next_obs: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    stored: np.ndarray  # False: a reset-only step after a done, not a transition
    episodes: FinishedEpisodes  # envs: the runner's copy index
    episode_t: np.ndarray  # the vector step each episode ended on


class DQNWorker:
    """Inside a runner: a vector env and a Q network, epsilon-greedy, for ``steps`` vector
    steps per fragment; episodes in progress carry over from one fragment to the next."""

    def __init__(
        self,
        seed_seq: np.random.SeedSequence,
        *,
        env: Any,
        config: Any,
        spec: dict[str, Any],
        steps: int,
    ) -> None:
        from rlx.agents.dqn import DQNLearner
        from rlx.core.envs import EpisodeTracker

        self.config, self.steps = config, steps
        self.envs = make_vec_env(env, config.num_envs, vectorization=config.vectorization)
        self.actor = DQNLearner(dataclasses.replace(config, compile=False), **spec)
        self.rng = np.random.default_rng(seed_seq)
        self.obs, _ = self.envs.reset(seed=env_seed(seed_seq))
        self.after_done = np.zeros(config.num_envs, dtype=bool)
        self.tracker = EpisodeTracker(config.num_envs, config.gamma)

    def collect(self, payload: dict[str, Any]) -> TransitionFragment:
        actor, clip = self.actor, self.config.reward_clip
        actor.online.load_state_dict(torch_state(payload["online"]))
        if actor.obs_norm is not None:
            actor.obs_norm.load_state_dict(payload["obs_norm"])
        rows: dict[str, list[np.ndarray]] = {k: [] for k in TRANSITION_FIELDS}
        finished, ended_at = [], []
        for t in range(self.steps):
            actions, q_taken = actor.act(self.obs, payload["epsilon"], self.rng)
            next_obs, rewards, terminated, truncated, _ = self.envs.step(actions)
            stored = ~self.after_done
            seen = np.asarray(rewards, dtype=np.float32)
            seen = seen if clip is None else np.clip(seen, -clip, clip)
            step_rows = (self.obs, actions, seen, next_obs, terminated, truncated, stored)
            for name, value in zip(TRANSITION_FIELDS, step_rows, strict=True):
                rows[name].append(np.asarray(value))
            done = self.tracker.step(rewards, terminated, truncated, stored, q_taken, seen)
            if len(done.envs):
                finished.append(done)
                ended_at.append(np.full(len(done.envs), t))
            self.after_done = terminated | truncated
            self.obs = next_obs
        arrays = {name: np.stack(values) for name, values in rows.items()}
        finished = finished or [NO_EPISODES]
        episodes = FinishedEpisodes(
            *(np.concatenate([getattr(f, k) for f in finished]) for k in FinishedEpisodes._fields)
        )
        t_end = np.concatenate(ended_at) if ended_at else np.zeros(0, dtype=np.int64)
        return TransitionFragment(**arrays, episodes=episodes, episode_t=t_end)


NO_EPISODES = FinishedEpisodes(
    np.zeros(0, np.int64),
    np.zeros(0),
    np.zeros(0, np.int64),
    np.zeros(0),
    np.zeros(0),
    np.zeros(0, bool),
)
TRANSITION_FIELDS = ("obs", "actions", "rewards", "next_obs", "terminated", "truncated", "stored")


@dataclass
class TransitionBatch:
    """All runners' fragments of one round, ``[T, runners x num_envs, ...]``; the columns of
    a dropped fragment are not ``stored``. ``step`` is the count after the round."""

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    stored: np.ndarray
    step: int
    episodes: FinishedEpisodes  # envs: the learner's column
    episode_steps: np.ndarray  # the count when each ended
    restarted: np.ndarray  # columns whose runner was replaced this round


class TransitionCollector:
    """DQN's Ray env runners (a context manager that owns the Ray session): each round every
    runner acts ``steps`` vector steps with the learner's network and epsilon."""

    def __init__(
        self, env: Any, config: Any, spec: dict[str, Any], steps: int, start_step: int
    ) -> None:
        self.runners, self.envs_per_runner = config.runners, config.num_envs
        self.num_envs = config.runners * config.num_envs
        self.session = RaySession(config.ray_address, config.runners,
                                  f"runners={config.runners}").start()  # fmt: skip
        try:
            options = {"env": env, "config": config, "spec": spec, "steps": steps}
            self.pool = RunnerPool(DQNWorker, options, config.runners, config.seed,
                                   start_step=start_step)  # fmt: skip
        except BaseException:
            self.session.close()
            raise

    def collect(self, payload: dict[str, Any], step: int) -> TransitionBatch:
        """One round: ``payload`` holds ``online`` (the network's state), ``obs_norm`` and
        ``epsilon``; ``step`` is the count before it."""
        payload = {**payload, "online": numpy_state(payload["online"])}
        fragments, dropped = self.pool.run_some(payload)
        N = self.envs_per_runner
        template = next(f for f in fragments if f is not None)
        arrays = {}
        for name in TRANSITION_FIELDS:
            like = getattr(template, name)
            full = np.zeros((like.shape[0], self.num_envs, *like.shape[2:]), dtype=like.dtype)
            for r, fragment in enumerate(fragments):
                if fragment is not None:
                    full[:, r * N : (r + 1) * N] = getattr(fragment, name)
            arrays[name] = full
        counted = step + np.cumsum(arrays["stored"].sum(axis=1))
        kept = [(r, f) for r, f in enumerate(fragments) if f is not None]
        episodes = FinishedEpisodes(
            *(np.concatenate([getattr(f.episodes, k) + (r * N if k == "envs" else 0)
                              for r, f in kept]) for k in FinishedEpisodes._fields)
        )  # fmt: skip
        t_end = np.concatenate([f.episode_t for _, f in kept]).astype(np.int64)
        order = np.lexsort((episodes.envs, t_end))  # in time order, as one process logs them
        episodes = FinishedEpisodes(*(np.asarray(a)[order] for a in episodes))
        return TransitionBatch(
            **arrays, step=int(counted[-1]), episodes=episodes,
            episode_steps=counted[t_end[order]],
            restarted=np.asarray([r * N + j for r in sorted(dropped) for j in range(N)], int),
        )  # fmt: skip

    def stats(self) -> dict[str, float]:
        return self.pool.stats()

    def close(self) -> None:
        self.pool.close()
        self.session.close()

    def __enter__(self) -> TransitionCollector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
