"""The off-policy loop DQN, SAC and TD3 share, written once, and what it is made of.

    the learner, an empty replay buffer, the envs (or K Ray env runners)
    every vector step of the N env copies (or every round of the runners):
        collect with the learner's exploring policy; store the transitions in the replay
        every train_freq env steps: gradient_steps updates on uniform replay minibatches
        every log_every env steps: log the means since the last log (and, every eval_every
            env steps, a deterministic evaluation); checkpoint when due (and, for a run
            that heals, once before the first update)
    the last checkpoint, the final evaluation, the summary

The loop tells the run's observers (``rlx.train``'s ``callbacks``) ``on_step`` after each
collection; evaluations during training are :mod:`rlx.core.training_evaluation`'s.

An algorithm hands the loop an :class:`OffPolicyMethod` (how its transitions look, its
learner, its agent, what its env runners act with) and writes its learner on
:class:`ReplayLearner`: the networks, the targets, one gradient step, and a few hooks where an
algorithm's schedule lives (epsilon, the learning rate, a target network's sync). Where the
transitions come from (a vector env here, or env runners handed in as ``remote``) is the
collector's business (:mod:`rlx.core.transitions`); the loop is the same.

- :class:`LogWindow` keeps what happened since the last log: the update metrics as tensors
  (stacked and read once per log, never synchronised per step) and the finished episodes.
- :func:`off_policy_state` / :func:`restore_off_policy_state` checkpoint what a resumed run
  needs; the replay buffer only with ``save_replay_buffer`` (without it a resume says so on
  stderr, and gradient steps wait for ``learning_starts`` new transitions).
- :class:`ContinuousLearner`, :class:`ContinuousMethod` and :class:`ContinuousAgent` are what
  SAC and TD3 share: actions in ``[-1, 1]^d`` mapped onto the env's box, a uniformly random
  warm-up, the trained agent.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np
import torch
from torch import Tensor

from rlx import metrics as M
from rlx.core.buffers import ReplaySample
from rlx.core.continuous import ActionScaler, box_action_bounds
from rlx.core.devices import resolve_device
from rlx.core.envs import FinishedEpisodes, env_spaces, make_vec_env
from rlx.core.evaluation import final_evaluation
from rlx.core.masks import env_mask_size
from rlx.core.policies import observation_dim
from rlx.core.runners import EnvRunners
from rlx.core.seeding import rng_state, seed_everything, set_rng_state
from rlx.core.training_evaluation import TrainingEvaluation
from rlx.core.transitions import (
    ActingCopy,
    AnyReplayBuffer,
    ReplayLayout,
    RunnerTransitions,
    Transitions,
    VectorCollector,
)
from rlx.errors import CheckpointError, ConfigError, EnvError
from rlx.runs.handle import RunHandle


# ============================================================================ the algorithm's part
class ReplayLearner:
    """What the off-policy loop asks of a learner, in the order it asks; the defaults do
    nothing, an algorithm overrides what it needs.

    A learner holds the networks and optimisers and is the exploring policy the envs are
    stepped with (:meth:`explore`). ``self.config`` is its algorithm's config; ``self.device``
    where its networks learn (replay minibatches move there in one transfer each).
    """

    config: Any
    device: torch.device = torch.device("cpu")

    def begin_collection(self, step: int) -> None:
        """Set the exploration of the collection that starts at env step ``step``."""

    def explore(
        self,
        obs: np.ndarray,
        starts: np.ndarray,
        rng: np.random.Generator,
        masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Actions for a batch of observations (valid ones only, where ``masks`` is given),
        and ``Q(s, a)`` of them where ``starts`` (copies starting an episode, for the
        overestimation check), or None."""
        raise NotImplementedError

    def acting_state(self) -> dict[str, Any]:
        """What an env runner's copy of the policy needs to act as :meth:`explore` does (its
        weights as :func:`rlx.core.runners.numpy_state`)."""
        raise NotImplementedError(f"{type(self).__name__} does not act on env runners.")

    def update_statistics(self, transitions: Transitions) -> None:
        """Take in the transitions just stored (running statistics of observations, rewards)."""

    @property
    def value_scale(self) -> float:
        """What a reward is multiplied by before the learner sees it: ``Q(s_0, a_0)`` is
        divided by it for the log, so that it reads in the env's reward units."""
        return 1.0

    def begin_updates(self, step: int) -> None:
        """Set the schedules of the gradient steps about to be taken at env step ``step``."""

    def minibatches(self, sample: ReplaySample, count: int) -> Sequence[Any]:
        """One replay sample of ``count`` minibatches, as the tensors :meth:`update` takes."""
        return replay_batches(sample, count, self.config.batch_size, self.device)

    def update(self, batch: Any) -> dict[str, Tensor]:
        """One gradient step on a minibatch; its metrics, as tensors."""
        raise NotImplementedError

    def end_step(self, previous: int, step: int) -> None:
        """After a collection took the count from ``previous`` to ``step`` and its updates."""

    def log_values(self) -> dict[str, float]:
        """The learner's own values for the log row (e.g. the exploration rate)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raise NotImplementedError


class OffPolicyMethod(Protocol):
    """An off-policy algorithm as :func:`train_off_policy` sees it."""

    @property
    def name(self) -> str:
        """The registered name, e.g. "dqn" (read-only: the methods are frozen dataclasses)."""
        ...

    def layout(self, config: Any, obs_space: Any, action_space: Any, env_id: str) -> ReplayLayout:
        """How the algorithm's transitions look for these spaces; refuses spaces it cannot
        take (:class:`~rlx.errors.EnvError`, naming what to use instead)."""
        ...

    def learner(self, config: Any, layout: ReplayLayout, device: torch.device) -> ReplayLearner:
        """A fresh learner on ``device`` (the networks are initialised from torch's seeded
        generator)."""
        ...

    def agent(self, learner: Any, layout: ReplayLayout, env_id: str, config: Any) -> Any:
        """The trained agent ``rlx.train`` returns."""
        ...

    def actor(self, config: Any, layout: ReplayLayout) -> Callable[[], ActingCopy]:
        """What builds an env runner's copy of the exploring policy (sent to the runners, so
        it must pickle)."""
        ...


# ============================================================================ minibatches
class ReplayBatch(NamedTuple):
    """A replay minibatch as tensors; ``discounts`` is ``gamma`` per sample."""

    obs: Tensor
    actions: Tensor
    rewards: Tensor
    next_obs: Tensor
    terminated: Tensor
    discounts: Tensor


def replay_batches(
    sample: ReplaySample, n: int, batch_size: int, device: torch.device | None = None
) -> list[ReplayBatch]:
    """Split one replay sample of ``n * batch_size`` transitions into ``n`` minibatches.

    One numpy-to-torch conversion for all of them (views, no copies), and one transfer per
    field to ``device`` (None: they stay on the CPU).
    """
    arrays = (
        sample.obs, sample.actions, sample.rewards, sample.next_obs,
        sample.terminated.astype(np.float32), sample.discounts,
    )  # fmt: skip
    whole = ReplayBatch(*(torch.from_numpy(a).to(device) for a in arrays))
    if n == 1:
        return [whole]
    parts = [t.split(batch_size) for t in whole]
    return [ReplayBatch(*fields) for fields in zip(*parts, strict=True)]


# ============================================================================ logging
class LogWindow:
    """The update metrics and finished episodes since the last log."""

    def __init__(self) -> None:
        self.updates: list[dict[str, Tensor]] = []
        self.episodes: list[FinishedEpisodes] = []

    def add_update(self, metrics: dict[str, Tensor]) -> None:
        # kept as tensors: stacked and read once per log, never synchronised per step
        self.updates.append(metrics)

    def add_episodes(self, finished: FinishedEpisodes, value_scale: float = 1.0) -> None:
        """Episodes that ended; their start values are divided by ``value_scale``."""
        if len(finished.envs):
            start_values = finished.start_values / value_scale
            self.episodes.append(finished._replace(start_values=start_values))

    def flush(self) -> dict[str, float]:
        """Each update metric's mean and the episodes' means, then an empty window."""
        out: dict[str, float] = {}
        if self.updates:
            keys = {k for row in self.updates for k in row}
            for key in sorted(keys):
                values = [row[key] for row in self.updates if key in row]
                out[key] = float(torch.stack(values).mean())
        if self.episodes:
            cat = lambda field: np.concatenate([getattr(e, field) for e in self.episodes])  # noqa: E731
            out.update({
                M.EPISODE_RETURN: float(cat("returns").mean()),
                M.EPISODE_LENGTH: float(cat("lengths").mean()),
                M.MC_RETURN: float(cat("discounted_returns").mean()),
                M.Q_START: float(cat("start_values").mean()),
            })  # fmt: skip
        self.updates, self.episodes = [], []
        return out


# ============================================================================ checkpoints
def off_policy_state(
    step: int,
    gradient_steps: int,
    learner: ReplayLearner,
    buffer: AnyReplayBuffer,
    collector: Any,
    rng: np.random.Generator,
    layout: ReplayLayout,
    with_replay: bool,
) -> dict[str, Any]:
    """The learner, the step, the RNGs, the envs mid-episode, the agent's spec; with
    ``with_replay`` also the replay buffer (large)."""
    state = {
        "step": step,
        "gradient_steps": gradient_steps,
        "learner": learner.state_dict(),
        "collector": collector.state_dict(),
        "rng": rng_state(rng),
        "spec": layout.spec,
    }
    if with_replay:
        state["replay"] = buffer.state_dict()
    return state


def restore_off_policy_state(
    state: dict[str, Any],
    learner: ReplayLearner,
    buffer: AnyReplayBuffer,
    collector: Any,
    rng: np.random.Generator,
    algo: str,
) -> tuple[int, int]:
    """Load :func:`off_policy_state` (after :func:`with_current_layout`) into freshly built
    objects, the envs aside (``collector.load_state_dict`` once they are started); returns
    (step, gradient steps)."""
    try:
        learner.load_state_dict(state["learner"])
        set_rng_state(state["rng"], rng)
    except (KeyError, RuntimeError, ValueError) as exc:
        raise CheckpointError(
            f"the checkpoint does not match this {algo} config ({type(exc).__name__}: {exc}); "
            "resume with the run's own config."
        ) from exc
    replay = collector.fitting_replay(state.get("replay"), buffer)
    if replay is not None:
        buffer.load_state_dict(replay)
    elif "replay" not in state and int(state["step"]) > 0:  # at step 0 it was empty anyway
        print(
            f"rlx: {algo} resumes at step {int(state['step'])} with an empty replay buffer (the "
            "checkpoint holds none), so gradient steps wait for learning_starts new "
            "transitions; train with save_replay_buffer=True (--save-replay-buffer) to keep it "
            "and continue exactly.",
            file=sys.stderr,
        )
    return int(state["step"]), int(state.get("gradient_steps", 0))


def with_current_layout(state: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint in :func:`off_policy_state`'s layout, also when it was written before the
    off-policy loops were one: DQN's kept the envs under ``collection`` (``envs``), SAC's
    and TD3's kept the replay buffer inside ``collector``."""
    state = dict(state)
    if "collection" in state:
        old = state.pop("collection")
        kept = {k: v for k, v in old.items() if k != "envs"}
        state["collector"] = {"env": old.get("envs"), **kept}
    if "replay" in state.get("collector", {}):
        state["collector"] = dict(state["collector"])
        state["replay"] = state["collector"].pop("replay")
    return state


