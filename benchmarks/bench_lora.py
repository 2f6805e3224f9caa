"""Real models: rlx vs TRL on a Qwen2 model with a BPE tokenizer and a chat template, with and
without LoRA, like for like.

Protocol (one torch thread, CPU, every training run in a fresh process):

- **Model**: a randomly initialised Qwen2 (``rlx.llm.make_tiny_chat_lm``: hidden ``--hidden``,
  ``--layers`` layers, 4 heads) with a byte-level BPE tokenizer trained on the data's text and
  the ChatML template, saved as a Hugging Face folder; both libraries load that folder.
- **Data**, conversational, in TRL's columns, one pass (``steps x batch`` rows, so rlx's DPO,
  which scores every pair with the reference once before training, does no more work than
  TRL's, which scores each batch as it comes): two-digit additions as ``prompt`` (one user
  message) + ``completion`` (one assistant message) for SFT; the same prompts with the right
  sum ``chosen`` and a near miss ``rejected`` for DPO; prompts with an ``answer`` column and an
  exact-match reward reading it for GRPO.
- **Same work**, read from both configuration objects (:func:`like_for_like`, asserted by
  ``tests/benchmarks/test_like_for_like.py`` and before every run): precision (each
  ``--precisions`` entry on both sides: ``fp32``, or ``bf16-mixed``, TRL's ``bf16=True``, with
  the attention rlx uses for it on a CPU, eager), activation checkpointing (off on both:
  TRL's default is on, rlx's off), steps, rows per step, GRPO's group size and completion
  length, the longest sequence, learning rate and its linear schedule without warm-up, AdamW
  without weight decay, clipping at 1.0, SFT's loss on the completion only, DPO's beta 0.1,
  GRPO's beta 0.04, clip 0.2, one pass per batch, TRL's ``loss_type="grpo"``, LoRA rank 16,
  alpha 32 on every linear layer (``all-linear``), the seed, one thread.
- **Clocks**, the same span on both sides: from just before the model is loaded to the end of
  training with the model (and adapter) saved. rlx's covers the ``llm.sft`` / ``llm.dpo`` /
  ``llm.grpo`` call (reading the data, loading, tokenisation, training, saving); TRL's
  covers reading the data, the trainer's construction (loading, tokenisation), ``train()``
  and ``save_model()``. Imports (torch, transformers, trl, rlx) come before both.
- **Repeats**: ``--repeats`` (at least 3) of every configuration, the libraries alternated;
  reported: median and min seconds, rows/s from the median, the ratio of the medians (and of
  the mins).
- **Peak memory**: the process's peak resident memory (``ru_maxrss``) above what it held
  after the imports (median over the repeats).

- **Where each run got to**: SFT's and DPO's training loss, GRPO's mean reward, each the mean
  over the run's steps as the library itself logged them (both log every step), beside the
  speed: equal work should reach about the same place.

Goal: GRPO at least 1.5x TRL's prompts/s and every other stage at least TRL's speed (ratio of
the medians), per LoRA setting and precision. Written to ``benchmarks/results/lora.json``.

**A real pretrained model** (``--model DIR``, e.g. ``models/smollm2-135m-instruct`` from
``make real-model``): the same protocol on that folder instead of the random Qwen2, GRPO
completions of up to ``--max-new-tokens`` (12 by default there) and the step size a user of
each setting would take (``REAL_LR``: 1e-5 for full fine-tuning, ten times that for LoRA, on
both sides). Written to ``benchmarks/results/real_model.json``.

**Long completions** (``--record real_model_grpo_long``): GRPO on the real model where the
savings of scoring a prompt once per group and prefilling it once cannot help much: up to
128 new tokens per sample, the one-digit questions of ``--task small-sums`` with the
``last-number`` reward (the pretrained model sometimes gets them right at temperature 1, so
each group's rewards vary and both sides have something to learn), fewer prompts per step
(``--prompts``, ``--group-size``) so that three repeats of each library stay affordable on a
CPU. Which side a sample's reward favours is chance at this size: the record keeps every step's
mean reward on both sides.

Run: ``.venv/bin/python benchmarks/bench_lora.py [--steps 20] [--precisions fp32 bf16-mixed]``;
``--model models/smollm2-135m-instruct --steps 5 --precisions fp32`` for the real model;
``--model models/smollm2-135m-instruct --stages grpo --lora on --precisions fp32
--max-new-tokens 128 --task small-sums --reward last-number --prompts 2 --group-size 4
--steps 16 --record real_model_grpo_long`` for its long completions;
``--quick`` checks that it works (2 steps, one repeat, a smaller model).
"""

