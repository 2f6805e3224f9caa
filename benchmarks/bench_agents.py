"""A language model as an agent with a tool: rlx's GRPO over episodes vs TRL's GRPOTrainer in
environment mode (``environment_factory``), like for like.

Protocol (one torch thread, CPU, float32; both libraries in this process, alternated):

- **Task**: a hidden card (:class:`CardEnv`): "What color is the hidden card?", one of four
  colors drawn from the episode's seed, which only the tool ``read_card()`` tells. A call and
  then the color solves it in two turns (the reward is 1 when the final reply, stripped, is the
  color; a blind guess is right a quarter of the time). rlx plays it as a
  :class:`~rlx.llm.text_env.ToolEnv` of at most two replies; TRL as an environment class
  (:class:`CardEnvironment`) whose one public method is the same ``read_card``, so both show
  the model the same schema, with ``max_tool_calling_iterations=1`` (a call, its answer, then
  one more reply) and a reward function reading the last assistant message with rlx's own
  ``exact_answer``. The task is small on purpose: a model of this size learns to call the tool
  and repeat its answer, which is what lets both sides' rewards vary and move.
- **Model**: a randomly initialised Qwen2 (``rlx.llm.make_tiny_chat_lm``, hidden ``--hidden``,
  2 layers, 4 heads) with a byte-level BPE tokenizer trained on rendered episodes and
  Qwen2.5's chat template as TRL ships it (``trl.chat_template_utils``): the template TRL
  recognises and parses tool calls from, and whose Hermes ``<tool_call>`` format rlx reads.
  It is fine-tuned by ``rlx.llm.sft`` on demonstrations (seeds 2,000-3,999: the call, then a
  color: the card's in three quarters of them, a uniformly drawn one in the rest) for
  ``--sft-steps`` steps; both libraries start from that folder. The imperfect demonstrator
  is deliberate: the start model repeats the tool's answer only part of the time, so rewards
  vary within groups and both sides have something to learn.
- **Same work**, read from both configuration objects (:func:`like_for_like`, asserted by
  ``tests/benchmarks/test_like_for_like.py`` and before every run): steps, tasks per step and
  episodes per task (the group), temperature 1, the learning rate with a linear decay and no
  warm-up, AdamW without weight decay, clipping at 1.0, beta 0.04, clip 0.2, one pass per
  batch, TRL's ``loss_type="grpo"`` (rlx's ``sequence``), rewards scaled by the group's std,
  float32, activation checkpointing off, one checkpoint at the end, seed 0, and the training
  tasks: env seeds 1,000,000 upward on both sides, and the token budget: ``COMPLETION_TOKENS``
  after the prompt, the tool's answer included (TRL's ``max_completion_length``; rlx's
  ``max_length``, which caps the whole episode, set to the prompt's tokens plus that, and its
  cap per reply no tighter). The page reports each side's truncated share.
- **Clocks**, the same span on both sides: from just before the model is loaded to the end of
  training with the model saved. Imports (``clocks.import_everything``) come before both;
  rlx's held-out evaluation during training is off (``eval_episodes=0``).
- **Where each got to**: the mean training reward of the first and last quarter of the steps,
  as each library logged it; then each trained model (and the start model) plays the same
  held-out episodes (env seeds 0-199, which training never plays) through one evaluator
  (:func:`rlx.llm.episodes.run_episodes`), off the clocks, sampled at temperature 1 from a
  fixed seed (the policy GRPO trains: the success rate with its 95% Wilson interval) and
  greedily.
- **Repeats**: ``--repeats`` (at least 3) of each library on the same seed, alternated: median
  and min seconds per episode.

Goals: rlx at least TRL's episodes per second (ratio of the medians), and rlx's held-out
success after training (sampled) no more than 10 points below TRL's (medians). Written to
``benchmarks/results/agents.json``.

Run: ``.venv/bin/python benchmarks/bench_agents.py [--steps 40] [--sft-steps 1000]``;
``--quick`` checks that it works (2 steps from a 20-step SFT model, one repeat).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is experimental

import argparse  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402

import bench_lora  # noqa: E402  (the optimizer and checkpoint settings read from both configs)
from results import (  # noqa: E402
    MIN_REPEATS,
    check_like_for_like,
    goal,
    ratio,
    settings_table,
    spread,
    write_result,
)
from rlx.llm.text_env import ToolEnv, exact_answer  # noqa: E402

TASKS, G, STEPS, LR, BETA, CLIP, SEED = 4, 4, 40, 1e-4, 0.04, 0.2, 0
TURNS = 2
COMPLETION_TOKENS = 128
"""The longest episode after its prompt: both replies and the tool's answer between them."""
EPISODE_TOKENS = 512
"""The model's context (its position table), and the SFT rows' longest sequence."""
TRAIN_SEED_START = 1_000_000
EVAL_SEEDS = range(200)
SFT_SEEDS = range(2_000, 4_000)
SFT_STEPS, SFT_BATCH, HIDDEN = 1000, 32, 128
DEMO_RIGHT = 0.75
"""The share of demonstrations whose answer is the card (the rest: a uniformly drawn color)."""
THREADS = 1
SPEED_GOAL, SUCCESS_TOLERANCE = 1.0, 0.10
LIBRARIES = ("torch", "transformers", "trl", "datasets", "tokenizers", "accelerate")


