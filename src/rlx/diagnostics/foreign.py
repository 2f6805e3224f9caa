"""Other libraries' logs as a :class:`~rlx.diagnostics.series.RunLog`, in rlx's metric names.

Three formats are read, so that ``rlx doctor`` diagnoses runs that rlx did not train:

- **Stable-Baselines3** ``progress.csv`` (its CSV logger): one row per ``logger.dump``, the
  step axis is ``time/total_timesteps`` (environment steps).
- **TRL** (any Hugging Face ``Trainer``) ``trainer_state.json``: ``log_history`` is a list of
  dicts, one per logging step, the step axis is ``step`` (optimizer steps).
- **TensorBoard** event files ``events.out.tfevents.*`` from any library. Tags that look like
  SB3's (its TensorBoard logger uses the CSV keys) map through the SB3 table, tags that look
  like a Hugging Face trainer's (``train/loss``, ``eval/loss``: the log-history keys with a
  ``train/`` or ``eval/`` prefix) through the TRL table, CleanRL's (``charts/episodic_return``,
  ``losses/approx_kl``: the tags its single-file PPO, DQN, SAC and TD3 write) through the
  CleanRL table, and rlx's own tags are rlx's names.

The name tables are data: ``library key -> rlx name``, or ``-> (rlx name, transform)`` where the
library logs a different quantity (SB3's ``entropy_loss`` is minus the entropy). A key that
has no rlx name is kept under its own name, so a report can still plot it. NaN and infinite
values are kept (the doctor has a rule for them); an empty CSV cell means "not logged then".
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from rlx import metrics as M
from rlx.diagnostics.series import RunLog, Series
from rlx.errors import RunError
from rlx.runs.files import bounded_lines, check_regular, load_json_file, open_text

Transform = Callable[[float], float]
Target = str | tuple[str, Transform]
"""An entry of a name table: the rlx name, or (rlx name, value transform)."""


def negate(value: float) -> float:
    """``-value``: for losses that are minus a quantity rlx logs directly."""
    return -value


TOKEN_ACCURACY = M.TOKEN_ACCURACY

# Stable-Baselines3 keys (``logger.record`` in ppo.py, a2c.py, dqn.py, sac.py, td3.py) -> rlx.
SB3_NAMES: dict[str, Target] = {
    "rollout/ep_rew_mean": M.EPISODE_RETURN,
    "rollout/ep_len_mean": M.EPISODE_LENGTH,
    "rollout/exploration_rate": M.EPSILON,
    "train/approx_kl": M.APPROX_KL,
    "train/clip_fraction": M.CLIP_FRACTION,
    # SB3 logs entropy_loss = -mean(entropy), the term it adds to the loss
    "train/entropy_loss": (M.ENTROPY, negate),
    "train/policy_gradient_loss": M.POLICY_LOSS,  # PPO
    "train/policy_loss": M.POLICY_LOSS,  # A2C
    "train/value_loss": M.VALUE_LOSS,
    "train/explained_variance": M.EXPLAINED_VARIANCE,
    "train/learning_rate": M.LR,
    "train/loss": M.LOSS,  # PPO: the total loss; DQN: the Huber TD loss
    "train/ent_coef": M.ALPHA,  # SAC's entropy temperature
    "train/actor_loss": M.ACTOR_LOSS,
    "train/critic_loss": M.CRITIC_LOSS,
}

SB3_STEP = "time/total_timesteps"
"""The step axis of ``progress.csv``: environment steps so far."""

# TRL 1.x log-history keys (SFT, DPO, reward, GRPO, RLOO and online trainers) -> rlx. Where two
# keys would give one rlx name, the first one in this table gets it and the other keeps its
# own name.
TRL_NAMES: dict[str, Target] = {
    "loss": M.LOSS,
    "grad_norm": M.GRAD_NORM,
    "learning_rate": M.LR,
    "mean_token_accuracy": TOKEN_ACCURACY,
    "entropy": M.ENTROPY,  # mean token entropy of the policy
    # DPO: implicit rewards beta * log(pi / pi_ref) of the chosen and rejected completions
    "rewards/chosen": M.CHOSEN_REWARD,
    "rewards/rejected": M.REJECTED_REWARD,
    "rewards/accuracies": M.PAIR_ACCURACY,
    "rewards/margins": M.REWARD_MARGIN,
    # RewardTrainer
    "accuracy": M.PAIR_ACCURACY,
    "margin": M.REWARD_MARGIN,
    "mean_reward": M.RM_SCORE,
    # GRPO and RLOO ("reward_std" is the std over the whole batch, not within groups: unmapped)
    "reward": M.REWARD,
    "kl": M.KL_REF,
    "frac_reward_zero_std": M.FRAC_ZERO_STD_GROUPS,
    "completions/mean_length": M.RESPONSE_LENGTH,
    "completions/clipped_ratio": M.TRUNCATED_FRACTION,
    "clip_ratio/region_mean": M.CLIP_FRACTION,
    # online trainers (OnlineDPO) and TRL's PPOTrainer before 1.0
    "objective/kl": M.KL_REF,
    "objective/scores": M.RM_SCORE,
    "objective/rlhf_reward": M.REWARD,
    "objective/entropy": M.ENTROPY,
    "policy/approxkl_avg": M.APPROX_KL,
    "policy/clipfrac_avg": M.CLIP_FRACTION,
    "policy/entropy_avg": M.ENTROPY,
    "loss/policy_avg": M.POLICY_LOSS,
    "loss/value_avg": M.VALUE_LOSS,
}

# CleanRL's TensorBoard tags (``writer.add_scalar`` in ppo.py, dqn.py, sac_continuous_action.py,
# td3_continuous_action.py) -> rlx. Its episodic return is one point per finished episode.
CLEANRL_NAMES: dict[str, Target] = {
    "charts/episodic_return": M.EPISODE_RETURN,
    "charts/episodic_length": M.EPISODE_LENGTH,
    "charts/learning_rate": M.LR,
    "charts/epsilon": M.EPSILON,
    "losses/approx_kl": M.APPROX_KL,
    "losses/clipfrac": M.CLIP_FRACTION,
    "losses/entropy": M.ENTROPY,
    "losses/policy_loss": M.POLICY_LOSS,
    "losses/value_loss": M.VALUE_LOSS,
    "losses/explained_variance": M.EXPLAINED_VARIANCE,
    "losses/q_values": M.Q_MEAN,  # DQN: Q of the actions in the replayed batch
    "losses/qf1_values": M.Q_MEAN,  # SAC, TD3: the first critic's Q of those actions
    "losses/qf_loss": M.CRITIC_LOSS,
    "losses/actor_loss": M.ACTOR_LOSS,
    "losses/alpha": M.ALPHA,
}
CLEANRL_PREFIXES = ("charts/", "losses/")
"""The prefixes of CleanRL's tags (its ``charts/SPS`` has no rlx name and keeps its own)."""

