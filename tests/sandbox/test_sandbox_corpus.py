"""The sandbox's verdict agrees with plain execution on the corpus of ``tests/sandbox/corpus.py``.

Plain execution is the reference, computed here, now, for every case (nothing is cached): each
program runs in a fresh ``python -I`` with no sandbox, as HumanEval's harness runs it. The
program is executed as the module ``solution`` (registered in ``sys.modules``, so ``from
solution import f`` and ``pickle`` of its classes work, as they do for a user running the tests
beside ``solution.py``), then the tests run in that same namespace, with ``check(entry_point)``
added where HumanEval's harness adds it. pytest files run under pytest (one file of program and
tests, or ``solution.py`` beside a test file that imports it), ``unittest`` files under
unittest's loader, stdin/stdout programs as scripts once per case. A case passes plainly when
nothing raised (every test passed, at least one ran, every stdio case printed its output).
Where partial credit matters (MBPP assert lists, stdio cases) the share of asserts or cases
passed is compared too, each assert run on its own.

Every case must agree, except the documented forgeries (:data:`INTENDED_DISAGREEMENTS`), which
plain Python passes and the sandbox must score 0. ``make test`` runs a deterministic stratified
subset (every shape, version and forgery); ``-m slow`` runs the whole corpus.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from rlx.sandbox import run_many, run_stdio
from tests.sandbox.corpus import SHAPES, VERSIONS, Case, corpus, subset

TIMEOUT_S = 2.0
PLAIN_LIMIT_S = 3 * TIMEOUT_S
"""Plain execution's time limit; a plain run past it fails."""
INCONCLUSIVE_S = TIMEOUT_S / 2
"""A plain pass slower than this is too near the sandbox's limit to compare: left out, and
counted."""
MAX_INCONCLUSIVE = 3
"""More cases too slow to compare than this fails the test: the corpus would be judging less
than it says."""
WORKERS = 2

INTENDED_DISAGREEMENTS = {
    "forged/stopiteration-map": "a StopIteration from the program ends map() early",
    "forged/stopiteration-filter": "a StopIteration from the program ends filter() early",
    "forged/stopiteration-zip": "a StopIteration from the program ends zip() early",
    "forged/humaneval-32-redefines-poly": "the completion redefines the prompt's poly (set-up)",
    "forged/humaneval-38-redefines-encode_cyclic": "the completion redefines encode_cyclic",
    "forged/humaneval-50-redefines-encode_shift": "the completion redefines encode_shift",
    "forged/mbpp-patched-math-isclose": "the tests' unbound math is the program's patched module",
    "forged/eq-always-true": "an object whose __eq__ always returns True",
    "forged/eq-always-true-pytest": "__eq__ always True and __ne__ always False, in pytest",
    "forged/callable": "callable() forged: builtins.callable patched, a non-callable returned",
}  # fmt: skip
"""The forgeries the sandbox closes: plain Python passes each, the sandbox must score it 0."""


# --- plain execution ------------------------------------------------------------------------------

# Run as ``python -I -c RUNNER case.json verdict.json`` in a fresh folder. It writes
# {"passed", "checks": [passed, total] or null, "elapsed"} and leaves with os._exit (threads a
# program leaves behind must not hold it).
RUNNER = r"""
import ast, json, os, sys, time, types
case = json.load(open(sys.argv[1]))
program, tests, layout = case["program"], case["tests"], case["layout"]
def finish(passed, checks=None):
    with open(sys.argv[2], "w") as out:
        json.dump({"passed": bool(passed), "checks": checks,
                   "elapsed": time.monotonic() - start}, out)
    os._exit(0)
with open("solution.py", "w") as f:
    f.write(program)
start = time.monotonic()
if layout == "pytest":
    import pytest
    two_files = "import solution" in tests or "from solution import" in tests
    with open("test_case.py", "w") as f:
        f.write(tests if two_files else program + "\n" + tests)
    class Timing:  # the tests' own time, without pytest's start-up
        spent = 0.0
        def pytest_runtest_logreport(self, report):
            Timing.spent += report.duration
    code = pytest.main(["-q", "-p", "no:cacheprovider", "-o", "addopts=", "-o",
                        "python_files=test_case.py", "--rootdir", os.getcwd(), "test_case.py"],
                       plugins=[Timing()])
    start = time.monotonic() - Timing.spent
    finish(code == 0)
module = types.ModuleType("solution")
module.__file__ = os.path.abspath("solution.py")
sys.modules["solution"] = module
namespace = module.__dict__
try:
    exec(compile(program, module.__file__, "exec"), namespace)
except BaseException:
    finish(False, [0, sum(isinstance(s, ast.Assert) for s in ast.parse(tests).body)])
if layout == "unittest":
    import unittest
    exec(compile(tests, "tests.py", "exec"), namespace)
    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    result = unittest.TestResult()
    suite.run(result)
    finish(result.wasSuccessful() and result.testsRun > len(result.skipped))
if case["partial"]:
    passed = total = 0
    for statement in ast.parse(tests).body:
        code = compile(ast.Module(body=[statement], type_ignores=[]), "tests.py", "exec")
        is_check = isinstance(statement, ast.Assert)
        total += is_check
        try:
            exec(code, namespace)
        except BaseException:
            if not is_check:
                finish(False, [0, sum(isinstance(s, ast.Assert) for s in ast.parse(tests).body)])
            continue
        passed += is_check
    finish(total > 0 and passed == total, [passed, total])
tree = ast.parse(tests)
defines_check = any(isinstance(s, ast.FunctionDef) and s.name == "check" for s in tree.body)
calls_check = "\ncheck(" in "\n" + tests
if case["entry_point"] and defines_check and not calls_check:
    tests = tests + "\n\ncheck(" + case["entry_point"] + ")\n"
try:
    exec(compile(tests, "tests.py", "exec"), namespace)
except BaseException:
    finish(False)
finish(True)
"""