from __future__ import annotations

import os

THREADS = 1
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, str(THREADS))
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
from typing import Any  # noqa: E402

from results import MIN_REPEATS, goal, ratio, settings_table, spread, write_result  # noqa: E402

STAGES = ("sft", "dpo", "grpo")
UNITS = {"sft": "examples/s", "dpo": "pairs/s", "grpo": "prompts/s"}
GOALS = {"sft": 1.0, "dpo": 1.0, "grpo": 1.5}
BATCH, G, MAX_TOKENS, LR = 8, 8, 4, 1e-4
DPO_BETA, GRPO_BETA, CLIP = 0.1, 0.04, 0.2
MAX_LENGTH = 256  # rlx's default longest sequence; TRL's is set to it
SEED = 0
LORA = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.0}
PRECISIONS = ("fp32", "bf16-mixed")
LIBRARIES = ("torch", "transformers", "trl", "peft", "datasets", "tokenizers", "accelerate")
QUICK = {"steps": 2, "hidden": 64, "layers": 2}
REAL_LR = {False: 1e-5, True: 1e-4}  # full fine-tuning; LoRA (peft practice: ~10x higher)
REAL_MAX_TOKENS = 12


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def assistant(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def grpo_rows(rows: int, task: str) -> list[dict[str, Any]]:
    """GRPO's prompts (one user message) and answers: ``"86+67="`` by default; with ``task``
    ``small-sums``, ``"What is 6 + 5?"`` with one-digit operands, which a small pretrained chat
    model sometimes gets right when it samples (so each group's rewards vary) and often
    answers at length."""
    from rlx import llm

    if task == "sums":
        return [{"prompt": user(p.prompt), "answer": p.answer}
                for p in llm.arithmetic(rows, seed=0)]  # fmt: skip
    small = llm.arithmetic(rows, seed=0, low=1, high=9)
    return [{"prompt": user("What is {} + {}?".format(*p.prompt.rstrip("=").split("+"))),
             "answer": p.answer} for p in small]  # fmt: skip


TASKS = ("sums", "small-sums")
"""GRPO's prompts, by ``--task`` (see :func:`grpo_rows`)."""


def build(root: Path, hidden: int, layers: int, rows: int, model: Path | None = None,
          task: str = "sums") -> dict[str, str]:  # fmt: skip
    """The model folder (``model`` when given, else a random Qwen2 built here) and one JSONL
    file of ``rows`` rows per stage (one pass of the run), in TRL's conversational columns."""
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
        "grpo": grpo_rows(rows, task),
    }
    files = {}
    for stage, stage_rows in shapes.items():
        files[stage] = str(root / f"{stage}.jsonl")
        llm.write_jsonl(files[stage], stage_rows)
    if model is not None:
        return {"model": str(model), **files}
    texts = [f"{p.prompt}{p.answer}" for p in problems]
    model = llm.make_tiny_chat_lm(root / "qwen", texts=texts, hidden_size=hidden,
                                  num_layers=layers, num_heads=4)  # fmt: skip
    return {"model": str(model), **files}


def exact_match(prompts, completions, answer, **kwargs):
    """TRL's form of a reward reading the data's ``answer`` column."""
    return [float(c[0]["content"].strip() == a) for c, a in zip(completions, answer, strict=True)]