# ---------------------------------------------------------------------------- the start model
def tool_template() -> str:
    """Qwen2.5's chat template, TRL's copy: TRL parses tool calls from the templates it ships."""
    from trl.chat_template_utils import qwen2_5_chat_template

    return str(qwen2_5_chat_template)


def demonstrations(tokenizer: Any) -> list[dict[str, str]]:
    """SFT rows for each demonstration seed: the rendered prompt (the tool shown) -> the call,
    and the prompt after the tool's answer -> a color, the card's in ``DEMO_RIGHT`` of the
    demonstrations and a uniformly drawn one in the rest (an imperfect demonstrator, so the
    start model's sampled answers vary and GRPO has something to learn on both sides)."""
    from rlx.llm.tool_calls import tool_schema

    env = CardEnv()
    tools = [tool_schema(env.read_card)]
    call = f"<tool_call>\n{json.dumps({'name': 'read_card', 'arguments': {}})}\n</tool_call>"
    rows, draw = [], random.Random(SEED)
    for seed in SFT_SEEDS:
        first = env.reset(seed)
        after = [*first, {"role": "assistant", "content": call},
                 {"role": "tool", "content": env.color}]  # fmt: skip
        said = env.color if draw.random() < DEMO_RIGHT else draw.choice(COLORS)
        for messages, completion in ((first, call), (after, said)):
            text = tokenizer.apply_chat_template(
                messages, tools=tools, tokenize=False, add_generation_prompt=True
            )
            rows.append({"prompt": text, "completion": completion})
    return rows


def build_start_model(root: Path, sft_steps: int, hidden: int) -> Path:
    """The tiny Qwen2 with the tool template, fine-tuned on the demonstrations."""
    from transformers import AutoTokenizer

    from rlx import llm

    render = AutoTokenizer.from_pretrained(llm.make_tiny_chat_lm(root / "render", texts=["a"]))
    render.chat_template = tool_template()
    rows = demonstrations(render)
    texts = [r["prompt"] + r["completion"] for r in rows[1:600:2]]  # the BPE's corpus
    base = llm.make_tiny_chat_lm(
        root / "base", texts=texts, vocab_size=1024, hidden_size=hidden,
        max_length=EPISODE_TOKENS, seed=SEED,
    )  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(base)
    tokenizer.chat_template = tool_template()
    tokenizer.save_pretrained(base)
    llm.write_jsonl(root / "sft.jsonl", rows)
    result = llm.sft(base, root / "sft.jsonl", run_dir=root / "sft", steps=sft_steps,
                     batch_size=SFT_BATCH, max_length=EPISODE_TOKENS, progress=False,
                     eval_every=10**6, eval_exact_match=False, seed=SEED)  # fmt: skip
    return Path(result.model_dir)


# ---------------------------------------------------------------------------- both sides
def prompt_tokens(model_dir: Path) -> int:
    """The tokens of an episode's prompt (the tool shown, the question, the assistant's turn
    opened): the same for every episode of the task."""
    from transformers import AutoTokenizer

    from rlx.llm.tool_calls import tool_schema

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    env = CardEnv()
    return len(tokenizer.apply_chat_template(
        env.reset(0), tools=[tool_schema(env.read_card)], tokenize=True,
        add_generation_prompt=True, return_dict=False,
    ))  # fmt: skip


