"""Data in the ecosystem's shapes: where the rows come from, and what shape each row has.

**Sources** (:func:`read_rows`): a file (JSONL, JSON, Parquet, CSV), a folder written by
``datasets``' ``save_to_disk``, a ``datasets.Dataset`` or ``DatasetDict`` (its ``train`` split,
or ``split=``), or a list of dicts.

**Shapes**, with TRL's column names; every text may also be a conversation, a list of
``{"role", "content"}`` messages, rendered with the tokenizer's chat template:

- SFT (:func:`sft_examples`): ``text`` (the loss covers every token), ``prompt`` +
  ``completion`` (the loss covers the completion; a text completion of a conversational
  prompt is the assistant's reply), or ``messages`` (the loss covers the assistant's turns);
- preferences (:func:`preference_pairs`): ``prompt`` + ``chosen`` + ``rejected``, or the
  implicit-prompt form, whole conversations in ``chosen`` and ``rejected`` whose shared
  opening turns are the prompt;
- prompts (:func:`prompt_rows`): ``prompt`` plus any other columns, which reach the reward
  functions under their own names (``answer``, ``tests``, ``solution``, ...).

A row that fits no shape is a :class:`~rlx.errors.ConfigError` of one sentence naming the
row, the columns it has and the shapes accepted.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlx.errors import ConfigError
from rlx.llm.chat import Message, Prompt, is_conversation
from rlx.llm.tasks import PreferencePair, SFTExample

FILE_KINDS = (".jsonl", ".json", ".parquet", ".csv")
"""Data files :func:`read_rows` reads, by suffix."""

SFT_SHAPES = "{'text'}, {'prompt', 'completion'} or {'messages'}"
PREFERENCE_SHAPES = (
    "{'prompt', 'chosen', 'rejected'}, or {'chosen', 'rejected'} holding whole conversations"
)
PROMPT_SHAPES = "{'prompt', ...any other columns}"


class Rows(list):
    """Rows (dicts) that know where each came from: ``where(i)`` is ``"FILE, line N"`` for a
    JSONL file's row, else ``"data row i"``; the shape errors name rows with it."""

    locations: list[str] | None = None

    def where(self, index: int) -> str:
        if self.locations is not None and index < len(self.locations):
            return self.locations[index]
        return f"data row {index}"


@dataclass(frozen=True)
class ChatExample:
    """A whole conversation to learn from: the loss covers the assistant's turns."""

    messages: list[Message]


@dataclass(frozen=True)
class PromptRow:
    """A prompt and every other column of its row, by name (what the reward functions get)."""

    prompt: Prompt
    columns: Mapping[str, Any] = field(default_factory=dict)

    @property
    def answer(self) -> Any:
        """The ``answer`` column, when the row has one (exact match, the gold reward)."""
        return self.columns.get("answer")


# --- sources ------------------------------------------------------------------------------------


def read_rows(source: Any, split: str | None = None) -> Rows:
    """The rows of ``source`` as dicts: a data file, a ``save_to_disk`` folder, a
    ``datasets.Dataset`` / ``DatasetDict`` (``split``, default ``train``), or a list of dicts."""
    if isinstance(source, (str, Path)):
        rows = _read_path(Path(source).expanduser(), split)
    elif _is_dataset_dict(source):
        rows = _pick_split(source, split, repr(type(source).__name__)).to_list()
    elif hasattr(source, "to_list") and hasattr(source, "column_names"):
        rows = source.to_list()
    elif isinstance(source, Sequence) and not isinstance(source, (str, bytes)):
        rows = [_as_row(row, i) for i, row in enumerate(source)]
    else:
        raise ConfigError(
            f"data={type(source).__name__} is not data rlx reads: give a file "
            f"({', '.join(FILE_KINDS)}), a folder saved by datasets, a datasets.Dataset or "
            "DatasetDict, or a list of dicts."
        )
    if not rows:
        raise ConfigError(f"the data {describe(source)} is empty: it holds no rows.")
    return rows if isinstance(rows, Rows) else Rows(rows)


def describe(source: Any) -> str:
    """A short name of a data source, for config.json and messages (a path as given)."""
    if isinstance(source, (str, Path)):
        return str(source)
    rows = getattr(source, "num_rows", None)
    if isinstance(rows, Mapping):  # a DatasetDict: rows per split
        rows = "+".join(str(n) for n in rows.values())
    if rows is None and isinstance(source, Sequence):
        rows = len(source)
    return f"<{type(source).__name__} of {rows} rows>"


