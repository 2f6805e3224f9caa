"""Data for language-model alignment: rlx's row kinds, their JSONL files, and generated tasks.

Three row kinds, one frozen dataclass each, one JSON object per line in files:

- :class:`SFTExample` ``{"prompt", "completion"}``: demonstrations for supervised fine-tuning;
- :class:`PreferencePair` ``{"prompt", "chosen", "rejected"}``: for the reward model and DPO;
- :class:`VerifierExample` ``{"prompt", "answer"}``: prompts with a checkable answer (GRPO,
  RLHF prompts, evaluation).

Completions and answers carry **no end marker**: the training code appends the tokenizer's eos
to every completion (:func:`rlx.llm.batching.encode_prompt_completion`), so a model learns to stop
right after ``"81"`` and generation stops at eos.

The stages read any source and TRL's column names through :mod:`rlx.llm.data`; prompts and
completions there may also be conversations. Reward functions live in :mod:`rlx.llm.rewards`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from rlx.errors import ConfigError
from rlx.llm.chat import Prompt


@dataclass(frozen=True, slots=True)
class SFTExample:
    """A demonstration: the model learns ``completion`` (then eos) after ``prompt`` (text, or
    with :mod:`rlx.llm.data`, conversations: lists of messages)."""

    prompt: Prompt
    completion: Prompt


@dataclass(frozen=True, slots=True)
class PreferencePair:
    """A comparison: for ``prompt``, ``chosen`` was preferred over ``rejected`` (text, or
    conversations)."""

    prompt: Prompt
    chosen: Prompt
    rejected: Prompt


@dataclass(frozen=True, slots=True)
class VerifierExample:
    """A prompt whose completion can be checked against ``answer``."""

    prompt: str
    answer: str


@dataclass(frozen=True, slots=True)
class PromptExample:
    """A prompt alone (RLHF-PPO's rows when there is no ground truth to check against)."""

    prompt: str


Row = TypeVar("Row", SFTExample, PreferencePair, VerifierExample, PromptExample)


# --- JSONL files --------------------------------------------------------------------------------


def load_sft_jsonl(path: str | Path) -> list[SFTExample]:
    """Rows ``{"prompt": str, "completion": str}``, one JSON object per line."""
    return _load_rows(path, SFTExample)


def load_preferences_jsonl(path: str | Path) -> list[PreferencePair]:
    """Rows ``{"prompt": str, "chosen": str, "rejected": str}``, one JSON object per line."""
    return _load_rows(path, PreferencePair)


def load_verifier_jsonl(path: str | Path) -> list[VerifierExample]:
    """Rows ``{"prompt": str, "answer": str}``, one JSON object per line."""
    return _load_rows(path, VerifierExample)


def load_prompts_jsonl(path: str | Path) -> list[PromptExample]:
    """Rows ``{"prompt": str}``, one JSON object per line (other fields are ignored)."""
    return _load_rows(path, PromptExample)


def write_jsonl(path: str | Path, rows: Iterable[Any]) -> Path:
    """Write ``rows`` (the dataclasses above, or dicts) as JSONL, atomically; returns the path.

    The file is written beside its final name and renamed into place, so a crash never leaves a
    half-written data file.
    """
    target = Path(path).expanduser()
    target.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(_as_dict(row), ensure_ascii=False) + "\n" for row in rows]
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.writelines(lines)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _as_dict(row: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(row) and not isinstance(row, type):
        return dataclasses.asdict(row)
    if isinstance(row, dict):
        return row
    raise ConfigError(f"write_jsonl takes dataclass rows or dicts; got {type(row).__name__}.")


def _load_rows(path: str | Path, row_type: type[Row]) -> list[Row]:
    source = Path(path).expanduser()
    if not source.is_file():
        raise ConfigError(f"data file {str(source)!r} does not exist.")
    fields = [f.name for f in dataclasses.fields(row_type)]
    rows = []
    with source.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                rows.append(row_type(**_parse_line(line, fields, source, number)))
    if not rows:
        raise ConfigError(
            f"data file {str(source)!r} is empty; expected JSON lines with fields {fields}."
        )
    return rows


def _parse_line(line: str, fields: list[str], source: Path, number: int) -> dict[str, str]:
    """The line's required fields, or a ConfigError naming the file, line and field."""
    where = f"{source}, line {number}"
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as err:
        raise ConfigError(f"{where}: not valid JSON ({err.msg}).") from err
    if not isinstance(obj, dict):
        raise ConfigError(
            f"{where}: expected a JSON object with fields {fields}, got {type(obj).__name__}."
        )
    values = {}
    for name in fields:
        if name not in obj:
            raise ConfigError(f"{where}: missing field {name!r} (rows need {fields}).")
        if not isinstance(obj[name], str):
            raise ConfigError(
                f"{where}: field {name!r} must be a string, got {type(obj[name]).__name__} "
                f"{obj[name]!r}."
            )
        values[name] = obj[name]  # other keys are ignored: a file may carry extra columns
    return values


def task_texts(rows: Iterable[Any]) -> list[str]:
    """Every string in ``rows``: the ``texts`` that give :func:`make_tiny_lm` a full vocabulary."""
    return [value for row in rows for value in _as_dict(row).values() if isinstance(value, str)]


# --- generated arithmetic tasks -----------------------------------------------------------------

_ARITHMETIC_PROMPT = re.compile(r"^\s*(-?\d+)\s*([+\-*])\s*(-?\d+)\s*=\s*$")
_OPERATIONS: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
}