def rlx_kwargs(steps: int, prompt: int) -> dict[str, Any]:
    """What the benchmark passes to ``llm.grpo`` besides the model, env and run folder
    (``prompt``: :func:`prompt_tokens`)."""
    return {
        "steps": steps, "batch_size": TASKS, "group_size": G,
        "max_new_tokens": COMPLETION_TOKENS, "max_length": prompt + COMPLETION_TOKENS,
        "learning_rate": LR, "beta": BETA, "clip_eps": CLIP,
        "num_epochs": 1, "loss_aggregation": "sequence", "scale_rewards": True,
        "temperature": 1.0, "warmup_ratio": 0.0, "weight_decay": 0.0, "max_grad_norm": 1.0,
        "precision": "fp32", "gradient_checkpointing": False, "seed": SEED,
        "num_threads": THREADS, "device": "cpu", "eval_episodes": 0, "eval_every": 10**6,
        "train_seed_start": TRAIN_SEED_START, "progress": False,
        "checkpoint_every_steps": steps,  # one checkpoint, at the end, as TRL's below
    }  # fmt: skip


ENV_KWARGS = {"max_turns": TURNS}
""":class:`CardEnv`'s keyword arguments on rlx's side."""


def trl_config(out: Path, steps: int) -> Any:
    """TRL's GRPOConfig as the benchmark builds it; everything else is TRL's default."""
    import trl

    return trl.GRPOConfig(
        output_dir=str(out), max_steps=steps, per_device_train_batch_size=TASKS * G,
        num_generations=G, max_completion_length=COMPLETION_TOKENS,
        max_tool_calling_iterations=TURNS - 1, temperature=1.0, top_p=1.0,
        learning_rate=LR, lr_scheduler_type="linear", warmup_steps=0, weight_decay=0.0,
        max_grad_norm=1.0, beta=BETA, epsilon=CLIP, loss_type="grpo", num_iterations=1,
        scale_rewards="group", logging_steps=1, save_strategy="steps", save_steps=steps,
        report_to=[], use_cpu=True, bf16=False, activation_checkpointing=False, disable_tqdm=True,
        dataloader_num_workers=0, seed=SEED,
    )  # fmt: skip


COMMON = (
    "precision",
    "attention",
    "activation checkpointing",
    "steps",
    "learning rate",
    "schedule",
    "optimizer",
    "weight decay",
    "max gradient norm",
    "seed",
    "torch threads",
    "device",
    "checkpoints (weights, optimizer, RNG)",
    "LoRA",
)
"""The settings bench_lora reads alike from any stage's config, on both sides."""


def like_for_like(steps: int, prompt: int) -> list[dict[str, Any]]:
    """Both libraries' settings, read from their config objects (``prompt``: the prompt's
    tokens, :func:`prompt_tokens`)."""
    from rlx import registry

    config = registry.get("grpo-episodes").config(
        **{k: v for k, v in rlx_kwargs(steps, prompt).items() if k != "progress"}
    )
    ours = bench_lora.rlx_settings("sft", config)  # the stage-independent part
    ours = {k: ours[k] for k in COMMON} | {
        "tasks per step": config.batch_size,
        "episodes per task (group)": config.group_size,
        "replies per episode (max)": ENV_KWARGS["max_turns"],
        "temperature": config.temperature,
        "beta (KL)": config.beta,
        "clip": (config.clip_eps, config.clip_eps_high or config.clip_eps),
        "passes per batch": config.num_epochs,
        "loss aggregation": {"sequence": "grpo", "token": "token"}[config.loss_aggregation],
        "reward scaling": "group std" if config.scale_rewards else "none",
        "first training task (env seed)": config.train_seed_start,
    }
    with tempfile.TemporaryDirectory() as out:
        trl = trl_config(Path(out), steps)
    theirs = bench_lora.trl_settings("grpo", trl, None)
    theirs = {k: theirs[k] for k in COMMON} | {
        "tasks per step": trl.per_device_train_batch_size // trl.num_generations,
        "episodes per task (group)": trl.num_generations,
        "replies per episode (max)": trl.max_tool_calling_iterations + 1,
        "temperature": trl.temperature,
        "beta (KL)": trl.beta,
        "clip": (trl.epsilon, trl.epsilon_high or trl.epsilon),
        "passes per batch": trl.num_iterations,
        "loss aggregation": trl.loss_type,
        "reward scaling": "group std" if trl.scale_rewards == "group" else "none",
        "first training task (env seed)": TRAIN_SEED_START,  # the rows trl_rows builds
    }
    ours["tokens after the prompt (max, the tool's answer included)"] = (
        config.max_length - prompt if config.max_new_tokens >= config.max_length - prompt else
        f"{config.max_new_tokens} per reply"
    )  # fmt: skip
    theirs["tokens after the prompt (max, the tool's answer included)"] = trl.max_completion_length
    return settings_table(ours, theirs)


