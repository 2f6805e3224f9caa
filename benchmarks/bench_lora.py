"""Real models: rlx vs TRL on a Qwen2 model with a BPE tokenizer and a chat template, with and
without LoRA, in one run.

Protocol (one torch thread, CPU, float32, every training run in a fresh process, seed 0):

- **Model**: a randomly initialised Qwen2 (``rlx.llm.make_tiny_chat_lm``: hidden ``--hidden``,
  ``--layers`` layers, 4 heads) with a byte-level BPE tokenizer trained on the data's text and
  the ChatML template, saved as a Hugging Face folder; both libraries load that folder.
- **Data**, conversational, in TRL's columns, one pass (``steps x batch`` rows, so rlx's DPO,
  which scores every pair with the reference once before training, does no more work than
  TRL's, which scores each batch as it comes): two-digit additions as ``prompt`` (one user
  message) + ``completion`` (one assistant message) for SFT; the same prompts with the right
  sum ``chosen`` and a near miss ``rejected`` for DPO; prompts with an ``answer`` column and an
  exact-match reward reading it for GRPO.
- **Same work**: the same steps, batch, learning rate, linear decay, AdamW, clipping at 1.0;
  SFT with the loss on the completion only; DPO beta 0.1; GRPO ``G`` completions of at most
  ``MAX_TOKENS`` tokens per prompt, beta 0.04, one pass per batch, TRL's ``loss_type="grpo"``.
  LoRA: rank 16, alpha 32, every linear layer (``all-linear``) on both sides; the reference of
  DPO and GRPO is the model with its adapter off in both libraries. TRL's activation
  checkpointing is off (rlx's default).
- **Clocks**: after the imports; rlx's covers the whole ``llm.sft`` / ``llm.dpo`` /
  ``llm.grpo`` call (loading, tokenisation, training, saving the model and the adapter), TRL's
  the trainer's construction and ``train()``.
- **Peak memory**: the process's peak resident memory (``ru_maxrss``) above what it held
  after the imports, i.e. the model, optimizer, activations and data of the run.

Reported: SFT examples/s, DPO pairs/s, GRPO prompts/s and peak memory, each library with and
without LoRA, written to ``benchmarks/results/lora.json`` (``--out-dir`` elsewhere). The goal:
GRPO at least 1.5x TRL's prompts/s and every other stage at least TRL's speed.

Run: ``.venv/bin/python benchmarks/bench_lora.py [--steps 20]``; a smoke run that only checks
it works: ``--steps 2 --skip-trl --out-dir /tmp/bench``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from results import write_result  # noqa: E402  (benchmarks/results.py)

STAGES = ("sft", "dpo", "grpo")
UNITS = {"sft": "examples/s", "dpo": "pairs/s", "grpo": "prompts/s"}
BATCH, G, MAX_TOKENS, LR = 8, 8, 4, 1e-4
LORA = {"r": 16, "lora_alpha": 32}


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def assistant(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def build(root: Path, hidden: int, layers: int, rows: int) -> dict[str, str]:
    """The model folder and one JSONL file of ``rows`` rows per stage (one pass of the run),
    in TRL's conversational columns."""
    from rlx import llm

    problems = llm.arithmetic(rows, seed=0)
    wrong = llm.arithmetic_preferences(rows, seed=0)
    shapes = {
        "sft": [{"prompt": user(p.prompt), "completion": assistant(p.answer)} for p in problems],
        "dpo": [
            {
                "prompt": user(p.prompt),
                "chosen": assistant(p.chosen),
                "rejected": assistant(p.rejected),
            }
            for p in wrong
        ],
        "grpo": [{"prompt": user(p.prompt), "answer": p.answer} for p in problems],
    }
    files = {}
    for stage, rows in shapes.items():
        files[stage] = str(root / f"{stage}.jsonl")
        llm.write_jsonl(files[stage], rows)
    texts = [f"{p.prompt}{p.answer}" for p in problems]
    model = llm.make_tiny_chat_lm(root / "qwen", texts=texts, hidden_size=hidden,
                                  num_layers=layers, num_heads=4)  # fmt: skip
    return {"model": str(model), **files}


def exact_match(prompts, completions, answer, **kwargs):
    """TRL's form of a reward reading the data's ``answer`` column."""
    return [float(c[0]["content"].strip() == a) for c, a in zip(completions, answer, strict=True)]


def run_rlx(spec: dict) -> None:
    from rlx import llm

    stage, steps = spec["stage"], spec["steps"]
    common = {"steps": steps, "batch_size": BATCH, "learning_rate": LR, "warmup_ratio": 0.0,
              "eval_fraction": 0.0, "eval_exact_match": False, "progress": False,
              "run_dir": spec["out"]}  # fmt: skip
    if spec["lora"]:
        common["lora"] = LORA
    if stage == "sft":
        llm.sft(spec["model"], spec["sft"], **common)
    elif stage == "dpo":
        llm.dpo(spec["model"], spec["dpo"], beta=0.1, **common)
    else:
        llm.grpo(spec["model"], spec["grpo"], reward=exact_match, group_size=G,
                 max_new_tokens=MAX_TOKENS, beta=0.04, **common)  # fmt: skip


