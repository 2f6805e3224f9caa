"""The offline loop of the language-model stages, and the run plumbing every stage shares.

A stage trained on a fixed data set (SFT, reward model, DPO) is a :class:`Stage`: the
per-row weight its loss is normalised by (target tokens for SFT, 1 per pair otherwise), the
*summed* loss of some rows, an evaluation and a way to save its model. :func:`train_loop`
turns sums into the batch mean ``L = sum_rows loss_i / sum_rows w_i`` whatever the split into
micro-batches, so ``grad_accum`` changes memory, never the gradient.

The schedule is linear warm-up over ``warmup_ratio`` of the steps, then linear decay to 0
(what ``transformers``' Trainer and TRL do by default). The online stages (GRPO, RLHF-PPO)
sample between updates in :mod:`rlx.llm.online`'s loop, on the same config
(:mod:`rlx.llm.stage_config`), schedule, sampler, checkpoints and run plumbing (here), in the
same precision (:mod:`rlx.llm.precision`) and over the same processes
(:mod:`rlx.llm.parallel`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol

import numpy as np
import torch
from torch import Tensor

from rlx import metrics as M
from rlx.core.env_recipe import IN_PYTHON, Consent
from rlx.core.threads import set_torch_threads
from rlx.errors import ConfigError
from rlx.llm.parallel import DataParallel, sum_gradients
from rlx.llm.precision import attention_for, autocast, resolve_precision
from rlx.llm.stage_config import (
    Config,
    StageConfig,
    default_learning_rate,
    resolve_epochs,
    resolve_eval_every,
    resolve_steps,
)
from rlx.runs import MODEL_DIR
from rlx.runs.handle import RunHandle


# ============================================================================ data
def split_rows(rows: Sequence[Any], eval_fraction: float, seed: int) -> tuple[list, list]:
    """A seeded shuffle split into (train, held out); at most 500 rows are held out and at
    least one stays for training."""
    order = np.random.default_rng(seed).permutation(len(rows))
    held = min(round(eval_fraction * len(rows)), 500, len(rows) - 1)
    held_out = [rows[i] for i in order[:held]]
    train = [rows[i] for i in order[held:]]
    return train, held_out


class EpochSampler:
    """Row indices for each step: a fresh seeded permutation per epoch, taken in order.

    Its whole state is ``(epoch, position)`` plus the seed, so a resumed run draws exactly
    the batches an uninterrupted one would.
    """

    def __init__(self, num_rows: int, batch_size: int, seed: int) -> None:
        self.num_rows, self.batch_size, self.seed = num_rows, batch_size, seed
        self.epoch, self.position = 0, 0
        self._order = self._permutation(0)

    def _permutation(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(self.num_rows)

    def next(self) -> np.ndarray:
        """The next ``batch_size`` indices, crossing into the next epoch when needed."""
        out: list[np.ndarray] = []
        need = self.batch_size
        while need:
            if self.position == self.num_rows:
                self.epoch, self.position = self.epoch + 1, 0
                self._order = self._permutation(self.epoch)
            take = min(need, self.num_rows - self.position)
            out.append(self._order[self.position : self.position + take])
            self.position += take
            need -= take
        return np.concatenate(out)

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
        self._order = self._permutation(self.epoch)


# ============================================================================ schedule
def warmup_linear(step: int, total: int, warmup_ratio: float) -> float:
    """The learning-rate factor at ``step`` (0-based): ``(step + 1) / W`` during the ``W``
    warm-up steps, then ``(total - step) / (total - W)`` down to ``1 / (total - W)``."""
    warmup = int(warmup_ratio * total)
    if step < warmup:
        return (step + 1) / warmup
    return max(0.0, (total - step) / max(1, total - warmup))


def set_learning_rate(
    optimizer: torch.optim.Optimizer, peak: float, step: int, steps: int, warmup_ratio: float
) -> float:
    """Set every parameter group's step size for ``step`` (0-based) of ``steps``: ``peak``
    times :func:`warmup_linear`. Returns it."""
    lr = peak * warmup_linear(step, steps, warmup_ratio)
    for group in optimizer.param_groups:
        group["lr"] = lr
    return lr


# ============================================================================ the loop
class Stage(Protocol):
    """One offline stage's training problem, as :func:`train_loop` needs it (SFT, the reward
    model and DPO each implement it as a class: ``SFTStage``, ``RewardModelStage``,
    ``DPOStage``).

    Attributes:
        model: the module trained (its parameters with ``requires_grad``).
        units: per training row, what its loss is normalised by (tokens, or 1 per pair).
    """

    model: torch.nn.Module
    units: np.ndarray

    def loss(self, rows: np.ndarray) -> tuple[Tensor, dict[str, Tensor]]:
        """Row indices -> (loss summed over the rows' units, metrics as 0-d tensors)."""
        ...

    def evaluate(self) -> dict[str, float]:
        """Held-out metrics, called every ``eval_every`` steps and at the last."""
        ...

    def save_model(self, out: Path) -> None:
        """Write the trained model into the folder ``out``."""
        ...


@dataclass(frozen=True)
class Loaded:
    """What an offline stage loads before its config is complete (the data's size and the
    model's decide ``steps`` and ``learning_rate``): the model, its tokenizer and the rows."""

    model: Any
    tokenizer: Any
    train_rows: list[Any]
    held_out: list[Any]


def save_stage_model(model: Any, tokenizer: Any, out: Path, fsdp: bool = False) -> None:
    """The trained policy into the folder ``out`` (:func:`rlx.llm.lora.save_trained`: merged,
    with the adapter beside it); a sharded model is gathered by every process and written by
    rank 0."""
    if fsdp:
        from rlx.llm.sharding import save_full_model

        save_full_model(model, tokenizer, out)
    else:
        from rlx.llm.lora import save_trained

        save_trained(model, tokenizer, out.parent, out.name)


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW over the trainable parameters (foreach kernels: few calls per step on CPU)."""
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, foreach=True)


def train_loop(
    stage: Stage,
    config: StageConfig,
    run: RunHandle,
    *,
    steps: int,
    lr: float,
    parallel: DataParallel | None = None,
) -> dict[str, float]:
    """``steps`` optimizer steps of ``stage`` inside an open run; returns the last evaluation.

    Each step draws ``batch_size`` rows, splits them into ``grad_accum`` micro-batches and
    accumulates ``d/dtheta [sum_micro loss_micro / sum_batch units]``: the gradient of the
    batch's mean loss. Metrics are logged per step, the held-out evaluation every
    ``eval_every`` steps; a checkpoint (trainable weights, optimizer, sampler, RNG) at the
    config's cadence (``checkpoint_every_s``, ``checkpoint_every_steps``), on Ctrl-C, and at
    the end, where the model is also saved to ``RUN_DIR/model``. With
    ``parallel`` each process computes its shard of every micro-batch and the gradients are
    summed over the processes before the step (only the writing process saves files).
    """
    model = stage.model
    optimizer = make_optimizer(model, lr, config.weight_decay)
    sampler = EpochSampler(len(stage.units), config.batch_size, config.seed)
    step = 0
    if run.resumed_state is not None:
        restore_state(run.resumed_state, model, optimizer, sampler)
        step = int(run.resumed_step or 0)
    model.train()
    with attention_for(model, config.precision):
        step, last_eval = _steps(stage, config, run, optimizer, sampler, step, steps, lr, parallel)
    if run.stop_requested and step < steps:
        run.save_checkpoint(step, stage_state(model, optimizer, sampler))
        return last_eval
    run.save_checkpoint(step, stage_state(model, optimizer, sampler))
    if not last_eval:  # resumed at the end: evaluate what was trained
        last_eval = _evaluate(stage)
    if run.writer or _sharded(model):  # a sharded model: gathered by all, written by rank 0
        stage.save_model(run.dir / MODEL_DIR)
    return last_eval


def _steps(
    stage: Stage,
    config: StageConfig,
    run: RunHandle,
    optimizer: torch.optim.Optimizer,
    sampler: EpochSampler,
    step: int,
    steps: int,
    lr: float,
    parallel: DataParallel | None = None,
) -> tuple[int, dict[str, float]]:
    """The optimizer steps from ``step`` to ``steps`` (or a stop request): the step reached
    and the last evaluation."""
    model = stage.model
    eval_every = resolve_eval_every(config, steps)
    params = [p for p in model.parameters() if p.requires_grad]
    last_eval: dict[str, float] = {}
    while step < steps and not run.stop_requested:
        step_lr = set_learning_rate(optimizer, lr, step, steps, config.warmup_ratio)
        with_precision = autocast(config.precision, config.device)
        metrics = accumulate_gradients(
            stage, sampler.next(), config.grad_accum, with_precision, parallel
        )
        if config.max_grad_norm is not None:
            norm = torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm, foreach=True)
            if hasattr(norm, "full_tensor"):  # FSDP: a DTensor
                norm = norm.full_tensor()
            metrics[M.GRAD_NORM] = norm
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        metrics[M.LR] = step_lr
        metrics[M.EPOCH] = sampler.epoch + sampler.position / len(stage.units)
        if step % eval_every == 0 or step == steps:
            last_eval = _evaluate(stage)
            metrics.update(last_eval)
        run.log(step, metrics)
        due = step < steps and run.checkpoint_due()  # the last step's is written after the loop
        if _sharded(model):  # gathering a sharded checkpoint is a collective: all or none
            from rlx.llm.sharding import agree

            due = agree(due)
        if due:
            run.save_checkpoint(step, stage_state(model, optimizer, sampler))
    return step, last_eval


def accumulate_gradients(
    stage: Stage,
    rows: np.ndarray,
    grad_accum: int,
    precision: Any = None,
    parallel: DataParallel | None = None,
) -> dict[str, Tensor | float]:
    """Backward of the batch's mean loss in ``grad_accum`` parts; returns the batch's
    metrics, each micro-batch's weighted by its share of the units. ``precision``: the
    context the forward passes run in (:func:`autocast`; backward runs outside it).

    With ``parallel`` this process takes its shard of each micro-batch; the loss is still
    divided by the whole batch's units, so the gradients and the share-weighted metrics
    summed over the processes are those of one process running the whole batch."""
    total_units = float(stage.units[rows].sum())
    metrics: dict[str, Tensor | float] = {}
    for part in np.array_split(rows, grad_accum):
        mine = part if parallel is None else parallel.shard(part)
        if len(mine) == 0:
            continue
        with precision or nullcontext():
            loss_sum, part_metrics = stage.loss(mine)
        (loss_sum / total_units).backward()
        share = float(stage.units[mine].sum()) / total_units
        for key, value in part_metrics.items():
            metrics[key] = metrics.get(key, 0.0) + share * value.detach()
    if parallel is not None:
        params = [p for p in stage.model.parameters() if p.requires_grad]
        if not _sharded(stage.model):  # FSDP has reduce-scattered (summed) them already
            sum_gradients(params, parallel)
        keys = sorted(metrics)
        values = torch.stack([torch.as_tensor(metrics[k], dtype=torch.float64) for k in keys])
        parallel.sum_([values])
        metrics = dict(zip(keys, values, strict=True))
    return metrics


def _evaluate(stage: Stage) -> dict[str, float]:
    stage.model.eval()
    try:
        with torch.no_grad():
            return {k: float(v) for k, v in stage.evaluate().items()}
    finally:
        stage.model.train()


def stage_state(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, sampler: EpochSampler
) -> dict[str, Any]:
    """What a checkpoint holds: the weights that train (:func:`model_state`), the optimizer's
    state (it only ever holds the trainable parameters), the sampler and the RNG. A sharded
    model (``fsdp=True``) is gathered whole on rank 0, the writer: every process calls this."""
    if _sharded(model):
        from rlx.llm.sharding import full_model_state, full_optimizer_state

        weights, optimizer_state = full_model_state(model), full_optimizer_state(model, optimizer)
    else:
        weights, optimizer_state = model_state(model), optimizer.state_dict()
    return {
        "model": weights,
        "optimizer": optimizer_state,
        "sampler": sampler.state_dict(),
        "torch_rng": torch.get_rng_state(),
    }


def _sharded(model: Any) -> bool:
    """Whether ``model`` is sharded over the processes (``fsdp=True``)."""
    if not torch.distributed.is_available() or not torch.distributed.is_initialized():
        return False
    from rlx.llm.sharding import is_sharded

    return is_sharded(model)


def model_state(model: torch.nn.Module) -> dict[str, Tensor]:
    """The model's part of a checkpoint: its whole state dict when every weight trains; with
    frozen weights (a LoRA adapter on a frozen base) the trainable ones alone, since the
    frozen base is rebuilt from the model folder the run's config names on resume and on
    ``rlx.load``: a checkpoint the size of the adapter, not of the model."""
    state = model.state_dict()
    named = list(model.named_parameters(remove_duplicate=False))
    if all(p.requires_grad for _, p in named):
        return {k: v.detach().cpu() for k, v in state.items()}
    trainable = {name for name, p in named if p.requires_grad}
    return {k: v.detach().cpu() for k, v in state.items() if k in trainable}


def load_model_state(model: torch.nn.Module, weights: Mapping[str, Tensor]) -> None:
    """Load a checkpoint's :func:`model_state` into a model built from the run's config: every
    weight, or the trainable ones with the frozen ones as built. CheckpointError when the
    checkpoint lacks a trainable weight, holds one the model has not, or holds one of another
    shape (a checkpoint of another model or LoRA setting)."""
    from rlx.errors import CheckpointError

    advice = ("it was written for another model or LoRA setting than the run's config builds; "
              "load it with the run's own model, lora and lora_* fields")  # fmt: skip
    try:
        missing, unexpected = model.load_state_dict(dict(weights), strict=False)
    except RuntimeError as exc:  # a weight of another shape (another size, another rank)
        first = str(exc).strip().splitlines()[-1].strip().rstrip(".")
        raise CheckpointError(
            f"the checkpoint does not fit the model ({first}): {advice}."
        ) from exc
    trainable = {n for n, p in model.named_parameters(remove_duplicate=False) if p.requires_grad}
    lacking = sorted(set(missing) & trainable)
    if lacking:
        raise CheckpointError(
            f"the checkpoint lacks {len(lacking)} trainable weights of the model "
            f"({', '.join(lacking[:3])}, ...): {advice}."
        )
    if unexpected:
        raise CheckpointError(
            f"the checkpoint holds {len(unexpected)} weights the model has not "
            f"({', '.join(sorted(unexpected)[:3])}, ...): {advice}."
        )


def restore_state(
    state: Mapping[str, Any],
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    sampler: EpochSampler,
) -> None:
    """Put a :func:`stage_state` back into a model built from the run's config (its
    frozen base, if any, from the model folder), its optimizer and its sampler; a sharded
    model keeps its shards of the whole weights."""
    if _sharded(model):
        from rlx.llm.sharding import load_full_state

        load_full_state(model, optimizer, state["model"], state["optimizer"])
    else:
        load_model_state(model, state["model"])
        optimizer.load_state_dict(state["optimizer"])
    sampler.load_state_dict(state["sampler"])
    torch.set_rng_state(state["torch_rng"])


# ============================================================================ run plumbing
@dataclass
class StageResult:
    """What a stage returns: where its run and its trained model are, and its last held-out
    metrics (``rlx.train`` sets ``run_dir`` on every result it returns)."""

    run_dir: Path
    model_dir: Path
    metrics: dict[str, float]
    wall_s: float
    status: str


@dataclass
class Prepared(Generic[Config]):
    """A stage's problem before the config is complete: its training rows and model size
    decide ``steps`` and ``learning_rate``; ``build`` makes the :class:`Stage` once they are."""

    train_rows: int
    num_params: int
    build: Callable[[Config], Stage]


def complete_config(
    config: StageConfig,
    run: RunHandle,
    train_rows: int,
    num_params: int,
    lr_scale: float,
    target_rows: int,
    opened: StageConfig | None = None,
) -> Any:
    """Fill ``epochs``, ``steps`` and ``learning_rate`` left at None (from the data size and
    the model size, and whether an adapter trains: :func:`trains_adapter`), and record the
    completed config in the run's ``config.json`` when it differs from ``opened``, the config
    the run was opened with (None: record it).

    ``config.json`` is written once, as the run opens, unless a field is decided here, inside
    the run: ``epochs`` and ``steps`` need the number of training rows and ``learning_rate``
    the model's parameter count, known only once the stage has read its data and loaded its
    model; ``device`` and ``precision`` left at ``"auto"`` are decided on the machine that
    trains (:func:`resolved`). The second write then records what the run trains with, so a
    resumed run and ``rlx doctor`` read the values it used. A run that sets them all
    (``steps``, ``learning_rate``, ``device``, ``precision``) keeps its first write."""
    if config.steps is None:
        config = dataclasses.replace(config, epochs=resolve_epochs(config, train_rows, target_rows))
    lr = config.learning_rate or default_learning_rate(num_params, lr_scale, trains_adapter(config))
    config = dataclasses.replace(config, steps=resolve_steps(config, train_rows), learning_rate=lr)
    if config != opened:
        run.record_config(config, total=config.steps)
    return config


def trains_adapter(config: StageConfig) -> bool:
    """Whether a stage trains a LoRA adapter on a frozen base: ``lora=True``, or ``model`` an
    adapter folder (whose adapter keeps training, :func:`rlx.llm.lora.load_for_training`)."""
    from rlx.llm.lora import is_adapter_folder

    return bool(config.lora) or bool(config.model and is_adapter_folder(config.model))


@dataclass(frozen=True)
class StageData:
    """A run's data when it is more than a file name: in-memory data (a ``datasets.Dataset``,
    a list of dicts), or data with what GRPO's ``train`` must know of its rewards that
    ``config.json`` cannot hold.

    ``llm.sft(model, data)`` and its siblings (and ``rlx align grpo``) hand this to
    ``rlx.train`` as the run's "env", so the objects reach that run's ``train`` and no other.
    ``name`` describes the data (:func:`rlx.llm.data.describe`): it is the run's env id, which
    ``config.json`` and ``summary.json`` record; the rows themselves cannot be recorded, so a
    run on in-memory data resumes with the data given again.

    The reward fields (:func:`rlx.llm.stages.grpo.run_rewards`): ``rewards`` are the functions
    given with this call, in the order of ``config.reward`` (a Python function that cannot be
    imported reaches the run only this way); ``trust_code`` is the user's consent to import
    the ``package.module:function`` references ``config.reward`` names (a resumed run folder's
    are data until then), and ``consent`` words a refusal for where the user is."""

    name: str
    source: Any = None
    """the rows, or a file or saved data set; None: ``config.data``"""
    rewards: tuple[Callable[..., Any], ...] = ()
    trust_code: bool = False
    consent: Consent = IN_PYTHON


def stage_rows(config: StageConfig, data: Any) -> list[dict[str, Any]]:
    """The run's rows as dicts, read from its data: the env its ``train`` received (a file or
    a saved data set, or a :class:`StageData`), else, for a stage called without one,
    ``config.data``."""
    from rlx.llm.data import read_rows

    source = data.source if isinstance(data, StageData) else data
    if source is None or (isinstance(source, (str, Path)) and not str(source)):
        source = config.data
    if isinstance(source, Path):
        source = str(source)
    if not isinstance(source, str):
        return read_rows(source, config.split)
    if not source:
        raise ConfigError("no data: give data= (a file, a datasets.Dataset or a list of dicts).")
    if source.startswith("<"):  # the description of in-memory data, as its run records it
        raise ConfigError(
            f"this run trained on in-memory data {source}: pass the data again to resume."
        )
    return read_rows(source, config.split)


def data_name(config: StageConfig, data: Any) -> str:
    """The name of the run's data for messages: the :class:`StageData`'s, the file's, or
    ``config.data``."""
    if isinstance(data, StageData):
        return data.name
    if isinstance(data, (str, Path)) and str(data):
        return str(data)
    return config.data


def trainable_share(model: torch.nn.Module) -> dict[str, float]:
    """``trainable_parameters``, ``total_parameters`` and their ratio ``trainable_share``
    (below 1 with LoRA), as the run's summary records them."""
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {
        "trainable_parameters": trainable,
        "total_parameters": total,
        "trainable_share": trainable / max(total, 1),
    }


