"""Data-parallel language-model stages under ``torchrun`` (or ``accelerate launch``).

Every process loads the whole model and draws the same batches; each takes its shard of every
batch, and the gradients are all-reduced before each optimizer step, so all processes take
the same step (:class:`rlx.llm.parallel.DataParallel` is the stage's side of it). Only rank 0
writes the run folder.

    torchrun --nproc-per-node 8 -m rlx.cli align sft --model M --data D --run-dir runs/sft
    torchrun --nnodes 2 --node-rank R --nproc-per-node 8 --rdzv-backend c10d \\
        --rdzv-endpoint HOST:29500 -m rlx.cli align grpo --model M --data D --run-dir runs/g

The launcher sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and
``MASTER_PORT``; :func:`from_environment` joins the process group they describe (NCCL on
GPUs, gloo on CPUs) and pins each process to its GPU (``cuda:LOCAL_RANK``).
"""

from __future__ import annotations

import atexit
import dataclasses
import inspect
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor

from rlx.errors import ConfigError


def takes_data_parallel(spec: Any) -> bool:
    """Whether the algorithm's ``train`` accepts a ``parallel=`` part (the LM stages)."""
    return "parallel" in inspect.signature(spec.train).parameters


@dataclass
class TorchDataParallel:
    """This process's part of a ``torch.distributed`` run: its rank, the number of
    processes, its shard of a batch, and sums over the processes (all-reduce)."""

    rank: int
    world_size: int
    device: str = "cpu"

    def shard(self, rows: np.ndarray) -> np.ndarray:
        """This process's contiguous part of ``rows`` (sizes differ by at most one)."""
        return np.array_split(rows, self.world_size)[self.rank]

    def sum_(self, tensors: Sequence[Tensor]) -> None:
        """Replace each tensor by its sum over the processes, flattened into one all-reduce
        (one message however many parameters)."""
        if not tensors:
            return
        flat = torch.cat([t.reshape(-1).to(torch.float64) for t in tensors]).to(self.device)
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        offset = 0
        for tensor in tensors:
            n = tensor.numel()
            tensor.copy_(flat[offset : offset + n].view_as(tensor).to(tensor))
            offset += n


def from_environment() -> TorchDataParallel:
    """Join the process group the launcher's environment describes (once per process)."""
    cuda = torch.cuda.is_available()
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if cuda else "gloo")
        # the group rlx joined, rlx leaves: left to the interpreter's exit, gloo's threads can
        # be torn down while joinable, and the process aborts ("terminate called ...")
        atexit.register(leave_process_group)
    device = "cpu"
    if cuda:
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
        torch.cuda.set_device(device)
    return TorchDataParallel(dist.get_rank(), dist.get_world_size(), device)


def leave_process_group() -> None:
    """Destroy the process group :func:`from_environment` joined, if it is still there."""
    if dist.is_initialized():
        dist.destroy_process_group()


def check_divisible(config: Any, processes: int) -> None:
    """Each process needs an equal shard of every batch (and micro-batch): the gradients
    averaged over them are then the whole batch's."""
    parts = processes * getattr(config, "grad_accum", 1)
    if config.batch_size % parts:
        raise ConfigError(
            f"batch_size={config.batch_size} must be a multiple of {parts} (processes times "
            "grad_accum) to give every process an equal shard of every batch."
        )


def data_parallel(spec: Any) -> Callable[..., Any]:
    """``spec.train`` with this process's :class:`TorchDataParallel` part, built here from
    above; ``device`` on a GPU machine becomes this process's own GPU."""
    part = from_environment()

    def train(config: Any, data: Any, run: Any) -> Any:
        check_divisible(config, part.world_size)
        if part.device != "cpu" and str(config.device) in ("auto", "cuda"):
            config = dataclasses.replace(config, device=part.device)
        return spec.train(config, data, run, parallel=part)

    return train


__all__ = [
    "TorchDataParallel",
    "check_divisible",
    "data_parallel",
    "from_environment",
    "leave_process_group",
    "takes_data_parallel",
]