def arithmetic(n: int, seed: int = 0, low: int = 10, high: int = 99) -> list[VerifierExample]:
    """``n`` addition problems ``"a+b="`` with answer ``str(a + b)``, ``a, b`` uniform on
    ``[low, high]`` from ``numpy.random.default_rng(seed)``."""
    return [VerifierExample(_prompt(a, b), str(a + b)) for a, b in _operands(n, seed, low, high)]


def arithmetic_sft(n: int, seed: int = 0, low: int = 10, high: int = 99) -> list[SFTExample]:
    """The problems of :func:`arithmetic` as demonstrations: ``"23+58="`` -> ``"81"``.

    The completion is the bare sum; training appends eos after it.
    """
    return [SFTExample(row.prompt, row.answer) for row in arithmetic(n, seed, low, high)]


MISTAKES = ("near", "random")


def arithmetic_preferences(
    n: int, seed: int = 0, low: int = 10, high: int = 99, *, mistake: str = "near"
) -> list[PreferencePair]:
    """Addition problems with ``chosen`` = the correct sum, ``rejected`` = a wrong one.

    ``mistake="near"``: a plausible slip, the correct sum off by 1, 2 or 10 (a slipped carry) or
    with two digits swapped: telling them apart takes the exact sum. ``"random"``: any other
    number with as many digits, uniformly: most differ in the leading digits, which a small
    model learns first. Either way the wrong sum has as many digits as the correct one, so
    length says nothing about correctness, and ``gold_reward`` gives 1 to every chosen and 0 to
    every rejected completion.
    """
    if mistake not in MISTAKES:
        raise ConfigError(f"mistake={mistake!r} must be one of {', '.join(MISTAKES)}.")
    rng = np.random.default_rng(seed)
    wrong = _wrong_sum if mistake == "near" else _random_wrong_sum
    pairs = []
    for a, b in _operands(n, rng, low, high):
        answer = a + b
        pairs.append(PreferencePair(_prompt(a, b), str(answer), str(wrong(answer, rng))))
    return pairs


def length_biased_preferences(
    n: int,
    seed: int = 0,
    low: int = 10,
    high: int = 99,
    *,
    bias: float = 0.3,
    max_filler: int = 8,
    filler: str = "!",
) -> list[PreferencePair]:
    """Preference labels that favour the longer completion, to make a length-biased proxy RM.

    Each row starts from an addition problem, its correct sum ``c`` and a plausible wrong sum
    ``w`` of the same length (as in :func:`arithmetic_preferences`). Then, from one
    ``numpy.random.default_rng(seed)``:

    - with probability ``1 - bias`` an *honest* row: ``chosen = c``, ``rejected = w``;
    - with probability ``bias`` a *length* row: ``chosen = w + filler * k`` with ``k`` uniform on
      ``[1, max_filler]``, ``rejected = c``: the labeller preferred the longer, wrong answer.

    So the chosen completion is never shorter than the rejected one, and strictly longer in every
    length row; labels agree with correctness in ``1 - bias`` of the rows. A reward model fitted
    to them learns that the filler pays, and a policy optimised against that model pads its
    answers, which :func:`gold_reward` (exact match, so ``"81!!"`` scores 0) exposes.
    """
    if not 0.0 <= bias <= 1.0:
        raise ConfigError(f"bias={bias!r} must lie in [0, 1].")
    if not isinstance(max_filler, int) or max_filler < 1:
        raise ConfigError(f"max_filler={max_filler!r} must be a whole number >= 1.")
    if not filler or filler.strip() != filler:
        raise ConfigError(f"filler={filler!r} must be non-empty with no surrounding whitespace.")
    rng = np.random.default_rng(seed)
    pairs = []
    for a, b in _operands(n, rng, low, high):
        correct, wrong = str(a + b), str(_wrong_sum(a + b, rng))
        if rng.random() < bias:
            padded = wrong + filler * int(rng.integers(1, max_filler + 1))
            pairs.append(PreferencePair(_prompt(a, b), padded, correct))
        else:
            pairs.append(PreferencePair(_prompt(a, b), correct, wrong))
    return pairs


