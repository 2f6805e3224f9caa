"""GRPO on two-digit addition: rlx vs TRL's GRPOTrainer, like for like.

Protocol (one torch thread, CPU; each precision run on both sides: float32, and bf16-mixed,
bfloat16 autocast over float32 weights, with the eager attention rlx uses for it on a CPU,
since PyTorch's CPU SDPA runs its bfloat16 backward far slower; ``--configs`` picks which):

- **Model**: a 1.03M-parameter Llama with a character tokenizer (``rlx.llm.make_tiny_lm``,
  hidden 160), fine-tuned by ``rlx.llm.sft`` for 300 steps of 64 on 4,000 additions (seed 0);
  both libraries start from that folder.
- **Data**: 2,000 prompts ``"23+58="`` with answers (seed 5) to train on; 300 held-out problems
  (seed 99) for greedy exact match before and after, off the clocks.
- **Same work**, read from both configuration objects (``bench_lora.rlx_settings`` and
  ``trl_settings`` on the configs :func:`rlx_kwargs` and :func:`trl_config` build; asserted
  by ``tests/benchmarks/test_like_for_like.py`` and before every run): ``STEPS`` steps of 8
  prompts x G = 8 completions of at most 5 tokens, temperature 1, top-p 1, the exact-match
  reward, beta 0.04 (KL to the frozen start model), clip 0.2, one optimisation pass per batch,
  the loss averaged per sequence then over the batch (TRL's ``loss_type="grpo"``), rewards
  scaled by the group's std, the same learning rate with linear decay and no warm-up, AdamW
  without weight decay, gradient clipping at 1.0, activation checkpointing off (TRL's default
  is on), the same precision and attention, seed 0. TRL's prompts get the bos text, so both
  libraries see ``[bos] + prompt``.
- **Clocks**, the same span on both sides: from just before the model is loaded to the end of
  training with the model saved. rlx's covers the whole ``llm.grpo`` call (loading,
  training, saving); TRL's the tokenizer's loading, the data, the trainer's construction,
  ``train()`` and ``save_model()``. Imports come before both.
- **Repeats**: ``--repeats`` (at least 3) of every configuration on the same seed, so the same
  work, the libraries alternated: median and min seconds.

Reported: seconds per step, prompts per second (from the median), rlx's speed against TRL's
at the same precision (ratio of the medians, and of the mins), and held-out exact match before
and after, written to ``benchmarks/results/grpo.json``. Goals, per precision: rlx at least 3x
TRL's prompts per second, and its exact match after training no more than 5 points below
TRL's.

Run: ``.venv/bin/python benchmarks/bench_grpo.py [--steps 60] [--lr 1e-5] [--configs ...]``;
``--quick`` checks that it works (2 steps from a 5-step SFT model, one repeat).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402

import bench_lora  # noqa: E402  (the settings read from both configs)
from precision import default_configs  # noqa: E402  (benchmarks/precision.py)
from results import MIN_REPEATS, goal, ratio, settings_table, spread, write_result  # noqa: E402

PROMPTS, G, MAX_TOKENS, BETA, CLIP, SEED = 8, 8, 5, 0.04, 0.2, 0
THREADS = 1
CONFIGS = ("rlx", "rlx-bf16", "TRL", "TRL-bf16")
LIBRARIES = ("torch", "transformers", "trl", "datasets", "tokenizers", "accelerate")
SPEED_GOAL, ACCURACY_TOLERANCE = 3.0, 0.05
SFT_STEPS = 300


def build_sft(root: Path, steps: int = SFT_STEPS) -> Path:
    """The start model: a tiny Llama fine-tuned by SFT for ``steps`` steps of 64 additions."""
    from rlx import llm

    rows = llm.arithmetic_sft(4000, seed=0)
    llm.write_jsonl(root / "sft.jsonl", rows)
    base = llm.make_tiny_lm(root / "tiny", texts=llm.task_texts(rows), hidden_size=160)
    sft = llm.sft(base, root / "sft.jsonl", run_dir=root / "sft", steps=steps, progress=False,
                  eval_every=10**6, eval_exact_match=False)  # fmt: skip
    return sft.model_dir


def rlx_kwargs(steps: int, lr: float, precision: str) -> dict[str, Any]:
    """What the benchmark passes to ``llm.grpo`` besides the model, data and run folder."""
    return {
        "steps": steps, "batch_size": PROMPTS, "group_size": G, "max_new_tokens": MAX_TOKENS,
        "learning_rate": lr, "beta": BETA, "clip_eps": CLIP, "num_epochs": 1,
        "loss_aggregation": "sequence", "temperature": 1.0, "top_p": 1.0, "warmup_ratio": 0.0,
        "weight_decay": 0.0, "max_grad_norm": 1.0, "precision": precision,
        "gradient_checkpointing": False, "seed": SEED, "num_threads": THREADS, "device": "cpu",
        "eval_exact_match": False, "eval_every": 10**6, "progress": False,
        "checkpoint_every_steps": steps,  # one checkpoint, at the end, as TRL's below
    }  # fmt: skip


def trl_config(out: Path, steps: int, lr: float, precision: str) -> Any:
    """TRL's GRPOConfig as the benchmark builds it; everything else is TRL's default."""
    import trl

    bf16 = precision == "bf16-mixed"
    return trl.GRPOConfig(
        output_dir=str(out), max_steps=steps, per_device_train_batch_size=PROMPTS * G,
        num_generations=G, max_completion_length=MAX_TOKENS, temperature=1.0, top_p=1.0,
        learning_rate=lr, lr_scheduler_type="linear", warmup_steps=0, weight_decay=0.0,
        max_grad_norm=1.0, beta=BETA, epsilon=CLIP, loss_type="grpo", num_iterations=1,
        logging_steps=10, save_strategy="steps", save_steps=steps, report_to=[], use_cpu=True,
        bf16=bf16,
        # with bf16, eager attention, as rlx computes it on a CPU (SDPA's bf16 backward is slow)
        model_init_kwargs={"attn_implementation": "eager"} if bf16 else None,
        activation_checkpointing=False, disable_tqdm=True, dataloader_num_workers=0, seed=SEED,
    )  # fmt: skip


def like_for_like(steps: int, lr: float, precision: str) -> list[dict[str, Any]]:
    """Both libraries' settings at one precision, read from their config objects."""
    config = bench_lora.rlx_config("grpo", rlx_kwargs(steps, lr, precision))
    with tempfile.TemporaryDirectory() as out:
        trl = bench_lora.trl_settings("grpo", trl_config(Path(out), steps, lr, precision), None)
    return settings_table(bench_lora.rlx_settings("grpo", config), trl)