COLORS = ("red", "green", "blue", "yellow")


def card_color(seed: int) -> str:
    """The hidden card of the episode ``seed``."""
    return COLORS[random.Random(seed).randrange(len(COLORS))]


class CardEnv(ToolEnv):
    """rlx's side: the hidden card as a :class:`~rlx.llm.text_env.ToolEnv` whose one tool,
    :meth:`read_card`, reads this episode's card."""

    def __init__(self, max_turns: int = TURNS) -> None:
        self.color = ""
        super().__init__(self.card_task, [self.read_card], max_turns=max_turns)

    def card_task(self, seed: int) -> tuple[str, str]:
        """The question and its answer; the card is drawn from ``seed``."""
        self.color = card_color(seed)
        return QUESTION, self.color

    def read_card(self) -> str:
        """Read the hidden card's color."""
        return self.color


QUESTION = "What color is the hidden card?"


class CardEnvironment:
    """TRL's side, as its environment mode takes an env: ``reset`` with the data row, the public
    methods as tools (:meth:`CardEnv.read_card` itself, so the schema is the same)."""

    read_card = CardEnv.read_card

    def __init__(self) -> None:
        self.color = ""

    def reset(self, answer: str, **row: Any) -> None:
        """The row's answer is this episode's card; the prompt stays as the row gives it."""
        self.color = answer


def final_answer(completions: list[Any], answer: list[str], **kwargs: Any) -> list[float]:
    """1.0 when the episode's last message is the assistant's reply, without a call, and its
    text stripped is the card: :func:`rlx.llm.text_env.exact_answer`, as rlx's env scores."""
    rewards = []
    for messages, color in zip(completions, answer, strict=True):
        last = messages[-1] if messages else {}
        final = last.get("role") == "assistant" and not last.get("tool_calls")
        rewards.append(exact_answer(str(last.get("content") or ""), color) if final else 0.0)
    return rewards


def trl_rows(steps: int) -> list[dict[str, Any]]:
    """TRL's data: one row per training task, the env seeds rlx plays, in its order."""
    seeds = range(TRAIN_SEED_START, TRAIN_SEED_START + steps * TASKS)
    return [{"prompt": [{"role": "user", "content": QUESTION}], "answer": card_color(seed)}
            for seed in seeds]  # fmt: skip


def run_rlx(start: Path, out: Path, steps: int) -> tuple[float, Path, list[float], float]:
    """One rlx run: (seconds, model folder, reward per step, truncated share)."""
    from rlx import llm

    prompt = prompt_tokens(start)  # off the clock: the benchmark's bookkeeping
    t0 = time.perf_counter()
    result = llm.grpo(start, env=CardEnv, env_kwargs=ENV_KWARGS, run_dir=out,
                      **rlx_kwargs(steps, prompt))  # fmt: skip
    seconds = time.perf_counter() - t0
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "reward" in r and "step" in r]
    rewards = [float(r["reward"]) for r in rows]
    truncated = statistics.mean(float(r.get("truncated_share", 0.0)) for r in rows)
    return seconds, Path(result.model_dir), rewards, truncated


def run_trl(start: Path, out: Path, steps: int) -> tuple[float, Path, list[float], float]:
    """One TRL run: (seconds, model folder, reward per step, truncated share)."""
    import datasets
    import trl
    from transformers import AutoTokenizer

    datasets.disable_progress_bars()
    t0 = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(start)
    trainer = trl.GRPOTrainer(model=str(start), reward_funcs=final_answer,
                              args=trl_config(out, steps),
                              train_dataset=datasets.Dataset.from_list(trl_rows(steps)),
                              processing_class=tokenizer,
                              environment_factory=CardEnvironment)  # fmt: skip
    trainer.train()
    trainer.save_model(str(out / "model"))
    tokenizer.save_pretrained(str(out / "model"))
    seconds = time.perf_counter() - t0
    logs = [h for h in trainer.state.log_history if "reward" in h]
    rewards = [float(h["reward"]) for h in logs]
    truncated = statistics.mean(float(h.get("completions/clipped_ratio", 0.0)) for h in logs)
    return seconds, out / "model", rewards, truncated


