"""SFT, reward model and DPO on a tiny Llama: rlx vs TRL's trainers, in one run.

TRL's trainers are SFTTrainer, RewardTrainer and DPOTrainer.

Protocol (one torch thread everywhere, CPU, every training run in a fresh process, seeds 0, 1,
2, one repeat each; medians and mins over the seeds are reported):

- **Configurations** (``--configs``): each library in float32 (``TRL``, ``rlx``) and in
  bf16-mixed (``TRL-bf16``, ``rlx-bf16``): bfloat16 autocast over float32 weights, optimizer
  and losses (TRL's ``bf16=True``, rlx's ``precision="bf16-mixed"``), both with eager
  attention, because PyTorch's CPU SDPA runs its bfloat16 backward far slower (slow enough
  that TRL's default SDPA makes a bf16 step slower than a float32 one). rlx is compared with
  TRL at the same precision only.
- **Like for like**: the settings that change the work are read from both configuration
  objects (:func:`like_for_like`: precision, attention, activation checkpointing, steps, rows
  per step, longest sequence, learning rate and schedule, AdamW, clipping, beta, the loss, the
  seed, threads), checked equal before the runs and by
  ``tests/benchmarks/test_like_for_like.py``, and written to the result.
- **Model**: per seed, one randomly initialised Llama-style model of 1.03M parameters with a
  character tokenizer (``rlx.llm.make_tiny_lm``: hidden 160, 4 layers, 4 heads).
- **Data** (``rlx.llm.tasks``, disjoint seeds): 4,000 two-digit additions as demonstrations
  (``arithmetic_sft``, seed 0), 2,000 preference pairs (``arithmetic_preferences``, seed 1; the
  rejected sum is a plausible slip of the same length), 500 held-out problems (``arithmetic``,
  seed 99) and 300 held-out pairs (seed 98).
- **Stages**, with the same steps, batch size, learning rate (constants below), schedule (linear
  warm-up over 5% of the steps, then linear decay to 0), AdamW without weight decay and gradient
  clipping at 1.0 on both sides: SFT 300 steps of 64 from the random model; reward model 600
  steps of 32 pairs; DPO 100 steps of 32 pairs, beta 0.1. The reward model and DPO of *both*
  libraries start from the same SFT model, TRL's (rlx's under ``--skip-trl``).
- **Same token ids**: rlx trains on ``[bos] + prompt + completion + [eos]`` with the loss on the
  completion and its eos. TRL appends the eos text to every completion itself (non-conversational
  data) but adds no bos (the character tokenizer has no post-processor), so its prompts get the
  bos *text* ``"<bos>"``, which the tokenizer maps to the bos id: both libraries train on the
  same ids, and generation (``[bos] + prompt``) matches training. TRL runs SFT on
  prompt-completion rows with ``completion_only_loss=True``, the reward model and DPO on
  explicit-prompt ``{"prompt", "chosen", "rejected"}`` rows. TRL's default activation
  (gradient) checkpointing is turned off (it slows a 1M model on CPU, and rlx does not use
  it); its default bf16 is one of the configurations above, with eager attention.
- **Clocks**, the same span on both sides: imports (torch, transformers, datasets, trl or rlx)
  and ``torch._dynamo``, which torch.optim imports on first use, come before either clock
  starts. TRL's clock covers reading the JSONL, loading the tokenizer, building the
  ``Dataset``, constructing the trainer (model load, tokenisation), ``trainer.train()`` and
  ``trainer.save_model()``; rlx's covers the whole ``llm.sft`` / ``llm.reward_model`` /
  ``llm.dpo`` call: reading, loading, tokenisation, training and the model save (no
  evaluation: ``eval_fraction=0``). Throughput is rows trained on (``steps x batch``: examples
  for SFT, pairs otherwise) over those seconds.
- **Accuracy** (held-out, after training, off the clocks): greedy exact match on the 500
  problems (``rlx.llm.generation.exact_match``) before and after SFT and DPO; for the reward
  models, the share of the 300 held-out pairs whose chosen completion scores higher
  (:func:`pair_accuracy`, one scorer for both libraries' sequence-classification folders); for
  DPO also the held-out implicit-reward pair accuracy (:func:`implicit_pair_accuracy`).
- **Ceiling**: a bare Hugging Face SFT step of the same model (forward with labels, backward,
  clipping, AdamW) on one pre-built batch of 64, repeated, with nothing else, like the raw env
  ceiling of the RL benchmarks, in each precision: the share of it each library's SFT reaches
  shows how much of its time is overhead rather than the model's own compute.

Learning rates were chosen with TRL, the same for both libraries: SFT 1e-3 (rlx's default
below 10M parameters; 300 steps end in the middle of the jump from 0 to high accuracy, so single
seeds scatter widely); reward model 1e-4, the best of 3e-5 .. 1e-3 for TRL's held-out pair
accuracy; DPO 1e-4, the largest rate at which TRL's DPO stays stable on these offline pairs
(which raise its implicit-reward accuracy but not its exact match at any rate).

Goals, per stage and precision: rlx at least 1.5x TRL's throughput for SFT and 2x for the
reward model and DPO (ratio of the medians), with accuracy no worse; given the seed-to-seed
scatter, "no worse" here means a median at most 5 points below TRL's.

The table goes to ``benchmarks/results/llm.json``.

Run: ``.venv/bin/python benchmarks/bench_llm.py [--stages sft rm dpo] [--skip-rlx] [--skip-trl]
[--seeds 0 1 2]``; ``--quick`` checks that it works (3 steps a stage, one seed).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from dataclasses import dataclass, field, replace  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from precision import default_configs  # noqa: E402  (benchmarks/precision.py)
from results import goal, ratio, settings_table, spread, write_result  # noqa: E402

THREADS = 1
MAX_LENGTH = 256  # rlx's default longest sequence; TRL's (1024) is set to it
MODEL = {"hidden_size": 160, "num_layers": 4, "num_heads": 4}  # 1,030,560 parameters
N_SFT, N_PAIRS, N_TEST, N_TEST_PAIRS = 4000, 2000, 500, 300
DATA_SEEDS = {"sft": 0, "pairs": 1, "test": 99, "test_pairs": 98}
WARMUP_RATIO = 0.05
BETA = 0.1
# Learning rates, the same for both libraries (chosen with TRL on seeds 0-3, see the docstring):
LR_SFT = 1e-3  # rlx's default below 10M parameters
LR_RM = 1e-4  # best of 3e-5 .. 1e-3 for TRL's held-out pair accuracy
LR_DPO = 1e-4  # the largest that does not collapse; larger rates unlearn the answers
ACCURACY_TOLERANCE = 0.05  # "no worse": a median at most 5 points below TRL's (see docstring)
QUICK_STEPS = 3  # --quick: steps of each stage and of the bare step, a smoke run


@dataclass(frozen=True)
class Stage:
    name: str
    title: str
    steps: int
    batch_size: int
    learning_rate: float
    goal: float  # rlx / TRL throughput to reach
    unit: str  # what a batch row is

    @property
    def examples(self) -> int:
        return self.steps * self.batch_size


STAGES = {
    "sft": Stage("sft", "SFT", 300, 64, LR_SFT, 1.5, "examples"),
    "rm": Stage("rm", "reward model", 600, 32, LR_RM, 2.0, "pairs"),
    "dpo": Stage("dpo", "DPO", 100, 32, LR_DPO, 2.0, "pairs"),
}
# configurations: (library, precision); bf16-mixed is bfloat16 autocast with float32 weights
CONFIGS = {
    "TRL": ("TRL", "fp32"),
    "TRL-bf16": ("TRL", "bf16-mixed"),
    "rlx": ("rlx", "fp32"),
    "rlx-bf16": ("rlx", "bf16-mixed"),
}


@dataclass
class Result:
    library: str
    stage: str
    seed: int
    seconds: float  # the protocol's clock
    train_s: float  # the library's own training time
    model_dir: str
    accuracy: float = 0.0  # exact match after (SFT, DPO) or held-out pair accuracy (RM)
    accuracy_before: float | None = None  # exact match of the start model (SFT, DPO)
    implicit_accuracy: float | None = None  # DPO: held-out implicit-reward pair accuracy
    extra: dict = field(default_factory=dict)

    @property
    def per_s(self) -> float:
        return STAGES[self.stage].examples / self.seconds

    @property
    def per_train_s(self) -> float:
        return STAGES[self.stage].examples / self.train_s


# -------------------------------------------------------------------- configurations
def rlx_kwargs(stage: Stage, precision: str, seed: int) -> dict[str, Any]:
    """What the benchmark passes to ``llm.sft`` / ``llm.reward_model`` / ``llm.dpo`` besides
    the model, data and run folder."""
    kwargs: dict[str, Any] = {
        "steps": stage.steps, "batch_size": stage.batch_size,
        "learning_rate": stage.learning_rate, "warmup_ratio": WARMUP_RATIO,
        "weight_decay": 0.0, "max_grad_norm": 1.0, "max_length": MAX_LENGTH, "seed": seed,
        "eval_every": 10**9, "eval_fraction": 0.0, "precision": precision,
        "gradient_checkpointing": False, "num_threads": THREADS, "device": "cpu",
        "progress": False,
        "checkpoint_every_steps": stage.steps,  # one checkpoint, at the end, as TRL's below
    }  # fmt: skip
    if stage.name == "dpo":
        kwargs["beta"] = BETA
    return kwargs


def trl_config(stage: Stage, precision: str, seed: int, out: str) -> Any:
    """TRL's config for the stage as the child process builds it; the rest is TRL's default."""
    import trl

    Config = {"sft": trl.SFTConfig, "rm": trl.RewardConfig, "dpo": trl.DPOConfig}[stage.name]
    extra = {"sft": {"completion_only_loss": True}, "rm": {}, "dpo": {"beta": BETA}}[stage.name]
    bf16 = precision == "bf16-mixed"
    return Config(
        output_dir=out + "-trainer",
        max_steps=stage.steps,
        per_device_train_batch_size=stage.batch_size,
        learning_rate=stage.learning_rate,
        lr_scheduler_type="linear",
        warmup_steps=WARMUP_RATIO,  # below 1: a share of max_steps
        weight_decay=0.0,
        max_grad_norm=1.0,
        max_length=MAX_LENGTH,
        logging_steps=50,
        # TRL's default strategy: a checkpoint (model, optimizer, RNG) at the end, as rlx's
        save_strategy="steps",
        save_steps=stage.steps,
        report_to="none",
        use_cpu=True,
        bf16=bf16,
        # with bf16, eager attention, as rlx computes it on a CPU (SDPA's bf16 backward is slow)
        model_init_kwargs={"attn_implementation": "eager"} if bf16 else None,
        activation_checkpointing=False,  # TRL turns it on by default; rlx does not use it
        seed=seed,
        dataloader_num_workers=0,
        disable_tqdm=True,
        **extra,
    )


def like_for_like(name: str, precision: str, seed: int = 0) -> list[dict[str, Any]]:
    """Both libraries' settings for one stage and precision, read from their config objects
    (``bench_lora.rlx_settings`` and ``trl_settings``)."""
    import bench_lora

    stage = STAGES[name]
    config = bench_lora.rlx_config(name, rlx_kwargs(stage, precision, seed))
    with tempfile.TemporaryDirectory() as out:
        trl = bench_lora.trl_settings(name, trl_config(stage, precision, seed, out), None)
    return settings_table(bench_lora.rlx_settings(name, config), trl)


# -------------------------------------------------------------------- one stage, one process
def child(spec: dict[str, Any]) -> None:
    """One training run in this fresh process; prints its clock and figures as JSON. Both
    clocks span reading the data, loading the model, training and saving it."""
    import torch

    torch.set_num_threads(THREADS)
    import datasets
    import torch._dynamo
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    datasets.disable_progress_bars()
    datasets.utils.logging.set_verbosity_error()
    stage = replace(STAGES[spec["stage"]], steps=spec["steps"])
    from clocks import import_everything

    import_everything()  # the same modules on both sides before either clock starts
    out = (run_trl if spec["library"] == "TRL" else run_rlx)(spec, stage)
    print(json.dumps(out))


def run_trl(spec: dict[str, Any], stage: Stage) -> dict[str, Any]:
    import trl
    from transformers import AutoTokenizer

    Trainer = {"sft": trl.SFTTrainer, "rm": trl.RewardTrainer, "dpo": trl.DPOTrainer}[stage.name]
    start = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(spec["model"])
    with open(spec["data"], encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    for row in rows:  # rlx's sequences start with bos; TRL adds none with this tokenizer
        row["prompt"] = tokenizer.bos_token + row["prompt"]
    import datasets

    trainer = Trainer(
        model=spec["model"],
        args=trl_config(stage, spec["precision"], spec["seed"], spec["out"]),
        train_dataset=datasets.Dataset.from_list(rows),
        processing_class=tokenizer,
    )
    output = trainer.train()
    trainer.save_model(spec["out"])
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "train_s": output.metrics["train_runtime"],
            "model_dir": spec["out"], "train_loss": output.training_loss}  # fmt: skip


def run_rlx(spec: dict[str, Any], stage: Stage) -> dict[str, Any]:
    from rlx import llm

    train = {"sft": llm.sft, "rm": llm.reward_model, "dpo": llm.dpo}[stage.name]
    start = time.perf_counter()
    result = train(spec["model"], data=spec["data"], run_dir=spec["out"],
                   **rlx_kwargs(stage, spec["precision"], spec["seed"]))  # fmt: skip
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "train_s": float(result.wall_s),
        "model_dir": str(result.model_dir),
        "metrics": {k: v for k, v in result.metrics.items() if isinstance(v, (int, float))},
    }


def run_stage(config: str, stage: Stage, model: Path, data: Path, out: Path, seed: int) -> Result:
    library, precision = CONFIGS[config]
    spec = {"library": library, "precision": precision, "stage": stage.name, "steps": stage.steps,
            "model": str(model), "data": str(data), "out": str(out), "seed": seed}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise RuntimeError(f"{config} {stage.title} failed (exit {proc.returncode})")
    data_out = json.loads(proc.stdout.strip().splitlines()[-1])
    extra = {k: v for k, v in data_out.items() if k not in ("seconds", "train_s", "model_dir")}
    return Result(
        config, stage.name, seed, data_out["seconds"], data_out["train_s"],
        data_out["model_dir"], extra=extra,
    )  # fmt: skip


RAW_SCRIPT = r"""
import json, sys, time
spec = json.loads(sys.argv[1])
import torch
torch.set_num_threads(spec["threads"])
import torch._dynamo  # noqa: F401
import transformers
from transformers import AutoModelForCausalLM
from rlx.llm.batching import encode_prompt_completions, pad_batch
from rlx.llm.models import load_tokenizer
from rlx.llm.tasks import load_sft_jsonl
transformers.utils.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()
tokenizer = load_tokenizer(spec["model"])
bf16 = spec["precision"] == "bf16-mixed"
model = AutoModelForCausalLM.from_pretrained(
    spec["model"], attn_implementation="eager" if bf16 else "sdpa"
).train()
rows = load_sft_jsonl(spec["data"])[: spec["batch_size"]]
encoded = encode_prompt_completions(
    tokenizer, [r.prompt for r in rows], [r.completion for r in rows], None
)
batch = pad_batch(encoded, tokenizer.pad_token_id)
labels = batch.input_ids.masked_fill(~batch.loss_mask, -100)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)