# ============================================================================ the training loop
def train_off_policy(
    method: OffPolicyMethod, config: Any, env: Any, run: RunHandle, remote: EnvRunners | None = None
) -> Any:
    """The off-policy loop, inside an open :class:`rlx.runs.Run`; returns the trained agent.

    Collect one vector step (or, with ``config.runners``, one round of the env runners that
    ``remote`` starts) with the learner's exploring policy and store it; every ``train_freq``
    env steps take ``gradient_steps`` updates on replay minibatches (once ``learning_starts``
    transitions are stored); log every ``log_every`` env steps; checkpoint only what passed
    the NaN check, and evaluate every ``eval_every`` env steps. The run ends at the budget, at
    a stop (Ctrl-C, the doctor, a callback) or once an evaluation reaches ``stop_at_return``;
    then the last checkpoint, the final evaluation and the summary.
    """
    algo = method.name.upper()
    device = resolve_device(config.device)
    evaluation = TrainingEvaluation(config, env, run)
    collector, layout = _open_collector(method, config, env, run.env_id, remote)
    try:
        rng = seed_everything(config.seed)
        learner = method.learner(config, layout, device)
        buffer = replay_buffer(layout, config, collector.num_envs)
        step = gradient_steps = 0
        saved = None if run.resumed_state is None else with_current_layout(run.resumed_state)
        if saved is not None:
            step, gradient_steps = restore_off_policy_state(
                saved, learner, buffer, collector, rng, algo
            )
            evaluation.load_state_dict(saved.get("evaluation"), step)
        collector.start(config.seed, step)
        if saved is not None:
            collector.load_state_dict(saved["collector"])
        window = LogWindow()

        def state(with_replay: bool = False) -> dict[str, Any]:
            return {
                **off_policy_state(step, gradient_steps, learner, buffer, collector, rng, layout,
                                 with_replay),
                "evaluation": evaluation.state_dict(),
            }  # fmt: skip

        def checkpoint() -> None:
            run.save_checkpoint(step, state(config.save_replay_buffer))

        def agent() -> Any:
            return method.agent(learner, layout, run.env_id, config)

        if run.start_checkpoint_due():  # a run that heals rolls back to it (rlx.launch.heal)
            checkpoint()
        next_log = (step // config.log_every + 1) * config.log_every
        while step < config.total_steps and not run.stop_requested and not evaluation.reached:
            # ---- collect and store
            learner.begin_collection(step)
            previous = step
            got = collector.collect(learner, step, rng)
            if len(got.restarted):
                buffer.end_episodes(got.restarted)
            got.transitions.store_in(buffer)
            learner.update_statistics(got.transitions)
            step = got.step
            if len(got.episodes.envs):
                window.add_episodes(got.episodes, learner.value_scale)
                run.log_episodes(got.episode_steps, got.episodes.returns, got.episodes.lengths)
            finished = got.episodes
            ended = {"episode_returns": finished.returns, "episode_lengths": finished.lengths}
            run.notify("on_step", step, ended)

            # ---- gradient_steps updates per train_freq env steps, on replay minibatches
            rounds = step // config.train_freq - previous // config.train_freq
            if rounds and len(buffer) >= max(config.learning_starts, 1):
                learner.begin_updates(step)
                n = rounds * config.gradient_steps
                sample = buffer.sample(n * config.batch_size, rng)
                for batch in learner.minibatches(sample, n):
                    window.add_update(learner.update(batch))
                gradient_steps += n
            learner.end_step(previous, step)

            # ---- log, then checkpoint: only what passed the NaN check is saved
            if step >= next_log or step >= config.total_steps or run.stop_requested:
                row = {
                    **learner.log_values(),
                    **window.flush(),
                    M.GRADIENT_STEPS: gradient_steps,
                    **collector.stats(),
                }
                if evaluation.due(step):
                    row.update(evaluation.evaluate(step, agent, state))
                run.log(step, row)
                next_log = (step // config.log_every + 1) * config.log_every
                if run.checkpoint_due():
                    checkpoint()
        checkpoint()
    finally:
        collector.close()
    agent = method.agent(learner, layout, run.env_id, config)
    run.finish(step, final_evaluation(agent, env, run, config.eval_episodes, config.seed))
    return agent


def replay_buffer(layout: ReplayLayout, config: Any, columns: int) -> AnyReplayBuffer:
    """The empty replay buffer of a run: ``config.buffer_size`` transitions of ``layout``
    over ``columns`` env copies (the one place a run's buffer is chosen)."""
    return layout.replay_buffer(config.buffer_size, columns, config.gamma)


def with_masks(layout: ReplayLayout, size: int | None, algo: str, env_id: str) -> ReplayLayout:
    """``layout`` storing action masks of ``size`` (None: the env gives none); masks must
    have one flag per action of a ``Discrete`` space the algorithm takes."""
    if size is None:
        return layout
    n_actions = layout.spec.get("n_actions")
    if n_actions is None:
        raise EnvError(
            f"{env_id} gives action masks; {algo.upper()} has no discrete actions to mask "
            "(masks apply to dqn, ppo, a2c and reinforce)."
        )
    if size != n_actions:
        raise EnvError(
            f"{env_id}'s action masks hold {size} flags for its {n_actions} actions; give one "
            "flag per action."
        )
    return dataclasses.replace(layout, mask_size=size)


def _open_collector(
    method: OffPolicyMethod, config: Any, env: Any, env_id: str, remote: EnvRunners | None
) -> tuple[Any, ReplayLayout]:
    """The collector a config asks for (a vector env here, or env runners) and the layout
    of its transitions; the spaces are checked before anything starts."""
    if getattr(config, "runners", None) is None:
        vec = make_vec_env(env, config.num_envs, vectorization=config.vectorization)
        try:
            spaces = vec.single_observation_space, vec.single_action_space
            layout = method.layout(config, *spaces, env_id)
            _, infos = vec.reset(seed=config.seed)  # VectorCollector.start resets again
            layout = with_masks(layout, env_mask_size(vec, infos), method.name, env_id)
        except Exception:
            vec.close()
            raise
        return VectorCollector(vec, layout, config.gamma), layout
    if remote is None:
        raise ConfigError(
            f"{method.name.upper()}: runners={config.runners} needs the Ray env runners that "
            "rlx.train builds (rlx.distributed); train through rlx.train or rlx train, or "
            "leave runners out."
        )
    layout = method.layout(config, *env_spaces(env), env_id)
    probe = make_vec_env(env, 1)
    try:
        _, infos = probe.reset(seed=config.seed)
        layout = with_masks(layout, env_mask_size(probe, infos), method.name, env_id)
    finally:
        probe.close()
    actor = method.actor(config, layout)
    return RunnerTransitions(remote, env, config, layout, actor, config.runner_steps), layout


# ============================================================================ SAC's and TD3's parts
class ContinuousLearner(ReplayLearner):
    """What SAC's and TD3's learners share: they act in ``[-1, 1]^d``, uniformly at random
    before ``learning_starts`` and with their exploring policy after, and read
    ``min_k Q_k(s_0, a_0)`` at episode starts; :meth:`act` and :meth:`start_value` are theirs.
    """

    def __init__(self, config: Any, act_dim: int, device: torch.device | None = None) -> None:
        self.config, self.act_dim = config, act_dim
        self.device = torch.device("cpu") if device is None else device
        self.warming_up = True

    def begin_collection(self, step: int) -> None:
        self.warming_up = step < self.config.learning_starts

    def explore(
        self,
        obs: np.ndarray,
        starts: np.ndarray,
        rng: np.random.Generator,
        masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        if self.warming_up:
            actions = rng.uniform(-1.0, 1.0, (len(obs), self.act_dim)).astype(np.float32)
        else:
            actions = self.act(obs, False, rng)
        return actions, self.start_value(obs, actions) if starts.any() else None

    def act(self, obs: np.ndarray, deterministic: bool, rng: np.random.Generator) -> np.ndarray:
        """Actions in ``[-1, 1]^d``: the policy's mean when deterministic, else exploring."""
        raise NotImplementedError

    def start_value(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``min_k Q_k(s, a)``, read at episode starts for the overestimation check."""
        raise NotImplementedError


@dataclass(frozen=True)
class ContinuousMethod:
    """SAC or TD3 as :func:`train_off_policy` sees it: flat float32 observations, actions in
    ``[-1, 1]^d`` stored as they are and mapped onto the env's box when stepping it."""

    name: str
    learner_cls: type

    def layout(self, config: Any, obs_space: Any, action_space: Any, env_id: str) -> ReplayLayout:
        if getattr(obs_space, "shape", None) is None:  # Dict, Tuple, ...
            raise EnvError(
                f"{self.name.upper()} takes Box observations; {env_id} has {obs_space}; try "
                "ppo (Dict observations) or flatten it with "
                "gymnasium.wrappers.FlattenObservation."
            )
        low, high = box_action_bounds(action_space, self.name.upper(), env_id)
        obs_dim = observation_dim(obs_space, env_id)
        scaler = ActionScaler(low, high)
        return ReplayLayout(
            (obs_dim,), np.float32, (len(low),), np.float32, action_scaler=scaler,
            spec={"obs_dim": obs_dim, "low": scaler.low.tolist(), "high": scaler.high.tolist()},
        )  # fmt: skip

    def learner(self, config: Any, layout: ReplayLayout, device: torch.device) -> ReplayLearner:
        return self.learner_cls(config, layout.obs_shape[0], layout.action_shape[0], device)

    def agent(self, learner: Any, layout: ReplayLayout, env_id: str, config: Any) -> Any:
        assert layout.action_scaler is not None
        return ContinuousAgent(self.name, learner, layout.action_scaler, env_id, config)

    def actor(self, config: Any, layout: ReplayLayout) -> Callable[[], ActingCopy]:
        raise ConfigError(f"{self.name.upper()} collects in one process; it takes no runners.")


class ContinuousAgent:
    """A trained SAC or TD3 policy: ``act(obs)`` for one observation, ``act_batch`` for many.

    ``deterministic=True`` (the default) takes the policy's mean action (SAC: ``tanh(mu)``;
    TD3: ``mu(s)``); ``False`` samples as in training. Actions come in the env's bounds.
    """

    def __init__(
        self, algo: str, learner: Any, scaler: ActionScaler, env_id: str, config: Any
    ) -> None:
        self.algo, self.learner, self.scaler = algo, learner, scaler
        self.env_id, self.config = env_id, config
        self.rng = np.random.default_rng(getattr(config, "seed", 0))
        self.run_dir = None

    def act_batch(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        """Env actions ``[B, d]`` for observations ``[B, ...]``."""
        flat = np.asarray(obs, dtype=np.float32).reshape(len(obs), -1)
        return self.scaler.to_env(self.learner.act(flat, deterministic, self.rng))

    def act(self, obs: Any, deterministic: bool = True) -> np.ndarray:
        """The env action for one observation (a float array of the action box's shape)."""
        return self.act_batch(np.asarray(obs)[None], deterministic)[0]

    def __repr__(self) -> str:
        config = self.config
        fields = (
            dataclasses.asdict(config)
            if dataclasses.is_dataclass(config) and not isinstance(config, type)
            else {}
        )
        return (
            f"ContinuousAgent({self.algo}, env={self.env_id}, hidden={fields.get('hidden_sizes')})"
        )


def load_continuous(
    algo: str, learner_cls: type, config: Any, env_id: str, state: dict
) -> ContinuousAgent:
    """The agent of a SAC or TD3 checkpoint (``rlx.load``), acting deterministically on the
    CPU (the checkpoint was read there, whatever device trained it)."""
    spec = state["spec"]
    learner = learner_cls(config, int(spec["obs_dim"]), len(spec["low"]))
    learner.load_state_dict(state["learner"])
    return ContinuousAgent(algo, learner, ActionScaler(spec["low"], spec["high"]), env_id, config)