def last_number(prompts, completions, answer, **kwargs):
    """1 when the last number in the reply is the answer: a chat model that explains before
    it answers still scores, so the rewards of a pretrained model's group vary."""
    import re

    def last(text: str) -> str | None:
        found = re.findall(r"-?\d+", text.replace(",", ""))
        return found[-1] if found else None

    return [float(last(c[0]["content"]) == a) for c, a in zip(completions, answer, strict=True)]


REWARDS = {"exact-match": exact_match, "last-number": last_number}
"""GRPO's reward, by ``--reward``: the same function on both sides."""


# ---------------------------------------------------------------------------- configurations
def rlx_kwargs(stage: str, lora: bool, precision: str, steps: int, lr: float = LR,
               max_new_tokens: int = MAX_TOKENS, prompts: int = BATCH, group: int = G
               ) -> dict[str, Any]:  # fmt: skip
    """What the benchmark passes to ``llm.sft`` / ``llm.dpo`` / ``llm.grpo`` (besides the
    model, the data, the reward and the run folder); ``prompts`` rows per step, GRPO's
    ``group`` samples per prompt."""
    kwargs: dict[str, Any] = {
        "steps": steps, "batch_size": prompts, "learning_rate": lr, "warmup_ratio": 0.0,
        "weight_decay": 0.0, "max_grad_norm": 1.0, "max_length": MAX_LENGTH,
        "precision": precision, "gradient_checkpointing": False, "seed": SEED,
        "num_threads": THREADS, "device": "cpu", "eval_fraction": 0.0,
        "eval_exact_match": False, "progress": False,
        "checkpoint_every_steps": steps,  # one checkpoint, at the end, as TRL's below
    }  # fmt: skip
    if lora:
        kwargs["lora"] = dict(LORA)
    if stage == "dpo":
        kwargs["beta"] = DPO_BETA
    elif stage == "grpo":
        kwargs |= {"group_size": group, "max_new_tokens": max_new_tokens, "beta": GRPO_BETA,
                   "clip_eps": CLIP, "num_epochs": 1, "loss_aggregation": "sequence",
                   "temperature": 1.0, "top_p": 1.0}  # fmt: skip
    return kwargs


def rlx_config(stage: str, kwargs: dict[str, Any]) -> Any:
    """The stage config ``llm.<stage>(**kwargs)`` builds (rlx.llm.lora.lora_fields spells a
    LoRA dict as the config's ``lora_*`` fields)."""
    from rlx import registry
    from rlx.llm.lora import lora_fields

    fields = lora_fields({k: v for k, v in kwargs.items() if k != "progress"})
    return registry.get(stage).config(**fields)


def trl_config(stage: str, lora: bool, precision: str, steps: int, out: str, lr: float = LR,
               max_new_tokens: int = MAX_TOKENS, prompts: int = BATCH, group: int = G
               ) -> tuple[Any, Any]:  # fmt: skip
    """TRL's config for the stage, as the child process builds it, and the peft config (None
    without LoRA). Everything not set here is TRL's default. It logs every step, as rlx does,
    so both report where the run got to."""
    import trl
    from peft import LoraConfig

    Config = {"sft": trl.SFTConfig, "dpo": trl.DPOConfig, "grpo": trl.GRPOConfig}[stage]
    bf16 = precision == "bf16-mixed"
    extra = {
        "sft": {"completion_only_loss": True, "per_device_train_batch_size": prompts,
                "max_length": MAX_LENGTH},
        "dpo": {"beta": DPO_BETA, "per_device_train_batch_size": prompts,
                "max_length": MAX_LENGTH},
        "grpo": {"beta": GRPO_BETA, "per_device_train_batch_size": prompts * group,
                 "num_generations": group, "max_completion_length": max_new_tokens, "epsilon": CLIP,
                 "loss_type": "grpo", "num_iterations": 1, "temperature": 1.0, "top_p": 1.0},
    }[stage]  # fmt: skip
    config = Config(
        output_dir=out, max_steps=steps, learning_rate=lr, lr_scheduler_type="linear",
        warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0, logging_steps=1,
        # TRL's default strategy: a checkpoint (model, optimizer, RNG) at the end, as rlx's
        save_strategy="steps", save_steps=steps, report_to="none", use_cpu=True, bf16=bf16,
        # rlx computes bf16 attention eagerly on a CPU (PyTorch's SDPA backward is slow there)
        model_init_kwargs={"attn_implementation": "eager"} if bf16 else None,
        activation_checkpointing=False, seed=SEED, dataloader_num_workers=0,
        disable_tqdm=True, **extra,
    )  # fmt: skip
    peft = None
    if lora:
        peft = LoraConfig(**LORA, target_modules="all-linear", task_type="CAUSAL_LM")
    return config, peft