def step():
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, labels=labels)
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


for _ in range(10):
    step()
start = time.perf_counter()
for _ in range(spec["steps"]):
    step()
per_s = spec["steps"] * spec["batch_size"] / (time.perf_counter() - start)
# where a step's time goes: its matrix products against everything else
from torch.profiler import ProfilerActivity, profile
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for _ in range(20):
        step()
matmul_us = sum(e.self_cpu_time_total for e in prof.key_averages()
                if e.key in ("aten::mm", "aten::addmm", "aten::bmm")) / 20
embedding = model.get_input_embeddings().weight.numel()
flops = 6 * (sum(p.numel() for p in model.parameters()) - embedding) * batch.input_ids.numel()
print(json.dumps({"per_s": per_s, "matmul_ms": matmul_us / 1e3, "gflop": flops / 1e9,
                  "tokens": batch.input_ids.numel()}))
"""


def bare_step_ceiling(model: Path, data: Path, precision: str, steps: int = 100) -> dict:
    """A bare SFT step (forward with labels, backward, clip, AdamW) of the same model on one
    pre-built batch of 64 demonstrations, repeated: no data pipeline, no logging
    (``bf16-mixed``: eager attention, the forward under bfloat16 autocast). Returns its
    examples/s (``per_s``), the milliseconds of a step spent in matrix products (``matmul_ms``,
    torch.profiler over 20 more steps), the step's ``6 N T`` GFLOP and its tokens."""
    spec = {"model": str(model), "data": str(data), "batch_size": STAGES["sft"].batch_size,
            "steps": steps, "threads": THREADS, "precision": precision}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-c", RAW_SCRIPT, json.dumps(spec)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise RuntimeError(f"the bare-step ceiling failed (exit {proc.returncode})")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------- setup and scoring