def resolved(config: Any) -> Any:
    """``config`` with ``device="auto"`` and ``precision="auto"`` decided for this machine."""
    from rlx.core.devices import resolve_device

    device = str(resolve_device("auto")) if config.device == "auto" else config.device
    return dataclasses.replace(
        config, device=device, precision=resolve_precision(config.precision, device)
    )


def run_stage(
    config: Config,
    run: RunHandle,
    prepare: Callable[[Config, Any], Prepared[Config]],
    *,
    lr_scale: float,
    target_rows: int,
    data: Any = None,
    parallel: DataParallel | None = None,
) -> StageResult:
    """The registered ``train(config, data, run)`` of every stage: load and split the data
    (``data``, the run's env: :func:`stage_rows`), load the model, complete the config
    (:func:`complete_config`), train, save.

    ``lr_scale`` scales :func:`default_learning_rate`; ``target_rows`` sizes the default
    number of passes (:func:`resolve_epochs`)."""
    set_torch_threads(config.num_threads)
    # dropout (LoRA's lora_dropout, a model's own) draws from torch's stream: seeded, a run
    # is reproducible, and a resumed one, which restores the stream, continues it exactly
    torch.manual_seed(config.seed + (parallel.rank if parallel is not None else 0))
    opened = config
    config = resolved(config)
    prepared = prepare(config, data)
    config = complete_config(
        config, run, prepared.train_rows, prepared.num_params, lr_scale, target_rows, opened
    )
    stage = prepared.build(config)
    run.add_to_summary(**trainable_share(stage.model))
    steps, lr = config.steps, config.learning_rate
    assert steps is not None and lr is not None  # complete_config filled both
    metrics = train_loop(stage, config, run, steps=steps, lr=lr, parallel=parallel)
    summary = run.finish(run.last_step, metrics)
    return StageResult(
        run.dir, run.dir / MODEL_DIR, metrics, float(summary["wall_s"]), summary["status"]
    )