def rlx_settings(stage: str, config: Any) -> dict[str, Any]:
    """The settings that change the work, from rlx's stage config (``stage``: sft, rm, dpo or
    grpo; bench_llm.py and bench_grpo.py use it too)."""
    import torch

    from rlx.llm.precision import resolve_precision
    from rlx.llm.training import make_optimizer

    precision = resolve_precision(config.precision, "cpu")
    adam = make_optimizer(torch.nn.Linear(1, 1), 1.0, config.weight_decay).defaults
    settings = {
        "precision": precision,
        "attention": "eager" if precision == "bf16-mixed" else "sdpa",
        "activation checkpointing": config.gradient_checkpointing,
        "steps": config.steps,
        "rows per step": config.batch_size,
        "learning rate": config.learning_rate,
        "schedule": f"linear to 0, warm-up share {config.warmup_ratio:g}",
        "optimizer": f"AdamW betas {tuple(adam['betas'])} eps {adam['eps']:g}",
        "weight decay": config.weight_decay,
        "max gradient norm": config.max_grad_norm,
        "seed": config.seed,
        "torch threads": config.num_threads,
        "device": config.device,
        "checkpoints (weights, optimizer, RNG)": rlx_checkpoints(config),
        "LoRA": _lora_text(config.lora, config.lora_r, config.lora_alpha, config.lora_dropout,
                           config.lora_target_modules),
    }  # fmt: skip
    if stage in ("sft", "dpo", "rm"):
        settings["longest sequence (tokens)"] = config.max_length
    if stage == "sft":
        settings["loss on"] = "completion"  # rlx's SFT of prompt/completion rows
    elif stage == "dpo":
        settings |= {"beta": config.beta, "loss": "sigmoid" if config.rpo_alpha == 0 else "rpo"}
    elif stage == "rm":
        settings |= {"loss": "Bradley-Terry", "reward centering": "none"}
    else:
        settings |= {
            "group size": config.group_size,
            "completion tokens (max)": config.max_new_tokens,
            "temperature": config.temperature,
            "top-p": config.top_p,
            "beta (KL)": config.beta,
            "clip": (config.clip_eps, config.clip_eps_high or config.clip_eps),
            "passes per batch": config.num_epochs,
            "loss aggregation": {"sequence": "grpo", "token": "token"}[config.loss_aggregation],
            "reward scaling": "group std" if config.scale_rewards else "none",
        }
    return settings


