"""Fully sharded data parallel (``fsdp=True``) for SFT and DPO under ``torchrun``.

Plain data parallel (:mod:`rlx.distributed.data_parallel`) keeps the whole model, its
gradients and AdamW's two moments on every process. With ``fsdp=True`` each process keeps
``1 / N`` of each of them: every decoder layer, then the whole model, is wrapped by torch's
FSDP2 (``torch.distributed.fsdp.fully_shard``), which gathers a layer's weights just before its
forward and backward pass and reduce-scatters its gradients just after. Each process still
takes its shard of every batch, so the step is the one plain data parallel takes.

Checkpoints and the trained model are gathered into full state dicts on rank 0, which writes
them as an unsharded run writes them: a run folder looks the same whether it trained sharded
or not, and ``rlx.load`` reads it without a process group.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard, cast

import torch
import torch.distributed as dist
from torch import Tensor

from rlx.errors import ConfigError

if TYPE_CHECKING:
    from torch.distributed.fsdp import FSDPModule

FSDP_STAGES = ("sft", "dpo")
"""The stages that take ``fsdp=True``."""


def check_fsdp(config: Any, parallel: Any, stage: str, *, adapter: bool) -> None:
    """ConfigError when ``fsdp=True`` cannot run: outside ``torchrun`` (no process group to
    shard over) or with a LoRA adapter (``adapter``: the stage trains one, its frozen base is not
    sharded here)."""
    if not getattr(config, "fsdp", False):
        return
    if parallel is None:
        raise ConfigError(
            f"{stage}: fsdp=True shards the model over the processes of a torchrun launch; run "
            "it under torchrun (torchrun --nproc-per-node N -m rlx.cli align ...) or set "
            "fsdp=False."
        )
    if adapter:
        raise ConfigError(
            f"{stage}: fsdp=True does not train a LoRA adapter (lora={config.lora}, "
            f"model={config.model!r}); train the adapter data-parallel with fsdp=False, or "
            "set lora=False to shard every weight."
        )


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's repeated blocks: the modules whose class Hugging Face names in
    ``_no_split_modules`` (``LlamaDecoderLayer``, ``GPT2Block``...), else the children of
    its longest ``ModuleList``."""
    names = set(getattr(model, "_no_split_modules", None) or ())
    layers = [m for m in model.modules() if type(m).__name__ in names]
    if layers:
        return layers
    lists = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList)]
    if not lists:
        return []
    longest = max(lists, key=len)
    return list(longest)


def shard_model(model: torch.nn.Module) -> torch.nn.Module:
    """Shard ``model`` in place over the default process group: each decoder layer, then the
    root (embeddings, final norm and output head), each whole only while it computes.
    Gradients are reduce-scattered as sums, not means: a stage's loss on each process is
    already its share of the whole batch's mean."""
    from torch.distributed.fsdp import fully_shard

    for layer in decoder_layers(model):
        fully_shard(layer)
    # the root too gives its weights back after each forward pass (FSDP2 keeps the root's
    # whole by default): a forward pass outside training (DPO's reference scores, an
    # evaluation) would otherwise leave whole weights where the optimizer needs the shards
    fully_shard(model, reshard_after_forward=True)
    for module in model.modules():
        if is_sharded(module):
            module.set_gradient_divide_factor(1.0)
            module.set_force_sum_reduction_for_comms(True)  # a plain SUM: gloo has no PREMUL_SUM
    return model


def is_sharded(model: Any) -> TypeGuard[FSDPModule]:
    """Whether ``model`` was sharded by :func:`shard_model`."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def local_numel(model: torch.nn.Module) -> int:
    """The parameter elements this process holds (its shards; all of them unsharded)."""
    return sum(getattr(p, "_local_tensor", p).numel() for p in model.parameters())


def _full() -> Any:
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, cpu_offload=True)


def full_model_state(model: torch.nn.Module) -> dict[str, Tensor]:
    """The whole model's state dict, gathered on rank 0 (on the CPU); empty on the other
    ranks. Every process must call it (it is a collective)."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    # a model's state dict, gathered whole: its values are tensors
    return cast(dict[str, Tensor], get_model_state_dict(model, options=_full()))


