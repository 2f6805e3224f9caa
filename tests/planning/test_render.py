"""format_values / format_policy: grids with arrows and marks, tables otherwise."""

from __future__ import annotations

import numpy as np
import pytest

from rlx.errors import MDPError
from rlx.mdp import GridWorld, from_gymnasium
from rlx.planning import format_policy, format_values, value_iteration


def test_gridworld_policy_grid_has_arrows_terminal_marks_and_walls():
    g = GridWorld(4, 4, walls=[(1, 2)], gamma=1.0)
    text = format_policy(g, value_iteration(g).policy)
    lines = text.splitlines()
    assert len(lines) == 4 and all(len(line.split()) == 4 for line in lines)
    assert lines[0].split()[0] == "■" and lines[3].split()[3] == "■"
    assert lines[1].split()[2] == "#"
    assert {"↑", "←", "→", "↓"} & set(text.split())
    assert lines[0].split()[1] == "←"  # (0,1): one step left to the corner


def test_gridworld_values_grid():
    g = GridWorld(gamma=1.0)
    lines = format_values(g, value_iteration(g).V, decimals=1).splitlines()
    assert len(lines) == 4
    assert lines[0].split() == ["0.0", "-1.0", "-2.0", "-3.0"]


def test_table_without_grid_truncates():
    taxi = from_gymnasium("Taxi-v4")
    r = value_iteration(taxi)
    text = format_policy(taxi, r.policy, max_rows=3)
    lines = text.splitlines()
    assert lines[0].split() == ["state", "action"]
    assert lines[1].startswith("taxi=(0,0) passenger=R destination=R") and lines[1].endswith("■")
    assert lines[-1] == "... 497 more states"
    assert "taxi=(0,0)" in format_values(taxi, r.V, max_rows=2)


def test_wrong_length_is_rejected():
    with pytest.raises(MDPError, match=r"V has shape \(3,\)"):
        format_values(GridWorld(), np.zeros(3))
