"""Gymnasium toy-text environments (FrozenLake, CliffWalking, Taxi) as explicit MDPs.

These environments publish their model as ``env.unwrapped.P[s][a] = [(prob, s', r, done), ...]``.
:func:`from_gymnasium` reads it into a :class:`TabularMDP` with per-transition rewards, so
sampling the MDP returns the reward of the transition taken (FrozenLake pays 1 only on
entering the goal) and ``R[s, a]`` is its expectation.

How ``done`` becomes terminal. A terminal state of a ``TabularMDP`` ends the episode on
entry and has value 0, whichever transition entered it. Gymnasium instead flags the
transition. The two agree when a flagged target ``s'`` is never entered by an unflagged
transition during an episode; then ``s'`` is simply marked terminal. That is checked by
reachability: the states an episode can visit are those reachable from the start
distribution through unflagged transitions. A flagged target outside that set (FrozenLake's
holes and goal, CliffWalking's goal, Taxi's drop-off states) becomes terminal. A flagged
target inside it also gets entered without ending the episode, so its flagged transitions
are sent to a new absorbing terminal copy appended after the environment's states (named
``"<name> (terminal copy)"``); the environment's state indices stay valid. CliffWalking's
cliff is not terminal in Gymnasium 1.x (it sends the agent back to the start with -100), and
stays so here.

Identical ``(s, a, s', done)`` outcomes listed twice are merged, their probabilities summed
and their rewards averaged by probability.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order

from rlx.errors import EnvError
from rlx.mdp.tabular import TabularMDP

TOY_TEXT_IDS = ("FrozenLake-v1", "FrozenLake8x8-v1", "CliffWalking-v1", "Taxi-v4")

# action labels of the toy-text environments, in their action order
_ACTION_NAMES = {
    "FrozenLakeEnv": ("←", "↓", "→", "↑"),
    "CliffWalkingEnv": ("↑", "→", "↓", "←"),
    "TaxiEnv": ("↓", "↑", "→", "←", "pickup", "dropoff"),
}
_TAXI_PLACES = ("R", "G", "Y", "B", "taxi")


def from_gymnasium(id_or_env: Any, gamma: float = 0.99, **make_kwargs: Any) -> TabularMDP:
    """The MDP ``(S, A, P, R, gamma)`` of a Gymnasium environment that publishes its model.

    ``P(s' | s, a) = sum of prob`` and ``R(s, a) = sum_{s'} prob * r`` over the entries
    ``(prob, s', r, done)`` of ``env.unwrapped.P[s][a]``; ``done`` transitions end the episode
    (see the module docstring). The start distribution is ``initial_state_distrib`` when the
    environment has one, else uniform over non-terminal states. The result also carries
    ``max_episode_steps`` (the spec's time limit, or ``None``) and ``name`` (the env id).

    Args:
        id_or_env: a registered id such as ``"FrozenLake-v1"``, or an environment object.
        gamma: discount in ``[0, 1]``.
        make_kwargs: passed to ``gymnasium.make`` with an id, e.g. ``map_name="8x8"``.
    """
    env, owned = _make(id_or_env, make_kwargs)
    try:
        env_id = _env_id(env, id_or_env)
        n_states, n_actions = _discrete_sizes(env, env_id)
        model = _model(env, env_id)
        table = _transition_table(model, n_states, n_actions, env_id)
        initial = _initial(env.unwrapped, n_states)
        return _build(env, env_id, table, n_states, n_actions, initial, gamma)
    finally:
        if owned:
            env.close()


# --------------------------------------------------------------------------- reading the env
def _make(id_or_env: Any, make_kwargs: dict) -> tuple[Any, bool]:
    import gymnasium as gym  # on first use, so that `import rlx` stays quick

    if not isinstance(id_or_env, str):
        if make_kwargs:
            raise EnvError(
                f"keyword arguments {sorted(make_kwargs)} only apply when from_gymnasium is "
                "given an environment id; an environment object is already made."
            )
        if not hasattr(id_or_env, "unwrapped"):
            raise EnvError(
                f"{type(id_or_env).__name__} is not a Gymnasium environment; give an id such "
                f"as {TOY_TEXT_IDS[0]!r} or an object made by gymnasium.make."
            )
        return id_or_env, False
    try:
        return gym.make(id_or_env, **make_kwargs), True
    except gym.error.Error as err:
        raise EnvError(_unknown_id_message(id_or_env, err)) from None
    except TypeError as err:
        raise EnvError(
            f"{id_or_env} does not accept the keyword arguments {make_kwargs}: {err}."
        ) from None
    except (KeyError, ValueError, IndexError) as err:
        # a keyword the env accepts with a value it does not (FrozenLake's map_name='9x9')
        given = ", ".join(f"{k}={v!r}" for k, v in make_kwargs.items()) or "no keywords"
        raise EnvError(
            f"gymnasium.make({id_or_env!r}) rejected {given} ({type(err).__name__}: {err}); "
            "check the values against the env's documentation."
        ) from None


def _unknown_id_message(env_id: str, err: Exception) -> str:
    import gymnasium as gym

    known = [str(k) for k in gym.registry]
    close = difflib.get_close_matches(env_id, known, n=5, cutoff=0.5)
    hint = f"similar registered ids: {', '.join(close)}" if close else "no similar id is registered"
    return (
        f"{env_id!r} is not a usable Gymnasium id ({err}); {hint}. Models for from_gymnasium: "
        f"{', '.join(TOY_TEXT_IDS)}."
    )


def _env_id(env: Any, id_or_env: Any) -> str:
    spec = getattr(env, "spec", None)
    if spec is not None and getattr(spec, "id", None):
        return str(spec.id)
    return id_or_env if isinstance(id_or_env, str) else type(env.unwrapped).__name__


def _discrete_sizes(env: Any, env_id: str) -> tuple[int, int]:
    from gymnasium.spaces import Discrete

    for label, space in (("observation", env.observation_space), ("action", env.action_space)):
        if not isinstance(space, Discrete):
            raise EnvError(
                f"{env_id} has {label} space {space}; an explicit MDP needs Discrete observation "
                f"and action spaces (e.g. {', '.join(TOY_TEXT_IDS)})."
            )
        if int(space.start) != 0:
            raise EnvError(
                f"{env_id} has {label} space {space} starting at {space.start}; "
                "from_gymnasium needs spaces that start at 0."
            )
    return int(env.observation_space.n), int(env.action_space.n)


def _model(env: Any, env_id: str) -> Any:
    model = getattr(env.unwrapped, "P", None)
    if model is None or not hasattr(model, "__getitem__"):
        raise EnvError(
            f"{env_id} publishes no transition model (env.unwrapped.P[s][a] = "
            f"[(prob, next_state, reward, done), ...]); model-based toy-text environments "
            f"do: {', '.join(TOY_TEXT_IDS)}. Learn from samples instead (e.g. q_learning)."
        )
    return model


def _transition_table(model: Any, S: int, A: int, env_id: str) -> dict[str, np.ndarray]:
    """Flat arrays ``state, action, prob, next_state, reward, done``, one entry per outcome."""
    # the model is a Python dict of lists, so reading it is a Python loop, done once
    try:
        rows = [
            (s, a, float(p), int(s2), float(r), bool(d))
            for s in range(S)
            for a in range(A)
            for (p, s2, r, d, *_) in model[s][a]
        ]
    except (KeyError, IndexError, TypeError, ValueError) as err:
        raise EnvError(
            f"{env_id}'s env.unwrapped.P is not a model P[s][a] = [(prob, next_state, reward, "
            f"done), ...] for every s < {S} and a < {A}: {err!r}."
        ) from None
    if not rows:
        raise EnvError(f"{env_id}'s env.unwrapped.P lists no transitions.")
    columns = list(zip(*rows, strict=True))
    table = {
        name: np.asarray(col, dtype=dtype)
        for name, col, dtype in zip(
            ("state", "action", "prob", "next_state", "reward", "done"),
            columns,
            (np.int64, np.int64, np.float64, np.int64, np.float64, bool),
            strict=True,
        )
    }
    bad = (table["next_state"] < 0) | (table["next_state"] >= S)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise EnvError(
            f"{env_id}'s model sends (s={table['state'][i]}, a={table['action'][i]}) to state "
            f"{table['next_state'][i]}, outside [0, {S})."
        )
    keep = table["prob"] > 0
    return {name: col[keep] for name, col in table.items()}


def _initial(unwrapped: Any, S: int) -> np.ndarray | None:
    mu = getattr(unwrapped, "initial_state_distrib", None)
    if mu is None:
        return None
    mu = np.asarray(mu, dtype=np.float64).ravel()
    return mu / mu.sum() if mu.shape == (S,) and mu.sum() > 0 else None


# --------------------------------------------------------------------------- building the MDP
def _build(
    env: Any,
    env_id: str,
    table: dict[str, np.ndarray],
    S: int,
    A: int,
    initial: np.ndarray | None,
    gamma: float,
) -> TabularMDP:
    targets = np.unique(table["next_state"][table["done"]])
    if initial is not None:
        support = initial > 0
    else:  # no start distribution published: assume episodes start anywhere but at an end
        support = np.ones(S, dtype=bool)
        support[targets] = False
    visited = _visitable(table, S, support)
    terminal_targets = targets[~visited[targets]]
    copied = targets[visited[targets]]  # entered with and without ending the episode
    n_total = S + copied.size
    next_state = _redirect_done(table, copied, S)

    P, R = _sparse_model(table, next_state, n_total, A, copied)
    terminal = np.zeros(n_total, dtype=bool)
    terminal[terminal_targets] = True
    terminal[S:] = True
    if initial is not None:
        initial = np.concatenate([initial, np.zeros(copied.size)])

    unwrapped = env.unwrapped
    names = _state_names(unwrapped, S)
    if names is not None:
        names += [f"{names[s]} (terminal copy)" for s in copied]
    mdp = TabularMDP(
        P,
        R,
        gamma,
        terminal=terminal,
        initial=initial,
        state_names=names,
        action_names=_ACTION_NAMES.get(type(unwrapped).__name__),
        grid_shape=_grid_shape(unwrapped, n_total),
        name=env_id,
    )
    spec = getattr(env, "spec", None)
    steps = getattr(spec, "max_episode_steps", None)
    mdp.max_episode_steps = int(steps) if steps is not None else None
    return mdp


def _visitable(table: dict[str, np.ndarray], S: int, start: np.ndarray) -> np.ndarray:
    """States an episode can be in: reachable from ``start`` through transitions not ``done``."""
    live = ~table["done"]
    # node S is a virtual source with an edge to every start state
    src = np.concatenate([table["state"][live], np.full(int(start.sum()), S)])
    dst = np.concatenate([table["next_state"][live], np.flatnonzero(start)])
    graph = sp.csr_array((np.ones(src.size), (src, dst)), shape=(S + 1, S + 1))
    order = breadth_first_order(graph, S, directed=True, return_predecessors=False)
    mask = np.zeros(S + 1, dtype=bool)
    mask[order] = True
    return mask[:S]


def _redirect_done(table: dict[str, np.ndarray], copied: np.ndarray, S: int) -> np.ndarray:
    """Next states with ``done`` transitions into a copied state sent to its terminal copy."""
    next_state = table["next_state"].copy()
    copy_of = np.full(S, -1, dtype=np.int64)
    copy_of[copied] = S + np.arange(copied.size)
    to_copy = table["done"] & (copy_of[next_state] >= 0)
    next_state[to_copy] = copy_of[next_state[to_copy]]
    return next_state


def _sparse_model(
    table: dict[str, np.ndarray], next_state: np.ndarray, n: int, A: int, copied: np.ndarray
) -> tuple[sp.csr_array, sp.csr_array]:
    """``P`` and per-transition ``R`` as CSR ``[A * n, n]`` with the same sparsity."""
    copies = np.arange(n - copied.size, n)
    # each terminal copy loops on itself with reward 0 under every action
    s = np.concatenate([table["state"], np.tile(copies, A)])
    a = np.concatenate([table["action"], np.repeat(np.arange(A), copies.size)])
    s2 = np.concatenate([next_state, np.tile(copies, A)])
    p = np.concatenate([table["prob"], np.ones(copies.size * A)])
    r = np.concatenate([table["reward"], np.zeros(copies.size * A)])
    keys, inverse = np.unique((a * n + s) * n + s2, return_inverse=True)
    prob = np.bincount(inverse, weights=p)
    reward = np.bincount(inverse, weights=p * r) / prob
    row, col = np.divmod(keys, n)
    P = sp.csr_array((prob, (row, col)), shape=(A * n, n))
    R = sp.csr_array((reward, (row, col)), shape=(A * n, n))  # a missing entry reads as 0
    return P, R


def _state_names(unwrapped: Any, S: int) -> list[str] | None:
    name = type(unwrapped).__name__
    if name == "TaxiEnv":
        return [_taxi_state_name(*unwrapped.decode(s)) for s in range(S)]
    shape = _grid_shape(unwrapped, S)
    if shape is None:
        return None
    return [f"({r},{c})" for r in range(shape[0]) for c in range(shape[1])]


def _taxi_state_name(row: int, col: int, passenger: int, destination: int) -> str:
    return (
        f"taxi=({row},{col}) passenger={_TAXI_PLACES[passenger]} "
        f"destination={_TAXI_PLACES[destination]}"
    )


def _grid_shape(unwrapped: Any, S: int) -> tuple[int, int] | None:
    """``(rows, cols)`` when the states are the cells of a grid (FrozenLake, CliffWalking)."""
    candidates: list[Sequence[int]] = []
    if type(unwrapped).__name__ == "FrozenLakeEnv":
        candidates.append(np.shape(unwrapped.desc))
    shape = getattr(unwrapped, "shape", None)
    if isinstance(shape, tuple):
        candidates.append(shape)
    for rows_cols in candidates:
        if len(rows_cols) == 2 and int(rows_cols[0]) * int(rows_cols[1]) == S:
            return int(rows_cols[0]), int(rows_cols[1])
    return None