def trl_settings(stage: str, config: Any, peft: Any) -> dict[str, Any]:
    """The same settings, from TRL's config (and peft's)."""
    init = config.model_init_kwargs or {}
    warmup = config.warmup_steps
    share = warmup / config.max_steps if warmup >= 1 else warmup
    per_step = config.per_device_train_batch_size * config.gradient_accumulation_steps
    settings = {
        "precision": "bf16-mixed" if config.bf16 else ("fp16-mixed" if config.fp16 else "fp32"),
        "attention": init.get("attn_implementation", "sdpa"),
        "activation checkpointing": config.activation_checkpointing,
        "steps": config.max_steps,
        "rows per step": per_step // (config.num_generations if stage == "grpo" else 1),
        "learning rate": config.learning_rate,
        "schedule": f"{_value(config.lr_scheduler_type)} to 0, warm-up share {share:g}",
        "optimizer": f"AdamW betas {(config.adam_beta1, config.adam_beta2)} "
        f"eps {config.adam_epsilon:g}",
        "weight decay": config.weight_decay,
        "max gradient norm": config.max_grad_norm,
        "seed": config.seed,
        "torch threads": THREADS,  # the child process sets it
        "device": "cpu" if config.use_cpu else "auto",
        "checkpoints (weights, optimizer, RNG)": trl_checkpoints(config),
        "LoRA": "off" if peft is None else _lora_text(
            True, peft.r, peft.lora_alpha, peft.lora_dropout, peft.target_modules),
    }  # fmt: skip
    if stage in ("sft", "dpo", "rm"):
        settings["longest sequence (tokens)"] = config.max_length
    if stage == "sft":
        settings["loss on"] = "completion" if config.completion_only_loss else "sequence"
    elif stage == "dpo":
        settings |= {"beta": config.beta, "loss": ",".join(config.loss_type)}
    elif stage == "rm":
        centering = config.center_rewards_coefficient
        settings |= {"loss": "Bradley-Terry", "reward centering": centering or "none"}
    else:
        settings |= {
            "group size": config.num_generations,
            "completion tokens (max)": config.max_completion_length,
            "temperature": config.temperature,
            "top-p": config.top_p,
            "beta (KL)": config.beta,
            "clip": (config.epsilon, config.epsilon_high or config.epsilon),
            "passes per batch": config.num_iterations,
            "loss aggregation": config.loss_type,
            "reward scaling": "group std" if config.scale_rewards == "group" else "none",
        }
    return settings


def rlx_checkpoints(config: Any) -> str:
    """When an rlx stage writes a checkpoint: at its cadence, and always at the end."""
    every_s, every_steps = config.checkpoint_every_s, config.checkpoint_every_steps
    if every_steps is not None and every_s is None:
        return "at the end" if every_steps >= config.steps else f"every {every_steps} steps"
    return f"every {30 if every_s is None else every_s:g} s and at the end"


def trl_checkpoints(config: Any) -> str:
    """When TRL's trainer writes one: by its save strategy, and at the end unless "no"."""
    strategy = _value(config.save_strategy)
    if strategy == "no":
        return "none"
    if strategy == "steps" and config.save_steps >= config.max_steps:
        return "at the end"
    return f"{strategy} {config.save_steps:g}"


def _value(x: Any) -> str:
    return str(getattr(x, "value", x))


def _lora_text(on: bool, r: int, alpha: float, dropout: float, targets: Any) -> str:
    if not on:
        return "off"
    if targets is None or targets == "all-linear" or targets == ("all-linear",):
        targets = "all-linear"
    return f"r {r}, alpha {alpha:g}, dropout {dropout:g}, {targets}"


def like_for_like(stage: str, lora: bool, precision: str, steps: int, lr: float = LR,
                  max_new_tokens: int = MAX_TOKENS, prompts: int = BATCH, group: int = G
                  ) -> list[dict[str, Any]]:  # fmt: skip
    """Both libraries' settings for one configuration, read from their config objects."""
    kwargs = rlx_kwargs(stage, lora, precision, steps, lr, max_new_tokens, prompts, group)
    rlx = rlx_settings(stage, rlx_config(stage, kwargs))
    with tempfile.TemporaryDirectory() as out:
        trl = trl_settings(stage, *trl_config(stage, lora, precision, steps, out, lr,
                                              max_new_tokens, prompts, group))  # fmt: skip
    return settings_table(rlx, trl)


REACHED = {"sft": "loss", "dpo": "loss", "grpo": "reward"}
"""What each stage reports as where the run got to: both libraries log it under this name."""


def logged(rows: list[dict[str, Any]], name: str) -> list[float]:
    """``name`` over the logged rows that carry it, in order (each step's value)."""
    return [float(r[name]) for r in rows if isinstance(r.get(name), int | float)]


