"""The config fields the deep agents share, declared and checked once.

An algorithm's config inherits the groups its training loop reads and adds only its own
hyperparameters:

- :class:`RunFields`: the budget, the seed, the env copies, the evaluations (during training,
  :mod:`rlx.core.training_evaluation`, and after it), the device and the checkpoints (every
  deep agent);
- :class:`CheckpointFields`: when the run folder gets a checkpoint and how many stay
  (:class:`rlx.runs.checkpoints.CheckpointCadence` reads them from any config that has them,
  so another family's config takes them by inheriting this group);
- :class:`ReplayFields`: the off-policy loop's vector env, replay buffer, rhythm of updates,
  logs and checkpoints (DQN, SAC, TD3);
- :class:`RunnerFields`: Ray env runners, checked as plain data (PPO, A2C, DQN).

``rlx train ALGO --help`` lists the fields in declaration order: the groups first (what to
run, for how long, where), then the algorithm's own. An algorithm that needs another default
for a shared field redeclares it without a docstring, so the field keeps its place and its
one description.

Each group checks its own fields in ``__post_init__`` and hands on to the next group
(``super().__post_init__()``); an algorithm's config does the same, then checks its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rlx.core.checks import at_least, check_runner_fields, one_of
from rlx.core.devices import check_device
from rlx.core.envs import VECTORIZATIONS
from rlx.errors import ConfigError


@dataclass(frozen=True)
class CheckedFields:
    """The root of the field groups: the end of the chain of ``__post_init__`` checks."""

    def __post_init__(self) -> None:
        """Nothing left to check."""


@dataclass(frozen=True)
class CheckpointFields(CheckedFields):
    """When a run writes a checkpoint, and how many it keeps."""

    checkpoint_every_s: float | None = None
    """seconds of wall time between checkpoints (None: 30, unless checkpoint_every_steps is
    set; 0: at every log)"""
    checkpoint_every_steps: int | None = None
    """steps between checkpoints, counted as the run logs them (env steps for the deep
    agents, optimizer steps for the language-model stages); None: by time only"""
    checkpoints_kept: int = 3
    """the newest step checkpoints kept (0: all; checkpoints/best.pt is always kept)"""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.checkpoint_every_s is not None:
            at_least(self, "checkpoint_every_s", 0)
        if self.checkpoint_every_steps is not None:
            at_least(self, "checkpoint_every_steps", 1)
        at_least(self, "checkpoints_kept", 0)


@dataclass(frozen=True)
class _RunBasics(CheckedFields):
    """The budget, the seed, the env copies, the evaluations and the device: the first
    fields of :class:`RunFields`, ahead of the checkpoint fields in ``--help``."""

    total_steps: int = 100_000
    """env steps to train for (transitions, over all env copies)"""
    seed: int = 0
    """seeds the networks, the envs, the actions and every sampling (replay, minibatches)"""
    num_envs: int = 1
    """env copies stepped together as one vector env"""
    eval_episodes: int = 20
    """deterministic evaluation episodes after training (summary.json) and at each
    eval_every (0: none)"""
    eval_every: int | None = None
    """env steps between evaluations during training; the best is kept as
    checkpoints/best.pt (None or 0: none)"""
    stop_at_return: float | None = None
    """end training, completed, once an evaluation's mean return reaches this (needs eval_every)"""
    device: str = "auto"
    """where the networks learn and act: auto (CUDA, then MPS, then the CPU), cpu, cuda,
    cuda:N or mps"""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_device(self)
        at_least(self, "total_steps", 1)
        at_least(self, "num_envs", 1)
        at_least(self, "eval_episodes", 0)
        check_evaluation_fields(self)


@dataclass(frozen=True)
class RunFields(CheckpointFields, _RunBasics):
    """What every deep agent's run takes: what to run, for how long and where, then when to
    checkpoint. (A dataclass lists a base's fields before its subclass's, the last base's
    first: so the checkpoint fields follow the others.)"""


def check_evaluation_fields(config: _RunBasics) -> None:
    """``eval_every`` >= 0 (None or 0: off) with ``eval_episodes`` >= 1 to evaluate, and
    ``stop_at_return`` only where something evaluates."""
    name = type(config).__name__
    if config.eval_every is not None:
        at_least(config, "eval_every", 0)
        if config.eval_every and config.eval_episodes < 1:
            raise ConfigError(
                f"{name}: eval_every={config.eval_every} evaluates eval_episodes episodes, but "
                "eval_episodes=0; use eval_episodes >= 1 (e.g. 10), or leave eval_every out."
            )
    if config.stop_at_return is not None and not config.eval_every:
        raise ConfigError(
            f"{name}: stop_at_return={config.stop_at_return} is read from the evaluations "
            "during training, and there are none; add eval_every (env steps between them, "
            "e.g. 5000)."
        )


@dataclass(frozen=True)
class ReplayFields(RunFields):
    """What the off-policy loop reads: the vector env, the replay buffer, when to learn."""

    vectorization: Literal["auto", "sync", "async"] = "auto"
    """auto: the env's native vector version if it has one, else sync; async: subprocesses"""
    buffer_size: int = 1_000_000
    """replay buffer capacity in transitions"""
    batch_size: int = 256
    """transitions per gradient step"""
    learning_starts: int = 5_000
    """transitions stored before the first gradient step (continuous-action agents act
    uniformly at random until then)"""
    train_freq: int = 1
    """env steps (over all copies) between rounds of gradient steps"""
    gradient_steps: int = 1
    """gradient steps per round"""
    save_replay_buffer: bool = False
    """also save the replay buffer in checkpoints (large), so a resume continues exactly"""
    log_every: int = 1_000
    """env steps between metric logs"""

    def __post_init__(self) -> None:
        super().__post_init__()
        one_of(self, "vectorization", VECTORIZATIONS)
        for name in ("buffer_size", "batch_size", "train_freq", "gradient_steps", "log_every"):
            at_least(self, name, 1)
        at_least(self, "learning_starts", 0)
        if self.buffer_size < self.batch_size:
            raise ConfigError(
                f"{type(self).__name__}: buffer_size={self.buffer_size} is smaller than "
                f"batch_size={self.batch_size}; use buffer_size >= {self.batch_size}."
            )
        if self.learning_starts > self.buffer_size:
            raise ConfigError(
                f"{type(self).__name__}: learning_starts={self.learning_starts} exceeds "
                f"buffer_size={self.buffer_size}, so learning would never start; use "
                "learning_starts <= buffer_size."
            )


@dataclass(frozen=True)
class RunnerFields(CheckedFields):
    """Ray env runners: collect on ``runners`` Ray actors of ``num_envs`` copies each."""

    runners: int | None = None
    """Ray env runners collecting in parallel, num_envs copies each, side by side in the
    learner's buffer (None: collect in this process; extra ray)"""
    ray_address: str | None = None
    """with runners: join the Ray cluster at HOST:PORT (None: start a local Ray for the run)"""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_runner_fields(self)


__all__ = [
    "CheckedFields",
    "CheckpointFields",
    "ReplayFields",
    "RunFields",
    "RunnerFields",
    "check_evaluation_fields",
]