TRL_EVAL_PREFIX = "eval_"
"""Evaluation entries of the log history: ``eval_loss``, ``eval_rewards/chosen`` ... (mapped with
the prefix kept: ``eval_loss``, ``eval_chosen_reward``)."""

TRAINER_SUMMARY_KEYS = frozenset(
    {
        "train_loss",  # the mean loss over the whole run
        "train_runtime",
        "train_samples_per_second",
        "train_steps_per_second",
        "total_flos",
    }
)
"""Keys of the last log-history entry, which sums up training: kept in ``RunLog.summary``."""

# a Hugging Face trainer's TensorBoard tag prefix -> the log-history key prefix
HF_TAG_PREFIXES = {"train/": "", "eval/": "eval_", "test/": "test_"}

# Which algorithm logged these keys: the first rule whose keys all appear wins.
SB3_ALGOS: tuple[tuple[frozenset[str], str], ...] = (
    (frozenset({"train/clip_fraction"}), "ppo"),
    (frozenset({"train/approx_kl"}), "ppo"),
    (frozenset({"train/ent_coef"}), "sac"),
    (frozenset({"train/actor_loss", "train/critic_loss"}), "td3"),
    (frozenset({"rollout/exploration_rate"}), "dqn"),
    (frozenset({"train/policy_loss", "train/value_loss"}), "a2c"),
)
CLEANRL_ALGOS: tuple[tuple[frozenset[str], str], ...] = (
    (frozenset({"losses/clipfrac"}), "ppo"),
    (frozenset({"losses/alpha"}), "sac"),
    (frozenset({"losses/qf1_values", "losses/actor_loss"}), "td3"),
    (frozenset({"losses/q_values"}), "dqn"),
)
TRL_ALGOS: tuple[tuple[frozenset[str], str], ...] = (
    (frozenset({"rewards/chosen"}), "dpo"),
    (frozenset({"rewards/margins"}), "dpo"),
    (frozenset({"frac_reward_zero_std"}), "grpo"),
    (frozenset({"objective/kl"}), "rlhf-ppo"),
    (frozenset({"kl", "reward"}), "rlhf-ppo"),
    (frozenset({"accuracy", "margin", "mean_reward"}), "rm"),
    (frozenset({"mean_token_accuracy"}), "sft"),
)

