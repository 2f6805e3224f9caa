"""The sandbox's verdict agrees with plain execution on a generated corpus.

Ten small problems, each with a reference solution and cases; for each problem the right
program, two empty ones (a body of ``pass``, and nothing at all) and one-token mutants of the
right one (an operator, a number or a keyword changed); each program judged in every test
layout the sandbox reads (top-level asserts, asserts in a loop, pytest functions, a pytest
class, unittest with and without ``unittest.main()``, HumanEval's ``check`` with its call and
without it given the entry point) and as a stdin/stdout program. Plain execution runs the
program and its tests together in a fresh interpreter (``python file.py``, ``python -m
unittest``; the pytest layouts in one pytest process per layout, each program its own module)
and passes when it exits 0. The sandbox must give the same verdict on every one.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tokenize
import xml.etree.ElementTree as ElementTree
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rlx.sandbox import run_many, run_stdio
from rlx.sandbox.launcher import same_output

TIMEOUT_S = 2.0

PROBLEMS = [
    ("add", "def add(a, b):\n    return a + b\n", [((2, 3), 5), ((-1, 1), 0), ((10, 5), 15)]),
    ("square", "def square(x):\n    return x * x\n", [((0,), 0), ((3,), 9), ((-4,), 16)]),
    (
        "is_even",
        "def is_even(n):\n    return n % 2 == 0\n",
        [((4,), True), ((7,), False), ((0,), True)],
    ),
    (
        "maximum",
        "def maximum(xs):\n    best = xs[0]\n    for x in xs:\n        if x > best:\n"
        "            best = x\n    return best\n",
        [(([1, 5, 3],), 5), (([-2, -7],), -2), (([4],), 4)],
    ),
    (
        "count_vowels",
        "def count_vowels(s):\n    return sum(1 for c in s if c in 'aeiou')\n",
        [(("hello",), 2), (("sky",), 0), (("aeiou",), 5)],
    ),
    (
        "reverse",
        "def reverse(s):\n    return s[::-1]\n",
        [(("abc",), "cba"), (("",), ""), (("ab",), "ba")],
    ),
    (
        "factorial",
        "def factorial(n):\n    result = 1\n    for k in range(2, n + 1):\n        result *= k\n"
        "    return result\n",
        [((0,), 1), ((5,), 120), ((30,), 265252859812191058636308480000000)],
    ),
    (
        "clamp",
        "def clamp(x, low, high):\n    return max(low, min(x, high))\n",
        [((5, 0, 10), 5), ((-3, 0, 10), 0), ((12, 0, 10), 10)],
    ),
    (
        "gcd",
        "def gcd(a, b):\n    while b:\n        a, b = b, a % b\n    return a\n",
        [((12, 18), 6), ((7, 3), 1), ((0, 5), 5)],
    ),
    (
        "fib",
        "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n"
        "    return a\n",
        [((0,), 0), ((1,), 1), ((10,), 55)],
    ),
]  # fmt: skip

SWAPS = {
    "+": "-", "-": "+", "*": "+", "%": "//", "<": "<=", ">": ">=", "==": "!=", "[": "[",
    "0": "1", "1": "2", "2": "1", "True": "False", "min": "max", "max": "min", "a": "b",
}  # fmt: skip
MUTANTS_PER_PROBLEM = 2


def mutants(source: str, count: int) -> list[str]:
    """The first ``count`` one-token changes of ``source`` that still compile and differ from
    it, skipping the function's name and its parameters (so the program keeps its interface)."""
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    header_end = next(i for i, t in enumerate(tokens) if t.string == ":")
    found = []
    for index, token in enumerate(tokens):
        swap = SWAPS.get(token.string)
        if index <= header_end or swap is None or swap == token.string:
            continue
        changed = [t._replace(string=swap) if i == index else t for i, t in enumerate(tokens)]
        text = tokenize.untokenize(changed)
        try:
            compile(text, "<mutant>", "exec")
        except SyntaxError:
            continue
        if text not in found and text != source:
            found.append(text)
        if len(found) == count:
            break
    return found