def run_rlx(sft: Path, root: Path, out: Path, steps: int, lr: float, precision: str):
    """One rlx run into the run folder ``out``: (seconds, the trained model's folder)."""
    from rlx import llm

    t0 = time.perf_counter()
    result = llm.grpo(sft, root / "prompts.jsonl", run_dir=out,
                      **rlx_kwargs(steps, lr, precision))  # fmt: skip
    return time.perf_counter() - t0, result.model_dir


def run_trl(sft: Path, root: Path, out: Path, steps: int, lr: float, precision: str):
    """One TRL run writing into ``out``: (seconds, the trained model's folder)."""
    import datasets
    import trl
    from transformers import AutoTokenizer

    from rlx.llm.rewards import exact_match_reward
    from rlx.llm.tasks import load_verifier_jsonl

    def exact_match(prompts, completions, answer, **kwargs):
        return exact_match_reward(prompts, completions, answer=answer)

    datasets.disable_progress_bars()
    t0 = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(sft)
    rows = [{"prompt": tokenizer.bos_token + r.prompt, "answer": r.answer}
            for r in load_verifier_jsonl(root / "prompts.jsonl")]  # fmt: skip
    trainer = trl.GRPOTrainer(model=str(sft), reward_funcs=exact_match,
                              args=trl_config(out, steps, lr, precision),
                              train_dataset=datasets.Dataset.from_list(rows),
                              processing_class=tokenizer)  # fmt: skip
    trainer.train()
    trainer.save_model(str(out / "model"))
    tokenizer.save_pretrained(str(out / "model"))
    return time.perf_counter() - t0, out / "model"