@dataclass(frozen=True)
class Plain:
    passed: bool
    share: float | None  # share of checks passed, where partial credit is compared
    elapsed: float
    timed_out: bool = False


def same_output(actual: str, expected: str) -> bool:
    """Judges' usual rule: equal line by line up to trailing whitespace and trailing empty
    lines (written here again, independently of the sandbox's own)."""

    def lines(text: str) -> list[str]:
        rows = [row.rstrip() for row in text.replace("\r\n", "\n").split("\n")]
        while rows and not rows[-1]:
            rows.pop()
        return rows

    return lines(actual) == lines(expected)


def plain_stdio(case: Case, folder: Path) -> Plain:
    script = folder / "solution.py"
    script.write_text(case.program)
    passed, elapsed = 0, 0.0
    assert case.cases is not None
    for given, expected in case.cases:
        start = time.monotonic()
        try:
            done = subprocess.run(
                [sys.executable, "-I", str(script)], input=given.encode(),
                capture_output=True, timeout=PLAIN_LIMIT_S, cwd=folder,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return Plain(False, None, PLAIN_LIMIT_S, timed_out=True)
        elapsed = max(elapsed, time.monotonic() - start)
        ok = done.returncode == 0 and same_output(done.stdout.decode(errors="replace"), expected)
        passed += ok
    return Plain(passed == len(case.cases), passed / len(case.cases), elapsed)


def plain_one(case: Case) -> Plain:
    with tempfile.TemporaryDirectory(prefix="rlx-plain-") as name:
        folder = Path(name)
        if case.layout == "stdio":
            return plain_stdio(case, folder)
        job = {"program": case.program, "tests": case.tests, "layout": case.layout,
               "entry_point": case.entry_point, "partial": case.partial}  # fmt: skip
        (folder / "case.json").write_text(json.dumps(job))
        try:
            subprocess.run([sys.executable, "-I", "-c", RUNNER, "case.json", "verdict.json"],
                           cwd=folder, capture_output=True, timeout=PLAIN_LIMIT_S,
                           stdin=subprocess.DEVNULL)  # fmt: skip
        except subprocess.TimeoutExpired:
            return Plain(False, None, PLAIN_LIMIT_S, timed_out=True)
        verdict_path = folder / "verdict.json"
        if not verdict_path.exists():  # the program ended the interpreter: it failed
            return Plain(False, 0.0 if case.partial else None, 0.0)
        verdict = json.loads(verdict_path.read_text())
        checks = verdict["checks"]
        share = checks[0] / checks[1] if case.partial and checks and checks[1] else None
        if case.partial and checks and not checks[1]:
            share = 0.0
        return Plain(verdict["passed"], share, verdict["elapsed"])


def plain_execution(cases: list[Case]) -> list[Plain]:
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        return list(pool.map(plain_one, cases))


# --- the sandbox ----------------------------------------------------------------------------------


def sandboxed(cases: list[Case]):
    """The sandbox's result for each case (stdio through run_stdio, the rest in one run_many)."""
    results: list = [None] * len(cases)
    judged = [i for i, c in enumerate(cases) if c.layout != "stdio"]
    extra = {"setups": [cases[i].setup or "" for i in judged]}
    many = run_many(
        [cases[i].program for i in judged], [cases[i].tests or "" for i in judged],
        entry_points=[cases[i].entry_point for i in judged], timeout_s=TIMEOUT_S,
        max_workers=WORKERS, **extra,
    )  # fmt: skip
    for index, result in zip(judged, many, strict=True):
        results[index] = result
    stdio = [i for i, c in enumerate(cases) if c.layout == "stdio"]
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        found = pool.map(
            lambda i: run_stdio(cases[i].program, list(cases[i].cases or ()), timeout_s=TIMEOUT_S),
            stdio,
        )
        for index, result in zip(stdio, found, strict=True):
            results[index] = result
    return results


def describe(result) -> str:
    why = f"; {result.failures[0]}" if result.failures else ""
    return f"{result.status} {result.tests_passed}/{result.tests_total}{why}"[:220]


def compare(cases: list[Case]) -> tuple[list[str], list[str], dict[str, float]]:
    """Disagreements (one line each); forgeries left out because their set-up cannot be
    given yet; cases left out because plain execution was too slow to compare; timings."""
    start = time.monotonic()
    results = sandboxed(cases)
    sandbox_s = time.monotonic() - start
    plain = plain_execution(cases)
    plain_s = time.monotonic() - start - sandbox_s
    problems, inconclusive = [], []
    for case, result, reference in zip(cases, results, plain, strict=True):
        if case.intended_disagreement is not None:
            if not reference.passed:
                problems.append(f"{case.id}: the forgery does not pass plain execution")
            elif result.passed or result.tests_passed:
                problems.append(f"{case.id}: forgery scored {describe(result)} (must score 0)")
            continue
        if reference.passed and reference.elapsed > INCONCLUSIVE_S:
            inconclusive.append(f"{case.id}: plain pass took {reference.elapsed:.2f} s")
            continue
        plain_text = "timeout" if reference.timed_out else ("pass" if reference.passed else "fail")
        if result.passed != reference.passed:
            problems.append(f"{case.id}: sandbox {describe(result)} vs plain {plain_text}")
        elif (
            case.partial
            and reference.share is not None
            and result.status != "timeout"
            and not math.isclose(result.share_passed, reference.share)
        ):
            problems.append(
                f"{case.id}: sandbox share {result.share_passed:.3f} ({describe(result)}) "
                f"vs plain share {reference.share:.3f}"
            )
    timings = {"sandbox_s": sandbox_s, "plain_s": plain_s, "cases": len(cases)}
    return problems, inconclusive, timings


def report(problems: list[str], inconclusive: list[str], timings: dict[str, float]) -> str:
    lines = [f"{len(problems)} disagreements over {timings['cases']} cases "
             f"(sandbox {timings['sandbox_s']:.1f} s, plain {timings['plain_s']:.1f} s):",
             *problems]  # fmt: skip
    if inconclusive:
        lines += [f"{len(inconclusive)} too slow plainly to compare:", *inconclusive]
    return "\n".join(lines)


# --- the tests ------------------------------------------------------------------------------------


def test_the_corpus_is_large_and_covers_every_shape():
    cases = corpus()
    assert len({c.program for c in cases}) >= 500
    assert {c.shape for c in cases} == set(SHAPES)
    for shape in SHAPES:
        versions = {c.version for c in cases if c.shape == shape}
        assert {"right", "wrong", "mutated"} <= versions <= set(VERSIONS), shape
    assert corpus() == corpus()  # built deterministically
    forged = {c.id: c.intended_disagreement for c in cases if c.intended_disagreement}
    assert set(forged) == set(INTENDED_DISAGREEMENTS)
    assert all(c.version == "forged" for c in cases if c.intended_disagreement)
    humaneval = [c for c in cases if c.shape == "humaneval" and c.version != "forged"]
    assert len({c.id.split("/")[1] for c in humaneval}) == 164
    small = subset()
    assert 120 <= len(small) <= 180
    assert {(c.shape, c.version) for c in small} == {(c.shape, c.version) for c in cases}
    assert set(INTENDED_DISAGREEMENTS) <= {c.id for c in small}
    assert all(c.layout != "stdio" or c.cases for c in cases)


@pytest.mark.parametrize("case_id", sorted(INTENDED_DISAGREEMENTS))
def test_each_forgery_passes_plainly_and_scores_zero_in_the_sandbox(case_id):
    (case,) = [c for c in corpus() if c.id == case_id]
    assert plain_one(case).passed, "not a forgery: plain execution fails it"
    (result,) = sandboxed([case])
    assert not result.passed and result.tests_passed == 0, describe(result)


def test_the_sandbox_agrees_with_plain_execution_on_a_stratified_subset():
    """The forgeries of the subset are judged one by one above."""
    found = compare([c for c in subset() if c.intended_disagreement is None])
    problems, inconclusive, _ = found
    if problems or len(inconclusive) > MAX_INCONCLUSIVE:
        pytest.fail(report(*found), pytrace=False)


@pytest.mark.slow
def test_the_sandbox_agrees_with_plain_execution_on_the_whole_corpus():
    found = compare(list(corpus()))
    problems, inconclusive, _ = found
    if problems or len(inconclusive) > MAX_INCONCLUSIVE:
        pytest.fail(report(*found), pytrace=False)