TRAINER_STATE = "trainer_state.json"
PROGRESS_CSV = "progress.csv"
EVENTS_PREFIX = "events.out.tfevents."
LOOKED_FOR = f"{TRAINER_STATE}, {PROGRESS_CSV} or {EVENTS_PREFIX}* files"
MAX_DEPTH = 4  # folders below the one given that are searched
MAX_FOLDERS = 2000  # folders visited at most, so pointing at a home folder stays quick

Points = dict[str, dict[float, float]]
"""``key -> {step: value}``: a value logged again at the same step replaces the earlier one
(a resumed run, or ``epoch`` repeated in the eval entries of a log history)."""


# ---------------------------------------------------------------------------- entry point
def read_foreign(path: str | Path) -> RunLog:
    """The :class:`RunLog` of another library's logs at ``path``.

    ``path`` is a TRL ``trainer_state.json``, an SB3 ``progress.csv``, a TensorBoard event file,
    or a folder holding them (searched up to :data:`MAX_DEPTH` levels down). In a folder a
    ``trainer_state.json`` is preferred (the latest, when checkpoints hold several), then a
    ``progress.csv``, then the event files of one folder, merged. ``kind`` is ``"trl"``,
    ``"sb3"`` or ``"tensorboard"``; ``algo`` is guessed from the keys logged.
    """
    path = Path(path)
    if not path.exists():
        raise RunError(f"{path} does not exist; give a folder or a file with {LOOKED_FOR}.")
    return _read_folder(path) if path.is_dir() else _read_file(path)


def _read_file(file: Path) -> RunLog:
    """One log file, read by its name."""
    if file.name.startswith(EVENTS_PREFIX):
        return read_event_files([file])
    if file.suffix == ".json":
        return read_trainer_state(file)
    if file.suffix == ".csv":
        return read_progress_csv(file)
    raise RunError(f"{file} is not one of the logs rlx reads: {LOOKED_FOR}.")


def _read_folder(folder: Path) -> RunLog:
    """The preferred logs found under ``folder``, with ``folder`` as the run's source."""
    found = find_logs(folder)
    if found[TRAINER_STATE]:
        log = read_trainer_state(_latest_trainer_state(found[TRAINER_STATE]))
    elif found[PROGRESS_CSV]:
        log = read_progress_csv(_only_one(folder, found[PROGRESS_CSV], "SB3 runs"))
    elif found[EVENTS_PREFIX]:
        log = read_event_files(_one_event_folder(folder, found[EVENTS_PREFIX]))
    else:
        raise RunError(
            f"{folder} holds no rlx run (metrics.jsonl) and none of {LOOKED_FOR} "
            f"(searched {MAX_DEPTH} folders deep)."
        )
    log.source = folder
    return log


def find_logs(folder: Path) -> dict[str, list[Path]]:
    """The log files under ``folder`` by kind, shallowest first: at most :data:`MAX_DEPTH`
    levels down and :data:`MAX_FOLDERS` folders, skipping hidden ones (``.git``, ``.venv``)."""
    found: dict[str, list[Path]] = {TRAINER_STATE: [], PROGRESS_CSV: [], EVENTS_PREFIX: []}
    for visited, (root, dirs, files) in enumerate(os.walk(folder), 1):
        depth = len(Path(root).relative_to(folder).parts)
        # pruning `dirs` in place is how os.walk is told not to descend
        dirs[:] = [] if depth >= MAX_DEPTH else sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            kind = EVENTS_PREFIX if name.startswith(EVENTS_PREFIX) else name
            if kind in found:
                found[kind].append(Path(root) / name)
        if visited >= MAX_FOLDERS:
            break
    for paths in found.values():
        paths.sort(key=lambda p: (len(p.parts), str(p)))
    return found


def _latest_trainer_state(paths: list[Path]) -> Path:
    """Of several ``trainer_state.json`` (one per ``checkpoint-N``), the one furthest along:
    its log history contains the others'."""
    return max(paths, key=lambda p: (_json_object(p).get("global_step") or 0, -len(p.parts)))


def _only_one(folder: Path, paths: list[Path], what: str) -> Path:
    if len(paths) > 1:
        listed = ", ".join(str(p) for p in paths[:5])
        raise RunError(f"{folder} holds {len(paths)} {what} ({listed}); give one of them.")
    return paths[0]