@dataclass(frozen=True)
class Setup:
    sft_data: Path
    pairs_data: Path
    test_rows: list
    test_pairs: list
    texts: list


def make_data(work: Path) -> Setup:
    from rlx import llm

    sft_rows = llm.arithmetic_sft(N_SFT, seed=DATA_SEEDS["sft"])
    pairs = llm.arithmetic_preferences(N_PAIRS, seed=DATA_SEEDS["pairs"])
    test_rows = llm.arithmetic(N_TEST, seed=DATA_SEEDS["test"])
    test_pairs = llm.arithmetic_preferences(N_TEST_PAIRS, seed=DATA_SEEDS["test_pairs"])
    return Setup(
        sft_data=llm.write_jsonl(work / "sft.jsonl", sft_rows),
        pairs_data=llm.write_jsonl(work / "pairs.jsonl", pairs),
        test_rows=test_rows,
        test_pairs=test_pairs,
        texts=llm.task_texts([*sft_rows, *pairs, *test_rows, *test_pairs]),
    )


def make_model(folder: Path, texts: list[str], seed: int) -> tuple[Path, int]:
    """The tiny Llama of the protocol, initialised from ``seed``, and its parameter count."""
    from rlx import llm

    path = llm.make_tiny_lm(folder, texts=texts, seed=seed, **MODEL)
    network, _ = llm.load_model(path)
    return path, llm.count_parameters(network)


