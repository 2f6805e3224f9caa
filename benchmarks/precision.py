"""Which precisions a benchmark runs by default on this CPU (shared by the LLM benchmarks)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rlx.llm.precision import cpu_has_bf16


def default_configs(configs: Iterable[str], is_bf16: Callable[[str], bool]) -> list[str]:
    """All ``configs``, or, on a CPU without native bfloat16 (no AVX512-BF16 or AMX), only the
    float32 ones: PyTorch emulates bfloat16 there and a training step runs many times slower,
    which would time the emulation, not the libraries. ``--configs`` still forces them."""
    configs = list(configs)
    if cpu_has_bf16():
        return configs
    kept = [c for c in configs if not is_bf16(c)]
    left_out = ", ".join(c for c in configs if is_bf16(c))
    print(f"this CPU has no native bfloat16 (AVX512-BF16 or AMX): {left_out} left out "
          "(emulated, far slower than float32 here; --configs runs them anyway)")  # fmt: skip
    return kept
