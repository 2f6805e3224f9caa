"""Data parallelism as a stage sees it: a :class:`DataParallel` (handed in from above by
:mod:`rlx.distributed`, under torchrun) shards each batch's rows over the processes and sums
tensors across them; the gradients and metrics of the shards are combined here so that N
processes take the step one process would take on the whole batch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor


class DataParallel(Protocol):
    """This process's part of a data-parallel run (``torchrun --nproc-per-node N``), handed to
    a stage's ``train`` from above (:mod:`rlx.distributed.data_parallel`) as ``parallel=``.

    Every process holds the whole model and draws the same batches; each takes its
    :meth:`shard` of every batch, and :meth:`sum_` adds tensors (gradients, metrics) over the
    processes in place, so each ends the step with the gradient of the whole batch."""

    rank: int
    world_size: int

    def shard(self, rows: np.ndarray) -> np.ndarray:
        """This process's part of a batch's rows (contiguous, sizes differ by at most one)."""
        ...

    def sum_(self, tensors: Sequence[Tensor]) -> None:
        """Replace each tensor by its sum over the processes."""
        ...


def sum_gradients(params: Sequence[torch.nn.Parameter], parallel: DataParallel | None) -> None:
    """Every parameter's gradient summed over the processes (nothing on one process); a
    parameter without a gradient on this process counts as a zero one."""
    if parallel is None:
        return
    grads = []
    for param in params:
        if param.grad is None:
            param.grad = torch.zeros_like(param)
        grads.append(param.grad)
    parallel.sum_(grads)


def average_gradients(params: Sequence[torch.nn.Parameter], parallel: DataParallel | None) -> None:
    """Every parameter's gradient averaged over the processes: the gradient of the mean of
    their losses, when each process's loss is a mean over an equal shard of the batch."""
    if parallel is None:
        return
    sum_gradients(params, parallel)
    for param in params:
        if param.grad is not None:  # sum_gradients gave every parameter one
            param.grad.div_(parallel.world_size)


def mean_over_processes(metrics: dict[str, Any], parallel: DataParallel | None) -> dict[str, Any]:
    """Each metric's mean over the processes (unchanged on one process)."""
    if parallel is None or not metrics:
        return metrics
    keys = sorted(metrics)
    values = torch.tensor([float(metrics[k]) for k in keys], dtype=torch.float64)
    parallel.sum_([values])
    return {k: float(v) / parallel.world_size for k, v in zip(keys, values.tolist(), strict=True)}