def _read_path(path: Path, split: str | None) -> list[dict[str, Any]]:
    if path.is_dir():
        return _read_saved_dataset(path, split)
    if not path.is_file():
        raise ConfigError(f"data file {str(path)!r} does not exist.")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _read_jsonl(path)
    if suffix == ".json":
        return _read_json(path)
    if suffix == ".csv":
        with path.open(encoding="utf-8", newline="") as handle:
            return [dict(row) for row in csv.DictReader(handle)]
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    raise ConfigError(
        f"data file {str(path)!r}: rlx reads {', '.join(FILE_KINDS)} files or a folder saved by "
        "datasets (save_to_disk)."
    )


def _read_jsonl(path: Path) -> Rows:
    rows, locations = Rows(), []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}, line {number}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ConfigError(f"{where}: not valid JSON ({err.msg}).") from err
            rows.append(_as_row(row, number, where))
            locations.append(where)
    rows.locations = locations
    return rows


def _read_json(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}: not valid JSON ({err.msg}).") from err
    if isinstance(data, Mapping) and all(isinstance(v, list) for v in data.values()) and data:
        # column-oriented: {"prompt": [...], "answer": [...]}
        names, columns = list(data), zip(*data.values(), strict=True)
        return [dict(zip(names, values, strict=True)) for values in columns]
    if not isinstance(data, list):
        raise ConfigError(f"{path}: expected a JSON list of rows, got {type(data).__name__}.")
    return [_as_row(row, i, f"{path}, row {i}") for i, row in enumerate(data)]


def _read_saved_dataset(path: Path, split: str | None) -> list[dict[str, Any]]:
    import datasets

    if not any((path / name).is_file() for name in ("dataset_dict.json", "state.json")):
        raise ConfigError(
            f"data folder {str(path)!r} is not a data set saved by datasets (save_to_disk); "
            "give a data file or that folder."
        )
    saved = datasets.load_from_disk(str(path))
    if _is_dataset_dict(saved):
        saved = _pick_split(saved, split, str(path))
    return saved.to_list()


def _is_dataset_dict(source: Any) -> bool:
    return type(source).__name__ in ("DatasetDict", "IterableDatasetDict")


def _pick_split(splits: Any, split: str | None, where: str) -> Any:
    name = split or "train"
    if name not in splits:
        raise ConfigError(
            f"{where} has no split {name!r}; its splits are {', '.join(splits)} (pass split=)."
        )
    return splits[name]


def _as_row(row: Any, index: int, where: str | None = None) -> dict[str, Any]:
    if isinstance(row, Mapping):
        return dict(row)
    if hasattr(row, "__dataclass_fields__"):  # rlx's own row types
        return {name: getattr(row, name) for name in row.__dataclass_fields__}
    raise ConfigError(
        f"{where or f'data row {index}'}: expected a JSON object (a dict of columns), got "
        f"{type(row).__name__}."
    )


# --- shapes -------------------------------------------------------------------------------------


def sft_examples(rows: Sequence[Mapping[str, Any]]) -> list[SFTExample | ChatExample]:
    """Each row as a demonstration: ``text`` -> ``SFTExample("", text)``, ``prompt`` +
    ``completion`` -> ``SFTExample``, ``messages`` -> :class:`ChatExample`."""
    out: list[SFTExample | ChatExample] = []
    for i, row in enumerate(rows):
        if "messages" in row and _check_conversation(row["messages"], i, "messages", row):
            out.append(ChatExample(list(row["messages"])))
        elif "prompt" in row and "completion" in row:
            prompt = _text_or_chat(row, i, "prompt")
            completion = _text_or_chat(row, i, "completion")
            if isinstance(prompt, str) and not isinstance(completion, str):
                raise _mixed(i, row, "prompt", "completion")
            out.append(SFTExample(prompt, completion))
        elif "text" in row:
            out.append(SFTExample("", _text(row, i, "text")))
        else:
            raise _no_shape(_where(rows, i), row, "SFT", SFT_SHAPES, ("prompt", "completion"))
    return out


