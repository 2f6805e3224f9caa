"""The language-model runs' data and models of the doctor corpus, shared by the runs rlx trains
(``doctor_corpus.py``) and those another library trains (``foreign_corpus.py``): data files of
small sums, a tiny base model and an SFT model of it, built once under a folder."""

from __future__ import annotations

from pathlib import Path

EASY = {"low": 1, "high": 20}
"""The language-model cases' additions."""


def language_files(root: Path, seed: int = 0) -> dict[str, Path]:
    """The data files, a tiny base model and an SFT model of it (built once under ``root``)."""
    from rlx import llm

    root.mkdir(parents=True, exist_ok=True)
    files = {
        "sft.jsonl": root / "sft.jsonl",
        "prefs.jsonl": root / "prefs.jsonl",
        "prompts.jsonl": root / "prompts.jsonl",
    }
    if not files["sft.jsonl"].exists():
        # sums of numbers up to 20, which a tiny model learns in a few hundred steps: GRPO's
        # groups then hold right and wrong answers (two-digit sums leave most groups all wrong)
        llm.write_jsonl(files["sft.jsonl"], llm.arithmetic_sft(2000, seed=0, **EASY))
        llm.write_jsonl(files["prefs.jsonl"], llm.arithmetic_preferences(400, seed=1, **EASY))
        llm.write_jsonl(files["prompts.jsonl"], llm.arithmetic(400, seed=2, **EASY))
    base = root / "base"
    if not (base / "config.json").exists():
        rows = llm.arithmetic_sft(2000, seed=0, **EASY)
        llm.make_tiny_lm(base, texts=llm.task_texts(rows), hidden_size=96, seed=seed)
    sft = root / "sft-model"
    if not (sft / "model" / "config.json").exists():
        import shutil

        shutil.rmtree(sft, ignore_errors=True)
        llm.sft(base, files["sft.jsonl"], run_dir=sft, steps=300, seed=seed, progress=False,
                eval_exact_match=False)  # fmt: skip
    return {**files, "base": base, "sft": sft / "model"}