def _one_event_folder(folder: Path, paths: list[Path]) -> list[Path]:
    """The event files of one run: TensorBoard takes a folder as a run, and several files in it
    as one run written in parts (a resumed run); files in different folders are different runs."""
    parents = sorted({p.parent for p in paths}, key=lambda p: (len(p.parts), str(p)))
    _only_one(folder, parents, "TensorBoard runs")
    return [p for p in paths if p.parent == parents[0]]


# ---------------------------------------------------------------------------- names
def rename(keys: Iterable[str], dialect: str) -> dict[str, Target]:
    """``key -> target`` for every key: its rlx name in ``dialect``'s table, else itself.

    Where two keys map to one rlx name the one earlier in the table gets it and the other
    keeps its own name; a key whose own name is taken is dropped (the same quantity logged
    twice, e.g. TRL's old ``lr`` beside ``learning_rate``).
    """
    lookup, table = DIALECTS[dialect]
    names: dict[str, Target] = {}
    taken: set[str] = set()
    mapped = {key: lookup(key) for key in sorted(keys, key=_table_order(table))}
    for key, target in mapped.items():
        if target is not None and _name(target) not in taken:
            names[key] = target
            taken.add(_name(target))
    for key in mapped:
        if key not in names and key not in taken:
            names[key] = key
            taken.add(key)
    return names


def _name(target: Target) -> str:
    return target if isinstance(target, str) else target[0]


def _apply(target: Target, value: float) -> float:
    return value if isinstance(target, str) else target[1](value)


def sb3_target(key: str) -> Target | None:
    """The rlx name of an SB3 key."""
    return SB3_NAMES.get(key)


def trl_target(key: str) -> Target | None:
    """The rlx name of a TRL log-history key; ``eval_`` keys keep their prefix."""
    if key.startswith(TRL_EVAL_PREFIX):
        target = TRL_NAMES.get(key.removeprefix(TRL_EVAL_PREFIX))
        if target is None:
            return None
        if isinstance(target, str):
            return TRL_EVAL_PREFIX + target
        return (TRL_EVAL_PREFIX + target[0], target[1])
    return TRL_NAMES.get(key)


def cleanrl_target(key: str) -> Target | None:
    """The rlx name of a CleanRL tag."""
    return CLEANRL_NAMES.get(key)


def rlx_target(key: str) -> Target | None:
    """rlx's own TensorBoard tags are rlx names already."""
    return None


# a TensorBoard dialect -> (its name lookup, its table, which decides the order of clashes)
DIALECTS: dict[str, tuple[Callable[[str], Target | None], Mapping[str, Target]]] = {
    "sb3": (sb3_target, SB3_NAMES),
    "trl": (trl_target, TRL_NAMES),
    "cleanrl": (cleanrl_target, CLEANRL_NAMES),
    "rlx": (rlx_target, {}),
}


def _table_order(table: Mapping[str, Target]) -> Callable[[str], tuple[int, str]]:
    """Sort key putting a table's keys first, in its order (which decides name clashes)."""
    order = {key: i for i, key in enumerate(table)}
    return lambda key: (order.get(key.removeprefix(TRL_EVAL_PREFIX), len(order)), key)


def guess_algo(keys: Iterable[str], rules: tuple[tuple[frozenset[str], str], ...]) -> str | None:
    """The algorithm of the first rule whose keys were all logged, else None."""
    keys = {k.removeprefix(TRL_EVAL_PREFIX) for k in keys}
    return next((algo for needed, algo in rules if needed <= keys), None)


def _series(points: Points, names: Mapping[str, Target]) -> dict[str, Series]:
    """Rename and transform the raw ``key -> (step, value)`` points into rlx series."""
    series = {}
    for key, target in names.items():
        pairs = [(step, _apply(target, value)) for step, value in points[key].items()]
        series[_name(target)] = Series.from_pairs(pairs)
    return series


