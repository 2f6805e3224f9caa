"""What the code reward's sandbox costs per program, against running the program plainly.

The same work on both sides: a program that defines ``add`` and the row's two asserts, run by
the same interpreter (the trainer's). The peer is what a user writes without a sandbox: the
program and its tests joined in one file and run by ``subprocess.run([python, "-I", file])``,
its exit status the verdict (no isolation, the verdict in the program's own hands). rlx runs
the program and the judge each in a bubblewrap room of its own (as root, each as its own
sandbox uid), with the seccomp filter, and the verdict outside the program's reach
(:mod:`rlx.sandbox`).

Reported: milliseconds per program, one program at a time (the latency a GRPO group of G
completions pays ``ceil(G / max_workers)`` times), and programs per second with
``max_workers`` programs at once; a stdin/stdout case (``run_stdio``) one at a time. Each
figure is the median over ``--repeats`` (at least 3) batches of ``--programs`` programs.
Goal: rlx at most 80 ms per program one at a time (the sandbox's overhead band), on a quiet
machine; the isolation the machine gave is in the result file.

Run: ``.venv/bin/python benchmarks/bench_sandbox.py`` (as root for the full isolation);
``--quick`` checks that it works.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results import MIN_REPEATS, goal, ratio, settings_table, spread, write_result
from rlx.sandbox import run_many, run_sandboxed, run_stdio, sandbox_info

PROGRAM = "def add(a, b):\n    return a + b\n"
TESTS = "assert add(2, 3) == 5\nassert add(-1, 1) == 0\n"
STDIO = "a, b = map(int, input().split())\nprint(a + b)\n"
TIMEOUT_S = 10.0
GOAL_MS = 80.0


def sandboxed_ms(programs: int) -> float:
    """Milliseconds per program, one at a time."""
    start = time.perf_counter()
    for _ in range(programs):
        result = run_sandboxed(PROGRAM, TESTS, timeout_s=TIMEOUT_S)
        assert result.passed, result.failures
    return (time.perf_counter() - start) / programs * 1e3


def sandboxed_batch_per_s(programs: int, workers: int) -> float:
    """Programs per second with ``workers`` at once."""
    start = time.perf_counter()
    results = run_many(
        [PROGRAM] * programs, [TESTS] * programs, timeout_s=TIMEOUT_S, max_workers=workers
    )
    assert all(r.passed for r in results)
    return programs / (time.perf_counter() - start)


def stdio_ms(programs: int) -> float:
    start = time.perf_counter()
    for _ in range(programs):
        assert run_stdio(STDIO, [("2 3\n", "5\n")], timeout_s=TIMEOUT_S).passed
    return (time.perf_counter() - start) / programs * 1e3


def plain_ms(programs: int, folder: Path) -> float:
    """Milliseconds per program run plainly: program and tests in one file, exit status."""
    path = folder / "program.py"
    path.write_text(PROGRAM + "\n" + TESTS)
    start = time.perf_counter()
    for _ in range(programs):
        done = subprocess.run([sys.executable, "-I", str(path)], capture_output=True)
        assert done.returncode == 0
    return (time.perf_counter() - start) / programs * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=MIN_REPEATS)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.programs, args.repeats = 4, 1
    info = sandbox_info()
    run_sandboxed(PROGRAM, TESTS, timeout_s=TIMEOUT_S)  # probe the isolation once, untimed
    with tempfile.TemporaryDirectory() as scratch:
        plain = [plain_ms(args.programs, Path(scratch)) for _ in range(args.repeats)]
    one = [sandboxed_ms(args.programs) for _ in range(args.repeats)]
    batch = [sandboxed_batch_per_s(args.programs, args.workers) for _ in range(args.repeats)]
    stdio = [stdio_ms(args.programs) for _ in range(args.repeats)]
    one_s, plain_s, batch_s, stdio_s = spread(one), spread(plain), spread(batch), spread(stdio)
    rows = [
        ["rlx sandbox, one at a time (ms per program)", one_s["median"], one_s["min"]],
        [f"rlx sandbox, {args.workers} at a time (programs/s)", batch_s["median"], batch_s["max"]],
        ["rlx sandbox, stdin/stdout case (ms per program)", stdio_s["median"], stdio_s["min"]],
        ["plain subprocess, no isolation (ms per program)", plain_s["median"], plain_s["min"]],
    ]
    settings = settings_table(
        {
            "interpreter": sys.executable,
            "program": PROGRAM,
            "tests": TESTS,
            "programs per batch": args.programs,
        },
        {
            "interpreter": sys.executable,
            "program": PROGRAM,
            "tests": TESTS,
            "programs per batch": args.programs,
        },
    )
    protections = [
        k
        for k in (
            "network_namespace",
            "pid_namespace",
            "ipc_namespace",
            "read_only_host",
            "uid_drop",
            "judge_uid",
            "seccomp",
            "cgroup",
        )
        if info.get(k)
    ]
    write_result(
        "sandbox",
        title="Code reward: the sandbox's cost per program",
        columns=["run", "median", "best"],
        rows=rows,
        libraries=["torch"],
        repeats=args.repeats,
        peer="plain subprocess (no sandbox)",
        settings=settings,
        goals=[
            goal(
                "rlx per program, one at a time",
                f"<= {GOAL_MS:.0f} ms",
                one_s["median"],
                one_s["median"] <= GOAL_MS,
            )
        ],
        figures={
            "sandbox_ms": one_s["median"],
            "plain_ms": plain_s["median"],
            "overhead_ratio": ratio(one_s["median"], plain_s["median"]),
        },
        notes=(
            "what the cost buys, against the plain subprocess: the program and its tests in "
            f"rooms of their own ({', '.join(protections) or 'none'}), the verdict outside the "
            f"program's reach, forgeries closed; missing here: {info['missing'] or 'nothing'}"
        ),
        details={
            "one_at_a_time_ms": one_s,
            "batch_per_s": batch_s,
            "stdio_ms": stdio_s,
            "plain_ms": plain_s,
            "sandbox": info,
        },
        quick=args.quick,
    )


if __name__ == "__main__":
    main()
