"""The ``python-tests`` and ``stdio-tests`` rewards, and the rule that model-written code never
runs unisolated unless the user says so."""

from __future__ import annotations

import functools
import json
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rlx.errors import ConfigError, SandboxError
from rlx.sandbox import cgroups
from rlx.sandbox.isolation import MAX_PROCESSES, missing_protections
from rlx.sandbox.process import (
    JUDGE_MEMORY_MB,
    MAX_FILE_MB,
    MAX_OPEN_FILES,
    SandboxResult,
    check_limits,
    check_test_code,
    current_isolation,
    run_many,
    run_stdio,
)
from rlx.sandbox.testcode import trusted_setup


class SandboxWarning(UserWarning):
    """Model-written code runs with protections missing, because the user allowed it."""


_warned = threading.Event()


def python_tests_reward(
    prompts: Sequence[str],
    completions: Sequence[str],
    tests: Sequence[str] | None = None,
    *,
    entry_point: Sequence[str | None] | None = None,
    partial: bool = False,
    allow_unisolated: bool = False,
    timeout_s: float = 2.0,
    memory_mb: int = 256,
    judge_memory_mb: int = JUDGE_MEMORY_MB,
    max_workers: int | None = None,
    prepend_prompt: bool = True,
    answer: Sequence[str] | None = None,
    answers: Sequence[str] | None = None,
    setup: Sequence[str | None] | None = None,
    test_setup_code: Sequence[str | None] | None = None,
    **_: Any,
) -> list[float]:
    """1.0 per completion whose program passes its row's tests, else 0.0.

    The program is ``prompt + completion``: the prompt holds the code the model continues (a
    signature, a docstring), the completion the rest; with ``prepend_prompt=False`` the prompt
    (e.g. natural language) is left out. The program runs in the sandbox and only defines its
    names; the row's test code runs in the judge, a second sandboxed process, and calls them
    across a boundary that lets only plain data through (:mod:`rlx.sandbox`), so nothing the
    program does can forge a pass. ``tests`` is one string of test code per completion, the
    data's ``tests`` column (when None, the ``answer`` column of rows ``{"prompt", "answer"}``,
    also accepted as ``answers``), in any of the layouts of :mod:`rlx.sandbox.testcode`:
    top-level asserts, pytest functions and classes, unittest cases, HumanEval's
    ``check(candidate)`` (called with the row's ``entry_point`` column when the tests do not
    call it).

    With ``prepend_prompt=True`` the prompt's own definitions (its helpers, its constants: all
    but the entry point, the function the completion finishes) also run in the judge as
    trusted set-up code (:func:`~rlx.sandbox.testcode.trusted_setup`), and the tests call
    those, never a completion's redefinition of them. The ``setup`` column (MBPP's
    ``test_setup_code``, also accepted by that name, or the code prompt of a chat-layout row)
    is trusted set-up code the same way, whatever ``prepend_prompt`` is: with the row's
    ``entry_point``, its definitions but the entry point (as for a prompt), else all of it.
    Without either (``prepend_prompt=False`` and no ``setup``), a completion that defines the
    helpers the tests call itself is trusted for them.

    ``partial=True`` scores the share of tests passed instead, tests as written: each assert
    statement (wherever it sits: a loop of asserts is one test, passed only when every run of
    it passed) and each test function, method or parametrized case; a failing set-up statement
    scores the row 0.
    ``timeout_s`` is the wall-clock limit per program and its tests, ``memory_mb`` the
    program's address-space limit and ``judge_memory_mb`` the judge's; ``max_workers``
    programs (default ``min(4, cpu_count)``) run at once; the scores keep the order of
    ``completions``. Test code that is not Python or checks nothing raises
    :class:`~rlx.errors.SandboxError` naming the row, before anything runs. Where this machine
    cannot isolate the program, raises SandboxError unless ``allow_unisolated=True``, which
    warns once instead.
    """
    test_code = _tests_for(prompts, completions, tests, answer if answer is not None else answers)
    entry_points = _column("entry_point", entry_point, len(completions))
    for row, (code, name) in enumerate(zip(test_code, entry_points, strict=True)):
        _checked_row(row, check_test_code, code, name)
    _guard(allow_unisolated)
    programs = [
        (prompt if prepend_prompt else "") + completion + "\n"
        for prompt, completion in zip(prompts, completions, strict=True)
    ]
    extra = _column("setup", setup if setup is not None else test_setup_code, len(completions))
    setups = [
        (trusted_setup(prompt, name) if prepend_prompt and isinstance(prompt, str) else "")
        + _row_setup(code, name)
        for prompt, name, code in zip(prompts, entry_points, extra, strict=True)
    ]
    results = run_many(
        programs, test_code, entry_points=entry_points, setups=setups, timeout_s=timeout_s,
        memory_mb=memory_mb, judge_memory_mb=judge_memory_mb, max_workers=max_workers,
    )  # fmt: skip
    return _scores(results, partial)


