"""The test layouts people write, what the judge counts in each, and stdin/stdout problems.

Each layout is run against a right program (it must pass), a wrong one (it must fail) and a
partly right one (its partial credit is the share of executed checks, worked out by hand).
"""

from __future__ import annotations

import json

import pytest

from rlx.errors import ConfigError, SandboxError
from rlx.llm.rewards import REWARDS
from rlx.sandbox import python_tests_reward, run_sandboxed, run_stdio, stdio_tests_reward
from rlx.sandbox.launcher import same_output

TIMEOUT_S = 5.0
RIGHT = "def square(x):\n    return x * x\n"
WRONG = "def square(x):\n    return x + x\n"  # right for 0 and 2 only
CASES = [0, 2, 3, 4]  # the wrong square passes 2 of these 4

LAYOUTS = {
    "top-level asserts": "".join(f"assert square({x}) == {x * x}\n" for x in CASES),
    "asserts in a loop": f"for x in {CASES}:\n    assert square(x) == x * x, x\n",
    "pytest functions": "".join(
        f"def test_{x}():\n    assert square({x}) == {x * x}\n" for x in CASES
    ),
    "pytest parametrize": (
        "import pytest\n"
        f"@pytest.mark.parametrize('x', {CASES})\n"
        "def test_square(x):\n    assert square(x) == x * x\n"
    ),
    "pytest class": "class TestSquare:\n"
    + "".join(f"    def test_{x}(self):\n        assert square({x}) == {x * x}\n" for x in CASES),
    "unittest with main": (
        "import unittest\nclass TestSquare(unittest.TestCase):\n"
        + "".join(
            f"    def test_{x}(self):\n        self.assertEqual(square({x}), {x * x})\n"
            for x in CASES
        )
        + "if __name__ == '__main__':\n    unittest.main()\n"
    ),
    "unittest without main": (
        "import unittest\nclass TestSquare(unittest.TestCase):\n"
        + "".join(
            f"    def test_{x}(self):\n        self.assertEqual(square({x}), {x * x})\n"
            for x in CASES
        )
    ),
    "humaneval check with its call": (
        "def check(candidate):\n"
        + "".join(f"    assert candidate({x}) == {x * x}\n" for x in CASES)
        + "\ncheck(square)\n"
    ),
    "async pytest functions": "".join(
        f"async def test_{x}():\n    assert square({x}) == {x * x}\n" for x in CASES
    ),
}


def reward(program: str, tests: str, partial: bool = False, **kw) -> float:
    kw.setdefault("timeout_s", TIMEOUT_S)
    return python_tests_reward([""], [program], [tests], partial=partial, **kw)[0]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_each_layout_passes_the_right_program_and_fails_the_wrong_one(layout):
    tests = LAYOUTS[layout]
    assert reward(RIGHT, tests) == 1.0
    assert reward(WRONG, tests) == 0.0


@pytest.mark.parametrize(
    ("layout", "share"),
    [
        ("top-level asserts", 2 / 4),  # four asserts run: 0 and 2 pass, 3 and 4 fail
        ("pytest functions", 2 / 4),
        ("pytest parametrize", 2 / 4),
        ("pytest class", 2 / 4),
        ("unittest without main", 2 / 4),
        ("unittest with main", 2 / 4),
        ("async pytest functions", 2 / 4),
        # one assert statement is one test, however often it runs: 3 fails it
        ("asserts in a loop", 0 / 1),
        ("humaneval check with its call", 2 / 3),  # the same: the failure ends check()
    ],
)
def test_partial_credit_is_the_share_of_tests_as_written(layout, share):
    """Worked by hand: the wrong square (x + x) is right for 0 and 2, wrong for 3 and 4. A test
    is an assert statement, or a test function, method or parametrized case."""
    assert reward(WRONG, LAYOUTS[layout], partial=True) == pytest.approx(share)


def test_a_unittest_method_is_one_test_and_assert_raises_counts_its_outcome():
    program = "def parse(text):\n    return int(text)\n"
    tests = (
        "import unittest\nclass T(unittest.TestCase):\n"
        "    def test_values(self):\n"
        "        self.assertEqual(parse('1'), 1)\n"
        "        self.assertListEqual([parse('2')], [2])\n"  # calls other assertions inside
        "        with self.assertRaises(ValueError):\n"
        "            parse('x')\n"
        "        self.assertRaises(ValueError, parse, 'y')\n"
    )
    result = run_sandboxed(program, tests, timeout_s=TIMEOUT_S)
    assert (result.tests_passed, result.tests_total) == (1, 1), result.failures
    lenient = "def parse(text):\n    return int(text) if text.isdigit() else 0\n"
    result = run_sandboxed(lenient, tests, timeout_s=TIMEOUT_S)
    # the first assertRaises fails: the test method fails
    assert (result.tests_passed, result.tests_total) == (0, 1), result.failures
    assert "ValueError not raised" in result.failures[0]