def preference_pairs(rows: Sequence[Mapping[str, Any]]) -> list[PreferencePair]:
    """Each row as a preference pair; an implicit prompt (conversations in ``chosen`` and
    ``rejected`` only) is their shared opening turns."""
    out = []
    for i, row in enumerate(rows):
        if "chosen" not in row or "rejected" not in row:
            raise _no_shape(_where(rows, i), row, "preference", PREFERENCE_SHAPES,
                            ("prompt", "chosen", "rejected"))  # fmt: skip
        chosen, rejected = _text_or_chat(row, i, "chosen"), _text_or_chat(row, i, "rejected")
        if "prompt" in row:
            prompt = _text_or_chat(row, i, "prompt")
        elif is_conversation(chosen) and is_conversation(rejected):
            prompt, chosen, rejected = _split_shared_turns(chosen, rejected, i)
        else:
            raise _no_shape(_where(rows, i), row, "preference", PREFERENCE_SHAPES, ("prompt",))
        if isinstance(prompt, str) and not (isinstance(chosen, str) and isinstance(rejected, str)):
            raise _mixed(i, row, "prompt", "chosen", "rejected")
        out.append(PreferencePair(prompt, chosen, rejected))
    return out


def prompt_rows(rows: Sequence[Mapping[str, Any]]) -> list[PromptRow]:
    """Each row as a prompt with its other columns (GRPO and RLHF-PPO)."""
    out = []
    for i, row in enumerate(rows):
        if "prompt" not in row:
            raise _no_shape(_where(rows, i), row, "prompt", PROMPT_SHAPES, ("prompt",))
        prompt = _text_or_chat(row, i, "prompt")
        out.append(PromptRow(prompt, {k: v for k, v in row.items() if k != "prompt"}))
    return out


def _split_shared_turns(
    chosen: list[Message], rejected: list[Message], index: int
) -> tuple[list[Message], list[Message], list[Message]]:
    shared = 0
    while shared < min(len(chosen), len(rejected)) and chosen[shared] == rejected[shared]:
        shared += 1
    if shared == 0 or shared == len(chosen) or shared == len(rejected):
        raise ConfigError(
            f"data row {index}: chosen and rejected conversations must share their opening "
            f"turns (the prompt) and then differ; they share {shared} of "
            f"{len(chosen)} and {len(rejected)} turns."
        )
    return chosen[:shared], chosen[shared:], rejected[shared:]


def _text_or_chat(row: Mapping[str, Any], index: int, column: str) -> Prompt:
    value = row[column]
    if isinstance(value, str):
        return value
    _check_conversation(value, index, column, row)
    return list(value)


def _text(row: Mapping[str, Any], index: int, column: str) -> str:
    value = row[column]
    if not isinstance(value, str):
        raise ConfigError(
            f"data row {index}: column {column!r} must be a string, got "
            f"{type(value).__name__} {_short(value)}."
        )
    return value


def _check_conversation(value: Any, index: int, column: str, row: Mapping[str, Any]) -> bool:
    if is_conversation(value) and all(isinstance(m.get("content"), str) for m in value):
        return True
    raise ConfigError(
        f"data row {index}: column {column!r} must be a string or a list of messages "
        f"{{'role', 'content'}}, got {_short(value)}."
    )


def _where(rows: Sequence[Any], index: int) -> str:
    return rows.where(index) if isinstance(rows, Rows) else f"data row {index}"


def _no_shape(
    where: str, row: Mapping[str, Any], kind: str, shapes: str, nearest: Sequence[str]
) -> ConfigError:
    """The row's one-sentence error: the field of the nearest shape it lacks, the columns it
    has, and the shapes accepted."""
    missing = next((name for name in nearest if name not in row), None)
    lacks = f"missing field {missing!r}: " if missing else ""
    return ConfigError(
        f"{where}: {lacks}the columns {sorted(row)} fit no {kind} shape; accepted: {shapes} "
        "(TRL's column names)."
    )


def _mixed(index: int, row: Mapping[str, Any], *columns: str) -> ConfigError:
    kinds = ", ".join(
        f"{c}: {'text' if isinstance(row.get(c), str) else 'messages'}" for c in columns if c in row
    )
    return ConfigError(
        f"data row {index} has a text prompt but a conversational answer ({kinds}); give a "
        "conversational prompt (a list of messages), or the answers as strings."
    )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


__all__ = [
    "FILE_KINDS",
    "ChatExample",
    "PromptRow",
    "Rows",
    "describe",
    "preference_pairs",
    "prompt_rows",
    "read_rows",
    "sft_examples",
]