python_tests_reward.runs_model_code = True  # type: ignore[attr-defined]


def _row_setup(code: str | None, entry_point: str | None) -> str:
    """A row's ``setup`` column as trusted set-up code (see :func:`python_tests_reward`)."""
    if not isinstance(code, str) or not code.strip():
        return ""
    if entry_point:
        return trusted_setup(code, entry_point)
    return code if code.endswith("\n") else code + "\n"


def check_python_tests_data(
    prompts: Sequence[Any],
    tests: Sequence[str] | None = None,
    *,
    entry_point: Sequence[str | None] | None = None,
    answer: Sequence[str] | None = None,
    answers: Sequence[str] | None = None,
    **_: Any,
) -> None:
    """Check every row's test code before a run starts (SandboxError naming the first row that
    is not Python or checks nothing), so that a bad row stops the run at its start, not hours
    in, when a batch first holds it."""
    test_code = _tests_for(prompts, prompts, tests, answer if answer is not None else answers)
    entry_points = _column("entry_point", entry_point, len(prompts))
    for row, (code, name) in enumerate(zip(test_code, entry_points, strict=True)):
        _checked_row(row, check_test_code, code, name)


def check_stdio_tests_data(prompts: Sequence[Any], **columns: Any) -> None:
    """Check every row's stdin/stdout cases before a run starts (SandboxError naming the first
    row without usable cases)."""
    names = ("input", "output", "tests", "inputs", "outputs")
    given = {name: columns[name] for name in names if columns.get(name) is not None}
    _column_lengths_match(given, len(prompts))
    for row in range(len(prompts)):
        _checked_row(row, stdio_cases, **{k: v[row] for k, v in given.items()})


python_tests_reward.check_data = check_python_tests_data  # type: ignore[attr-defined]


def stdio_tests_reward(
    prompts: Sequence[str],
    completions: Sequence[str],
    input: Sequence[str | Sequence[str]] | None = None,
    output: Sequence[str | Sequence[str]] | None = None,
    *,
    tests: Sequence[Any] | None = None,
    inputs: Sequence[Sequence[str]] | None = None,
    outputs: Sequence[Sequence[str]] | None = None,
    partial: bool = False,
    allow_unisolated: bool = False,
    timeout_s: float = 2.0,
    memory_mb: int = 256,
    max_workers: int | None = None,
    prepend_prompt: bool = False,
    **_: Any,
) -> list[float]:
    """1.0 per completion whose program, run as a script on each of its row's inputs, prints
    each expected output; else 0.0 (with ``partial=True``, the share of cases passed).

    The form of competitive-programming data: each row holds ``input`` and ``output`` columns
    (a string each, or a list of strings each), or ``inputs``/``outputs`` lists, or a ``tests``
    column with a list of ``{"input", "output"}`` pairs or an ``{"inputs", "outputs"}`` object
    (APPS' ``input_output``, also as JSON text). The program reads the input on stdin in the
    sandbox; its stdout is compared with the expected output by the launcher, outside its
    reach, the usual judges' way: line by line, trailing whitespace and trailing empty lines
    ignored. ``timeout_s`` holds for each case. The prompt is usually the problem's text, so it
    is left out of the program unless ``prepend_prompt=True``. Isolation as for
    :func:`python_tests_reward`.
    """
    if len(prompts) != len(completions):
        raise ConfigError(f"got {len(prompts)} prompts and {len(completions)} completions.")
    columns = {"input": input, "output": output, "tests": tests, "inputs": inputs,
               "outputs": outputs}  # fmt: skip
    rows = [
        _checked_row(row, stdio_cases, **{k: v[row] for k, v in columns.items() if v is not None})
        for row in range(len(completions))
        if _column_lengths_match(columns, len(completions))
    ]
    _guard(allow_unisolated)
    programs = [
        (prompt if prepend_prompt else "") + completion + "\n"
        for prompt, completion in zip(prompts, completions, strict=True)
    ]
    workers = check_limits(timeout_s, memory_mb, max_workers)
    isolation = current_isolation()
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(programs)))) as pool:
        results = list(
            pool.map(
                lambda pair: run_stdio(
                    pair[0], pair[1], timeout_s=timeout_s, memory_mb=memory_mb, isolation=isolation
                ),
                zip(programs, rows, strict=True),
            )
        )
    return _scores(results, partial)


