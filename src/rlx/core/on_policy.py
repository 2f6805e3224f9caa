"""The on-policy loop REINFORCE, A2C and PPO share, written once, and what it is made of.

    every update:
        collect T vector steps of N env copies with the current policy (here, or on K Ray
            env runners of N copies each, side by side as one rollout of K x N copies);
            gSDE draws new exploration matrices at its start (and every sde_sample_freq steps)
        the algorithm's update on that rollout (V, log pi_old, advantages, gradient steps)
        log the update's diagnostics and the episodes that ended (and, every eval_every env
            steps, a deterministic evaluation); checkpoint when due (and, for a run that
            heals, once before the first update)
    evaluate the final policy; write the run's summary

The loop tells the run's observers (``rlx.train``'s ``callbacks``) ``on_step`` after each
collection; evaluations during training are :mod:`rlx.core.training_evaluation`'s.

What the loop is made of lives beside it:

- :mod:`rlx.core.rollouts` collects: a :class:`~rlx.core.rollouts.Collector` steps ``N`` env
  copies in this process, a :class:`~rlx.core.rollouts.RunnerCollector` gathers Ray env
  runners' fragments as one collector; :func:`~rlx.core.rollouts.make_collector` picks the
  one a config asks for.
- :mod:`rlx.core.rollout_batch` turns a rollout into training samples (``V_old``,
  ``log pi_old``, GAE, the valid steps as flat tensors), which each algorithm's update uses.
- :mod:`rlx.core.policy_agent`: the actor-critic a config describes and the
  :class:`~rlx.core.policy_agent.PolicyAgent` that ``rlx.train`` returns and ``rlx.load``
  restores.
- here, :func:`on_policy_state` / :func:`restore_on_policy_state` checkpoint everything a
  resumed run needs to continue exactly: networks, optimizer, step, normalisation statistics,
  RNG states, gSDE's exploration matrices, and the envs mid-episode
  (:mod:`rlx.core.env_state`);
  :class:`OnPolicyMethod` is what an algorithm adds to the loop (its optimizer, its update,
  what it completes of the config once the policy is built);
  :func:`train_on_policy` is the loop.

Under Gymnasium's NEXT_STEP autoreset, the step after a done only resets that copy: its row in
the buffer is marked ``valid=False`` and left out of every loss. The observation a done step
produced is the true final observation, stored as the next row's observation, so
``V(s_{t+1})`` of a truncated step is the value of its real final state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from rlx import metrics as M
from rlx.core.buffers import RolloutBuffer
from rlx.core.devices import resolve_device
from rlx.core.evaluation import final_evaluation
from rlx.core.optim import Optimizer, annealed
from rlx.core.policies import ActorCritic
from rlx.core.policy_agent import PolicyAgent, agent_state, build_policy
from rlx.core.rollouts import Collector, Episodes, make_collector
from rlx.core.runners import EnvRunners
from rlx.core.seeding import rng_state, seed_everything, set_rng_state
from rlx.core.training_evaluation import TrainingEvaluation
from rlx.errors import CheckpointError
from rlx.runs.handle import RunHandle


def episode_metrics(episodes: Episodes) -> dict[str, float]:
    """Mean return and length of the episodes that finished (nothing when none did)."""
    if len(episodes.returns) == 0:
        return {}
    return {
        M.EPISODE_RETURN: float(episodes.returns.mean()),
        M.EPISODE_LENGTH: float(episodes.lengths.mean()),
    }


# ---------------------------------------------------------------------------- checkpoints
def on_policy_state(
    step: int,
    policy: ActorCritic,
    optimizer: Optimizer,
    collector: Collector,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """Everything a resumed run needs to continue exactly, plus the agent for ``rlx.load``
    (with gSDE, its exploration matrices too: ``log sigma`` is among the parameters)."""
    state = {
        "step": step,
        "optimizer": optimizer.state_dict(),
        "collector": collector.state_dict(),
        "rng": rng_state(rng),
        "agent": agent_state(policy, collector),
    }
    if policy.use_sde:
        matrices = policy.exploration_matrices
        state["sde_noise"] = None if matrices is None else matrices.copy()
    return state


def restore_on_policy_state(
    state: dict[str, Any],
    policy: ActorCritic,
    optimizer: Optimizer,
    collector: Collector,
    rng: np.random.Generator,
) -> int:
    """Load :func:`on_policy_state` into freshly built objects; returns the step."""
    try:
        policy.load_state_dict(state["agent"]["policy"])
        optimizer.load_state_dict(state["optimizer"])
    except (KeyError, RuntimeError, ValueError) as exc:
        raise CheckpointError(
            f"the checkpoint does not match this config ({type(exc).__name__}: {exc}); "
            "resume with the run's own config."
        ) from exc
    collector.load_state_dict(state["collector"])
    set_rng_state(state["rng"], rng)
    if policy.use_sde and state.get("sde_noise") is not None:
        policy.exploration_matrices = state["sde_noise"].copy()
    return int(state["step"])


def end_training(
    algo: str, run: RunHandle, env: Any, config: Any, step: int, policy: ActorCritic, collector: Any
) -> PolicyAgent:
    """The common end of an on-policy run: close the envs rlx made, build the agent from the
    final policy, evaluate it (:func:`rlx.core.evaluation.final_evaluation`) and write the
    summary."""
    if isinstance(env, str):
        collector.close()
    agent = PolicyAgent(algo, config, run.env_id, agent_state(policy, collector))
    run.finish(step, final_evaluation(agent, env, run, config.eval_episodes, config.seed))
    return agent


# ============================================================================ the training loop
@dataclass(frozen=True)
class Rollout:
    """What one collection hands the algorithm's update."""

    buffer: RolloutBuffer  # T x N steps, filled
    last_obs: np.ndarray  # the bootstrap observations [N, obs_dim]
    step: int  # env steps done before it (where annealed settings are read)


