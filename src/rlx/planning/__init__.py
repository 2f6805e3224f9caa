"""Exact dynamic programming on a known MDP: policy evaluation, value and policy iteration."""

from rlx.planning.evaluation import policy_evaluation
from rlx.planning.policy_iteration import policy_iteration
from rlx.planning.render import format_policy, format_values
from rlx.planning.result import PlanningResult, greedy_policy
from rlx.planning.value_iteration import value_iteration

__all__ = [
    "PlanningResult",
    "format_policy",
    "format_values",
    "greedy_policy",
    "policy_evaluation",
    "policy_iteration",
    "value_iteration",
]
