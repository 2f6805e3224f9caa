"""Shared machinery of the deep agents: evaluation (and, later, nets, buffers, vector envs)."""

from rlx.core.evaluation import EvalStats, evaluate

__all__ = ["EvalStats", "evaluate"]