# ---------------------------------------------------------------------------- one run
def run_rlx(spec: dict) -> list[float]:
    from rlx import llm

    stage = spec["stage"]
    kwargs = rlx_kwargs(stage, spec["lora"], spec["precision"], spec["steps"], spec["lr"],
                        spec["max_new_tokens"], spec["prompts"], spec["group"])  # fmt: skip
    train = {"sft": llm.sft, "dpo": llm.dpo, "grpo": llm.grpo}[stage]
    extra = {"reward": REWARDS[spec.get("reward", "exact-match")]} if stage == "grpo" else {}
    train(spec["model"], spec[stage], run_dir=spec["out"], **extra, **kwargs)
    with open(Path(spec["out"]) / "metrics.jsonl", encoding="utf-8") as handle:
        return logged([json.loads(line) for line in handle], REACHED[stage])


def run_trl(spec: dict) -> list[float]:
    import datasets
    import trl

    stage = spec["stage"]
    datasets.disable_progress_bars()
    with open(spec[stage], encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    config, peft = trl_config(stage, spec["lora"], spec["precision"], spec["steps"],
                              spec["out"], spec["lr"], spec["max_new_tokens"], spec["prompts"],
                              spec["group"])  # fmt: skip
    Trainer = {"sft": trl.SFTTrainer, "dpo": trl.DPOTrainer, "grpo": trl.GRPOTrainer}[stage]
    kwargs: dict[str, Any] = {}
    if stage == "grpo":
        kwargs["reward_funcs"] = REWARDS[spec.get("reward", "exact-match")]
    if peft is not None:
        kwargs["peft_config"] = peft
    trainer = Trainer(model=spec["model"], args=config,
                      train_dataset=datasets.Dataset.from_list(rows), **kwargs)  # fmt: skip
    trainer.train()
    trainer.save_model(spec["out"])
    return logged(trainer.state.log_history, REACHED[stage])


def child(spec: dict) -> None:
    """One training run in this fresh process: prints seconds and peak memory as JSON."""
    import torch

    torch.set_num_threads(THREADS)
    import torch._dynamo
    import transformers  # noqa: F401

    from clocks import import_everything

    import_everything()  # the same modules on both sides before the clock and the baseline
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    reached = (run_trl if spec["library"] == "TRL" else run_rlx)(spec)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": seconds, "peak_mb": (peak - baseline) / 1024,
                      "reached": reached}))  # fmt: skip


