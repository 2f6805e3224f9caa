"""GridWorld: Sutton & Barto's layout, walls, slip."""

from __future__ import annotations

import numpy as np
import pytest

from rlx.errors import MDPError
from rlx.mdp import GridWorld, TabularMDP

UP, RIGHT, DOWN, LEFT = range(4)


def P_dense(g: GridWorld) -> np.ndarray:
    return g.P_stacked.toarray().reshape(g.n_actions, g.n_states, g.n_states)


def test_default_is_sutton_barto_4x4():
    g = GridWorld()
    assert isinstance(g, TabularMDP)
    assert (g.n_states, g.n_actions, g.grid_shape) == (16, 4, (4, 4))
    assert np.flatnonzero(g.terminal).tolist() == [0, 15]
    assert g.action_names == ["↑", "→", "↓", "←"]
    assert g.state_names[6] == "(1,2)"
    assert np.all(g.R[~g.terminal] == -1.0) and np.all(g.R[g.terminal] == 0.0)


def test_moves_and_bumps():
    g = GridWorld()
    P = P_dense(g)
    assert P[RIGHT, g.state(1, 1), g.state(1, 2)] == 1.0
    assert P[UP, g.state(0, 2), g.state(0, 2)] == 1.0  # the edge: stays put
    assert P[LEFT, g.state(2, 0), g.state(2, 0)] == 1.0


def test_walls_and_slip_rows_sum_to_one_and_walls_are_never_entered():
    g = GridWorld(3, 4, walls=[(1, 1), (0, 2)], slip=0.2)
    P = P_dense(g)
    np.testing.assert_allclose(P.sum(axis=2), 1.0)
    walls = [g.state(1, 1), g.state(0, 2)]
    others = np.setdiff1d(np.arange(g.n_states), walls)
    assert P[:, others][:, :, walls].sum() == 0.0
    assert g.terminal[walls].all() and g.initial[walls].sum() == 0.0
    assert g.walls[walls].all() and g.walls.sum() == 2


def test_slip_goes_perpendicular_in_equal_parts():
    g = GridWorld(3, 3, terminal=[(2, 2)], slip=0.2)
    P = P_dense(g)
    s = g.state(1, 1)
    assert P[UP, s, g.state(0, 1)] == pytest.approx(0.8)
    assert P[UP, s, g.state(1, 2)] == pytest.approx(0.1)
    assert P[UP, s, g.state(1, 0)] == pytest.approx(0.1)
    # from a corner the two slips bump: left into the edge (stay), right moves
    corner = g.state(0, 0)
    assert P[UP, corner, corner] == pytest.approx(0.8 + 0.1)
    assert P[UP, corner, g.state(0, 1)] == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"walls": [(4, 0)]}, r"wall cell \(4,0\) is outside the 4x4 grid"),
        ({"walls": [(0, 0)]}, r"cell \(0,0\) is both a wall and terminal"),
        ({"slip": 1.5}, r"slip=1\.5 is not a probability"),
        ({"terminal": [(1,)]}, r"terminal cell \(1,\) is not a \(row, col\) pair"),
    ],
)
def test_bad_layouts_are_rejected(kwargs, match):
    with pytest.raises(MDPError, match=match):
        GridWorld(4, 4, **kwargs)