def programs_of(name: str, right: str) -> list[str]:
    signature = right.splitlines()[0]
    return [right, f"{signature}\n    pass\n", "", *mutants(right, MUTANTS_PER_PROBLEM)]


def layouts(name: str, cases: list) -> dict[str, tuple[str, str | None]]:
    """Test code per layout, and the entry point the layout relies on (or None)."""
    calls = [(f"{name}(*{args!r})", expected) for args, expected in cases]
    asserts = "".join(f"assert {call} == {expected!r}\n" for call, expected in calls)
    loop = f"for args, expected in {cases!r}:\n    assert {name}(*args) == expected\n"
    functions = "".join(
        f"def test_{i}():\n    assert {call} == {expected!r}\n"
        for i, (call, expected) in enumerate(calls)
    )
    klass = "class TestIt:\n" + "".join(
        f"    def test_{i}(self):\n        assert {call} == {expected!r}\n"
        for i, (call, expected) in enumerate(calls)
    )
    case = "import unittest\nclass TestIt(unittest.TestCase):\n" + "".join(
        f"    def test_{i}(self):\n        self.assertEqual({call}, {expected!r})\n"
        for i, (call, expected) in enumerate(calls)
    )
    check = "def check(candidate):\n" + "".join(
        f"    assert candidate(*{args!r}) == {expected!r}\n" for args, expected in cases
    )
    return {
        "asserts": (asserts, None),
        "loop": (loop, None),
        "pytest functions": (functions, None),
        "pytest class": (klass, None),
        "unittest with main": (case + "if __name__ == '__main__':\n    unittest.main()\n", None),
        "unittest without main": (case, None),
        "check with its call": (check + f"\ncheck({name})\n", None),
        "check and entry point": (check, name),
    }


def corpus() -> list[dict]:
    rows = []
    for name, right, cases in PROBLEMS:
        for number, program in enumerate(programs_of(name, right)):
            for layout, (tests, entry) in layouts(name, cases).items():
                rows.append({"problem": name, "number": number, "program": program,
                             "layout": layout, "tests": tests, "entry": entry})  # fmt: skip
    return rows


def plain_execution(rows: list[dict], folder: Path) -> list[bool]:
    """Whether each row passes when its program and tests run together, plainly."""
    verdicts: list[bool | None] = [None] * len(rows)
    scripts = []
    for index, row in enumerate(rows):
        source = row["program"] + "\n" + row["tests"]
        if row["entry"]:
            source += f"\ncheck({row['entry']})\n"
        module = f"test_row{index}"
        (folder / f"{module}.py").write_text(source)
        if row["layout"].startswith("pytest"):
            continue
        if row["layout"] == "unittest without main":
            scripts.append((index, [sys.executable, "-m", "unittest", "-q", module]))
        else:
            scripts.append((index, [sys.executable, f"{module}.py"]))

    def run(command: list[str]) -> bool:
        try:
            done = subprocess.run(command, cwd=folder, capture_output=True, timeout=TIMEOUT_S * 3,
                                  stdin=subprocess.DEVNULL)  # fmt: skip
        except subprocess.TimeoutExpired:
            return False
        return done.returncode == 0

    with ThreadPoolExecutor(max_workers=4) as pool:
        for (index, _), ok in zip(scripts, pool.map(run, [c for _, c in scripts]), strict=True):
            verdicts[index] = ok
    for layout in ("pytest functions", "pytest class"):
        indices = [i for i, row in enumerate(rows) if row["layout"] == layout]
        report = folder / f"{layout.replace(' ', '_')}.xml"
        files = [f"test_row{i}.py" for i in indices]
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   "-o", "addopts=", f"--junitxml={report}", *files]  # fmt: skip
        # no standard input, as the sandbox's program has none: a program that reads it must
        # not wait on the terminal or pipe the test runner was started with
        subprocess.run(command, cwd=folder, capture_output=True, timeout=600,
                       stdin=subprocess.DEVNULL)  # fmt: skip
        failed, seen = set(), set()
        for testcase in ElementTree.parse(report).getroot().iter("testcase"):
            module = testcase.get("classname", "").split(".")[0]
            seen.add(module)
            if any(child.tag in ("failure", "error", "skipped") for child in testcase):
                failed.add(module)
        for index in indices:
            module = f"test_row{index}"
            verdicts[index] = module in seen and module not in failed
    return [bool(v) for v in verdicts]