def measure(spec: dict) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)],
                         capture_output=True, text=True, check=False)  # fmt: skip
    if out.returncode:
        raise RuntimeError(f"{spec['library']} {spec['stage']} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(spec: dict, repeats: int, tmp: Path, key: str) -> tuple[list[list], dict]:
    """``repeats`` runs of each library on one configuration, alternated; the table's two
    rows (rlx's first) and the details (seconds and peak memory, with their spread)."""
    runs: dict[str, list[dict]] = {"rlx": [], "TRL": []}
    for repeat in range(repeats):
        for library in runs:  # alternated, so a busy moment hits both
            out = str(tmp / f"{library}-{key}-{repeat}".replace(", ", "-").replace(" ", "_"))
            runs[library].append(measure({**spec, "library": library, "out": out}))
            print(f"{key} {library} repeat {repeat}: {runs[library][-1]['seconds']:.2f} s",
                  flush=True)  # fmt: skip
    secs = {lib: spread([r["seconds"] for r in rs]) for lib, rs in runs.items()}
    peak = {lib: spread([r["peak_mb"] for r in rs]) for lib, rs in runs.items()}
    reached = {lib: [r["reached"] for r in rs] for lib, rs in runs.items()}
    by_median = ratio(secs["TRL"]["median"], secs["rlx"]["median"])
    by_min = ratio(secs["TRL"]["min"], secs["rlx"]["min"])
    stage, rows = spec["stage"], []
    for library in runs:
        rate = spec["prompts"] * spec["steps"] / secs[library]["median"]
        ours = library == "rlx"
        rows.append([stage, "yes" if spec["lora"] else "no", spec["precision"], library,
                     secs[library]["median"], secs[library]["min"], f"{rate:.3g} {UNITS[stage]}",
                     by_median if ours else "", by_min if ours else "",
                     round(peak[library]["median"]), _reached_text(reached[library])])  # fmt: skip
    return rows, {"seconds": secs, "peak_mb": peak, REACHED[stage]: reached}


def _reached_text(series: list[list[float]]) -> str:
    """The repeats' mean loss or reward as ``median (min-max)``; with 8 or more logged steps,
    also the mean of the first and of the last quarter of the steps (medians over the
    repeats), which says whether the run moved."""
    known = sorted(sum(s) / len(s) for s in series if s)
    if not known:
        return "not logged"
    middle = known[len(known) // 2]
    text = f"{middle:.3g} ({known[0]:.3g}-{known[-1]:.3g})" if len(known) > 1 else f"{middle:.3g}"
    runs = [s for s in series if len(s) >= 8]
    if runs:
        quarter = [len(s) // 4 for s in runs]
        first = sorted(sum(s[:q]) / q for s, q in zip(runs, quarter, strict=True))
        last = sorted(sum(s[-q:]) / q for s, q in zip(runs, quarter, strict=True))
        text += (f"; first quarter of the steps {first[len(first) // 2]:.3g}, last quarter "
                 f"{last[len(last) // 2]:.3g}")  # fmt: skip
    return text


# ---------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=MIN_REPEATS)
    parser.add_argument("--stages", nargs="+", default=list(STAGES), choices=STAGES)
    parser.add_argument("--precisions", nargs="+", default=None, choices=PRECISIONS,
                        help="each run on both sides (default: both; float32 only on a CPU "
                             "without native bfloat16)")  # fmt: skip
    parser.add_argument("--model", type=Path, default=None,
                        help="a pretrained Hugging Face folder to train instead of the random "
                             "Qwen2 (make real-model writes models/smollm2-135m-instruct); "
                             "results go to real_model.json")  # fmt: skip
    parser.add_argument("--max-new-tokens", type=int, default=None,
                        help=f"GRPO's completion length (default {MAX_TOKENS}, "
                             f"{REAL_MAX_TOKENS} with --model)")  # fmt: skip
    parser.add_argument("--prompts", type=int, default=BATCH,
                        help=f"rows (GRPO: prompts) per step (default {BATCH})")  # fmt: skip
    parser.add_argument("--group-size", type=int, default=G,
                        help=f"GRPO's samples per prompt (default {G})")  # fmt: skip
    parser.add_argument("--task", default="sums", choices=TASKS,
                        help="GRPO's prompts: two-digit sums 'a+b=' (default) or one-digit "
                             "questions 'What is a + b?' (small-sums)")  # fmt: skip
    parser.add_argument("--reward", default="exact-match", choices=sorted(REWARDS),
                        help="GRPO's reward, the same function on both sides (last-number: "
                             "the reply's last number is the sum)")  # fmt: skip
    parser.add_argument("--lora", default="both", choices=("both", "on", "off"),
                        help="run with LoRA, without, or both")  # fmt: skip
    parser.add_argument("--record", default=None,
                        help="the result file's name (default lora, or real_model with "
                             "--model)")  # fmt: skip
    parser.add_argument("--quick", action="store_true",
                        help="2 steps, 1 repeat, a small model: checks that it works")  # fmt: skip
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where lora.json goes (default benchmarks/results, --quick: "
                             "benchmarks/results/quick)")  # fmt: skip
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    if args.quick:
        args.steps, args.hidden, args.layers = QUICK["steps"], QUICK["hidden"], QUICK["layers"]
        args.repeats = 1
    from precision import default_configs  # benchmarks/precision.py

    precisions = args.precisions or default_configs(PRECISIONS, lambda p: p == "bf16-mixed")
    columns = ["stage", "LoRA", "precision", "library", "seconds, median", "seconds, min",
               "rows/s (median)", "rlx / TRL (medians)", "rlx / TRL (mins)",
               "peak memory MB (median)", "mean loss (SFT, DPO) or reward (GRPO)"]  # fmt: skip
    real = args.model is not None
    if real and not (args.model / "config.json").is_file():
        parser.error(f"--model {args.model}: no Hugging Face model folder there "
                     "(make real-model writes models/smollm2-135m-instruct)")  # fmt: skip
    tokens = args.max_new_tokens or (REAL_MAX_TOKENS if real else MAX_TOKENS)
    table, goals, settings, details = [], [], [], {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = build(Path(tmp), args.hidden, args.layers, args.steps * args.prompts,
                      args.model.resolve() if real else None, args.task)  # fmt: skip
        for stage in args.stages:
            for lora in {"both": (False, True), "on": (True,), "off": (False,)}[args.lora]:
                for precision in precisions:
                    key = f"{stage}, LoRA {'on' if lora else 'off'}, {precision}"
                    lr = REAL_LR[lora] if real else LR
                    checked = like_for_like(stage, lora, precision, args.steps, lr, tokens,
                                            args.prompts, args.group_size)  # fmt: skip
                    settings += [{**r, "setting": f"{key}: {r['setting']}"} for r in checked]
                    spec = {**paths, "stage": stage, "lora": lora, "precision": precision,
                            "steps": args.steps, "lr": lr, "max_new_tokens": tokens,
                            "reward": args.reward, "prompts": args.prompts,
                            "group": args.group_size}  # fmt: skip
                    rows, details[key] = compare(spec, args.repeats, Path(tmp), key)
                    table += rows
                    by_median, target = rows[0][7], GOALS[stage]
                    goals.append(goal(f"{key}: rlx at least {target:g}x TRL's {UNITS[stage]}",
                                      f"ratio >= {target:g}", by_median,
                                      by_median is not None and by_median >= target))  # fmt: skip
    model_text = (f"the pretrained model in {args.model.name} (its own tokenizer and chat "
                  "template)" if real else
                  f"Qwen2 hidden {args.hidden}, {args.layers} layers, BPE + ChatML")  # fmt: skip
    lr_text = (f"lr {REAL_LR[False]:g} full, {REAL_LR[True]:g} with LoRA" if real
               else f"lr {LR:g}")  # fmt: skip
    notes = (f"{args.steps} steps of {args.prompts} rows (GRPO: prompts x "
             f"G={args.group_size}, at most {tokens} tokens, prompts {args.task}, "
             f"reward {args.reward}), {lr_text}, "
             f"LoRA r={LORA['r']} alpha={LORA['lora_alpha']} all-linear, "
             f"{model_text}, one thread; each "
             "precision run on both sides. Each run in a fresh process; both clocks span "
             "reading the data, loading the model, training and saving it (and the adapter); "
             f"{args.repeats} repeats, libraries alternated; ratios divide TRL's seconds by "
             "rlx's. In a short run the fixed costs weigh most; bench_grpo.py and bench_llm.py "
             "time longer runs. Peak memory: the process's peak resident memory above what it "
             "held after the imports. The loss or reward is each library's own, as it logged "
             "it; a chat template that ends an assistant turn with eos and a newline "
             "(SmolLM2's) gives TRL's SFT one more completion token per row than rlx's, which "
             "stops at eos: TRL's mean token loss averages in that near-free newline.")  # fmt: skip
    title = (f"A real pretrained model ({args.model.name}), with and without LoRA: rlx vs TRL"
             if real else "Chat models with and without LoRA: rlx vs TRL")  # fmt: skip
    write_result(
        args.record or ("real_model" if real else "lora"),
        title=title,
        columns=columns,
        rows=table,
        libraries=LIBRARIES,
        repeats=args.repeats,
        seeds=[SEED],
        goals=goals,
        peer="TRL",
        settings=settings,
        details=details,
        notes=notes,
        quick=args.quick,
        out_dir=args.out_dir,
    )


if __name__ == "__main__":
    main()