def held_out_success(model_dir: Path, greedy: bool) -> float:
    """The share of the held-out tasks the model solves, played by rlx's evaluator: greedily,
    or sampled at temperature 1 (the policy GRPO trains) from a fixed seed."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlx.llm.episodes import run_episodes

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    seeds = list(EVAL_SEEDS)
    torch.manual_seed(SEED)
    episodes = run_episodes(model, tokenizer, [CardEnv(**ENV_KWARGS) for _ in seeds], seeds,
                            max_new_tokens=COMPLETION_TOKENS,
                            max_episode_tokens=prompt_tokens(model_dir) + COMPLETION_TOKENS,
                            temperature=1.0, greedy=greedy)  # fmt: skip
    return sum(e.reward > 0 for e in episodes) / len(episodes)


def successes(model_dir: Path) -> dict[str, float]:
    """Held-out success sampled (``success``) and greedy (``greedy_success``)."""
    return {"success": held_out_success(model_dir, greedy=False),
            "greedy_success": held_out_success(model_dir, greedy=True)}  # fmt: skip


def quarters(rewards: list[float]) -> tuple[float, float]:
    """The mean reward of the first and the last quarter of the steps."""
    q = max(1, len(rewards) // 4)
    return statistics.mean(rewards[:q]), statistics.mean(rewards[-q:])


# ---------------------------------------------------------------------------- report
def wilson_text(share: float, n: int) -> str:
    """``share`` of ``n`` with its 95% interval (rlx's, :mod:`rlx.core.intervals`)."""
    from rlx.core.intervals import proportion_interval

    low, high = proportion_interval(round(share * n), n)
    return f"{share:.1%} [{low:.1%}, {high:.1%}]"


def report(runs: dict[str, list[dict[str, Any]]], start: dict[str, float], args: Any) -> None:
    """The table (seconds per episode, the speed ratio, where each run got to), the goals, and
    agents.json."""
    columns = ["library", "s per episode, median", "s per episode, min", "episodes/s (median)",
               "rlx / TRL (medians)", "rlx / TRL (mins)", "training reward, first -> last "
               "quarter (median)", "truncated share", "held-out success sampled at T=1 (200 "
               "tasks, median, 95% interval)", "held-out success greedy (median)"]  # fmt: skip
    episodes = args.steps * TASKS * G
    seconds = {name: spread([r["seconds"] for r in rs]) for name, rs in runs.items()}
    success = {name: spread([r["success"] for r in rs]) for name, rs in runs.items()}
    greedy = {name: spread([r["greedy_success"] for r in rs]) for name, rs in runs.items()}
    table, goals, details = [], [], {}
    for name, rs in runs.items():
        by_median = by_min = ""
        if name == "rlx" and "TRL" in seconds:
            by_median = ratio(seconds["TRL"]["median"], seconds["rlx"]["median"])
            by_min = ratio(seconds["TRL"]["min"], seconds["rlx"]["min"])
            goals.append(goal(f"rlx at least {SPEED_GOAL:g}x TRL's episodes/s",
                              f"ratio >= {SPEED_GOAL:g}", by_median,
                              by_median >= SPEED_GOAL))  # fmt: skip
            gap = round(success["rlx"]["median"] - success["TRL"]["median"], 3)
            goals.append(goal(f"rlx's held-out success after no more than "
                              f"{SUCCESS_TOLERANCE:.0%} below TRL's",
                              f">= -{SUCCESS_TOLERANCE}", gap,
                              gap >= -SUCCESS_TOLERANCE))  # fmt: skip
        first = statistics.median(r["quarters"][0] for r in rs)
        last = statistics.median(r["quarters"][1] for r in rs)
        med = seconds[name]["median"]
        table.append([
            name, round(med / episodes, 4), round(seconds[name]["min"] / episodes, 4),
            round(episodes / med, 2), by_median, by_min, f"{first:.3f} -> {last:.3f}",
            f"{statistics.median(r['truncated'] for r in rs):.3f}",
            f"{wilson_text(start['success'], len(EVAL_SEEDS))} -> "
            f"{wilson_text(success[name]['median'], len(EVAL_SEEDS))}",
            f"{start['greedy_success']:.1%} -> {greedy[name]['median']:.1%}",
        ])  # fmt: skip
        details[name] = {"seconds": seconds[name], "held_out_success": success[name],
                         "held_out_greedy_success": greedy[name], "runs": rs}  # fmt: skip
        print(f"{name}: {med:.1f} s (median of {len(rs)}), held-out success (sampled) "
              f"{start['success']:.1%} -> {success[name]['median']:.1%}", flush=True)  # fmt: skip
    write_result(
        "agents",
        title="A language model with a tool: rlx's GRPO over episodes vs TRL's environment mode",
        columns=columns,
        rows=table,
        libraries=LIBRARIES,
        repeats=args.repeats,
        seeds=[SEED],
        goals=goals,
        peer="TRL",
        settings=like_for_like(args.steps, args.prompt_tokens),
        figures={
            "start_model_sft_steps": args.sft_steps,
            "hidden_size": args.hidden,
            "episodes_per_run": episodes,
        },
        details=details,
        notes=f"{args.steps} steps of {TASKS} hidden-card tasks x G={G} episodes of at most "
        f"{TURNS} replies, lr {LR}, beta {BETA}, float32, one torch thread; start model: a "
        f"tiny Qwen2 (hidden {args.hidden}) after {args.sft_steps} SFT steps on "
        "demonstrations. Both clocks span loading the model to saving it after training; "
        f"{args.repeats} repeats on the same seed, libraries alternated. Held-out success: "
        "episodes on env seeds 0-199 (training plays seeds from 1,000,000), sampled at "
        "temperature 1 from a fixed seed and greedily, every model played by the same "
        f"evaluator, off the clocks; start model's demonstrations right in {DEMO_RIGHT:.0%}.",
        quick=args.quick,
        out_dir=args.out_dir,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--repeats", type=int, default=MIN_REPEATS)
    parser.add_argument("--sft-steps", type=int, default=SFT_STEPS,
                        help="SFT steps of the start model (fewer: a smoke run)")  # fmt: skip
    parser.add_argument("--hidden", type=int, default=HIDDEN, help="the model's hidden size")
    parser.add_argument("--quick", action="store_true",
                        help="2 steps, 20 SFT steps, 1 repeat: a check that it runs")  # fmt: skip
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where agents.json goes (default benchmarks/results, --quick: "
                             "benchmarks/results/quick)")  # fmt: skip
    args = parser.parse_args()
    if args.quick:
        args.steps, args.sft_steps, args.repeats, args.hidden = 2, 20, 1, 64
    torch.set_num_threads(THREADS)
    from clocks import import_everything

    import_everything()  # both sides' imports (TRL's lazy trainers, datasets): no clock
    import rlx.llm.episode_grpo  # noqa: F401  (rlx's side of this benchmark)

    root = Path(tempfile.mkdtemp(prefix="bench-agents-"))
    start_model = build_start_model(root, args.sft_steps, args.hidden)
    args.prompt_tokens = prompt_tokens(start_model)
    check_like_for_like(like_for_like(args.steps, args.prompt_tokens), "bench_agents")
    start = successes(start_model)
    print(f"start model: held-out success {start['success']:.1%} sampled, "
          f"{start['greedy_success']:.1%} greedy", flush=True)  # fmt: skip
    train = {"rlx": run_rlx, "TRL": run_trl}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in train}
    for repeat in range(args.repeats):
        for name, run in train.items():  # alternated, so a busy moment hits both
            out = root / f"{name.lower()}-{repeat}"
            seconds, model, rewards, truncated = run(start_model, out, args.steps)
            result = {"seconds": round(seconds, 3), **successes(model),
                      "quarters": quarters(rewards), "truncated": round(truncated, 4),
                      "rewards": [round(r, 4) for r in rewards]}  # fmt: skip
            runs[name].append(result)
            print(f"{name} repeat {repeat}: {seconds:.1f} s, reward {result['quarters'][0]:.3f}"
                  f" -> {result['quarters'][1]:.3f}, held-out success {result['success']:.1%}"
                  f" sampled, {result['greedy_success']:.1%} greedy",
                  flush=True)  # fmt: skip
    report(runs, start, args)


if __name__ == "__main__":
    main()