def full_optimizer_state(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> dict[str, Any]:
    """The optimizer's whole state dict, gathered on rank 0 and keyed as
    ``optimizer.state_dict()`` keys an unsharded one (parameters by their position), so an
    unsharded run can resume it; empty on the other ranks. A collective."""
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    state: dict[str, Any] = get_optimizer_state_dict(model, optimizer, options=_full())
    if "param_groups" not in state:
        return {}
    names = [name for group in state["param_groups"] for name in group["params"]]
    index = {name: i for i, name in enumerate(names)}
    groups, start = [], 0
    for group in state["param_groups"]:
        count = len(group["params"])
        groups.append({**group, "params": list(range(start, start + count))})
        start += count
    return {"state": {index[k]: v for k, v in state["state"].items()}, "param_groups": groups}


def _names_by_position(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> list[str]:
    by_id = {id(p): name for name, p in model.named_parameters()}
    return [by_id[id(p)] for group in optimizer.param_groups for p in group["params"]]


def load_full_state(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    weights: Mapping[str, Tensor],
    optimizer_state: Mapping[str, Any],
) -> None:
    """Put a full checkpoint (:func:`full_model_state`, :func:`full_optimizer_state`, or an
    unsharded run's) into the sharded ``model`` and its ``optimizer``: each process keeps its
    shards. Every process must call it with the same checkpoint."""
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    from rlx.errors import CheckpointError

    options = StateDictOptions(full_state_dict=True)
    names = _names_by_position(model, optimizer)
    try:
        set_model_state_dict(model, dict(weights), options=options)
        state = {names[int(k)]: v for k, v in optimizer_state["state"].items()}
        groups, start = [], 0
        for group in optimizer_state["param_groups"]:
            count = len(group["params"])
            groups.append({**group, "params": names[start : start + count]})
            start += count
        set_optimizer_state_dict(
            model, optimizer, {"state": state, "param_groups": groups}, options=options
        )
    except (RuntimeError, KeyError, IndexError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[-1].strip().rstrip(".")
        raise CheckpointError(
            f"the checkpoint does not fit the sharded model ({first}): it was written for "
            "another model than the run's config builds; resume it with the run's own model."
        ) from exc


def save_full_model(model: torch.nn.Module, tokenizer: Any, out: Path) -> None:
    """Gather the sharded ``model`` and write it on rank 0 as a normal Hugging Face folder
    (as :func:`rlx.llm.models.save_pretrained` writes an unsharded one). A collective: every
    process calls it; the others write nothing."""
    from rlx.llm.models import (
        fresh_model_folder,
        no_progress_bars,
        portable_tokenizer_class,
        put_model_folder,
    )

    weights = full_model_state(model)
    if dist.get_rank() != 0:
        return
    out = Path(out)
    tmp = fresh_model_folder(out)  # a real folder, never a link planted at its name
    with no_progress_bars():
        # a Hugging Face model's method, which nn.Module does not declare
        model.save_pretrained(tmp, state_dict=weights)  # type: ignore[operator]
    tokenizer.save_pretrained(tmp)
    portable_tokenizer_class(tmp)
    put_model_folder(tmp, out)


def agree(flag: bool) -> bool:
    """True on every process when it is True on any (the processes of a sharded model must
    take a checkpoint, a collective, together)."""
    device = "cuda" if dist.get_backend() == "nccl" else "cpu"
    value = torch.tensor([float(flag)], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


__all__ = [
    "FSDP_STAGES",
    "agree",
    "check_fsdp",
    "decoder_layers",
    "full_model_state",
    "full_optimizer_state",
    "is_sharded",
    "load_full_state",
    "local_numel",
    "save_full_model",
    "shard_model",
]