def test_pytest_raises_counts_its_outcome():
    tests = (
        "import pytest\n"
        "def test_errors():\n"
        "    with pytest.raises(ValueError):\n        parse('x')\n"
        "    assert parse('3') == 3\n"
    )
    assert reward("def parse(t):\n    return int(t)\n", tests) == 1.0
    assert reward("def parse(t):\n    return 3\n", tests, partial=True) == 0.0


def test_a_test_that_returns_without_a_check_passes_and_one_that_raises_fails():
    """As pytest: a test function is a check of its own when it asserts nothing."""
    tests = "def test_runs():\n    square(3)\n"
    assert reward(RIGHT, tests) == 1.0
    assert reward("def square(x):\n    raise ValueError(x)\n", tests) == 0.0


def test_asserts_of_constants_are_not_checks():
    """HumanEval's ``assert True, 'debugging note'`` lines check no program."""
    tests = "assert True, 'note'\nassert square(3) == 9\nassert True\n"
    result = run_sandboxed(WRONG, tests, timeout_s=TIMEOUT_S)
    assert (result.tests_passed, result.tests_total) == (0, 1)


def test_skips_of_the_test_code_count_neither_way():
    tests = (
        "import pytest\n"
        "@pytest.mark.skip(reason='not today')\n"
        "def test_skipped():\n    assert square(3) == 0\n"
        "def test_square():\n    assert square(3) == 9\n"
    )
    result = run_sandboxed(RIGHT, tests, timeout_s=TIMEOUT_S)
    assert result.passed and (result.tests_passed, result.tests_total) == (1, 1)


def test_unknown_fixtures_are_refused_by_name():
    tests = "def test_square(database):\n    assert square(3) == 9\n"
    result = run_sandboxed(RIGHT, tests, timeout_s=TIMEOUT_S)
    assert not result.passed and "fixture 'database'" in result.failures[0]


def test_fixtures_of_the_test_code_and_the_built_in_ones_are_given():
    tests = (
        "import pytest\n"
        "@pytest.fixture\n"
        "def three():\n    return 3\n"
        "@pytest.fixture\n"
        "def squared(three):\n    yield square(three)\n"
        "def test_square(squared, tmp_path, monkeypatch, capsys, request):\n"
        "    assert squared == 9 and tmp_path.is_dir()\n"
    )
    result = run_sandboxed(RIGHT, tests, timeout_s=TIMEOUT_S)
    assert result.passed and (result.tests_passed, result.tests_total) == (1, 1)


def test_a_failing_set_up_statement_fails_the_row():
    tests = "from math import no_such_name\nassert square(3) == 9\n"
    result = run_sandboxed(RIGHT, tests, timeout_s=TIMEOUT_S)
    assert result.setup_failed and result.share_passed == 0.0 and not result.passed


def test_a_failing_test_statement_fails_its_checks_only():
    tests = "square(None)\nassert square(3) == 9\n"  # the call raises: a test that failed
    result = run_sandboxed(RIGHT, tests, timeout_s=TIMEOUT_S)
    assert (result.tests_passed, result.tests_total, result.setup_failed) == (1, 2, False)


def test_humaneval_entry_point_column():
    tests = "METADATA = {}\n\ndef check(candidate):\n    assert candidate(3) == 9\n"
    rewards = python_tests_reward(
        ["", "", ""], [RIGHT, WRONG, "def other(x):\n    return x * x\n"], [tests] * 3,
        entry_point=["square"] * 3, timeout_s=TIMEOUT_S,
    )  # fmt: skip
    assert rewards == [1.0, 0.0, 0.0]
    with pytest.raises(SandboxError, match=r"row 0 .*entry_point 'not a name'"):
        python_tests_reward([""], [RIGHT], [tests], entry_point=["not a name"])


def test_check_that_is_called_is_not_called_twice():
    tests = "calls = []\ndef check(candidate):\n    calls.append(1)\n    assert candidate(2) == 4\n"
    tests += "check(square)\nassert calls == [1]\n"
    assert reward(RIGHT, tests) == 1.0
    assert python_tests_reward([""], [RIGHT], [tests], entry_point=["square"]) == [1.0]


def test_the_program_defines_nothing_the_tests_need():
    result = run_sandboxed("x = 1\n", "assert square(2) == 4\n", timeout_s=TIMEOUT_S)
    assert not result.passed and "NameError" in result.failures[0]


# --- stdin/stdout problems ----------------------------------------------------------------------

SUM = "import sys\nnumbers = [int(t) for t in sys.stdin.read().split()]\nprint(sum(numbers))\n"


def test_stdio_program_passes_when_every_output_matches():
    result = run_stdio(SUM, [("1 2\n", "3\n"), ("5 5 5", "15"), ("", "0")], timeout_s=TIMEOUT_S)
    assert result.passed and (result.tests_passed, result.tests_total) == (3, 3)


