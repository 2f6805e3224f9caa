"""`make bench`: every benchmark in this folder, one after another, in fresh processes.

``--quick`` passes ``--quick`` to each (a check that every benchmark works; the results go to
``benchmarks/results/quick/``, which the docs never show); ``--only NAME ...`` and ``--skip
NAME ...`` pick benchmarks by name (``dqn`` for ``bench_dqn.py``). Run one at a time on a
quiet machine: the figures are wall-clock times.

``bench_lora.py`` runs twice: on its small random chat model, then on the real pretrained
model ``make real-model`` writes (``REAL_MODEL_RUN``; skipped, saying so, when it is missing).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REAL_MODEL_RUN = ["--steps", "5", "--precisions", "fp32"]
"""bench_lora.py's options on the real model (with ``--model`` its folder): 5 steps of each
stage, float32, 3 repeats (GRPO's steps take minutes there)."""


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
        if name == "lora" and not args.quick:
            failures += real_model_run(script)
    return 1 if failures else 0


def real_model_run(script: Path) -> int:
    """bench_lora.py on the real model: 1 if it failed, 0 if it ran or the model is missing."""
    from real_model import real_model_dir  # benchmarks/real_model.py

    try:
        folder = real_model_dir()
    except SystemExit as missing:
        print(f"##### {script.name} --model: skipped ({missing})", flush=True)
        return 0
    print(f"\n##### {script.name} --model {folder}", flush=True)
    command = [sys.executable, str(script), "--model", str(folder), *REAL_MODEL_RUN]
    return int(subprocess.call(command) != 0)


if __name__ == "__main__":
    sys.exit(main())