OptimizerT = TypeVar("OptimizerT", bound=Optimizer)
"""The optimizer an on-policy algorithm builds and its update takes."""


@dataclass(frozen=True)
class OnPolicyMethod(Generic[OptimizerT]):
    """What an on-policy algorithm adds to :func:`train_on_policy`.

    Attributes:
        name: the registered name (``"ppo"``), for the agent and error messages.
        optimizer: ``optimizer(policy, config)``, with the config's ``learning_rate``.
        learn: ``learn(policy, optimizer, rollout, config, rng)``: the algorithm's update on
            one rollout (advantages, losses, gradient steps); returns the log row's metrics.
        rollout_steps: the config field giving ``T``, the vector steps of a rollout.
        whole_episodes: collect until every copy has ended an episode (at most ``T`` steps).
        critic: whether the policy learns ``V(s)``, from the config (None: always).
        configure: ``configure(policy, config, masked)``: the config completed for this run
            once its policy is built and whether the env gives action masks (``masked``) is
            known; the loop trains with it and records it in ``config.json`` (PPO resolves
            its ``gradient`` here). None: the config as given.
    """

    name: str
    optimizer: Callable[[ActorCritic, Any], OptimizerT]
    learn: Callable[[ActorCritic, OptimizerT, Rollout, Any, np.random.Generator], dict[str, Any]]
    rollout_steps: str = "num_steps"
    whole_episodes: bool = False
    critic: Callable[[Any], bool] | None = None
    configure: Callable[[ActorCritic, Any, bool], Any] | None = None


def gives_masks(collector: Any) -> bool | None:
    """Whether the env gives action masks: a collector in this process knows from the envs'
    reset; env runners (:class:`~rlx.core.rollouts.RunnerCollector`) say so only in their
    fragments, so None until the first rollout has come back."""
    return collector.read_masks is not None if isinstance(collector, Collector) else None


def configure_run(
    method: OnPolicyMethod[Any], policy: ActorCritic, config: Any, masked: bool, run: RunHandle
) -> Any:
    """``method.configure``'s config, recorded in the run's ``config.json`` where it differs
    from the one given (a resumed run's config was completed when it started)."""
    assert method.configure is not None
    completed = method.configure(policy, config, masked)
    if completed != config:
        run.record_config(completed)
    return completed


