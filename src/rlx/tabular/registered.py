"""The tabular learners as registered algorithms: run folder, checkpoints, resume.

``rlx train q-learning --env FrozenLake-v1`` trains in chunks of episodes; after each chunk it
logs the metrics and the finished episodes, and every 30 s (and on Ctrl-C) it checkpoints the
learner's whole state. The learners are chunk-invariant (running 300 then 700 episodes equals
running 1,000), so a resumed run ends exactly where an uninterrupted one would.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx import metrics as M
from rlx import registry
from rlx.core.evaluation import final_evaluation
from rlx.core.fields import CheckpointFields
from rlx.errors import ConfigError
from rlx.runs.handle import RunHandle
from rlx.tabular import TabularConfig, TabularLearner


def chunk_episodes(budget: int) -> int:
    """Episodes per chunk: about 200 log points per run, 500 to 50,000 episodes each.

    Long enough that logging costs nothing next to the compiled kernel, short enough that the
    progress bar moves and Ctrl-C is answered promptly. Chunking never changes the result.
    """
    return int(np.clip(budget // 200, 500, 50_000))


@dataclass(frozen=True)
class TabularTrainConfig(CheckpointFields, TabularConfig):
    """A tabular learner's config, the run's checkpoint cadence (steps: env steps), plus an
    optional budget in env steps."""

    total_steps: int | None = None
    """stop once this many env steps are done, too (None: only the episode budget)"""
    eval_episodes: int = 100
    """greedy episodes of the final evaluation, seeded apart from training (0: none)"""

    def __post_init__(self) -> None:
        # both chains by name: TabularConfig (the learner's own, usable alone) ends its checks
        # without calling on, so the checkpoint fields' checks would be skipped by super()
        TabularConfig.__post_init__(self)
        CheckpointFields.__post_init__(self)
        if self.total_steps is not None and self.total_steps < 1:
            raise ConfigError(f"total_steps={self.total_steps} must be >= 1 (or None).")
        if self.eval_episodes < 0:
            raise ConfigError(f"eval_episodes={self.eval_episodes} must be >= 0 (0: none).")

    def learner_config(self) -> TabularConfig:
        """The learner's own fields (the run's budget and checkpoint cadence are the loop's)."""
        names = {f.name for f in dataclasses.fields(TabularConfig)}
        return TabularConfig(**{k: v for k, v in self.__dict__.items() if k in names})


class TabularAgent:
    """A trained tabular agent: greedy in its Q table (or acting by its evaluated policy).

    It carries the fields :func:`rlx.tabular.check` reads (``algo``, ``Q``, ``V``, ``policy``,
    ``gamma``), so an agent loaded from a run folder can be checked against DP directly.
    """

    def __init__(self, algo: str, config: TabularTrainConfig, env_id: str, state: dict) -> None:
        self.algo, self.config, self.env_id = algo, config, env_id
        self.Q: np.ndarray | None = state.get("Q")
        self.V: np.ndarray = state["V"]
        self.policy: np.ndarray = state["policy"]
        self.gamma = float(state["gamma"])
        self.run_dir = None

    @property
    def is_prediction(self) -> bool:
        return self.Q is None

    def act(self, obs: Any, deterministic: bool = True) -> int:
        """The greedy action in state ``obs`` (ties: the lowest action index)."""
        return int(self.act_batch(np.asarray([obs]), deterministic)[0])

    def act_batch(self, observations: Any, deterministic: bool = True) -> np.ndarray:
        """The greedy actions in the states ``observations``, in order."""
        states = np.asarray(observations, dtype=np.int64).reshape(-1)
        if self.policy.ndim == 1:
            return self.policy[states].astype(np.int64)
        return np.argmax(self.policy[states], axis=1)

    def __repr__(self) -> str:
        return f"TabularAgent({self.algo}, env={self.env_id}, S={self.V.shape[0]})"


def _agent_state(learner: TabularLearner) -> dict[str, Any]:
    result = learner.result()
    state: dict[str, Any] = {"V": result.V, "policy": result.policy, "gamma": result.gamma}
    if result.Q is not None:
        state["Q"] = result.Q
    return state


def _train(algo: str, config: TabularTrainConfig, env: Any, run: RunHandle) -> TabularAgent:
    learner = TabularLearner(algo, env, config.learner_config())
    if run.resumed_state is not None:
        learner.load_state_dict(run.resumed_state["learner"])
    budget_steps = config.total_steps or np.iinfo(np.int64).max

    def done() -> bool:
        return learner.episodes_done >= config.episodes or learner.steps_done >= budget_steps

    def save() -> None:
        run.save_checkpoint(
            learner.steps_done, {"learner": learner.state_dict(), "agent": _agent_state(learner)}
        )

    while not done() and not run.stop_requested:
        n = min(chunk_episodes(config.episodes), config.episodes - learner.episodes_done)
        start_steps = learner.steps_done
        batch = learner.run(n)
        ends = start_steps + np.cumsum(batch.lengths)
        run.log_episodes(ends, batch.returns, batch.lengths)
        run.log(
            learner.steps_done,
            {
                M.EPISODE_RETURN: float(np.mean(batch.returns)),
                M.EPISODE_LENGTH: float(np.mean(batch.lengths)),
                M.EPSILON: batch.epsilon,
                M.TD_ERROR: batch.td_error,
                M.EPISODES: learner.episodes_done,
            },
        )
        run.update_progress(learner.episodes_done)
        if run.checkpoint_due():
            save()
    save()
    recent = learner.result().returns[-100:]
    agent = TabularAgent(algo, config, run.env_id, _agent_state(learner))
    run.finish(
        learner.steps_done,
        {
            M.EPISODES: learner.episodes_done,
            "train_return_last100": float(np.mean(recent)) if len(recent) else None,
            # the headline: greedy episodes no training episode started from
            **final_evaluation(agent, env, run, config.eval_episodes, config.seed),
        },
    )
    return agent


def _load(algo: str, config: TabularTrainConfig, env_id: str, state: dict) -> TabularAgent:
    return TabularAgent(algo, config, env_id, state["agent"])


ALGORITHMS = ("q-learning", "sarsa", "expected-sarsa", "double-q", "mc", "mc-prediction", "td0")
"""The tabular learners registered here (their one-line summaries are in the registry)."""


def _register(algo: str) -> None:
    registry.register(
        registry.Algorithm(
            name=algo,
            config=TabularTrainConfig,
            train=lambda config, env, run: _train(algo, config, env, run),
            load=lambda config, env_id, state: _load(algo, config, env_id, state),
            budget_field="episodes",
            unit="episodes",
        )
    )


for _algo in ALGORITHMS:
    _register(_algo)
