"""Shared machinery of the deep agents, written once.

``envs`` (vector envs, episode statistics), ``nets`` (MLP, Nature CNN, Q network),
``distributions``, ``buffers`` (replay, rollout), ``targets`` (TD targets), ``normalize``
(running statistics), ``schedules``, ``seeding``, ``evaluation`` (``rlx.evaluate``).
"""

from rlx.core.evaluation import EvalStats, evaluate

__all__ = ["EvalStats", "evaluate"]