def report(runs: dict[str, list[tuple[float, float]]], start: float, args, root: Path) -> None:
    """The table (each configuration's median and min seconds, prompts/s, exact match), the
    goals per precision, and grpo.json."""
    columns = ["configuration", "s per step, median", "s per step, min", "prompts/s (median)",
               "rlx / TRL, same precision (medians)", "rlx / TRL (mins)",
               "exact match (300 held out)"]  # fmt: skip
    table, goals, details = [], [], {}
    seconds = {name: spread([s for s, _ in rs]) for name, rs in runs.items()}
    after = {name: spread([a for _, a in rs]) for name, rs in runs.items()}
    for name in runs:
        library, _, bf16 = name.partition("-")
        peer = "TRL" + ("-bf16" if bf16 else "")
        by_median = by_min = ""
        if library == "rlx" and peer in seconds:
            by_median = ratio(seconds[peer]["median"], seconds[name]["median"])
            by_min = ratio(seconds[peer]["min"], seconds[name]["min"])
            precision = "bf16-mixed" if bf16 else "fp32"
            goals.append(
                goal(
                    f"{precision}: rlx at least {SPEED_GOAL:g}x TRL's prompts/s",
                    f"ratio >= {SPEED_GOAL:g}",
                    by_median,
                    by_median >= SPEED_GOAL,
                )
            )
            gap = round(after[name]["median"] - after[peer]["median"], 3)
            goals.append(goal(f"{precision}: rlx's exact match after no more than "
                              f"{ACCURACY_TOLERANCE:.0%} below TRL's", f">= -{ACCURACY_TOLERANCE}",
                              gap, gap >= -ACCURACY_TOLERANCE))  # fmt: skip
        med = seconds[name]["median"]
        table.append([name, round(med / args.steps, 4), round(seconds[name]["min"] / args.steps, 4),
                      round(PROMPTS * args.steps / med, 1), by_median, by_min,
                      f"{start:.1%} -> {after[name]['median']:.1%}"])  # fmt: skip
        details[name] = {"seconds": seconds[name], "exact_match_after": after[name]}
        print(f"{name}: {med:.1f} s (median of {len(runs[name])}), exact match "
              f"{start:.1%} -> {after[name]['median']:.1%}")  # fmt: skip
    figures = {}
    for precision in ("fp32", "bf16-mixed"):
        metrics = root / f"rlx-{precision}-0" / "metrics.jsonl"
        if not metrics.is_file():
            continue
        rlx_rows = [json.loads(x) for x in metrics.read_text().splitlines()]
        gen = sum(r["generation_s"] for r in rlx_rows) / len(rlx_rows)
        upd = sum(r["update_s"] for r in rlx_rows) / len(rlx_rows)
        figures[f"rlx_{precision}_generation_s_per_step"] = round(gen, 4)
        figures[f"rlx_{precision}_update_s_per_step"] = round(upd, 4)
    settings = []
    for precision in sorted({"bf16-mixed" if n.endswith("-bf16") else "fp32" for n in runs}):
        rows = like_for_like(args.steps, args.lr, precision)
        settings += [{**r, "setting": f"{precision}: {r['setting']}"} for r in rows]
    write_result(
        "grpo",
        title="GRPO on two-digit addition: rlx vs TRL's GRPOTrainer",
        columns=columns,
        rows=table,
        libraries=LIBRARIES,
        repeats=args.repeats,
        seeds=[SEED],
        goals=goals,
        peer="TRL",
        settings=settings,
        figures=figures,
        details=details,
        notes=f"{args.steps} steps of {PROMPTS} prompts x G={G}, at most {MAX_TOKENS} tokens, "
        f"lr {args.lr}, beta {BETA}, one torch thread; start model: {args.sft_steps} SFT "
        f"steps. Both clocks span loading the model to saving it after training; "
        f"{args.repeats} repeats on the same seed, libraries alternated; ratios compare the "
        "same precision.",
        quick=args.quick,
        out_dir=args.out_dir,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--repeats", type=int, default=MIN_REPEATS)
    parser.add_argument("--sft-steps", type=int, default=SFT_STEPS,
                        help="SFT steps of the start model (fewer: a smoke run)")  # fmt: skip
    parser.add_argument("--quick", action="store_true",
                        help="2 steps, 1 repeat: checks that it works")  # fmt: skip
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where grpo.json goes (default benchmarks/results, --quick: "
                             "benchmarks/results/quick)")  # fmt: skip
    parser.add_argument(
        "--configs",
        nargs="+",
        default=None,
        choices=CONFIGS,
        help="library and precision (-bf16: bfloat16 autocast, fp32 weights; default: all, "
        "float32 only on a CPU without native bfloat16)",
    )
    args = parser.parse_args()
    if args.quick:
        args.steps, args.sft_steps, args.repeats = 2, 5, 1
    args.configs = args.configs or default_configs(CONFIGS, lambda c: c.endswith("-bf16"))
    torch.set_num_threads(THREADS)
    from clocks import import_everything

    import_everything()  # both sides' imports (TRL's lazy trainers, peft, datasets): no clock

    from rlx import llm

    for precision in {"bf16-mixed" if c.endswith("-bf16") else "fp32" for c in args.configs}:
        rows = like_for_like(args.steps, args.lr, precision)
        bad = [r["setting"] for r in rows if not r["equal"]]
        if bad:
            raise SystemExit(f"not like for like at {precision}: {bad}")
    root = Path(tempfile.mkdtemp(prefix="bench-grpo-"))
    sft = build_sft(root, args.sft_steps)
    llm.write_jsonl(root / "prompts.jsonl", llm.arithmetic(2000, seed=5))
    test = llm.arithmetic(300, seed=99)
    start = llm.exact_match(sft, test)
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in args.configs}
    train = {"rlx": run_rlx, "TRL": run_trl}
    for repeat in range(args.repeats):
        for name in args.configs:  # alternated, so a busy moment hits every configuration
            library, _, bf16 = name.partition("-")
            precision = "bf16-mixed" if bf16 else "fp32"
            out = root / f"{library.lower()}-{precision}-{repeat}"
            seconds, model = train[library](sft, root, out, args.steps, args.lr, precision)
            runs[name].append((seconds, llm.exact_match(model, test)))
            print(f"{name} repeat {repeat}: {seconds:.1f} s, exact match {start:.1%} -> "
                  f"{runs[name][-1][1]:.1%}", flush=True)  # fmt: skip
    report(runs, start, args, root)


if __name__ == "__main__":
    main()
