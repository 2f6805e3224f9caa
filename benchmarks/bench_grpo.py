"""GRPO on two-digit addition: rlx vs TRL's GRPOTrainer, side by side in one run.

Protocol (one torch thread, CPU; each library in float32 and in bf16-mixed: bfloat16 autocast
over float32 weights, with eager attention, since PyTorch's CPU SDPA runs its bfloat16 backward
far slower; ``--configs`` picks which):

- **Model**: a 1.03M-parameter Llama with a character tokenizer (``rlx.llm.make_tiny_lm``,
  hidden 160), fine-tuned by ``rlx.llm.sft`` for 300 steps of 64 on 4,000 additions (seed 0);
  both libraries start from that folder.
- **Data**: 2,000 prompts ``"23+58="`` with answers (seed 5) to train on; 300 held-out problems
  (seed 99) for greedy exact match before and after, off the clocks.
- **Same work**: ``STEPS`` steps of 8 prompts x G = 8 completions of at most 5 tokens,
  temperature 1, the exact-match reward, beta 0.04 (KL to the frozen start model), clip 0.2,
  one optimisation pass per batch, the loss averaged per sequence then over the batch (TRL's
  ``loss_type="grpo"``), the same learning rate with linear decay, AdamW, gradient clipping
  at 1.0. TRL's prompts get the bos text, so both libraries see ``[bos] + prompt``.
- **Clocks**: rlx's covers the whole ``llm.grpo`` call (loading, training, saving); TRL's the
  trainer's construction and ``train()``. Imports come before both.

Reported: seconds per step, prompts per second, and held-out exact match before and after,
written to ``benchmarks/results/grpo.json`` (``--out-dir`` elsewhere). The goal: rlx at least 3x
TRL's prompts per second, with no worse accuracy gain; the ratio printed is against TRL's
fastest configuration.

Run: ``.venv/bin/python benchmarks/bench_grpo.py [--steps 60] [--lr 1e-5] [--configs ...]``;
a smoke run that only checks it works: ``--steps 2 --sft-steps 5 --configs rlx``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

from precision import default_configs  # noqa: E402  (benchmarks/precision.py)
from results import write_result  # noqa: E402  (benchmarks/results.py)

PROMPTS, G, MAX_TOKENS, BETA = 8, 8, 5, 0.04


CONFIGS = ("rlx", "rlx-bf16", "TRL", "TRL-bf16")


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


def run_rlx(sft: Path, root: Path, steps: int, lr: float, precision: str) -> tuple[float, Path]:
    from rlx import llm

    t0 = time.perf_counter()
    result = llm.grpo(sft, root / "prompts.jsonl", run_dir=root / f"rlx-{precision}", steps=steps,
                      batch_size=PROMPTS, group_size=G, max_new_tokens=MAX_TOKENS,
                      learning_rate=lr, beta=BETA, warmup_ratio=0.0, eval_exact_match=False,
                      eval_every=10**6, progress=False, precision=precision)  # fmt: skip
    return time.perf_counter() - t0, result.model_dir


def run_trl(sft: Path, root: Path, steps: int, lr: float, precision: str) -> tuple[float, Path]:
    import datasets
    import trl
    from transformers import AutoTokenizer

    from rlx.llm.rewards import exact_match_reward
    from rlx.llm.tasks import load_verifier_jsonl

    def exact_match(prompts, completions, answer, **kwargs):
        return exact_match_reward(prompts, completions, answer=answer)

    datasets.disable_progress_bars()
    bf16 = precision == "bf16-mixed"
    out = root / f"trl-{precision}"
    t0 = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(sft)
    rows = [{"prompt": tokenizer.bos_token + r.prompt, "answer": r.answer}
            for r in load_verifier_jsonl(root / "prompts.jsonl")]  # fmt: skip
    config = trl.GRPOConfig(
        output_dir=str(out), max_steps=steps, per_device_train_batch_size=PROMPTS * G,
        num_generations=G, max_completion_length=MAX_TOKENS, temperature=1.0, top_p=1.0,
        learning_rate=lr, lr_scheduler_type="linear", warmup_steps=0, weight_decay=0.0,
        max_grad_norm=1.0, beta=BETA, epsilon=0.2, loss_type="grpo", num_iterations=1,
        logging_steps=10, save_strategy="no", report_to=[], use_cpu=True, bf16=bf16,
        # with bf16, eager attention: the default SDPA's bf16 backward is far slower on CPU
        model_init_kwargs={"attn_implementation": "eager"} if bf16 else None,
        gradient_checkpointing=False, disable_tqdm=True, dataloader_num_workers=0, seed=0,
    )  # fmt: skip
    trainer = trl.GRPOTrainer(model=str(sft), reward_funcs=exact_match, args=config,
                              train_dataset=datasets.Dataset.from_list(rows),
                              processing_class=tokenizer)  # fmt: skip
    trainer.train()
    seconds = time.perf_counter() - t0
    trainer.save_model(str(out / "model"))
    tokenizer.save_pretrained(str(out / "model"))
    return seconds, out / "model"


def report(rows: list, start: float, args: argparse.Namespace, root: Path) -> None:
    """Print the table of ``rows`` (name, seconds, exact match after) and write grpo.json."""
    print(f"\n{args.steps} steps of {PROMPTS} prompts x G={G}, max {MAX_TOKENS} tokens, "
          f"lr {args.lr}, beta {BETA}, one thread\n")  # fmt: skip
    columns = ["library", "s per step", "prompts/s", "exact match (300 held out)"]
    print("| " + " | ".join(columns) + " |")
    print("|---|---:|---:|---|")
    trl_seconds = min((s for name, s, _ in rows if name.startswith("TRL")), default=None)
    table, figures = [], {}
    for name, seconds, after in rows:
        rate = PROMPTS * args.steps / seconds
        ratio = ""
        if trl_seconds and name.startswith("rlx"):
            figures[f"{name}_vs_trl_fastest"] = round(trl_seconds / seconds, 2)
            ratio = f" ({trl_seconds / seconds:.2f}x TRL's fastest)"
        cells = [name, f"{seconds / args.steps:.3f}", f"{rate:.1f}{ratio}",
                 f"{start:.1%} -> {after:.1%}"]  # fmt: skip
        print("| " + " | ".join(cells) + " |")
        table.append(cells)
    for precision in ("fp32", "bf16-mixed"):
        metrics = root / f"rlx-{precision}" / "metrics.jsonl"
        if not metrics.is_file():
            continue
        rlx_rows = [json.loads(x) for x in metrics.read_text().splitlines()]
        gen = sum(r["generation_s"] for r in rlx_rows) / len(rlx_rows)
        upd = sum(r["update_s"] for r in rlx_rows) / len(rlx_rows)
        figures[f"rlx_{precision}_generation_s_per_step"] = round(gen, 4)
        figures[f"rlx_{precision}_update_s_per_step"] = round(upd, 4)
        print(f"rlx {precision} per step: generation {gen:.3f} s, update {upd:.3f} s")
    write_result(
        "grpo",
        title="GRPO on two-digit addition: rlx vs TRL's GRPOTrainer",
        columns=columns,
        rows=table,
        seeds=[0],
        figures=figures,
        notes=f"{args.steps} steps of {PROMPTS} prompts x G={G}, at most {MAX_TOKENS} tokens, "
        f"lr {args.lr}, beta {BETA}, one torch thread; start model: {args.sft_steps} SFT steps.",
        out_dir=args.out_dir,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--sft-steps", type=int, default=SFT_STEPS,
                        help="SFT steps of the start model (fewer: a smoke run)")  # fmt: skip
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where grpo.json goes (default benchmarks/results)")  # fmt: skip
    parser.add_argument(
        "--configs",
        nargs="+",
        default=None,
        choices=CONFIGS,
        help="library and precision (-bf16: bfloat16 autocast, fp32 weights; default: all, "
        "float32 only on a CPU without native bfloat16)",
    )
    args = parser.parse_args()
    args.configs = args.configs or default_configs(CONFIGS, lambda c: c.endswith("-bf16"))
    torch.set_num_threads(1)
    # torch.optim imports torch._dynamo on first use, and trl is slow to import: not on a clock
    importlib.import_module("torch._dynamo")
    importlib.import_module("trl")

    from rlx import llm

    root = Path(tempfile.mkdtemp(prefix="bench-grpo-"))
    sft = build_sft(root, args.sft_steps)
    llm.write_jsonl(root / "prompts.jsonl", llm.arithmetic(2000, seed=5))
    test = llm.arithmetic(300, seed=99)
    start = llm.exact_match(sft, test)
    rows = []
    runs = {"rlx": run_rlx, "TRL": run_trl}
    for name in args.configs:
        library, _, bf16 = name.partition("-")
        precision = "bf16-mixed" if bf16 else "fp32"
        seconds, model = runs[library](sft, root, args.steps, args.lr, precision)
        rows.append((name, seconds, llm.exact_match(model, test)))
        print(f"{name}: {seconds:.1f} s, exact match {start:.1%} -> {rows[-1][2]:.1%}", flush=True)
    report(rows, start, args, root)


if __name__ == "__main__":
    main()
