"""RLHF-PPO against a strong learned reward model on two-digit addition: does exact match rise?

Not a speed benchmark: a learning study, the evidence behind the README's RLHF-PPO figures. Its
table (exact match of every model, the reward model's pair accuracy) goes to
``benchmarks/results/study_rlhf_reward_model.json`` (``--out-dir`` elsewhere).

Protocol (one torch thread, CPU):

- **SFT model**: a 1.03M-parameter Llama with a character tokenizer (``rlx.llm.make_tiny_lm``,
  hidden 160), fine-tuned by ``rlx.llm.sft`` for ``--sft-steps`` (300) steps of 64 on 4,000
  additions (seed 0), the model of ``tests/llm/test_learning.py``.
- **Reward model**: the labeller ranks the SFT model's own *samples*: 8 completions at
  temperature 1 for each of ``--rm-problems`` problems (4,000; seed 21), every wrong one paired
  with the right answer (``chosen`` = the answer, ``rejected`` = the sample), de-duplicated; a
  scalar head on the SFT backbone fitted with the Bradley-Terry loss for ``--rm-steps`` steps
  of 32 at 3e-4.
- **PPO**: ``llm.rlhf`` on 2,000 prompts (seed 11), ``--ppo-steps`` steps of 64 prompts at
  1e-5, beta 0.05, for each ``--temperatures`` and ``--seeds``.
- **GRPO** (``--grpo-lrs``): ``llm.grpo`` with the same reward model as its reward,
  ``--grpo-steps`` (40) steps of 64 prompts x G = 8 completions of at most 5 tokens, at each
  learning rate: no critic. The control: the same GRPO at 5e-5 on the exact-match verifier
  scaled to 10 points, with and without Gaussian noise of std 4 (``--noise-stds``): does noise
  alone lower exact match?
- **Measured**: held-out pair accuracy of the reward model on sampled mistakes, and greedy
  exact match on 300 held-out problems (seed 99) of the SFT model and of each PPO model. Then,
  for the problems SFT solved and the last PPO model did not, the reward model's score of
  both greedy answers: whether it still prefers the right one. Last, the kinds of answer
  (right; a slip of the ones digit, +-1 or 2; of the tens digit, +-10 or 20; a wrong length;
  other) among the greedy answers of the SFT, PPO and GRPO models, and the reward model's mean
  score of each kind over 4 samples per problem at temperature 1.

Run: ``.venv/bin/python benchmarks/study_rlhf_reward_model.py [--root DIR] [--rm-steps 3000]
[--ppo-steps 100] [--temperatures 1.0 0.5] [--seeds 0 1 2] [--grpo-lrs 2e-4 5e-5]
[--noise-stds 4 0]`` (minutes per run on one core); a smoke run that only checks it works:
``--root DIR --sft-steps 5 --rm-problems 50 --rm-steps 2 --ppo-steps 1 --temperatures 1.0
--seeds 0 --grpo-lrs 2e-4 --grpo-steps 1 --noise-stds 0``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from results import write_result  # noqa: E402  (benchmarks/results.py)


def build_sft(root: Path, steps: int) -> Path:
    """The GRPO benchmark's SFT model (``bench_grpo.build_sft``), trained once per root."""
    from bench_grpo import build_sft as train_sft  # benchmarks/bench_grpo.py

    folder = root / "sft" / "model"
    return folder if folder.is_dir() else train_sft(root, steps)