def exact_match(model_dir: str | Path, rows: Sequence) -> float:
    from rlx.llm.generation import exact_match as greedy_exact_match

    return greedy_exact_match(model_dir, rows)


def _encode_pairs(tokenizer, pairs: Sequence) -> list:
    """``[bos] + prompt + completion + [eos]`` for every chosen, then every rejected completion."""
    from rlx.llm.batching import encode_prompt_completions

    prompts = [p.prompt for p in pairs] * 2
    completions = [p.chosen for p in pairs] + [p.rejected for p in pairs]
    return encode_prompt_completions(tokenizer, prompts, completions, None)


def pair_accuracy(model_dir: str | Path, pairs: Sequence) -> float:
    """Share of ``pairs`` whose chosen completion the reward model in ``model_dir`` (a
    sequence-classification folder with one label) scores above the rejected one.

    Each completion is scored as ``[bos] + prompt + completion + [eos]``, the layout both
    libraries train on, at its last token. Sequences are batched by length, so no batch holds
    padding and the score is read at the last token whatever the model's pad-token logic.
    """
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    sequences = [s.input_ids for s in _encode_pairs(tokenizer, pairs)]
    by_length: dict[int, list[int]] = {}
    for i, ids in enumerate(sequences):
        by_length.setdefault(len(ids), []).append(i)
    scores = torch.empty(len(sequences))
    with torch.no_grad():
        for rows in by_length.values():
            ids = torch.tensor([sequences[i] for i in rows])
            scores[rows] = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[:, 0]
    chosen, rejected = scores.split(len(pairs))
    return (chosen > rejected).float().mean().item()


