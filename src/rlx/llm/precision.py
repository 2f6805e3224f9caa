"""The precision a stage computes in: ``fp32``, or ``bf16-mixed`` (weights and optimizer in
float32, the forward passes under bfloat16 autocast), ``auto`` choosing per device; and the
attention a Hugging Face model uses under it on a CPU (eager: PyTorch's SDPA backward is slow
there in bfloat16), with a warning where the CPU has no native bfloat16 and emulates it."""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

PRECISIONS = ("fp32", "bf16-mixed", "auto")


def resolve_precision(precision: str, device: str | torch.device) -> str:
    """``precision`` with ``auto`` decided: ``bf16-mixed`` on a CUDA device that computes in
    bfloat16, else ``fp32`` (a CPU without bfloat16 instructions emulates it slowly)."""
    if precision != "auto":
        return precision
    on_cuda = torch.device(device).type == "cuda"
    return "bf16-mixed" if on_cuda and torch.cuda.is_bf16_supported() else "fp32"


def autocast(precision: str, device: str | torch.device) -> torch.autocast:
    """The context a training forward pass runs in: for ``bf16-mixed``, ``torch.autocast`` to
    bfloat16 (matmuls in bfloat16 with float32 accumulation, softmax and losses in float32,
    float32 master weights: no loss scaling needed); for ``fp32``, a disabled one."""
    return torch.autocast(
        torch.device(device).type, dtype=torch.bfloat16, enabled=precision == "bf16-mixed"
    )


@contextmanager
def attention_for(model: torch.nn.Module | None, precision: str) -> Iterator[None]:
    """Eager attention while ``bf16-mixed`` trains on CPU, the model's own afterwards (no
    model: nothing to do).

    PyTorch's fused CPU attention (SDPA) runs its backward far slower in bfloat16 than in
    float32, which costs more than the bfloat16 matmuls save; the eager path's small batched
    matmuls do not.
    """
    if not isinstance(model, torch.nn.Module):  # none, or a LoRA reference: the policy's
        model = None
    on_cpu = model is not None and next(model.parameters()).device.type == "cpu"
    if precision == "bf16-mixed" and on_cpu and not cpu_has_bf16():
        _warn_emulated_bf16()
    switched = _sdpa_models(model) if precision == "bf16-mixed" and on_cpu else []
    for hf_model in switched:
        hf_model.set_attn_implementation("eager")
    try:
        yield
    finally:
        for hf_model in switched:
            hf_model.set_attn_implementation("sdpa")


NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
"""x86 CPU flags (as Linux names them) of the instructions that compute in bfloat16."""


def cpu_has_bf16(flags: frozenset[str] | None = None) -> bool:
    """Whether this CPU computes bfloat16 matrix products natively: on x86, whether its flags
    (``flags``, by default those Linux lists in ``/proc/cpuinfo``) include AVX512-BF16 or AMX;
    without them PyTorch emulates bfloat16, slowly. Where the flags are unknown (not Linux,
    not x86), what oneDNN, PyTorch's CPU backend, reports; unknown to it too: True (no
    warning on a guess)."""
    flags = cpu_flags() if flags is None else flags
    if flags is not None:
        return bool(flags & NATIVE_BF16_FLAGS)
    check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return True if check is None else bool(check())


@functools.cache
def cpu_flags() -> frozenset[str] | None:
    """The x86 CPU's feature flags from ``/proc/cpuinfo`` (its first ``flags`` line); None
    where there is no such line (another OS, another architecture)."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return None


@functools.cache
def _warn_emulated_bf16() -> None:
    print("rlx: precision='bf16-mixed' on a CPU without bfloat16 instructions (AVX512-BF16 or "
          "AMX): PyTorch emulates them, and a training step runs many times slower than in "
          "fp32; use precision='fp32' on this machine.", file=sys.stderr)  # fmt: skip


def _sdpa_models(model: torch.nn.Module | None) -> list[Any]:
    """The outermost Hugging Face models inside ``model`` (itself, or one a wrapper such as a
    reward model holds) that attend with SDPA; their inner models share their config."""
    found: list[torch.nn.Module] = []
    for module in model.modules() if model is not None else ():
        config = getattr(module, "config", None)
        if (
            hasattr(module, "set_attn_implementation")
            and getattr(config, "_attn_implementation", None) == "sdpa"
            and not any(config is other.config for other in found)
        ):
            found.append(module)
    return found