def sampled_mistakes(sft: Path, n_problems: int = 4000, samples: int = 8) -> list:
    """The labeller's pairs: the right answer over each wrong sampled completion."""
    from rlx import llm
    from rlx.llm.generation import sample

    model, tokenizer = llm.load_model(sft)
    rows = llm.arithmetic(n_problems, seed=21)
    pairs = set()
    for start in range(0, len(rows), 250):
        chunk = rows[start : start + 250]
        completions = sample(model, tokenizer, [r.prompt for r in chunk], n=samples,
                             max_new_tokens=5, temperature=1.0)  # fmt: skip
        texts = tokenizer.batch_decode(completions, skip_special_tokens=True)
        for i, text in enumerate(texts):
            row = chunk[i // samples]
            if text.strip() != row.answer:
                pairs.add((row.prompt, row.answer, text))
    out = [llm.PreferencePair(*p) for p in sorted(pairs)]
    random.Random(0).shuffle(out)
    return out


def build_reward_model(root: Path, sft: Path, steps: int, problems: int) -> tuple[Path, float]:
    import json

    from rlx import llm

    if (root / "rm" / "model").is_dir():
        summary = json.loads((root / "rm" / "summary.json").read_text())
        return root / "rm" / "model", float(summary.get("eval_pair_accuracy", float("nan")))
    pairs = sampled_mistakes(sft, problems)
    print(f"{len(pairs):,} labelled pairs of sampled mistakes")
    llm.write_jsonl(root / "prefs.jsonl", pairs)
    rm = llm.reward_model(sft, root / "prefs.jsonl", run_dir=root / "rm", steps=steps,
                          batch_size=32, learning_rate=3e-4, progress=False,
                          eval_every=10**6)  # fmt: skip
    return rm.model_dir, rm.metrics["eval_pair_accuracy"]


def where_ppo_lost(sft: Path, ppo: Path, score: Any, test: list) -> None:
    """For problems SFT solved and PPO does not: does the reward model prefer SFT's answer?"""
    from rlx import llm
    from rlx.llm.generation import greedy

    prompts = [r.prompt for r in test]
    answers = {}
    for name, folder in (("sft", sft), ("ppo", ppo)):
        model, tokenizer = llm.load_model(folder)
        answers[name] = [a.strip() for a in greedy(model, tokenizer, prompts, max_new_tokens=5)]
    lost = [i for i, r in enumerate(test)
            if answers["sft"][i] == r.answer and answers["ppo"][i] != r.answer]  # fmt: skip
    if not lost:
        print("PPO lost no problem SFT solved")
        return
    right = score([prompts[i] for i in lost], [answers["sft"][i] for i in lost])
    wrong = score([prompts[i] for i in lost], [answers["ppo"][i] for i in lost])
    prefers = sum(a > b for a, b in zip(right, wrong, strict=True))
    print(f"{len(lost)} problems SFT solved and PPO does not; the reward model scores SFT's "
          f"right answer above PPO's wrong one on {prefers} of them")  # fmt: skip
    for i, a, b in list(zip(lost, right, wrong, strict=True))[:6]:
        print(f"  {prompts[i]}{test[i].answer}: SFT {answers['sft'][i]} ({a:+.2f}), "
              f"PPO {answers['ppo'][i]} ({b:+.2f})")  # fmt: skip


def answer_kind(answer: str, out: str) -> str:
    """What kind of answer ``out`` is to a problem whose sum is ``answer``."""
    if out == answer:
        return "right"
    if not out.isdigit():
        return "junk"
    miss = abs(int(out) - int(answer))
    if miss in (1, 2):
        return "ones slip"
    if miss in (10, 20):
        return "tens slip"
    return "length" if len(out) != len(answer) else "other"


def error_kinds(name: str, folder: Path, score: Any, test: list) -> None:
    """Counts of each kind among the greedy answers; the reward model's mean score per kind."""
    from collections import Counter, defaultdict

    from rlx import llm
    from rlx.llm.generation import greedy, sample

    model, tokenizer = llm.load_model(folder)
    prompts = [r.prompt for r in test]
    answers = [a.strip() for a in greedy(model, tokenizer, prompts, max_new_tokens=5)]
    kinds = Counter(answer_kind(r.answer, a) for r, a in zip(test, answers, strict=True))
    samples = tokenizer.batch_decode(sample(model, tokenizer, prompts, n=4, max_new_tokens=5,
                                            temperature=1.0), skip_special_tokens=True)  # fmt: skip
    rows = [r for r in test for _ in range(4)]
    scores = score([r.prompt for r in rows], samples)
    by_kind = defaultdict(list)
    for r, text, value in zip(rows, samples, scores, strict=True):
        by_kind[answer_kind(r.answer, text.strip())].append(value)
    print(f"{name}: greedy answers {dict(sorted(kinds.items()))}")
    means = [f"{k} {sum(v) / len(v):+.1f} ({len(v)})" for k, v in sorted(by_kind.items())]
    print("   the reward model's mean score of the samples by kind: " + ", ".join(means))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("runs/study-rlhf"))
    parser.add_argument("--sft-steps", type=int, default=300)
    parser.add_argument("--rm-problems", type=int, default=4000)
    parser.add_argument("--rm-steps", type=int, default=3000)
    parser.add_argument("--ppo-steps", type=int, default=100)
    parser.add_argument("--temperatures", type=float, nargs="+", default=[1.0, 0.5])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--grpo-lrs", type=float, nargs="*", default=[2e-4, 5e-5])
    parser.add_argument("--grpo-steps", type=int, default=40)
    parser.add_argument("--noise-stds", type=float, nargs="*", default=[4.0, 0.0])
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where the result file goes (default benchmarks/results)")  # fmt: skip
    args = parser.parse_args()

    from rlx import llm

    args.root.mkdir(parents=True, exist_ok=True)
    test = llm.arithmetic(300, seed=99)
    llm.write_jsonl(args.root / "prompts.jsonl", llm.arithmetic(2000, seed=11))
    sft = build_sft(args.root, args.sft_steps)
    rm, pair_accuracy = build_reward_model(args.root, sft, args.rm_steps, args.rm_problems)
    sft_accuracy = llm.exact_match(sft, test)
    print(f"SFT exact match {sft_accuracy:.1%}; reward model held-out pair "
          f"accuracy on sampled mistakes {pair_accuracy:.1%}")  # fmt: skip
    table = [["SFT", "", f"{sft_accuracy:.1%}"]]
    score = llm.load_reward_model(rm)
    ppo_models = ppo_runs(args, sft, rm, test, table)
    if ppo_models:
        where_ppo_lost(sft, ppo_models[-1], score, test)
    grpo_models = grpo_runs(args, sft, score, test, table)
    first_ppo = ppo_models[0] if ppo_models else None
    for name, folder in [("SFT", sft), ("PPO (first run)", first_ppo), *grpo_models[:1]]:
        if folder is not None and folder.is_dir():
            error_kinds(name, folder, score, test)
    noise_runs(args, sft, test, table)
    write_result(
        "study_rlhf_reward_model",
        title="RLHF-PPO and GRPO against a learned reward model on two-digit addition",
        columns=["model", "setting", "exact match (300 held out)"],
        rows=table,
        libraries=("torch", "transformers"),
        repeats=len(args.seeds),
        goals=[],
        peer="(a study of rlx alone)",
        seeds=args.seeds,
        figures={
            "reward_model_pair_accuracy": round(pair_accuracy, 4),
            "sft_exact_match": round(sft_accuracy, 4),
        },
        notes=f"SFT {args.sft_steps} steps; reward model {args.rm_steps} steps on the SFT "
        f"model's sampled mistakes on {args.rm_problems} problems; PPO {args.ppo_steps} steps "
        f"of 64 prompts; GRPO {args.grpo_steps} steps of 64 prompts x 8.",
        out_dir=args.out_dir,
    )