def implicit_pair_accuracy(
    policy_dir: str | Path, reference_dir: str | Path, pairs: Sequence
) -> float:
    """Share of ``pairs`` whose DPO implicit reward ``log pi(y|x) - log pi_ref(y|x)`` (summed over
    the completion and its eos) is higher for the chosen completion than for the rejected one."""
    import torch

    from rlx.llm.batching import pad_batch
    from rlx.llm.logprobs import sequence_logprobs
    from rlx.llm.models import load_model

    policy, tokenizer = load_model(policy_dir)
    reference, _ = load_model(reference_dir)
    batch = pad_batch(_encode_pairs(tokenizer, pairs), tokenizer.pad_token_id)
    with torch.no_grad():
        reward = sequence_logprobs(policy, batch) - sequence_logprobs(reference, batch)
    chosen, rejected = reward.split(len(pairs))
    return (chosen > rejected).float().mean().item()


# ---------------------------------------------------------------------------- report
def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def accuracy_text(runs: Sequence[Result], per_seed: bool = False) -> str:
    """The accuracy of one stage and library: medians over seeds (and each seed's value)."""
    after = [r.accuracy for r in runs]
    seeds = f" ({', '.join(f'{a:.1%}' for a in after)})" if per_seed and len(runs) > 1 else ""
    if runs[0].stage == "rm":
        return f"{median(after):.1%}{seeds} held-out pair accuracy"
    before = median([r.accuracy_before for r in runs])
    text = f"{before:.1%} -> {median(after):.1%}{seeds} exact match"
    if runs[0].stage == "dpo":
        text += f", {median([r.implicit_accuracy for r in runs]):.1%} implicit pair accuracy"
    return text


