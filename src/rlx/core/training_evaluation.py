"""Evaluation during training: deterministic episodes every ``eval_every`` env steps, the best
policy kept, an early end at a target return (SB3's ``EvalCallback`` and
``StopTrainingOnRewardThreshold``, as config fields of every deep agent).

Both deep loops (:func:`rlx.core.on_policy.train_on_policy`,
:func:`rlx.core.off_policy.train_off_policy`) hold one :class:`TrainingEvaluation` and ask it
at each log row:

    if evaluation.due(step):
        row |= evaluation.evaluate(step, agent, state)   # eval_return_mean, ...
    run.log(step, row)
    ... until the budget, a stop, or evaluation.reached

- An evaluation runs at the first log row at or after each multiple of ``eval_every`` (every
  update of an on-policy agent logs; an off-policy agent logs every ``log_every`` env steps),
  so the training rows are the same with or without evaluations.
- Its ``eval_episodes`` episodes run on env copies built for it and closed after it, never on
  the training envs (an env object given to ``rlx.train`` is copied: its Gymnasium spec made
  again, else a deep copy). They reset from ``seed + TRAINING_EVAL_SEED_OFFSET``: the same
  episodes at every evaluation, so that two evaluations differ only by the policy, and other
  ones than the final evaluation's (``seed + EVAL_SEED_OFFSET``).
- torch's, numpy's and Python's global random generators are put back as they were: a run
  with evaluations trains exactly as the same run without.
- A mean return above every earlier one writes the training state (without a replay buffer)
  as ``checkpoints/best.pt`` (``rlx.load(run_dir, checkpoint="best")``), and ``summary.json``
  gets ``best_eval_return_mean`` and ``best_eval_step``.
- Once a mean return reaches ``stop_at_return``, :attr:`TrainingEvaluation.reached` ends the
  loop: the run completes (last checkpoint, final evaluation, summary) after one line on
  stderr.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import random
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from rlx import metrics as M
from rlx.core.evaluation import EVAL_SEED_OFFSET, evaluate
from rlx.runs.handle import RunHandle

TRAINING_EVAL_SEED_OFFSET = 2 * EVAL_SEED_OFFSET
"""Evaluations during training reset their envs from ``seed + TRAINING_EVAL_SEED_OFFSET``."""


class TrainingEvaluation:
    """The evaluations of one run, from its config's ``eval_every``, ``eval_episodes``,
    ``stop_at_return`` and ``seed``; ``env`` is what the run trains on, ``run`` the open
    :class:`rlx.runs.Run` (best checkpoint, summary fields)."""

    def __init__(self, config: Any, env: Any, run: RunHandle) -> None:
        self.every = int(getattr(config, "eval_every", None) or 0)
        self.episodes = int(config.eval_episodes)
        self.target: float | None = getattr(config, "stop_at_return", None)
        self.seed = int(config.seed) + TRAINING_EVAL_SEED_OFFSET
        self.env, self.run = env, run
        self.next = self.every  # the env-step count the next evaluation waits for
        self.best: float | None = None
        self.best_step: int | None = None
        self.reached = False

    def due(self, step: int) -> bool:
        """Whether the log row at ``step`` evaluates (never once a stop was asked)."""
        return self.every > 0 and step >= self.next and not self.run.stop_requested

    def evaluate(
        self, step: int, agent: Callable[[], Any], state: Callable[[], dict[str, Any]]
    ) -> dict[str, float]:
        """Evaluate ``agent()`` (the policy as it is now, acting deterministically); keep
        ``state()`` as the best checkpoint when its mean return is the best so far; returns
        the figures for the log row."""
        with untouched_random_state():
            stats = evaluate(agent(), separate_env(self.env), self.episodes, seed=self.seed)
        self.next = (step // self.every + 1) * self.every
        figures = {
            M.EVAL_RETURN_MEAN: stats.mean_return,
            M.EVAL_RETURN_STD: stats.std_return,
            M.EVAL_LENGTH_MEAN: stats.mean_length,
        }
        if self.best is None or stats.mean_return > self.best:
            self.best, self.best_step = stats.mean_return, step
            record = {"step": step, **figures, "eval_episodes": self.episodes}
            self.run.save_best(step, {**state(), "evaluation": record})
            self._to_summary()
        if self.target is not None and stats.mean_return >= self.target:
            self.reached = True
            self.run.add_to_summary(stop_at_return_step=step)
            print(
                f"rlx: evaluation at step {step}: mean return {stats.mean_return:.4g} >= "
                f"stop_at_return={self.target:g}; training ends here (the best checkpoint is "
                "checkpoints/best.pt).",
                file=sys.stderr,
            )
        return figures

    def _to_summary(self) -> None:
        if self.best is not None:
            self.run.add_to_summary(best_eval_return_mean=self.best, best_eval_step=self.best_step)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The next evaluation's step and the best so far, for the run's checkpoints."""
        return {
            "every": self.every, "next": self.next, "best": self.best, "best_step": self.best_step
        }  # fmt: skip

    def load_state_dict(self, state: dict[str, Any] | None, step: int) -> None:
        """Continue from a checkpoint's :meth:`state_dict`: its next evaluation (one owed
        when a stop came first), unless the checkpoint has none or another ``eval_every``
        (then the first multiple of ``eval_every`` after ``step``), and its best so far."""
        if not self.every:
            return
        state = state or {}
        self.next = (step // self.every + 1) * self.every
        if state.get("every") == self.every:
            self.next = int(state["next"])
        if state.get("best") is not None:
            self.best, self.best_step = float(state["best"]), int(state["best_step"])
            self._to_summary()


def separate_env(env: Any) -> Any:
    """What an evaluation builds its own env copies from: an id or a recipe as it is (each
    evaluation makes and closes its copies), a factory called afresh, and an env object
    made again from its Gymnasium spec, else deep-copied (the object itself is a training
    env)."""
    if isinstance(env, str) or not callable(getattr(env, "step", None)):
        return env if not callable(env) else functools.partial(_call, env)
    if isinstance(env, type):  # an env class
        return functools.partial(_call, env)
    spec = getattr(env, "spec", None)
    if spec is not None:
        import gymnasium as gym

        return functools.partial(gym.make, spec)
    return functools.partial(copy.deepcopy, env)


def _call(factory: Callable[[], Any]) -> Any:
    return factory()


@contextlib.contextmanager
def untouched_random_state() -> Iterator[None]:
    """Put torch's CPU generator, numpy's global one and Python's ``random`` back as they were
    (building an agent initialises a network from torch's generator)."""
    import torch

    saved = torch.get_rng_state(), np.random.get_state(), random.getstate()
    try:
        yield
    finally:
        torch.set_rng_state(saved[0])
        np.random.set_state(saved[1])
        random.setstate(saved[2])


__all__ = [
    "TRAINING_EVAL_SEED_OFFSET",
    "TrainingEvaluation",
    "separate_env",
    "untouched_random_state",
]
