"""Sampling episodes from a TabularMDP inside compiled code.

:class:`ModelArrays` carries :meth:`TabularMDP.sampler_arrays` into numba kernels as one
argument; :func:`start_state` and :func:`step_model` draw from it with the learner's own
generator, so the kernels never call back into Python.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from rlx.mdp.tabular import TabularMDP
from rlx.tabular.rng import uniform


class ModelArrays(NamedTuple):
    """A TabularMDP's sampler arrays; row ``a * S + s`` owns ``indptr[row]:indptr[row + 1]``."""

    indptr: np.ndarray
    next_state: np.ndarray
    cumprob: np.ndarray
    reward: np.ndarray
    terminal: np.ndarray
    initial_cdf: np.ndarray
    n_states: int


def model_arrays(mdp: TabularMDP) -> ModelArrays:
    """The sampler arrays of ``mdp`` with the dtypes the kernels are compiled for."""
    arr = mdp.sampler_arrays()
    return ModelArrays(
        indptr=np.ascontiguousarray(arr.indptr, dtype=np.int64),
        next_state=np.ascontiguousarray(arr.next_state, dtype=np.int64),
        cumprob=np.ascontiguousarray(arr.cumprob, dtype=np.float64),
        reward=np.ascontiguousarray(arr.reward, dtype=np.float64),
        terminal=np.ascontiguousarray(arr.terminal, dtype=np.bool_),
        initial_cdf=np.ascontiguousarray(arr.initial_cdf, dtype=np.float64),
        n_states=int(mdp.n_states),
    )


@njit(cache=True, inline="always")
def start_state(model: ModelArrays, rng: np.ndarray) -> int:
    """``s0 ~ initial``: the first state whose cumulative probability exceeds a uniform draw."""
    s = np.searchsorted(model.initial_cdf, uniform(rng), side="right")
    # compiled, searchsorted of a scalar is an int64 and so is the min: an int in Python
    return min(s, model.n_states - 1)  # type: ignore[return-value]


@njit(cache=True, inline="always")
def step_model(model: ModelArrays, s: int, a: int, rng: np.ndarray) -> tuple[int, float, bool]:
    """One transition ``(s', r, terminated)`` with ``s' ~ P(. | s, a)``.

    The successor is the number of cumulative probabilities at or below a uniform draw,
    counted without a data-dependent branch: rows are short, and an early exit from the scan
    would be a branch the CPU mispredicts on about every other step.
    """
    row = a * model.n_states + s
    u = uniform(rng)
    first = model.indptr[row]
    k = first
    for j in range(first, model.indptr[row + 1] - 1):
        k += model.cumprob[j] <= u
    s_next = model.next_state[k]
    return s_next, model.reward[k], model.terminal[s_next]