def report(
    results: list[Result],
    parameters: int,
    stages: Sequence[str],
    seeds: list[int],
    ceiling: dict[str, float],
) -> tuple[list[str], list[list[Any]], list[dict[str, Any]], dict[str, Any]]:
    """Print the results; return the table (columns, rows), the goals per stage and precision
    (rlx against TRL at the same precision) and the figures: the bare step's examples/s per
    precision. Each row: median and min over the seeds (each seed is one repeat)."""
    figures = {f"bare_sft_step_{p}_examples_per_s": round(v, 1) for p, v in ceiling.items()}
    print(f"\ntiny Llama: {parameters:,} parameters, character tokenizer; {THREADS} torch "
          f"thread, CPU; seeds {', '.join(map(str, seeds))}")  # fmt: skip
    columns = ["stage (steps x batch)", "configuration", "rows/s, median", "rows/s, min",
               "seconds, median", "rlx / TRL, same precision (medians)",
               "held-out accuracy"]  # fmt: skip
    groups = {
        (name, config): [r for r in results if r.stage == name and r.library == config]
        for name in stages
        for config in CONFIGS
    }
    groups = {key: runs for key, runs in groups.items() if runs}
    table, goals = [], []
    for (name, config), runs in groups.items():
        stage = STAGES[name]
        rate = spread([r.per_s for r in runs])
        library, precision = CONFIGS[config]
        peer = next((c for c, v in CONFIGS.items() if v == ("TRL", precision)), None)
        vs = ""
        if library == "rlx" and (name, peer) in groups:
            trl_runs = groups[name, peer]
            vs = ratio(rate["median"], median([r.per_s for r in trl_runs]))
            gap = round(median([r.accuracy for r in runs]) -
                        median([r.accuracy for r in trl_runs]), 3)  # fmt: skip
            goals.append(goal(f"{stage.title}, {precision}: rlx at least {stage.goal:g}x TRL's "
                              f"{stage.unit}/s", f"ratio >= {stage.goal:g}", vs,
                              vs >= stage.goal))  # fmt: skip
            goals.append(goal(f"{stage.title}, {precision}: rlx's held-out accuracy no more "
                              f"than {ACCURACY_TOLERANCE:.0%} below TRL's",
                              f">= -{ACCURACY_TOLERANCE}", gap,
                              gap >= -ACCURACY_TOLERANCE))  # fmt: skip
        table.append([f"{stage.title} ({stage.steps} x {stage.batch_size})", config,
                      rate["median"], rate["min"], round(median([r.seconds for r in runs]), 2),
                      vs, accuracy_text(runs)])  # fmt: skip
        print(f"{stage.title:13} {config:8} {rate['median']:>7,.0f} {stage.unit}/s "
              f"(min {rate['min']:,.0f}), {accuracy_text(runs, True)}")  # fmt: skip
    for precision, per_s in ceiling.items():
        sft = {c: [r.per_s for r in results if r.stage == "sft" and r.library == c]
               for c in CONFIGS if CONFIGS[c][1] == precision}  # fmt: skip
        shares = [f"{c} {median(v) / per_s:.0%}" for c, v in sft.items() if v]
        print(f"bare HF SFT step, {precision}: {per_s:,.0f} examples/s; SFT reaches "
              f"{', '.join(shares)} of it")  # fmt: skip
    return columns, table, goals, figures


