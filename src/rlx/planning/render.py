"""Text views of a value function and a policy: a grid when the MDP has one, else a table."""

from __future__ import annotations

import numpy as np

from rlx.errors import MDPError
from rlx.mdp.tabular import TabularMDP

TERMINAL_MARK = "■"
WALL_MARK = "#"


def format_values(mdp: TabularMDP, V: np.ndarray, *, decimals: int = 2, max_rows: int = 50) -> str:
    """``V`` as the grid of ``mdp.grid_shape`` (walls as ``#``), else a ``state  value`` table.

    A table longer than ``max_rows`` states shows the first ``max_rows`` and a count of the rest.
    """
    V = _per_state(mdp, V, "V")
    cells = [f"{v:.{decimals}f}" for v in V]
    if mdp.grid_shape is not None:
        return _grid(mdp.grid_shape, _mark_walls(mdp, cells))
    return _table(mdp, cells, "value", max_rows)


def format_policy(mdp: TabularMDP, policy: np.ndarray, *, max_rows: int = 50) -> str:
    """The action per state by name (arrows on grids); terminal states as ``■``, walls ``#``."""
    policy = _per_state(mdp, policy, "policy").astype(np.int64)
    names = mdp.action_names or [str(a) for a in range(mdp.n_actions)]
    bad = (policy < 0) | (policy >= mdp.n_actions)
    if bad.any():
        s = int(np.flatnonzero(bad)[0])
        raise MDPError(f"policy[{s}] = {policy[s]} is not an action of {mdp.name}.")
    cells = [
        TERMINAL_MARK if end else names[a] for a, end in zip(policy, mdp.terminal, strict=True)
    ]
    if mdp.grid_shape is not None:
        return _grid(mdp.grid_shape, _mark_walls(mdp, cells))
    return _table(mdp, cells, "action", max_rows)


def _per_state(mdp: TabularMDP, x: np.ndarray, what: str) -> np.ndarray:
    x = np.asarray(x)
    if x.shape != (mdp.n_states,):
        raise MDPError(
            f"{what} has shape {x.shape}; {mdp.name} needs one entry per state, ({mdp.n_states},)."
        )
    return x


def _mark_walls(mdp: TabularMDP, cells: list[str]) -> list[str]:
    walls = getattr(mdp, "walls", None)
    if walls is None:
        return cells
    return [WALL_MARK if wall else cell for cell, wall in zip(cells, walls, strict=True)]


def _grid(grid_shape: tuple[int, int], cells: list[str]) -> str:
    rows, cols = grid_shape
    width = max(len(c) for c in cells)
    lines = [
        " ".join(cell.rjust(width) for cell in cells[r * cols : (r + 1) * cols])
        for r in range(rows)
    ]
    return "\n".join(lines)


def _table(mdp: TabularMDP, cells: list[str], header: str, max_rows: int) -> str:
    names = mdp.state_names or [str(s) for s in range(mdp.n_states)]
    shown = range(min(mdp.n_states, max_rows))
    width = max(len("state"), *(len(names[s]) for s in shown))
    cell_width = max(len(header), *(len(cells[s]) for s in shown))
    lines = [f"{'state'.ljust(width)}  {header.rjust(cell_width)}"]
    lines += [f"{names[s].ljust(width)}  {cells[s].rjust(cell_width)}" for s in shown]
    if mdp.n_states > max_rows:
        lines.append(f"... {mdp.n_states - max_rows} more states")
    return "\n".join(lines)
