"""Argument checks shared by the planners: one sentence naming the value and what is valid."""

from __future__ import annotations

import numbers

import numpy as np

from rlx.errors import ConfigError, MDPError
from rlx.mdp.tabular import TabularMDP

_PROB_TOL = 1e-8


def check_tol(tol: float) -> float:
    t = float(tol)
    if not np.isfinite(t) or t <= 0:
        raise ConfigError(f"tol={tol!r} must be a positive number, e.g. 1e-8.")
    return t


def check_max_iterations(max_iterations: int) -> int:
    if not isinstance(max_iterations, numbers.Integral) or max_iterations < 1:
        raise ConfigError(f"max_iterations={max_iterations!r} must be an integer >= 1.")
    return int(max_iterations)


def check_choice(name: str, value: str, valid: tuple[str, ...]) -> str:
    if value not in valid:
        raise ConfigError(f"{name}={value!r} is not one of {', '.join(map(repr, valid))}.")
    return value


def resolve_gamma(mdp: TabularMDP, gamma: float | None) -> float:
    if gamma is None:
        return mdp.gamma
    g = float(gamma)
    if not np.isfinite(g) or not 0.0 <= g <= 1.0:
        raise MDPError(f"gamma={gamma!r} is not a discount: it must lie in [0, 1].")
    return g


def policy_probabilities(mdp: TabularMDP, policy: np.ndarray) -> np.ndarray:
    """``pi(a | s)`` as ``[S, A]`` from a deterministic ``int [S]`` or a stochastic ``[S, A]``."""
    S, A = mdp.n_states, mdp.n_actions
    pi = np.asarray(policy)
    if pi.shape == (S,):
        return _one_hot(pi, S, A)
    if pi.shape == (S, A):
        return _checked_probabilities(pi, S)
    raise MDPError(
        f"policy has shape {pi.shape}; give actions int [S] = ({S},) or probabilities "
        f"[S, A] = ({S}, {A})."
    )


def _one_hot(pi: np.ndarray, S: int, A: int) -> np.ndarray:
    if not np.issubdtype(pi.dtype, np.integer):
        if not (np.all(np.isfinite(pi)) and np.all(pi == np.round(pi))):
            raise MDPError(
                f"a deterministic policy must hold integer actions; got dtype {pi.dtype}."
            )
        pi = pi.astype(np.int64)
    bad = (pi < 0) | (pi >= A)
    if bad.any():
        s = int(np.flatnonzero(bad)[0])
        raise MDPError(f"policy[{s}] = {pi[s]} is not an action; actions lie in [0, {A}).")
    probs = np.zeros((S, A))
    probs[np.arange(S), pi] = 1.0
    return probs


def _checked_probabilities(pi: np.ndarray, S: int) -> np.ndarray:
    probs = np.asarray(pi, dtype=np.float64)
    invalid = ~np.isfinite(probs) | (probs < 0)
    if invalid.any():
        s, a = (int(i) for i in np.argwhere(invalid)[0])
        raise MDPError(
            f"policy probability pi(a={a} | s={s}) = {probs[s, a]} is not a probability; "
            "each must be finite and >= 0."
        )
    sums = probs.sum(axis=1)
    off = np.flatnonzero(np.abs(sums - 1.0) > _PROB_TOL)
    if off.size:
        s = int(off[0])
        raise MDPError(
            f"policy probabilities of state {s} sum to {sums[s]:.10g}, not 1 "
            f"({off.size} such states); every row of pi must sum to 1."
        )
    return probs