def run_trl(spec: dict) -> None:
    import datasets
    import trl
    from peft import LoraConfig

    stage, steps = spec["stage"], spec["steps"]
    datasets.disable_progress_bars()
    with open(spec[stage], encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    Config, Trainer = {"sft": (trl.SFTConfig, trl.SFTTrainer),
                       "dpo": (trl.DPOConfig, trl.DPOTrainer),
                       "grpo": (trl.GRPOConfig, trl.GRPOTrainer)}[stage]  # fmt: skip
    extra = {
        "sft": {"completion_only_loss": True, "per_device_train_batch_size": BATCH},
        "dpo": {"beta": 0.1, "per_device_train_batch_size": BATCH},
        "grpo": {
            "beta": 0.04,
            "per_device_train_batch_size": BATCH * G,
            "num_generations": G,
            "max_completion_length": MAX_TOKENS,
            "loss_type": "grpo",
            "num_iterations": 1,
        },
    }[stage]
    config = Config(output_dir=spec["out"], max_steps=steps, learning_rate=LR,
                    lr_scheduler_type="linear", warmup_steps=0, weight_decay=0.0,
                    max_grad_norm=1.0, logging_steps=10**6, save_strategy="no",
                    report_to="none", use_cpu=True, activation_checkpointing=False, seed=0,
                    dataloader_num_workers=0, disable_tqdm=True, **extra)  # fmt: skip
    kwargs = {"reward_funcs": exact_match} if stage == "grpo" else {}
    if spec["lora"]:
        kwargs["peft_config"] = LoraConfig(**LORA, target_modules="all-linear",
                                           task_type="CAUSAL_LM")  # fmt: skip
    trainer = Trainer(model=spec["model"], args=config,
                      train_dataset=datasets.Dataset.from_list(rows), **kwargs)  # fmt: skip
    trainer.train()


def child(spec: dict) -> None:
    """One training run in this fresh process: prints seconds and peak memory as JSON."""
    import torch

    torch.set_num_threads(1)
    if spec["library"] == "TRL":
        import trl  # noqa: F401  (slow to import: not on the clock)
    import torch._dynamo  # torch.optim imports it on first use: not on the clock

    import rlx.llm.stages.grpo  # noqa: F401

    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    (run_trl if spec["library"] == "TRL" else run_rlx)(spec)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": seconds, "peak_mb": (peak - baseline) / 1024}))


def measure(spec: dict) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)],
                         capture_output=True, text=True, check=False)  # fmt: skip
    if out.returncode:
        raise RuntimeError(f"{spec['library']} {spec['stage']} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--stages", nargs="+", default=list(STAGES), choices=STAGES)
    parser.add_argument("--skip-trl", action="store_true")
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where lora.json goes (default benchmarks/results)")  # fmt: skip
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    libraries = ["rlx"] if args.skip_trl else ["rlx", "TRL"]
    columns = ["stage", "library", "LoRA", "rows/s", "vs TRL", "peak memory (MB)"]
    table, figures = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = build(Path(tmp), args.hidden, args.layers, args.steps * BATCH)
        for stage in args.stages:
            for lora in (False, True):
                seconds = {}
                for library in libraries:
                    out = str(Path(tmp) / f"{library}-{stage}-{lora}")
                    spec = {**paths, "stage": stage, "library": library, "lora": lora,
                            "steps": args.steps, "out": out}  # fmt: skip
                    result = measure(spec)
                    seconds[library] = result["seconds"]
                    rate = BATCH * args.steps / result["seconds"]
                    if library == "TRL":  # the rlx row above gets the ratio
                        speedup = seconds["TRL"] / seconds["rlx"]
                        name = f"{stage}_lora" if lora else stage
                        figures[f"{name}_rlx_vs_trl"] = round(speedup, 2)
                        table[-1][4] = f"{speedup:.2f}x"
                    peak = f"{result['peak_mb']:.0f}"
                    row = [stage, library, "yes" if lora else "no",
                           f"{rate:.1f} {UNITS[stage]}", "", peak]  # fmt: skip
                    print(" | ".join(row), flush=True)
                    table.append(row)
    notes = (f"{args.steps} steps of {BATCH} rows (GRPO: prompts x G={G}, at most {MAX_TOKENS} "
             f"tokens), lr {LR}, LoRA r={LORA['r']} alpha={LORA['lora_alpha']} all-linear, "
             f"Qwen2 hidden {args.hidden}, {args.layers} layers, BPE + ChatML, one thread, "
             "float32. End to end, each run in a fresh process: rlx's clock covers loading, "
             "tokenisation, training and saving the model (and adapter), TRL's the trainer's "
             "construction and train(); in a short run the fixed costs weigh most, so the "
             "ratios are larger than those of the training step alone (the GRPO and SFT/DPO "
             "step benchmarks, bench_grpo.py and bench_llm.py, time the step). Peak memory: "
             "the process's peak resident memory above what it held after the imports."
             )  # fmt: skip
    path = write_result("lora", title="Real models with and without LoRA: rlx vs TRL",
                        columns=columns, rows=table, seeds=[0], figures=figures, notes=notes,
                        out_dir=args.out_dir)  # fmt: skip
    print(f"\n{notes}\nwritten to {path}")


if __name__ == "__main__":
    main()
