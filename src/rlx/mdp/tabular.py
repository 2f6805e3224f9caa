"""The five-tuple (S, A, P, R, gamma) of a finite MDP, held explicitly.

``P[a, s, s'] = Pr(s' | s, a)`` as a dense ``[A, S, S]`` array or as scipy sparse matrices;
``R[s, a]`` is the expected reward of taking ``a`` in ``s``. Rewards may also be given per
transition, as a dense ``[A, S, S]`` array or as sparse ``[A * S, S]`` (row ``a * S + s``, the
layout of ``P_stacked``); then ``R[s, a] = sum_s' P[a, s, s'] R[a, s, s']`` and the sampler
draws the reward of the transition actually taken.

Internally every MDP keeps one CSR matrix of shape ``[A * S, S]`` (row ``a * S + s``), so a
Bellman backup over all states and actions is a single sparse matrix-vector product. Planning
also asks for the state-major copy :attr:`TabularMDP.P_by_state` (row ``s * A + a``), built on
first use: a fused sweep that reads the ``A`` rows of one state next to each other streams
through memory about twice as fast as one that jumps between ``A`` distant blocks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from rlx.errors import MDPError

_ROW_SUM_TOL = 1e-8


@dataclass(frozen=True)
class SamplerArrays:
    """Flat arrays for compiled samplers: row ``a * S + s`` owns ``indptr[row]:indptr[row+1]``."""

    indptr: np.ndarray  # int64 [A*S + 1]
    next_state: np.ndarray  # int64 [nnz]
    cumprob: np.ndarray  # float64 [nnz], cumulative within each row, last entry exactly 1
    reward: np.ndarray  # float64 [nnz], reward of that transition
    terminal: np.ndarray  # bool [S]
    initial_cdf: np.ndarray  # float64 [S]


class TabularMDP:
    """A finite MDP ``(S, A, P, R, gamma)`` with optional terminal states.

    Args:
        P: transition probabilities, dense ``[A, S, S]``, a sequence of ``A`` sparse ``[S, S]``
            matrices, or one sparse ``[A * S, S]`` matrix (row ``a * S + s``).
        R: expected rewards ``[S, A]``, or per-transition rewards: dense ``[A, S, S]`` or sparse
            ``[A * S, S]`` (row ``a * S + s``; a missing entry is a reward of 0).
        gamma: discount in ``[0, 1]``.
        terminal: boolean ``[S]`` (or indices): states where an episode ends; their value is 0.
        initial: start-state distribution ``[S]``; default uniform over non-terminal states.
        state_names: optional state labels for printing.
        action_names: optional action labels for printing.
        grid_shape: ``(rows, cols)`` when states are cells of a grid, row-major (for printing).
        name: a short description, e.g. ``"GridWorld(4x4)"``.

    ``max_episode_steps`` is the episode time limit of the source environment, or ``None``
    (:func:`rlx.mdp.from_gymnasium` sets it from the Gymnasium spec).
    """

    max_episode_steps: int | None = None

    def __init__(
        self,
        P: np.ndarray | sp.spmatrix | sp.sparray | Sequence,
        R: np.ndarray,
        gamma: float,
        *,
        terminal: np.ndarray | Sequence[int] | None = None,
        initial: np.ndarray | None = None,
        state_names: Sequence[str] | None = None,
        action_names: Sequence[str] | None = None,
        grid_shape: tuple[int, int] | None = None,
        name: str | None = None,
    ) -> None:
        self._dense_input = isinstance(P, np.ndarray) and not sp.issparse(P)
        stacked, n_states, n_actions = _stack_transitions(P)
        self.n_states, self.n_actions = n_states, n_actions
        self.gamma = _check_gamma(gamma)
        self._P = stacked
        _check_probabilities(stacked, n_states, n_actions)
        self._R, self._transition_reward = _expected_rewards(R, stacked, n_states, n_actions)
        self.terminal = _terminal_mask(terminal, n_states)
        self.initial = _initial_distribution(initial, self.terminal)
        self.state_names = list(state_names) if state_names is not None else None
        self.action_names = list(action_names) if action_names is not None else None
        if grid_shape is not None and grid_shape[0] * grid_shape[1] != n_states:
            raise MDPError(
                f"grid_shape {grid_shape} has {grid_shape[0] * grid_shape[1]} cells but the MDP "
                f"has {n_states} states; rows * cols must equal S."
            )
        self.grid_shape = grid_shape
        self.name = name or "TabularMDP"
        self._sampler: SamplerArrays | None = None
        self._gcdf: np.ndarray | None = None
        self._by_state: sp.csr_array | None = None

    # ----------------------------------------------------------------- the five-tuple
    @property
    def P(self) -> np.ndarray | tuple[sp.csr_array, ...]:
        """``P[a, s, s']``: dense ``[A, S, S]`` if given dense, else ``A`` CSR ``[S, S]``."""
        S = self.n_states
        if self._dense_input:
            return self._P.toarray().reshape(self.n_actions, S, S)
        return tuple(self._P[a * S : (a + 1) * S] for a in range(self.n_actions))

    @property
    def P_stacked(self) -> sp.csr_array:
        """All transitions as one CSR matrix ``[A * S, S]``, row ``a * S + s``."""
        return self._P

    @property
    def P_by_state(self) -> sp.csr_array:
        """The same transitions, state-major: CSR ``[S * A, S]``, row ``s * A + a``.

        Built on first use and cached (it doubles the memory held for ``P``); the fused Bellman
        sweeps of :mod:`rlx.planning` read it so the ``A`` rows of one state are adjacent.
        """
        if self._by_state is None:
            S, A = self.n_states, self.n_actions
            state_major = np.arange(S * A)
            # row s * A + a of the result is row a * S + s of P_stacked
            self._by_state = self._P[(state_major % A) * S + state_major // A]
        return self._by_state

    @property
    def R(self) -> np.ndarray:
        """Expected reward ``R[s, a]``."""
        return self._R

    @property
    def is_sparse(self) -> bool:
        return not self._dense_input

    def __repr__(self) -> str:
        return f"{self.name}(S={self.n_states}, A={self.n_actions}, gamma={self.gamma})"

    # ----------------------------------------------------------------- Bellman backups
    def expected_next_value(self, V: np.ndarray) -> np.ndarray:
        """``sum_s' P(s' | s, a) V(s')`` for every ``(s, a)``, shape ``[S, A]``."""
        return (self._P @ V).reshape(self.n_actions, self.n_states).T

    def q_from_v(self, V: np.ndarray, gamma: float | None = None) -> np.ndarray:
        """``Q(s, a) = R(s, a) + gamma sum_s' P(s' | s, a) V(s')``; zero in terminal states."""
        g = self.gamma if gamma is None else gamma
        Q = self._R + g * self.expected_next_value(V)
        Q[self.terminal] = 0.0
        return Q

    # ----------------------------------------------------------------- sampling
    def sampler_arrays(self) -> SamplerArrays:
        """Flat arrays (CSR with per-row cumulative probabilities) for compiled samplers."""
        if self._sampler is None:
            P = self._P
            indptr = P.indptr.astype(np.int64)
            rows = np.repeat(np.arange(P.shape[0]), np.diff(indptr))
            cum = np.cumsum(P.data)
            row_start = np.concatenate(([0.0], cum))[indptr[:-1]]
            cumprob = cum - row_start[rows]
            # close each row at exactly 1 so a uniform draw always lands in the row
            ends = indptr[1:] - 1
            nonempty = indptr[1:] > indptr[:-1]
            cumprob[ends[nonempty]] = 1.0
            reward = (
                self._transition_reward
                if self._transition_reward is not None
                else self._R.T.reshape(-1)[rows]
            )
            initial_cdf = np.cumsum(self.initial)
            initial_cdf[-1] = 1.0
            self._sampler = SamplerArrays(
                indptr=indptr,
                next_state=P.indices.astype(np.int64),
                cumprob=cumprob,
                reward=np.ascontiguousarray(reward, dtype=np.float64),
                terminal=self.terminal.copy(),
                initial_cdf=initial_cdf,
            )
        return self._sampler

    def reset(self, rng: np.random.Generator) -> int:
        """Draw a start state from ``initial``."""
        return int(np.searchsorted(self.sampler_arrays().initial_cdf, rng.random(), side="right"))

    def sample(self, s: int, a: int, rng: np.random.Generator) -> tuple[int, float, bool]:
        """One transition from ``(s, a)``: ``(s', r, terminated)``."""
        nxt, r, term = self.sample_batch(np.array([s]), np.array([a]), rng)
        return int(nxt[0]), float(r[0]), bool(term[0])

    def sample_batch(
        self, s: np.ndarray, a: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Transitions for arrays of states and actions, all at once.

        Each row's cumulative probabilities are shifted by the row number, which makes the whole
        array monotone, so one ``searchsorted`` serves every row.
        """
        arr = self.sampler_arrays()
        s = np.asarray(s, dtype=np.int64)
        a = np.asarray(a, dtype=np.int64)
        if s.shape != a.shape:
            raise MDPError(f"states {s.shape} and actions {a.shape} must have the same shape.")
        _check_indices(s, self.n_states, "state")
        _check_indices(a, self.n_actions, "action")
        rows = a * self.n_states + s
        pos = np.searchsorted(self._global_cdf(), rows + rng.random(rows.shape), side="right")
        pos = np.minimum(pos, arr.indptr[rows + 1] - 1)
        nxt = arr.next_state[pos]
        return nxt, arr.reward[pos], arr.terminal[nxt]

    def _global_cdf(self) -> np.ndarray:
        if self._gcdf is None:
            arr = self.sampler_arrays()
            rows = np.repeat(np.arange(len(arr.indptr) - 1), np.diff(arr.indptr))
            self._gcdf = arr.cumprob + rows
        return self._gcdf


# --------------------------------------------------------------------- validation helpers
def _check_indices(x: np.ndarray, n: int, what: str) -> None:
    if x.size and (x.min() < 0 or x.max() >= n):
        bad = int(x[(x < 0) | (x >= n)].ravel()[0])
        raise MDPError(f"{what} {bad} is out of range; {what}s must lie in [0, {n}).")


def _check_gamma(gamma: float) -> float:
    g = float(gamma)
    if not np.isfinite(g) or not 0.0 <= g <= 1.0:
        raise MDPError(f"gamma={gamma!r} is not a discount: it must lie in [0, 1].")
    return g


def _stack_transitions(P) -> tuple[sp.csr_array, int, int]:
    if sp.issparse(P):
        M = sp.csr_array(P, dtype=np.float64)
        rows, S = M.shape
        if S == 0 or rows % S:
            raise MDPError(f"sparse P has shape {M.shape}; expected [A * S, S] with row a * S + s.")
        return _canonical(M), S, rows // S
    if isinstance(P, np.ndarray) or (isinstance(P, Sequence) and len(P) and not sp.issparse(P[0])):
        D = np.asarray(P, dtype=np.float64)
        if D.ndim != 3 or D.shape[1] != D.shape[2] or 0 in D.shape:
            raise MDPError(f"P has shape {D.shape}; expected [A, S, S] with S >= 1, A >= 1.")
        A, S, _ = D.shape
        _check_finite(D, "P")
        return _canonical(sp.csr_array(D.reshape(A * S, S))), S, A
    if isinstance(P, Sequence) and len(P):
        mats = [sp.csr_array(m, dtype=np.float64) for m in P]
        S = mats[0].shape[0]
        for a, m in enumerate(mats):
            if m.shape != (S, S):
                raise MDPError(f"P[{a}] has shape {m.shape}; every action needs [S, S] = {(S, S)}.")
        return _canonical(sp.vstack(mats, format="csr")), S, len(mats)
    raise MDPError(
        f"P of type {type(P).__name__} is not a transition model; give a dense [A, S, S] "
        "array or scipy sparse matrices."
    )


def _canonical(M: sp.csr_array) -> sp.csr_array:
    M = sp.csr_array(M)
    M.eliminate_zeros()
    M.sum_duplicates()
    M.sort_indices()
    return M


def _check_finite(x: np.ndarray, what: str) -> None:
    if not np.all(np.isfinite(x)):
        idx = tuple(int(i) for i in np.argwhere(~np.isfinite(x))[0])
        raise MDPError(
            f"{what} has a non-finite value {x[idx]} at index {idx}; all must be finite."
        )


def _check_probabilities(P: sp.csr_array, S: int, A: int) -> None:
    _check_finite(P.data, "P")
    if P.data.size and P.data.min() < 0:
        k = int(np.argmin(P.data))
        row = int(np.searchsorted(P.indptr, k, side="right") - 1)
        raise MDPError(
            f"P has a negative probability {P.data[k]} for (s={row % S}, a={row // S}); "
            "probabilities must be >= 0."
        )
    sums = np.asarray(P.sum(axis=1)).ravel()
    bad = np.flatnonzero(np.abs(sums - 1.0) > _ROW_SUM_TOL)
    if bad.size:
        row = int(bad[0])
        raise MDPError(
            f"P(. | s={row % S}, a={row // S}) sums to {sums[row]:.10g}, not 1 "
            f"({bad.size} such (s, a) pairs); every row of P must sum to 1 within {_ROW_SUM_TOL}."
        )


def _expected_rewards(R, P: sp.csr_array, S: int, A: int) -> tuple[np.ndarray, np.ndarray | None]:
    if sp.issparse(R) or (isinstance(R, Sequence) and len(R) and sp.issparse(R[0])):
        return _sparse_transition_rewards(R, P, S, A)
    R = np.asarray(R, dtype=np.float64)
    _check_finite(R, "R")
    if R.shape == (S, A):
        return R.copy(), None
    if R.shape == (A, S, S):
        # reward of each stored transition, aligned with P.data
        rows = np.repeat(np.arange(A * S), np.diff(P.indptr))
        per_transition = R.reshape(A * S, S)[rows, P.indices]
        Rsa = np.bincount(rows, weights=P.data * per_transition, minlength=A * S)
        return Rsa.reshape(A, S).T.copy(), per_transition
    raise MDPError(f"R has shape {R.shape}; expected [S, A] = {(S, A)} or [A, S, S] = {(A, S, S)}.")


def _sparse_transition_rewards(
    R, P: sp.csr_array, S: int, A: int
) -> tuple[np.ndarray, np.ndarray | None]:
    """Rewards given sparse ``[A * S, S]`` (or ``A`` sparse ``[S, S]``), one per stored P entry."""
    M = sp.csr_array(R, dtype=np.float64) if sp.issparse(R) else sp.vstack(R, format="csr")
    if M.shape != (A * S, S):
        if M.shape == (S, A):
            return _expected_rewards(M.toarray(), P, S, A)
        raise MDPError(
            f"sparse R has shape {M.shape}; expected per-transition rewards [A * S, S] = "
            f"{(A * S, S)} (row a * S + s) or expected rewards [S, A] = {(S, A)}."
        )
    M = _canonical(M)
    _check_finite(M.data, "R")
    p_rows = np.repeat(np.arange(A * S, dtype=np.int64), np.diff(P.indptr))
    per_transition = np.zeros(P.nnz)
    if M.nnz:
        # look each stored transition of P up in R by its flat key row * S + column (both sorted)
        r_rows = np.repeat(np.arange(A * S, dtype=np.int64), np.diff(M.indptr))
        p_keys = p_rows * S + P.indices
        r_keys = r_rows * S + M.indices
        pos = np.minimum(np.searchsorted(r_keys, p_keys), r_keys.size - 1)
        hit = r_keys[pos] == p_keys
        per_transition[hit] = M.data[pos[hit]]
    Rsa = np.bincount(p_rows, weights=P.data * per_transition, minlength=A * S)
    return Rsa.reshape(A, S).T.copy(), per_transition


def _terminal_mask(terminal, S: int) -> np.ndarray:
    if terminal is None:
        return np.zeros(S, dtype=bool)
    t = np.asarray(terminal)
    if t.dtype == bool:
        if t.shape != (S,):
            raise MDPError(f"terminal mask has shape {t.shape}; expected ({S},).")
        return t.copy()
    idx = t.astype(np.int64).ravel()
    if idx.size and (idx.min() < 0 or idx.max() >= S):
        raise MDPError(f"terminal state indices {idx.tolist()} must lie in [0, {S}).")
    mask = np.zeros(S, dtype=bool)
    mask[idx] = True
    return mask


def _initial_distribution(initial, terminal: np.ndarray) -> np.ndarray:
    S = terminal.size
    if initial is None:
        mu = (~terminal).astype(np.float64)
        if mu.sum() == 0:
            raise MDPError("every state is terminal; an MDP needs at least one non-terminal state.")
        return mu / mu.sum()
    mu = np.asarray(initial, dtype=np.float64)
    if mu.ndim == 0:  # a single start state
        s0 = int(mu)
        if not 0 <= s0 < S:
            raise MDPError(f"initial state {s0} must lie in [0, {S}).")
        mu = np.zeros(S)
        mu[s0] = 1.0
    if (
        mu.shape != (S,)
        or not np.all(np.isfinite(mu))
        or np.any(mu < 0)
        or abs(mu.sum() - 1) > 1e-8
    ):
        raise MDPError(
            f"initial distribution must be [S] = ({S},), non-negative and summing to 1; "
            f"got shape {mu.shape} summing to {mu.sum():.6g}."
        )
    return mu