def test_stdio_wrong_answer_crash_and_timeout_fail_their_case():
    wrong = "print(int(input().split()[0]) * 2)\n"
    result = run_stdio(wrong, [("1 1\n", "2\n"), ("2 3\n", "5\n")], timeout_s=TIMEOUT_S)
    assert (result.tests_passed, result.tests_total) == (1, 2)
    assert "wrong answer" in result.failures[0]
    crash = run_stdio("raise SystemExit(3)\n", [("", "0")], timeout_s=TIMEOUT_S)
    assert not crash.passed and "exit status 3" in crash.failures[0]
    loop = run_stdio("while True:\n    pass\n", [("", "0")], timeout_s=1.0)
    assert loop.status == "timeout" and loop.elapsed_s < 1.0 + 3.0


@pytest.mark.parametrize(
    ("actual", "expected", "same"),
    [
        ("3\n", "3", True),
        ("3  \r\n\n\n", "3\n", True),
        ("1 2\n3\n", "1 2\n3", True),
        ("1  2\n", "1 2\n", False),  # inner whitespace matters
        ("Yes\n", "YES\n", False),  # letter case matters
        ("3\n4\n", "3\n", False),
        ("\n3\n", "3\n", False),  # a leading empty line matters
    ],
)
def test_stdio_output_comparison_follows_the_usual_rules(actual, expected, same):
    assert same_output(actual, expected) is same


def test_stdio_program_cannot_see_the_expected_output_or_write_the_verdict():
    """The expected output never enters the program's room: printing every file descriptor's
    and every readable file's content, or writing a verdict to every descriptor, earns
    nothing."""
    hostile = (
        "import os\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        '        os.write(fd, b\'{"passed": 9, "failed": 0}\')\n'
        "    except OSError:\n"
        "        pass\n"
        "print('SECRET-EXPECTED' if 'SECRET-EXPECTED' in open('/proc/self/environ').read() "
        "else 'no')\n"
    )
    result = run_stdio(hostile, [("x\n", "SECRET-EXPECTED\n")], timeout_s=TIMEOUT_S)
    assert result.tests_passed == 0


def test_stdio_reward_reads_every_column_shape():
    prompts, completions = ["Add the numbers."] * 4, [SUM, SUM, SUM, "print(0)\n"]
    by_columns = stdio_tests_reward(
        prompts, completions, input=["1 2", ["1", "2 2"], "7", "1"],
        output=["3", ["1", "4"], "7", "1"], timeout_s=TIMEOUT_S,
    )  # fmt: skip
    assert by_columns == [1.0, 1.0, 1.0, 0.0]
    pairs = [{"input": "1 1", "output": "2"}, {"input": "3", "output": "3"}]
    apps = json.dumps({"inputs": ["2 2"], "outputs": ["4"]})
    by_tests = stdio_tests_reward(
        prompts[:2], completions[:2], tests=[pairs, apps], timeout_s=TIMEOUT_S
    )
    assert by_tests == [1.0, 1.0]
    partial = stdio_tests_reward(
        ["p"], ["print(2)\n"], tests=[pairs], partial=True, timeout_s=TIMEOUT_S
    )
    assert partial == [0.5]


@pytest.mark.parametrize(
    "columns",
    [
        {"input": ["1"]},
        {"input": [["1", "2"]], "output": [["3"]]},
        {"tests": ["not json"]},
        {"tests": [[{"in": "1"}]]},
        {"input": [1], "output": [2]},
    ],
)
def test_stdio_rows_without_usable_cases_are_errors_naming_the_row(columns):
    with pytest.raises(SandboxError, match="row 0 "):
        stdio_tests_reward(["p"], [SUM], **columns)


def test_stdio_columns_of_the_wrong_length_are_config_errors():
    with pytest.raises(ConfigError, match="one value per completion"):
        stdio_tests_reward(["p", "q"], [SUM, SUM], input=["1"], output=["1"])


def test_stdio_tests_is_a_named_reward_that_runs_model_code():
    function = REWARDS["stdio-tests"]
    assert function.runs_model_code
    assert function(["p"], [SUM], input=["2 3"], output=["5"]) == [1.0]


def test_an_online_run_checks_every_rows_tests_before_it_starts(tmp_path):
    """A row whose tests check nothing stops GRPO at its start, naming the row: not hours in,
    when a batch first holds it, and never as a reward every program earns."""
    from rlx import llm

    never_called = "def check(candidate):\n    assert candidate(2) == 1\n"
    rows = [
        {"prompt": "def inc(x):\n", "answer": "assert inc(1) == 2\n"},
        {"prompt": "def dec(x):\n", "answer": never_called},
    ]
    model = llm.make_tiny_lm(tmp_path / "tiny", texts=[r["prompt"] + r["answer"] for r in rows])
    with pytest.raises(SandboxError, match=r"row 1 .*never calls it"):
        llm.grpo(model, rows, reward="python-tests", run_dir=tmp_path / "run", steps=1)
    assert not (tmp_path / "run" / "checkpoints").exists()
