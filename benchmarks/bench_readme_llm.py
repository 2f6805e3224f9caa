"""Does each stage of the README's language-model flow help on its held-out ``test.jsonl``?

The README's Python block and its ``rlx align grpo`` line run as written (the block read from
README.md, so the figures are of the code a reader copies), once per seed: the tiny model, SFT,
the reward model and DPO take the seed, and so does the GRPO command (``--seed``). Then every
model the flow makes is scored by greedy exact match on all 200 rows of ``test.jsonl``, rows no
stage trained on (the flow writes them from their own seed), each with its 95% Wilson
interval (:mod:`rlx.core.intervals`).

Goals, one per stage, judged on the mean over seeds: SFT lifts exact match above the untrained
model; DPO (with ``rpo_alpha``) above SFT; GRPO above the SFT model it starts from. A goal the
flow misses is reported as missed; the README says where a stage does not help at its budget.

Run: ``.venv/bin/python benchmarks/bench_readme_llm.py`` (seeds 0-2); ``--quick`` checks that
it works on one seed.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import os
import re
import shlex
import tempfile
import time
from pathlib import Path

from results import MIN_REPEATS, ROOT, goal, write_result

STAGES = ("untrained", "sft", "dpo", "grpo")
"""The models the flow makes, in its order; each stage's goal is to beat the one it starts
from (GRPO starts from SFT's model, as the README's command says)."""
STARTS_FROM = {"sft": "untrained", "dpo": "sft", "grpo": "sft"}


def readme_blocks(lang: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.DOTALL)


def run_flow(seed: int, folder: Path) -> dict[str, Path]:
    """The README's flow on ``seed`` in ``folder``: the model folder of each stage."""
    from rlx import llm
    from rlx.cli import main

    (code,) = [b for b in readme_blocks("python") if "from rlx import llm" in b]
    (script,) = [b for b in readme_blocks("bash") if "rlx align grpo" in b]
    (line,) = [x for x in script.splitlines() if x.startswith("rlx align grpo ")]
    old = os.getcwd()
    os.chdir(folder)
    saved = {name: getattr(llm, name) for name in ("make_tiny_lm", "sft", "reward_model", "dpo")}
    try:
        for name, function in saved.items():
            setattr(llm, name, functools.partial(function, seed=seed))
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(code, "README.md", "exec"), {})
            code_grpo = main([*shlex.split(line)[1:], "--seed", str(seed), "--no-progress"])
        if code_grpo != 0:
            raise SystemExit(f"the README's GRPO command exited {code_grpo} on seed {seed}")
    finally:
        for name, function in saved.items():
            setattr(llm, name, function)
        os.chdir(old)
    return {
        "untrained": folder / "models" / "tiny",
        "sft": folder / "runs" / "sft" / "model",
        "dpo": folder / "runs" / "dpo" / "model",
        "grpo": folder / "runs" / "grpo" / "model",
    }


def scores(models: dict[str, Path], test: Path) -> dict[str, dict[str, float]]:
    """Exact match of each model on every row of ``test``, with its Wilson interval."""
    from rlx import llm
    from rlx.core.intervals import proportion_interval

    n = sum(1 for line in test.read_text().splitlines() if line.strip())
    out = {}
    for stage, model in models.items():
        share = llm.exact_match(model, test)
        low, high = proportion_interval(round(share * n), n)
        out[stage] = {"exact_match": share, "low": low, "high": high, "rows": n}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.seeds = args.seeds[:1]
    per_seed: dict[int, dict[str, dict[str, float]]] = {}
    seconds: dict[int, float] = {}
    for seed in args.seeds:
        with tempfile.TemporaryDirectory() as scratch:
            start = time.perf_counter()
            models = run_flow(seed, Path(scratch))
            seconds[seed] = time.perf_counter() - start
            per_seed[seed] = scores(models, Path(scratch) / "test.jsonl")
        print(seed, {k: round(v["exact_match"], 3) for k, v in per_seed[seed].items()})
    mean = {s: sum(per_seed[k][s]["exact_match"] for k in args.seeds) / len(args.seeds)
            for s in STAGES}  # fmt: skip
    rows = []
    for seed in args.seeds:
        cells = [
            f"{per_seed[seed][s]['exact_match']:.3f} "
            f"[{per_seed[seed][s]['low']:.2f}, {per_seed[seed][s]['high']:.2f}]"
            for s in STAGES
        ]
        rows.append([seed, *cells, round(seconds[seed], 1)])
    rows.append(["mean", *(f"{mean[s]:.3f}" for s in STAGES), ""])
    goals = []
    for stage in ("sft", "dpo", "grpo"):
        start = STARTS_FROM[stage]
        measured = {stage: round(mean[stage], 4), start: round(mean[start], 4)}
        goals.append(
            goal(
                f"{stage} lifts exact match on test.jsonl above {start}",
                f"mean over seeds > {start}'s",
                measured,
                mean[stage] > mean[start],
            )
        )
    write_result(
        "readme_llm",
        title="The README's language-model flow on its held-out test.jsonl",
        columns=["seed", *(f"{s} exact match [95% interval]" for s in STAGES), "flow seconds"],
        rows=rows,
        libraries=["torch", "transformers"],
        repeats=len(args.seeds) if not args.quick else 1,
        peer="none (each stage against the model it starts from)",
        goals=goals,
        seeds=list(args.seeds),
        notes=(
            "The README's Python block and GRPO command as written, each stage on the seed; "
            "exact match by greedy decoding on all 200 rows of test.jsonl, which no stage "
            "trained on; intervals are Wilson's."
        ),
        details={"per_seed": per_seed, "seconds": seconds},
        quick=args.quick or len(args.seeds) < MIN_REPEATS,
    )


if __name__ == "__main__":
    main()
