"""The ``python-tests`` reward, and the rule that model-written code never runs unisolated
unless the user says so."""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from rlx.errors import ConfigError, SandboxError
from rlx.llm.sandbox.isolation import MAX_PROCESSES, missing_protections
from rlx.llm.sandbox.process import (
    MAX_FILE_MB,
    MAX_OPEN_FILES,
    current_isolation,
    run_many,
)


class SandboxWarning(UserWarning):
    """Model-written code runs with protections missing, because the user allowed it."""


_warned = threading.Event()


def python_tests_reward(
    prompts: Sequence[str],
    completions: Sequence[str],
    tests: Sequence[str] | None = None,
    *,
    partial: bool = False,
    allow_unisolated: bool = False,
    timeout_s: float = 2.0,
    memory_mb: int = 256,
    max_workers: int | None = None,
    prepend_prompt: bool = True,
    answer: Sequence[str] | None = None,
    answers: Sequence[str] | None = None,
    **_: Any,
) -> list[float]:
    """1.0 per completion whose program passes all of its row's tests, else 0.0.

    The program is ``prompt + completion``: the prompt holds the code the model continues (a
    signature, a docstring), the completion the rest; with ``prepend_prompt=False`` the prompt
    (e.g. natural language) is left out. The program runs in the sandbox and only defines its
    names; the row's test code runs in the judge, a trusted process, and calls them across a
    boundary that lets only plain data through (:mod:`rlx.llm.sandbox`), so nothing the
    program does can forge a pass. ``tests`` is one string of test code per completion, the
    data's ``tests`` column (when None, the ``answer`` column of rows ``{"prompt", "answer"}``,
    also accepted as ``answers``).

    ``partial=True`` scores the share of tests passed instead (each top-level ``assert`` and
    each ``test_*`` function is a test). ``timeout_s`` is the wall-clock limit per program and
    its tests, ``memory_mb`` its address-space limit; ``max_workers`` programs (default
    ``min(4, cpu_count)``) run at once; the scores keep the order of ``completions``. Where this
    machine cannot isolate the program, raises :class:`~rlx.errors.SandboxError` unless
    ``allow_unisolated=True``, which warns once instead.
    """
    test_code = _tests_for(prompts, completions, tests, answer if answer is not None else answers)
    missing = check_isolation(allow_unisolated)
    if missing and not _warned.is_set():
        warn_unisolated(missing)
    programs = [
        (prompt if prepend_prompt else "") + completion + "\n"
        for prompt, completion in zip(prompts, completions, strict=True)
    ]
    results = run_many(
        programs, test_code, timeout_s=timeout_s, memory_mb=memory_mb, max_workers=max_workers
    )
    if partial:
        return [result.share_passed for result in results]
    return [float(result.passed) for result in results]


python_tests_reward.runs_model_code = True  # type: ignore[attr-defined]


def check_isolation(allow_unisolated: bool = False) -> list[str]:
    """The protections this machine lacks (empty when it has them all); SandboxError when some
    are missing and ``allow_unisolated`` is False."""
    missing = missing_protections(current_isolation())
    if missing and not allow_unisolated:
        raise SandboxError(
            "running model-written code needs the sandbox's isolation, and here there is "
            f"{'; and '.join(missing)}. Run as root where `unshare` works, or accept the risk "
            "with allow_unisolated=True (CLI: --allow-unisolated)."
        )
    return missing


def warn_unisolated(missing: Sequence[str]) -> None:
    """The one warning that names every missing protection (once per process from the reward;
    a stage calls it at the start of each run)."""
    _warned.set()
    warnings.warn(
        "model-written code will run without full isolation (allow_unisolated=True): "
        + "; ".join(missing)
        + ". A program may then tamper with the judge, so its score is not guaranteed.",
        SandboxWarning,
        stacklevel=3,
    )


def prepare_for_run(
    reward: Callable[..., list[float]], allow_unisolated: bool
) -> tuple[Callable[..., list[float]], dict[str, Any] | None]:
    """For a reward that runs model-written code (``runs_model_code``): check the isolation
    before training starts (SandboxError, or with ``allow_unisolated`` the run's one warning),
    and return the reward bound to ``allow_unisolated`` with the record ``summary.json`` keeps
    of the protections. Any other reward comes back as it is, with no record."""
    if not getattr(reward, "runs_model_code", False):
        return reward, None
    missing = check_isolation(allow_unisolated)
    if missing:
        warn_unisolated(missing)
    info = sandbox_info()
    kinds = ("network_namespace", "pid_namespace", "private_tmp", "uid_drop")
    record = {
        "protections": [kind for kind in kinds if info[kind]],
        "missing": missing,
        "allow_unisolated": allow_unisolated,
    }
    bound = functools.partial(reward, allow_unisolated=allow_unisolated)
    return functools.update_wrapper(bound, reward), record


def sandbox_info() -> dict[str, Any]:
    """Which protections are active on this machine, and the limits each run gets."""
    isolation = current_isolation()
    uids = None if isolation.uids is None else sorted(set(isolation.uids))
    return {
        "python": isolation.python,
        "network_namespace": isolation.namespaces,
        "pid_namespace": isolation.namespaces,
        "private_tmp": isolation.namespaces,
        "uid_drop": uids is not None,
        "uids": None if uids is None else f"{uids[0]}..{uids[-1]}",
        "verdict_outside_program": True,
        "limits": {
            "wall_s": "timeout_s",
            "cpu_s": "ceil(timeout_s) + 1",
            "address_space_mb": "memory_mb",
            "processes": MAX_PROCESSES if isolation.uids is not None else "user's tasks + 64",
            "file_size_mb": MAX_FILE_MB,
            "open_files": MAX_OPEN_FILES,
        },
        "missing": missing_protections(isolation),
    }


def _tests_for(
    prompts: Sequence[str],
    completions: Sequence[str],
    tests: Sequence[str] | None,
    answers: Sequence[str] | None,
) -> Sequence[str]:
    """The test code per completion, from ``tests`` or else ``answers``, checked for length."""
    source = "tests" if tests is not None else "answers"
    test_code = tests if tests is not None else answers
    if test_code is None:
        raise ConfigError(
            "the python-tests reward needs test code: pass tests=[...] (one string of asserts "
            "per completion), or rows {'prompt', 'answer'} whose answer is the test code."
        )
    if isinstance(test_code, str):
        raise ConfigError(
            f"{source} must be a list with one string of test code per completion, not a string."
        )
    if len(prompts) != len(completions) or len(completions) != len(test_code):
        raise ConfigError(
            f"got {len(prompts)} prompts, {len(completions)} completions and {len(test_code)} "
            f"{source}; they must match, one per completion."
        )
    return test_code
