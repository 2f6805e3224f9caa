"""Callbacks: your own code at the hooks of a run, ``rlx.train(..., callbacks=[...])``.

A callback is any object with some of these methods (none is required, no base class is
needed); each may return False to stop training, None or True to go on:

    on_start(step, info)       the run is open; step 0, or the checkpoint's step on a resume;
                               info: {"run_dir": Path, "resumed": bool}
    on_step(step, info)        after each collection of a deep agent (one vector step of DQN,
                               SAC and TD3; one rollout of PPO, A2C and REINFORCE); step counts
                               env steps; info: {"episode_returns", "episode_lengths"}, arrays
                               of the training episodes that ended in it
    on_update(step, metrics)   each row the run logs, as metrics.jsonl gets it (an update of an
                               on-policy agent, every log_every env steps of an off-policy one,
                               a chunk of episodes of a tabular learner, a step of a language
                               model stage, an iteration of AlphaZero and MuZero)
    on_eval(step, result)      a logged row that holds evaluation figures, after its on_update;
                               result: those figures (eval_return_mean, eval_return_std,
                               eval_length_mean of a deep agent's evaluation every eval_every
                               steps; eval_* and exact_match of a language-model stage's
                               held-out data)
    on_end(step, summary)      the run has ended, summary.json as written (its return value is
                               not heeded)

Returning False asks the run to stop as Ctrl-C does: the loop finishes the step it is in, saves
a checkpoint and ends with ``status: "stopped"`` (a deep agent then skips the final evaluation,
as for any early stop); the reason is one line on stderr. An exception raised in a hook ends
the run as ``failed``, its checkpoints kept.

Which family calls which hook: every run calls ``on_start``, ``on_update`` and ``on_end``;
the deep agents (DQN, SAC, TD3, PPO, A2C, REINFORCE) also ``on_step``, and ``on_eval`` when
they evaluate during training (``eval_every``); the language-model stages ``on_eval`` at each
held-out evaluation (their ``eval_every``). Tabular learners, AlphaZero and MuZero call no
``on_step`` and no ``on_eval``: their rows (``on_update``) are their steps.

:class:`CallbackObserver` is how the callbacks reach the run: a
:class:`rlx.runs.RunObserver`, attached from above as the live doctor is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from rlx.errors import ConfigError
from rlx.metrics import is_evaluation

HOOKS = ("on_start", "on_step", "on_update", "on_eval", "on_end")
"""The methods a callback may have, in the order a run calls them first."""


class Callback(Protocol):
    """What ``rlx.train(..., callbacks=[...])`` takes: an object with any of :data:`HOOKS`
    (this protocol lists them all; a callback needs only those it uses)."""

    def on_start(self, step: int, info: Mapping[str, Any]) -> bool | None: ...

    def on_step(self, step: int, info: Mapping[str, Any]) -> bool | None: ...

    def on_update(self, step: int, metrics: Mapping[str, float]) -> bool | None: ...

    def on_eval(self, step: int, result: Mapping[str, float]) -> bool | None: ...

    def on_end(self, step: int, summary: Mapping[str, Any]) -> None: ...


class CallbackObserver:
    """The callbacks of one run as a :class:`rlx.runs.RunObserver`: hooks the run sends
    (:meth:`rlx.runs.Run.notify`) and its logged rows reach every callback that has the hook,
    in the order given; the first that returns False sets :attr:`stop_reason`."""

    def __init__(self, callbacks: Sequence[Any]) -> None:
        if isinstance(callbacks, (str, bytes)) or not isinstance(callbacks, Sequence):
            raise ConfigError(
                f"callbacks={callbacks!r} must be a list of callback objects (each with some "
                f"of {', '.join(HOOKS)})."
            )
        for i, callback in enumerate(callbacks):
            if not any(callable(getattr(callback, hook, None)) for hook in HOOKS):
                raise ConfigError(
                    f"callbacks[{i}] ({type(callback).__name__}) has none of the methods "
                    f"{', '.join(HOOKS)}; give it one, e.g. on_update(step, metrics)."
                )
        self.callbacks = list(callbacks)
        self.stop_reason: str | None = None

    # ------------------------------------------------------------------ RunObserver
    def attach(self, run_dir: Path, resumed: bool) -> None:
        """Nothing to prepare: ``on_start`` comes with the run's first hook."""

    def observe(self, step: int, values: Mapping[str, float]) -> None:
        """A logged row: ``on_update`` with it, then ``on_eval`` with its evaluation figures."""
        self._call("on_update", step, values)
        figures = {name: value for name, value in values.items() if is_evaluation(name)}
        if figures:
            self._call("on_eval", step, figures)

    def summary(self) -> dict[str, Any]:
        """No fields for ``summary.json``."""
        return {}

    # ------------------------------------------------------------------ the run's hooks
    def on_start(self, step: int, info: Mapping[str, Any]) -> None:
        self._call("on_start", step, info)

    def on_step(self, step: int, info: Mapping[str, Any]) -> None:
        self._call("on_step", step, info)

    def on_end(self, step: int, summary: Mapping[str, Any]) -> None:
        for callback in self.callbacks:
            method = getattr(callback, "on_end", None)
            if method is not None:
                method(step, summary)

    def _call(self, hook: str, step: int, payload: Any) -> None:
        for callback in self.callbacks:
            method = getattr(callback, hook, None)
            if method is None:
                continue
            if method(step, payload) is False and self.stop_reason is None:
                self.stop_reason = (
                    f"rlx: stopping at step {step}: {type(callback).__name__}.{hook} returned False"
                )


__all__ = ["HOOKS", "Callback", "CallbackObserver"]
