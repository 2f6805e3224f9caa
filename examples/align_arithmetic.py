"""Aligning a tiny language model to two-digit addition: SFT, a reward model, and DPO on the
model's own mistakes, each a run folder under runs/align/.

    .venv/bin/python examples/align_arithmetic.py        # about 2 minutes on one CPU core

1. Build a tiny Llama (1M parameters, random init, character tokenizer) and save it.
2. SFT on 4,000 demonstrations "23+58=" -> "81": exact match rises from 0.
3. A Bradley-Terry reward model on correct-vs-wrong sums: held-out pair accuracy.
4. Preference pairs from the SFT model's own wrong answers (chosen = the right sum), then DPO
   with an NLL term on the chosen answer (rpo_alpha=1): exact match rises again.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from rlx import llm

ROOT = Path("runs/align")


def main() -> None:
    shutil.rmtree(ROOT, ignore_errors=True)
    data = ROOT / "data"
    sft_rows = llm.arithmetic_sft(4000, seed=0)
    llm.write_jsonl(data / "sft.jsonl", sft_rows)
    prefs = llm.arithmetic_preferences(2000, seed=1, mistake="random")
    llm.write_jsonl(data / "prefs.jsonl", prefs)
    test = llm.arithmetic(300, seed=99)

    base = llm.make_tiny_lm(ROOT / "tiny", texts=llm.task_texts(sft_rows), hidden_size=160)
    print(f"tiny model: exact match {llm.exact_match(base, test):.1%} before training")

    sft = llm.sft(base, data / "sft.jsonl", run_dir=ROOT / "sft", steps=300)
    sft_accuracy = llm.exact_match(sft.model_dir, test)
    print(f"SFT: exact match {sft_accuracy:.1%}")

    rm = llm.reward_model(sft.model_dir, data / "prefs.jsonl", run_dir=ROOT / "rm", steps=300,
                          batch_size=32, learning_rate=1e-4)  # fmt: skip
    print(f"reward model: held-out pair accuracy {rm.metrics['eval_pair_accuracy']:.1%}")

    pairs = llm.mistake_pairs(sft.model_dir, llm.arithmetic(3000, seed=5))
    llm.write_jsonl(data / "mistakes.jsonl", pairs)
    dpo = llm.dpo(sft.model_dir, data / "mistakes.jsonl", run_dir=ROOT / "dpo", epochs=8,
                  learning_rate=1e-4, rpo_alpha=1.0)  # fmt: skip
    print(
        f"DPO on {len(pairs)} of its own mistakes: exact match "
        f"{sft_accuracy:.1%} -> {llm.exact_match(dpo.model_dir, test):.1%}"
    )
    print(f"run folders and models in {ROOT}/ (rlx align eval --model {ROOT}/dpo/model ...)")


if __name__ == "__main__":
    main()