def ppo_runs(args: argparse.Namespace, sft: Path, rm: Path, test: list, table: list) -> list[Path]:
    """RLHF-PPO against the reward model for every temperature and seed; their model folders."""
    from rlx import llm

    models = []
    for temperature in args.temperatures:
        for seed in args.seeds:
            run = args.root / f"ppo-T{temperature}-s{seed}"
            shutil.rmtree(run, ignore_errors=True)  # SFT and the reward model are reused
            ppo = llm.rlhf(sft, args.root / "prompts.jsonl", reward_model=rm, run_dir=run,
                           steps=args.ppo_steps, batch_size=64, learning_rate=1e-5,
                           temperature=temperature, seed=seed, progress=False)  # fmt: skip
            accuracy = llm.exact_match(ppo.model_dir, test)
            print(f"temperature {temperature} seed {seed}: PPO exact match {accuracy:.1%}")
            table.append(["PPO", f"temperature {temperature}, seed {seed}", f"{accuracy:.1%}"])
            models.append(ppo.model_dir)
    return models


def grpo_runs(
    args: argparse.Namespace, sft: Path, score: Any, test: list, table: list
) -> list[tuple[str, Path]]:
    """GRPO with the reward model as its reward, at every learning rate."""
    from rlx import llm

    def reward_model_score(prompts, completions, **_):
        return score(list(prompts), list(completions))

    models = []
    for lr in args.grpo_lrs:
        shutil.rmtree(args.root / f"grpo-lr{lr:g}", ignore_errors=True)
        grpo = llm.grpo(sft, args.root / "prompts.jsonl", reward=reward_model_score,
                        run_dir=args.root / f"grpo-lr{lr:g}", steps=args.grpo_steps,
                        batch_size=64, group_size=8, max_new_tokens=5, learning_rate=lr,
                        progress=False)  # fmt: skip
        accuracy = llm.exact_match(grpo.model_dir, test)
        print(f"GRPO against the reward model at {lr:g}: exact match {accuracy:.1%}")
        table.append(["GRPO, reward model", f"lr {lr:g}", f"{accuracy:.1%}"])
        models.append((f"GRPO {lr:g}", grpo.model_dir))
    return models


def noise_runs(args: argparse.Namespace, sft: Path, test: list, table: list) -> None:
    """The control: GRPO on 10 x exact match plus Gaussian noise of each std."""
    from rlx import llm

    for std in args.noise_stds:
        rng = random.Random(0)

        def noisy_verifier(prompts, completions, answers, std=std, rng=rng, **_):
            return [10.0 * (c.strip() == a.strip()) + rng.gauss(0.0, std)
                    for c, a in zip(completions, answers, strict=True)]  # fmt: skip

        run = args.root / f"grpo-noise{std:g}"
        shutil.rmtree(run, ignore_errors=True)
        grpo = llm.grpo(sft, args.root / "prompts.jsonl", reward=noisy_verifier, run_dir=run,
                        steps=args.grpo_steps, batch_size=64, group_size=8, max_new_tokens=5,
                        learning_rate=5e-5, progress=False)  # fmt: skip
        accuracy = llm.exact_match(grpo.model_dir, test)
        print(f"GRPO on 10 x exact match + noise of std {std:g}: exact match {accuracy:.1%}")
        table.append(["GRPO, noisy verifier", f"noise std {std:g}", f"{accuracy:.1%}"])


if __name__ == "__main__":
    main()
