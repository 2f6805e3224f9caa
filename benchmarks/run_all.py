"""`make bench`: every benchmark in this folder, one after another, in fresh processes.

``--quick`` passes ``--quick`` to each (a check that every benchmark works; the results go to
``benchmarks/results/quick/``, which the docs never show); ``--only NAME ...`` and ``--skip
NAME ...`` pick benchmarks by name (``dqn`` for ``bench_dqn.py``). Run one at a time on a
quiet machine: the figures are wall-clock times.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="pass --quick to every benchmark")
    parser.add_argument("--only", nargs="+", default=None, metavar="NAME")
    parser.add_argument("--skip", nargs="+", default=[], metavar="NAME")
    args = parser.parse_args()
    failures = 0
    for script in sorted(HERE.glob("bench_*.py")):
        name = script.stem.removeprefix("bench_")
        if (args.only is not None and name not in args.only) or name in args.skip:
            continue
        print(f"\n##### {script.name}", flush=True)
        extra = ["--quick"] if args.quick else []
        failures += subprocess.call([sys.executable, str(script), *extra]) != 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