def train_on_policy(
    method: OnPolicyMethod[Any],
    config: Any,
    env: Any,
    run: RunHandle,
    remote: EnvRunners | None = None,
) -> PolicyAgent:
    """The on-policy loop, inside an open :class:`rlx.runs.Run`; returns the trained agent.

    Each update: the learning rate (annealed if asked), one rollout with the current policy
    (in this process, or on ``config.runners`` env runners started by ``remote``), the
    algorithm's ``learn`` on it, one log row (its metrics, ``lr``, the episodes that ended,
    what the runners report, an evaluation when due); a checkpoint when due. The run ends at
    the budget, at a stop (Ctrl-C, the doctor, a callback) or once an evaluation reaches
    ``stop_at_return``; then the last checkpoint, the final evaluation and the summary.

    ``method.configure`` completes the config once, before the first update: as soon as the
    policy is built, or with env runners, which say whether the env gives action masks only
    in their fragments, after the first rollout (the collection does not read what it sets).
    """
    rng = seed_everything(config.seed)
    algo = method.name.upper()
    device = resolve_device(config.device)
    evaluation = TrainingEvaluation(config, env, run)
    with make_collector(config, env, run.env_id, algo, remote) as collector:
        critic = True if method.critic is None else method.critic(config)
        policy = build_policy(config, collector, critic=critic, device=device)
        if getattr(config, "use_sde", False):  # gSDE: log sigma becomes a matrix
            policy.enable_sde(config.log_std_init, use_expln=config.use_expln)
        masked = gives_masks(collector)
        unconfigured = method.configure is not None
        if unconfigured and masked is not None:
            config, unconfigured = configure_run(method, policy, config, masked, run), False
        optimizer = method.optimizer(policy, config)
        buffer = collector.new_buffer(getattr(config, method.rollout_steps))
        step = 0
        if run.resumed_state is not None:
            step = restore_on_policy_state(run.resumed_state, policy, optimizer, collector, rng)
            evaluation.load_state_dict(run.resumed_state.get("evaluation"), step)

        def state() -> dict[str, Any]:
            return {
                **on_policy_state(step, policy, optimizer, collector, rng),
                "evaluation": evaluation.state_dict(),
            }

        def agent() -> PolicyAgent:
            return PolicyAgent(method.name, config, run.env_id, agent_state(policy, collector))

        if run.start_checkpoint_due():  # a run that heals rolls back to it (rlx.launch.heal)
            run.save_checkpoint(step, state())
        collect_options = {"until_every_copy_done": True} if method.whole_episodes else {}
        while step < config.total_steps and not run.stop_requested and not evaluation.reached:
            lr = annealed(config.learning_rate, step, config.total_steps, config.anneal_lr)
            optimizer.lr = lr
            before = step
            step, episodes = collector.collect(policy, buffer, rng, step, **collect_options)
            if len(episodes.returns):  # logged as they end, before the update
                run.log_episodes(episodes.steps, episodes.returns, episodes.lengths)
            ended = {"episode_returns": episodes.returns, "episode_lengths": episodes.lengths}
            run.notify("on_step", step, ended)
            if unconfigured:  # env runners: the first rollout's fragments carry their masks
                masked = buffer.masks is not None
                config, unconfigured = configure_run(method, policy, config, masked, run), False
            rollout = Rollout(buffer, collector.last_obs, before)
            metrics = method.learn(policy, optimizer, rollout, config, rng)
            row = {**metrics, M.LR: lr, **episode_metrics(episodes), **collector.stats()}
            if evaluation.due(step):
                row.update(evaluation.evaluate(step, agent, state))
            run.log(step, row)
            if run.checkpoint_due():
                run.save_checkpoint(step, state())
        run.save_checkpoint(step, state())
        return end_training(method.name, run, env, config, step, policy, collector)