def test_the_corpus_is_large_and_varied():
    rows = corpus()
    assert len(rows) >= 300
    assert {row["layout"] for row in rows} == set(layouts("f", [((1,), 1)]))
    programs = {row["program"] for row in rows}
    mutated = programs - {p for name, right, _ in PROBLEMS for p in programs_of(name, right)[:3]}
    assert len(programs) >= 35 and len(mutated) >= 15


# Slow: tests/sandbox/test_sandbox_corpus.py's stratified subset is make test's agreement check
# (every shape and layout, and the forgeries); this older corpus of 8 fixed layouts per problem
# runs with make test-slow. Its plain-pytest reference run does not finish as a non-root user
# here (it does as root): a harness problem, not the sandbox's, still to find.
@pytest.mark.slow
def test_the_sandbox_agrees_with_plain_execution_on_every_program(tmp_path):
    rows = corpus()
    results = run_many(
        [row["program"] for row in rows], [row["tests"] for row in rows],
        entry_points=[row["entry"] for row in rows], timeout_s=TIMEOUT_S,
    )  # fmt: skip
    plain = plain_execution(rows, tmp_path)
    disagreements = [
        (row["problem"], row["number"], row["layout"], result.status, ok, result.failures[:1])
        for row, result, ok in zip(rows, results, plain, strict=True)
        if result.passed != ok
    ]
    assert disagreements == []
    assert sum(plain) >= 10 * 8  # every right program passes in every layout ...
    assert len(rows) - sum(plain) >= 10 * 8 * 2  # ... and both empty ones fail in every one


def test_stdio_verdicts_agree_with_plain_execution(tmp_path):
    """The same programs as scripts: the cases' arguments as JSON lines on stdin, the answer
    printed as JSON."""
    scripts, cases_of = [], []
    for name, right, cases in PROBLEMS:
        io_cases = [
            ("".join(json.dumps(a) + "\n" for a in args), json.dumps(expected) + "\n")
            for args, expected in cases
        ]
        for program in programs_of(name, right):
            scripts.append(
                program + "\nimport json, sys\n"
                "args = [json.loads(line) for line in sys.stdin.read().splitlines()]\n"
                f"print(json.dumps({name}(*args)))\n"
            )
            cases_of.append(io_cases)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(
            pool.map(
                lambda pair: run_stdio(pair[0], pair[1], timeout_s=TIMEOUT_S),
                zip(scripts, cases_of, strict=True),
            )
        )

    def plain(script: str, cases: list[tuple[str, str]]) -> bool:
        path = tmp_path / f"script{abs(hash(script))}.py"
        path.write_text(script)
        for given, expected in cases:
            try:
                done = subprocess.run([sys.executable, str(path)], input=given.encode(),
                                      capture_output=True, timeout=TIMEOUT_S * 3)  # fmt: skip
            except subprocess.TimeoutExpired:
                return False
            if done.returncode != 0 or not same_output(done.stdout.decode(), expected):
                return False
        return True

    with ThreadPoolExecutor(max_workers=4) as pool:
        verdicts = list(pool.map(lambda pair: plain(*pair), zip(scripts, cases_of, strict=True)))
    assert [r.passed for r in results] == verdicts
    assert 10 <= sum(verdicts) < len(scripts)