# ---------------------------------------------------------------------------- main
def run_seed(
    seed: int, libraries: list[str], stages: list[str], setup: Setup, work: Path
) -> tuple[list[Result], int]:
    """Every asked-for stage of every library, from one model initialised with ``seed``."""
    model, parameters = make_model(work / "tiny", setup.texts, seed)
    results: list[Result] = []

    def log(r: Result) -> None:
        print(f"seed {seed} {r.library:4} {STAGES[r.stage].title}: {r.per_s:,.0f} "
              f"{STAGES[r.stage].unit}/s, {r.seconds:.1f} s, {accuracy_text([r])}",
              flush=True)  # fmt: skip

    # SFT runs whenever a later stage needs its model; it is reported when asked for.
    sft_libraries = libraries if "sft" in stages else libraries[:1]
    random_accuracy = exact_match(model, setup.test_rows)
    sft_models: dict[str, str] = {}
    for library in sft_libraries:
        r = run_stage(library, STAGES["sft"], model, setup.sft_data, work / f"{library}-sft", seed)
        r.accuracy_before, r.accuracy = random_accuracy, exact_match(r.model_dir, setup.test_rows)
        sft_models[library] = r.model_dir
        if "sft" in stages:
            results.append(r)
            log(r)
    start = Path(sft_models.get("TRL") or next(iter(sft_models.values())))  # one start for all
    start_accuracy = exact_match(start, setup.test_rows)

    for name in ("rm", "dpo"):
        if name not in stages:
            continue
        for library in libraries:
            r = run_stage(library, STAGES[name], start, setup.pairs_data,
                          work / f"{library}-{name}", seed)  # fmt: skip
            if name == "rm":
                r.accuracy = pair_accuracy(r.model_dir, setup.test_pairs)
            else:
                r.accuracy_before = start_accuracy
                r.accuracy = exact_match(r.model_dir, setup.test_rows)
                r.implicit_accuracy = implicit_pair_accuracy(r.model_dir, start, setup.test_pairs)
            results.append(r)
            log(r)
    return results, parameters


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stages", nargs="+", choices=list(STAGES), default=list(STAGES))
    parser.add_argument("--skip-rlx", action="store_true", help="TRL only")
    parser.add_argument("--skip-trl", action="store_true", help="rlx only")
    parser.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=None,
                        help="library and precision configurations to run (default: all; "
                             "float32 only on a CPU without native bfloat16)")  # fmt: skip
    parser.add_argument(
        "--seeds", "--seed", type=int, nargs="+", default=[0, 1, 2],
        help="model initialisation and trainer seeds, one repeat each (at least 3)",
    )  # fmt: skip
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_STEPS} steps a stage, 1 seed: a smoke run")  # fmt: skip
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where llm.json goes (default benchmarks/results, --quick: "
                             "benchmarks/results/quick)")  # fmt: skip
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return 0
    if args.quick:
        args.seeds = args.seeds[:1]
        for name, stage in STAGES.items():
            STAGES[name] = replace(stage, steps=QUICK_STEPS)
    skipped = {"rlx": args.skip_rlx, "TRL": args.skip_trl}
    if importlib.util.find_spec("trl") is None and not args.skip_trl:
        print("TRL is not installed (pip install trl): rlx runs alone")
        skipped["TRL"] = True
    configs = args.configs or default_configs(CONFIGS, lambda c: CONFIGS[c][1] == "bf16-mixed")
    libraries = [c for c in configs if not skipped[CONFIGS[c][0]]]
    if not libraries:
        parser.error("--skip-rlx and --skip-trl leave nothing to run")
    stages = [name for name in STAGES if name in args.stages]
    settings = []
    for name in stages:
        for precision in sorted({CONFIGS[c][1] for c in libraries}):
            rows = like_for_like(name, precision)
            settings += [{**r, "setting": f"{STAGES[name].title}, {precision}: {r['setting']}"}
                         for r in rows]  # fmt: skip
    bad = [r["setting"] for r in settings if not r["equal"]]
    if bad and not skipped["TRL"]:
        raise SystemExit(f"not like for like: {bad}")

    import torch
    import transformers

    torch.set_num_threads(THREADS)
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()

    results: list[Result] = []
    parameters = 0
    with tempfile.TemporaryDirectory(prefix="bench_llm_") as tmp:
        setup = make_data(Path(tmp))
        ceiling: dict[str, float] = {}
        if "sft" in stages:
            model, _ = make_model(Path(tmp) / "ceiling-model", setup.texts, args.seeds[0])
            for precision in sorted({CONFIGS[c][1] for c in libraries}, reverse=True):
                bare = bare_step_ceiling(
                    model, setup.sft_data, precision, QUICK_STEPS if args.quick else 100
                )
                ceiling[precision] = bare["per_s"]
                print(f"bare HF SFT step, {precision}: {bare['per_s']:,.0f} examples/s",
                      flush=True)  # fmt: skip
        for seed in args.seeds:
            work = Path(tmp) / f"seed{seed}"
            runs, parameters = run_seed(seed, libraries, stages, setup, work)
            results += runs
    columns, table, goals, figures = report(results, parameters, stages, args.seeds, ceiling)
    write_result(
        "llm",
        title="SFT, reward model and DPO on a tiny Llama: rlx vs TRL",
        columns=columns,
        rows=table,
        libraries=("torch", "transformers", "trl", "datasets", "tokenizers", "accelerate"),
        repeats=len(args.seeds),
        seeds=args.seeds,
        goals=goals,
        peer="TRL",
        settings=settings,
        figures=figures,
        details={
            f"{r.stage} {r.library} seed {r.seed}": {
                "seconds": r.seconds,
                "train_s": r.train_s,
                "accuracy": r.accuracy,
                "accuracy_before": r.accuracy_before,
                "implicit_accuracy": r.implicit_accuracy,
            }
            for r in results
        },
        notes=f"{parameters:,}-parameter Llama, {THREADS} torch thread, CPU; one run per seed "
        "and configuration in a fresh process; both clocks span reading the data, loading the "
        "model, training and saving it; throughput counts rows trained on over that span; "
        "ratios compare rlx and TRL at the same precision.",
        quick=args.quick,
        out_dir=args.out_dir,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
