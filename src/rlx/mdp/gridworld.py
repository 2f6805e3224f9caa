"""GridWorld: Sutton & Barto's 4x4 example (Example 4.1), with walls and slippery moves.

States are the cells of a ``rows x cols`` grid, row-major (state ``r * cols + c``). Actions are
up, right, down, left (0-3). A move that would leave the grid or enter a wall leaves the agent
where it is. With ``slip > 0`` the agent moves in one of the two perpendicular directions
instead, each with probability ``slip / 2``. Every step from a non-terminal cell earns
``step_reward``; entering a terminal cell ends the episode.

Walls stay in the state space so that ``S = rows * cols`` and a grid prints as itself. A wall
cell can never be entered or started in; it is marked terminal (value 0, absorbing) so that it
carries no value and never makes the undiscounted Bellman system singular. ``GridWorld.walls``
tells walls apart from real terminal cells.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import numpy as np
import scipy.sparse as sp

from rlx.errors import MDPError
from rlx.mdp.tabular import TabularMDP

ACTION_NAMES = ("↑", "→", "↓", "←")
# (row, col) step of up, right, down, left: a clockwise order, so (a + 1) % 4 and (a + 3) % 4
# are the two directions perpendicular to a
_STEPS = np.array([(-1, 0), (0, 1), (1, 0), (0, -1)])

Cell = tuple[int, int]


class GridWorld(TabularMDP):
    """A ``rows x cols`` grid MDP; the default is Sutton & Barto's 4x4 GridWorld.

    Args:
        rows: grid height.
        cols: grid width.
        terminal: cells ``(r, c)`` where episodes end; default the corners ``(0, 0)`` and
            ``(rows - 1, cols - 1)`` as in Sutton & Barto's Example 4.1.
        walls: cells that cannot be entered (see the module docstring).
        slip: probability of moving perpendicular to the chosen direction (split equally).
        step_reward: reward of every step taken from a non-terminal cell.
        gamma: discount. The library-wide default 0.99; Sutton & Barto's table of ``v_pi``
            for the random policy (0, -14, -20, -22, ...) uses ``gamma=1``.

    ``GridWorld.from_id("GridWorld-3x5", slip=0.1)`` builds one from the id the command line
    and ``rlx.train`` take.
    """

    ID_PATTERN = re.compile(r"^gridworld(?:-(\d+)x(\d+))?$", re.IGNORECASE)
    """``GridWorld`` (the 4x4 one) or ``GridWorld-RxC``."""
    ID_KEYWORDS = ("rows", "cols", "slip", "step_reward", "gamma")
    """What an id may be given with (cells, terminal ones and walls, need Python)."""

    @classmethod
    def is_id(cls, env_id: str) -> bool:
        """Whether ``env_id`` names a GridWorld (:attr:`ID_PATTERN`)."""
        return isinstance(env_id, str) and bool(cls.ID_PATTERN.match(env_id.strip()))

    @classmethod
    def from_id(cls, env_id: str, **kwargs: Any) -> GridWorld:
        """The GridWorld ``env_id`` names, with keywords of :attr:`ID_KEYWORDS`; an unknown
        keyword or a bad value raises :class:`~rlx.errors.MDPError` naming it."""
        match = cls.ID_PATTERN.match(env_id.strip())
        if match is None:
            raise MDPError(f"{env_id!r} is not a GridWorld id; use 'GridWorld' or 'GridWorld-RxC'.")
        unknown = sorted(set(kwargs) - set(cls.ID_KEYWORDS))
        if unknown:
            raise MDPError(
                f"GridWorld takes no keyword {unknown[0]!r}; it takes {', '.join(cls.ID_KEYWORDS)}."
            )
        size = {"rows": int(match.group(1)), "cols": int(match.group(2))} if match.group(1) else {}
        return cls(**{**size, **kwargs})

    def __init__(
        self,
        rows: int = 4,
        cols: int = 4,
        *,
        terminal: Iterable[Cell] | None = None,
        walls: Iterable[Cell] = (),
        slip: float = 0.0,
        step_reward: float = -1.0,
        gamma: float = 0.99,
    ) -> None:
        rows, cols = _check_grid_size(rows, cols)
        self.rows, self.cols = rows, cols
        self.slip = _check_slip(slip)
        self.step_reward = _check_step_reward(step_reward)
        if terminal is None:
            terminal = [(0, 0), (rows - 1, cols - 1)]
        goal = _cell_mask(terminal, rows, cols, "terminal")
        self.walls = _cell_mask(walls, rows, cols, "wall")
        if np.any(goal & self.walls):
            r, c = divmod(int(np.flatnonzero(goal & self.walls)[0]), cols)
            raise MDPError(f"cell ({r},{c}) is both a wall and terminal; a cell can be only one.")
        absorbing = goal | self.walls
        P = _transitions(rows, cols, self.walls, absorbing, self.slip)
        R = np.where(absorbing, 0.0, self.step_reward)[:, None] * np.ones(len(ACTION_NAMES))
        super().__init__(
            P,
            R,
            gamma,
            terminal=absorbing,
            state_names=[f"({r},{c})" for r in range(rows) for c in range(cols)],
            action_names=ACTION_NAMES,
            grid_shape=(rows, cols),
            name=f"GridWorld({rows}x{cols})",
        )

    def __repr__(self) -> str:
        return (
            f"GridWorld({self.rows}, {self.cols}, walls={int(self.walls.sum())}, "
            f"slip={self.slip}, step_reward={self.step_reward}, gamma={self.gamma})"
        )

    def state(self, row: int, col: int) -> int:
        """The state index of cell ``(row, col)``."""
        return int(np.ravel_multi_index((row, col), (self.rows, self.cols)))

    def cell(self, state: int) -> Cell:
        """The cell ``(row, col)`` of a state index."""
        r, c = divmod(int(state), self.cols)
        return r, c


def _transitions(
    rows: int, cols: int, walls: np.ndarray, absorbing: np.ndarray, slip: float
) -> sp.csr_array:
    """``P`` as CSR ``[A * S, S]``: up to three outcomes (intended, two perpendicular) per row."""
    S, A = rows * cols, len(ACTION_NAMES)
    states = np.arange(S)
    destination = _destinations(rows, cols, walls)  # [direction, S]
    actions = np.arange(A)[:, None]
    directions = np.concatenate([actions, (actions + 1) % A, (actions + 3) % A], axis=1)
    probs = np.array([1.0 - slip, slip / 2, slip / 2])
    # cols[a, o, s]: where outcome o of action a leads from s; absorbing cells loop on themselves
    next_state = np.where(absorbing, states, destination[directions])
    row = np.broadcast_to(actions[:, :, None] * S + states, next_state.shape)
    data = np.broadcast_to(probs[None, :, None], next_state.shape)
    coo = sp.coo_array((data.ravel(), (row.ravel(), next_state.ravel())), shape=(A * S, S))
    return sp.csr_array(coo)  # duplicates (e.g. two bumps into walls) are summed


def _destinations(rows: int, cols: int, walls: np.ndarray) -> np.ndarray:
    """``[4, S]``: the cell reached by each direction; off-grid or wall moves stay put."""
    r, c = np.divmod(np.arange(rows * cols), cols)
    nr = r[None, :] + _STEPS[:, :1]
    nc = c[None, :] + _STEPS[:, 1:]
    inside = (nr >= 0) & (nr < rows) & (nc >= 0) & (nc < cols)
    target = np.where(inside, nr * cols + nc, r * cols + c)
    return np.where(walls[target], r * cols + c, target)


def _cell_mask(cells: Iterable[Cell], rows: int, cols: int, what: str) -> np.ndarray:
    mask = np.zeros(rows * cols, dtype=bool)
    for cell in cells:
        try:
            r, c = (int(x) for x in cell)
        except (TypeError, ValueError):
            raise MDPError(f"{what} cell {cell!r} is not a (row, col) pair.") from None
        if not (0 <= r < rows and 0 <= c < cols):
            raise MDPError(
                f"{what} cell ({r},{c}) is outside the {rows}x{cols} grid; rows lie in "
                f"[0, {rows}) and columns in [0, {cols})."
            )
        mask[r * cols + c] = True
    return mask


def _check_grid_size(rows: int, cols: int) -> tuple[int, int]:
    if int(rows) != rows or int(cols) != cols or rows < 1 or cols < 1:
        raise MDPError(
            f"a {rows}x{cols} grid is not possible; rows and cols must be integers >= 1."
        )
    return int(rows), int(cols)


def _check_slip(slip: float) -> float:
    p = float(slip)
    if not 0.0 <= p <= 1.0:
        raise MDPError(f"slip={slip!r} is not a probability; it must lie in [0, 1].")
    return p


def _check_step_reward(step_reward: float) -> float:
    r = float(step_reward)
    if not np.isfinite(r):
        raise MDPError(f"step_reward={step_reward!r} must be a finite number.")
    return r