def _number(value: Any) -> float | None:
    """``value`` as a float when it is a number (NaN and inf included), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


# ---------------------------------------------------------------------------- SB3 progress.csv
def read_progress_csv(path: Path) -> RunLog:
    """An SB3 ``progress.csv``: one column per key, one row per dump, steps from
    ``time/total_timesteps`` (the row number when that column is missing).

    An empty cell is a key not logged at that dump (DQN logs ``train/loss`` only once learning
    has started); ``nan`` and ``inf`` are kept as values.
    """
    points: Points = {}
    try:
        # a regular file of bounded size and lines: a pipe planted there is no hang
        with open_text(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(bounded_lines(f, path))
            if not reader.fieldnames:
                raise RunError(f"{path} is empty; expected an SB3 progress.csv with a header row.")
            for number, row in enumerate(reader):
                _add_csv_row(points, row, number)
    except (csv.Error, UnicodeDecodeError, ValueError) as exc:
        raise RunError(f"{path} is not a readable CSV file ({exc}).") from exc
    metrics = _series(points, rename(points, "sb3"))
    return RunLog(path, "sb3", metrics, algo=guess_algo(points, SB3_ALGOS))


def _add_csv_row(points: Points, row: Mapping[str | None, Any], number: int) -> None:
    step = _cell(row.get(SB3_STEP))
    step = float(number) if step is None else step
    for key, text in row.items():
        value = _cell(text)
        # key None holds the cells of a row longer than the header
        if key is None or key == SB3_STEP or value is None:
            continue
        points.setdefault(key, {})[step] = value


def _cell(text: Any) -> float | None:
    """A CSV cell as a float; None for an empty or non-numeric cell. ``float`` reads ``nan``
    and ``inf`` as themselves, which is what is wanted."""
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        return float(text)
    except ValueError:
        return None


# ---------------------------------------------------------------------------- TRL trainer state
def read_trainer_state(path: Path) -> RunLog:
    """A Hugging Face ``trainer_state.json`` (TRL's trainers): ``log_history`` entries, each a
    dict with the optimizer ``step`` and the values logged then.

    The last entry's totals (``train_runtime``, ``train_loss`` ...) go to ``summary``, with
    ``global_step``; ``eval_*`` entries become ``eval_`` series.
    """
    state = _json_object(path)
    history = state.get("log_history")
    if not isinstance(history, list):
        raise RunError(f"{path} has no 'log_history' list; expected a trainer_state.json.")
    points: Points = {}
    summary: dict[str, Any] = {}
    for number, entry in enumerate(history):
        step = _number(entry.get("step")) if isinstance(entry, dict) else None
        if step is None:
            raise RunError(f"{path}: log_history[{number}] has no numeric 'step'.")
        _add_history_entry(points, summary, entry, step)
    if isinstance(state.get("global_step"), int):
        summary["global_step"] = state["global_step"]
    metrics = _series(points, rename(points, "trl"))
    return RunLog(path, "trl", metrics, algo=guess_algo(points, TRL_ALGOS), summary=summary)


def _add_history_entry(
    points: Points, summary: dict[str, Any], entry: Mapping[str, Any], step: float
) -> None:
    for key, raw in entry.items():
        value = _number(raw)
        if key == "step" or value is None:
            continue
        if key in TRAINER_SUMMARY_KEYS:
            summary[key] = value
        else:
            points.setdefault(key, {})[step] = value


def _json_object(path: Path) -> dict[str, Any]:
    data = load_json_file(path)  # bounded: depth, size, an integer's digits
    if not isinstance(data, dict):
        raise RunError(f"{path} holds a JSON {type(data).__name__}; expected a trainer state.")
    return data


# ---------------------------------------------------------------------------- TensorBoard
def read_event_files(paths: list[Path]) -> RunLog:
    """The scalars of TensorBoard event files, merged as one run (a later file's value wins
    where two files logged a tag at the same step, as when a run resumes).

    Each file's tags are read in the dialect they look like: SB3, a Hugging Face trainer
    (TRL), or rlx (tags already rlx names); tags in no table keep their own name.
    """
    merged: Points = {}
    logged: dict[str, set[str]] = {dialect: set() for dialect in DIALECTS}
    summary: dict[str, Any] = {}
    for path in sorted(paths):
        tags = _event_scalars(path)
        dialect = tensorboard_dialect(tags)
        points = {(_hf_key(tag) if dialect == "trl" else tag): pairs for tag, pairs in tags.items()}
        if dialect == "trl":
            summary.update({k: _last(points.pop(k)) for k in TRAINER_SUMMARY_KEYS & set(points)})
        for key, target in rename(points, dialect).items():
            by_step = merged.setdefault(_name(target), {})
            by_step.update((step, _apply(target, value)) for step, value in points[key].items())
        logged[dialect].update(points)
    if not merged:
        listed = ", ".join(str(p) for p in paths[:3])
        raise RunError(f"{listed}: no scalar values read; expected TensorBoard event files.")
    metrics = {name: Series.from_pairs(by_step.items()) for name, by_step in merged.items()}
    algo = (guess_algo(logged["sb3"], SB3_ALGOS) or guess_algo(logged["trl"], TRL_ALGOS)
            or guess_algo(logged["cleanrl"], CLEANRL_ALGOS))  # fmt: skip
    return RunLog(paths[0], "tensorboard", metrics, algo=algo, summary=summary)


def tensorboard_dialect(tags: Iterable[str]) -> str:
    """``"sb3"``, ``"trl"``, ``"cleanrl"`` or ``"rlx"``: whose names most of ``tags`` are (SB3
    wins ties: its ``train/loss`` and ``train/learning_rate`` look like a trainer's too)."""
    tags = list(tags)
    votes = {
        "sb3": sum(t in SB3_NAMES or t.startswith(("rollout/", "time/")) for t in tags),
        "trl": sum(_looks_hf(t) for t in tags),
        "cleanrl": sum(t.startswith(CLEANRL_PREFIXES) for t in tags),
        "rlx": sum(t in M.ALL_METRICS or t == TOKEN_ACCURACY for t in tags),
    }
    return max(votes, key=lambda dialect: votes[dialect])  # max keeps the first of a tie


def _looks_hf(tag: str) -> bool:
    key = _hf_key(tag)
    if key == tag:
        return False
    base = key.removeprefix(TRL_EVAL_PREFIX)
    return base in TRL_NAMES or base in TRAINER_SUMMARY_KEYS or base == "epoch"


def _hf_key(tag: str) -> str:
    """A Hugging Face trainer's TensorBoard tag as its log-history key: ``train/loss`` ->
    ``loss``, ``eval/loss`` -> ``eval_loss`` (the inverse of transformers' ``rewrite_logs``)."""
    for prefix, key_prefix in HF_TAG_PREFIXES.items():
        if tag.startswith(prefix):
            return key_prefix + tag.removeprefix(prefix)
    return tag


def _mean_per_step(points: Iterable[tuple[float, float]]) -> dict[float, float]:
    """``{step: value}`` of one file's points of one tag, the mean where several share a step:
    CleanRL logs each finished episode at the global step, so episodes of several envs that
    end together share one (NaN stays NaN)."""
    sums: dict[float, list[float]] = {}
    for step, value in points:
        sums.setdefault(step, []).append(value)
    return {step: sum(values) / len(values) for step, values in sums.items()}


def _last(by_step: Mapping[float, float]) -> float:
    return by_step[max(by_step)]


def _event_scalars(path: Path) -> Points:
    """``tag -> {step: value}`` of one event file: classic scalar summaries (PyTorch's and
    tensorboardX's ``add_scalar``) and scalar tensors (TensorFlow 2's ``tf.summary.scalar``)."""
    try:
        from tensorboard.backend.event_processing import event_accumulator as ea
        from tensorboard.util import tensor_util
    except ImportError as exc:
        raise RunError(
            f"{path} is a TensorBoard event file; `pip install tensorboard` reads event files."
        ) from exc
    check_regular(path)  # the reader opens it by name: a regular file, no pipe to hang on
    # size 0 keeps every point instead of a reservoir sample
    accumulator = ea.EventAccumulator(str(path), size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
    try:
        accumulator.Reload()
    except Exception as exc:  # the reader raises its own error types on a corrupt record
        raise RunError(f"{path} is not a readable TensorBoard event file ({exc}).") from exc
    tags = accumulator.Tags()
    scalars = {
        tag: _mean_per_step((float(e.step), float(e.value)) for e in accumulator.Scalars(tag))
        for tag in tags.get(ea.SCALARS, [])
    }
    for tag in tags.get(ea.TENSORS, []):
        if accumulator.SummaryMetadata(tag).plugin_data.plugin_name != "scalars":
            continue  # text, histograms ...
        points = {}
        for e in accumulator.Tensors(tag):
            try:
                value = tensor_util.make_ndarray(e.tensor_proto)
            except Exception:  # a tensor its own library cannot read: no point
                continue
            if value.size == 1 and value.dtype.kind in "biuf":  # a scalar, as the plugin writes
                points[float(e.step)] = float(value.reshape(()))
        scalars[tag] = points
    return scalars


__all__ = [
    "CLEANRL_NAMES",
    "SB3_NAMES",
    "TRL_NAMES",
    "find_logs",
    "guess_algo",
    "read_event_files",
    "read_foreign",
    "read_progress_csv",
    "read_trainer_state",
    "tensorboard_dialect",
]