stdio_tests_reward.runs_model_code = True  # type: ignore[attr-defined]
stdio_tests_reward.check_data = check_stdio_tests_data  # type: ignore[attr-defined]


def stdio_cases(
    input: str | Sequence[str] | None = None,
    output: str | Sequence[str] | None = None,
    tests: Any = None,
    inputs: Sequence[str] | None = None,
    outputs: Sequence[str] | None = None,
) -> list[tuple[str, str]]:
    """One row's ``(input, expected output)`` cases from whichever columns it has (see
    :func:`stdio_tests_reward`); ConfigError saying what is malformed."""
    if isinstance(tests, str):
        try:
            tests = json.loads(tests)
        except ValueError:
            raise ConfigError("its tests column is text but not JSON.") from None
    if isinstance(tests, Mapping):
        inputs, outputs = tests.get("inputs"), tests.get("outputs")
    elif tests is not None:
        if not isinstance(tests, Sequence) or not all(isinstance(t, Mapping) for t in tests):
            raise ConfigError("its tests column must be a list of {'input', 'output'} pairs.")
        inputs = [t.get("input") for t in tests]
        outputs = [t.get("output") for t in tests]
    elif input is not None or output is not None:
        inputs = [input] if isinstance(input, str) else input
        outputs = [output] if isinstance(output, str) else output
    if inputs is None or outputs is None:
        raise ConfigError("it has no input/output columns (or tests with input/output pairs).")
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence) or \
            isinstance(outputs, (str, bytes)) or not isinstance(outputs, Sequence):  # fmt: skip
        raise ConfigError("its inputs and outputs must be strings or lists of strings.")
    inputs, outputs = list(inputs), list(outputs)
    if not inputs or len(inputs) != len(outputs):
        raise ConfigError(f"it has {len(inputs)} inputs and {len(outputs)} outputs.")
    if not all(isinstance(t, str) for t in inputs + outputs):
        raise ConfigError("its inputs and outputs must be strings.")
    return list(zip(inputs, outputs, strict=True))


def _checked_row(row: int, check: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``check(...)`` for one row; a data error becomes a SandboxError naming the row."""
    try:
        return check(*args, **kwargs)
    except (SandboxError, ConfigError) as error:
        raise SandboxError(f"row {row} of the data cannot judge code: {error}") from None


def _column_lengths_match(columns: Mapping[str, Sequence[Any] | None], rows: int) -> bool:
    for name, values in columns.items():
        if values is not None and (isinstance(values, str) or len(values) != rows):
            raise ConfigError(f"the {name} column must hold one value per completion ({rows}).")
    return True


def _column(name: str, values: Sequence[Any] | None, rows: int) -> list[Any]:
    if values is None:
        return [None] * rows
    if isinstance(values, str) or len(values) != rows:
        raise ConfigError(f"the {name} column must hold one value per completion ({rows}).")
    return list(values)


def _guard(allow_unisolated: bool) -> None:
    missing = check_isolation(allow_unisolated)
    if missing and not _warned.is_set():
        warn_unisolated(missing)


def _scores(results: Sequence[SandboxResult], partial: bool) -> list[float]:
    if partial:
        return [result.share_passed for result in results]
    return [float(result.passed) for result in results]


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
    kinds = ("network_namespace", "pid_namespace", "ipc_namespace", "private_tmp",
             "read_only_host", "uid_drop", "judge_uid", "seccomp")  # fmt: skip
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
        "ipc_namespace": isolation.namespaces,
        "private_tmp": isolation.namespaces,
        "read_only_host": isolation.namespaces,
        "uid_drop": uids is not None,
        "judge_uid": isolation.separate_judge_uid,
        "seccomp": isolation.seccomp,
        "cgroup": isolation.namespaces and cgroups.available(),
        "judge_sandboxed": True,
        "uids": None if uids is None else f"{uids[0]}..{uids[-1]}",
        "verdict_outside_program": True,
        "limits": {
            "wall_s": "timeout_s",
            "cpu_s": "ceil(timeout_s) + 1",
            "address_space_mb": "memory_mb",
            "judge_address_space_mb": "judge_memory_mb",
            "processes": MAX_PROCESSES
            if isolation.namespaces or isolation.uids is not None
            else "user's tasks + 64",
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