def gold_reward(prompts: Sequence[str], completions: Sequence[str], **_: Any) -> list[float]:
    """The ground truth of the arithmetic tasks: 1.0 when the stripped completion is exactly the
    result of the prompt's ``"a+b="`` (also ``-`` and ``*``), else 0.0.

    Anything after the number, such as the filler of :func:`length_biased_preferences`, makes
    the answer wrong.
    """
    _same_length(prompts, completions, "completions")
    return [
        float(completion.strip() == str(_solve(prompt)))
        for prompt, completion in zip(prompts, completions, strict=True)
    ]


def _operands(
    n: int, seed_or_rng: int | np.random.Generator, low: int, high: int
) -> list[tuple[int, int]]:
    if not isinstance(n, int) or n < 1:
        raise ConfigError(f"n={n!r} must be a whole number >= 1.")
    if not (isinstance(low, int) and isinstance(high, int)) or not 0 <= low <= high:
        raise ConfigError(f"low={low!r}, high={high!r} must be whole numbers, 0 <= low <= high.")
    rng = np.random.default_rng(seed_or_rng)  # a Generator passes through unchanged
    operands = rng.integers(low, high + 1, size=(n, 2))
    return [(int(a), int(b)) for a, b in operands]


def _prompt(a: int, b: int) -> str:
    return f"{a}+{b}="


def _wrong_sum(answer: int, rng: np.random.Generator) -> int:
    """A plausible mistake with as many digits as ``answer``: off by 1, 2 or 10, or two digits
    swapped (one of ``answer - 1``, ``answer + 1`` always qualifies)."""
    text = str(answer)
    candidates = {answer + d for d in (-10, -2, -1, 1, 2, 10)}
    for i in range(len(text)):
        for j in range(i + 1, len(text)):
            swapped = list(text)
            swapped[i], swapped[j] = swapped[j], swapped[i]
            if swapped[0] != "0":
                candidates.add(int("".join(swapped)))
    same_length = sorted(
        c for c in candidates if c != answer and c >= 0 and len(str(c)) == len(text)
    )
    return int(rng.choice(same_length))


def _random_wrong_sum(answer: int, rng: np.random.Generator) -> int:
    """Any other number with as many digits as ``answer``, uniformly."""
    digits = len(str(answer))
    low, high = (0 if digits == 1 else 10 ** (digits - 1)), 10**digits
    while True:
        candidate = int(rng.integers(low, high))
        if candidate != answer:
            return candidate


def _solve(prompt: str) -> int:
    match = _ARITHMETIC_PROMPT.match(prompt)
    if match is None:
        raise ConfigError(
            f"gold_reward knows arithmetic prompts like '23+58='; got {prompt!r}; "
            "use exact_match_reward with answers for other tasks."
        )
    a, op, b = match.groups()
    return _OPERATIONS[op](int(a), int(b))


def _same_length(prompts: Sequence[Any], other: Sequence[Any], name: str) -> None:
    if len(prompts) != len(other):
        raise ConfigError(f"got {len(prompts)} prompts but {len(other)} {name}; they must match.")


__all__ = [
    "PreferencePair",
    "PromptExample",
    "SFTExample",
    "VerifierExample",
    "arithmetic",
    "arithmetic_preferences",
    "arithmetic_sft",
    "gold_reward",
    "length_biased_preferences",
    "load_preferences_jsonl",
    "load_prompts_jsonl",
    "load_sft_jsonl",
    "load_verifier_jsonl",
    "task_texts",
    "write_jsonl",
]
