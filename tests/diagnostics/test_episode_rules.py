"""The doctor's rows for language models acting over multi-turn episodes: episodes that never
end, tool calls that always fail (groups with no reward variance: ``zero-spread-groups``, which
every group-baseline run logs). Each fires on a run stuck past its line and stays silent on a
healthy one."""

from __future__ import annotations

import numpy as np
import pytest

from rlx import metrics as M
from tests.diagnostics.test_rules_converge import N, finding, noise, run_log

CONFIG = {"max_length": 256, "max_new_tokens": 16, "group_size": 8, "temperature": 1.0}


@pytest.mark.parametrize(
    ("rule", "metric", "stuck", "healthy"),
    [
        ("episodes-never-end", M.EPISODE_TRUNCATED_FRACTION, 0.97, 0.2),
        ("tool-calls-fail", M.TOOL_ERROR_RATE, 0.95, 0.3),
        ("zero-spread-groups", M.FRAC_ZERO_STD_GROUPS, 0.9, 0.1),
    ],
)
def test_an_episode_row_fires_on_a_stuck_run_and_not_on_a_healthy_one(rule, metric, stuck, healthy):
    def log(level: float):
        values = np.clip(level + noise(0.02), 0.0, 1.0)
        return run_log("grpo-episodes", "hidden-number", CONFIG, **{metric: values})

    assert finding(log(stuck), rule) is not None
    assert finding(log(healthy), rule) is None


def test_episodes_cut_by_the_budget_name_a_larger_budget():
    log = run_log("grpo-episodes", "hidden-number", CONFIG,
                  **{M.EPISODE_TRUNCATED_FRACTION: np.full(N, 1.0)})  # fmt: skip
    found = finding(log, "episodes-never-end")
    assert (found.field, found.current, found.suggested) == ("max_length", 256, 512)
    # single-turn GRPO logs no episodes: the row is for episode policies only
    assert (
        finding(
            run_log("grpo", "x", CONFIG, **{M.EPISODE_TRUNCATED_FRACTION: np.full(N, 1.0)}),
            "episodes-never-end",
        )
        is None
    )
