"""The stateful tabular learner: run episodes in chunks, checkpoint, resume, report.

A :class:`TabularLearner` owns its tables, visit counts, generator state and counters. Every
random draw (start states, transitions, exploration, tie-breaks, Gymnasium reset seeds) comes
from its own generator, so ``run(300)`` then ``run(700)`` gives bit-for-bit the same tables
and returns as ``run(1000)``, also across :meth:`state_dict` / :meth:`load_state_dict`.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx.errors import CheckpointError, ConfigError, UnknownAlgorithmError
from rlx.tabular.algorithms import double_q, expected_sarsa, monte_carlo, q_learning, sarsa, td0
from rlx.tabular.config import TabularConfig
from rlx.tabular.environment import ResolvedEnv, resolve_env
from rlx.tabular.explore import policy_cdf
from rlx.tabular.rng import seed_rng

CONTROL = ("mc", "q-learning", "sarsa", "expected-sarsa", "double-q")
PREDICTION = ("mc-prediction", "td0")
ALGORITHMS = CONTROL + PREDICTION

# compiled kernel (on a model) and plain loop (on a Gymnasium env) of each algorithm; each
# algorithm's loops take their own arguments and return (steps, sum of |TD error|)
_Loop = Callable[..., tuple[int, float]]
_LOOPS: dict[str, tuple[_Loop, _Loop]] = {
    "q-learning": (q_learning.learn_on_model, q_learning.learn),
    "sarsa": (sarsa.learn_on_model, sarsa.learn),
    "expected-sarsa": (expected_sarsa.learn_on_model, expected_sarsa.learn),
    "double-q": (double_q.learn_on_model, double_q.learn),
    "mc": (monte_carlo.learn_control_on_model, monte_carlo.learn_control),
    "mc-prediction": (monte_carlo.learn_prediction_on_model, monte_carlo.learn_prediction),
    "td0": (td0.learn_on_model, td0.learn),
}


@dataclass(frozen=True)
class EpisodeBatch:
    """What one :meth:`TabularLearner.run` call did."""

    returns: np.ndarray
    """undiscounted return of each episode of the chunk"""
    lengths: np.ndarray
    """steps of each episode of the chunk"""
    epsilon: float
    """exploration rate of the chunk's last episode (0 for prediction, which follows its policy)"""
    td_error: float
    """mean |TD error| (|G - Q| for Monte Carlo) over the chunk's updates"""


@dataclass
class TabularResult:
    """A trained tabular learner's tables and training curve.

    For ``double-q``, ``Q = (Q1 + Q2) / 2`` (the behaviour policy is greedy in ``Q1 + Q2``, so the
    same argmax); ``Q1`` and ``Q2`` are the two tables.
    """

    algo: str
    Q: np.ndarray | None
    """action values [S, A] (None for prediction)"""
    V: np.ndarray
    """state values [S]: max_a Q(s, a) for control, the estimate for prediction"""
    policy: np.ndarray
    """control: greedy actions int [S] (ties: lowest index); prediction: the evaluated pi [S, A]"""
    returns: np.ndarray
    """undiscounted return of every training episode"""
    lengths: np.ndarray
    """steps of every training episode"""
    gamma: float = 0.99
    """discount the learner used"""
    Q1: np.ndarray | None = None
    """double-q: the first table"""
    Q2: np.ndarray | None = None
    """double-q: the second table"""
    visits: np.ndarray | None = None
    """updates made per (s, a) (control) or per s (prediction); summed over both double-q tables"""

    @property
    def is_prediction(self) -> bool:
        return self.Q is None


class TabularLearner:
    """A tabular learner on a TabularMDP (compiled) or a Discrete Gymnasium env (Python loop).

    Args:
        algo: one of ``"mc"`` (Monte Carlo control), ``"mc-prediction"``, ``"td0"``,
            ``"q-learning"``, ``"sarsa"``, ``"expected-sarsa"``, ``"double-q"``.
        env: an ``rlx.mdp.TabularMDP``, a Gymnasium env with Discrete spaces, or an id (toy-text
            ids with a model, e.g. ``"FrozenLake-v1"``, take the compiled path).
        config: hyperparameters (:class:`TabularConfig`).
        policy: prediction only: the policy to evaluate, int ``[S]`` or probabilities ``[S, A]``;
            None is the equiprobable random policy.
    """

    def __init__(
        self,
        algo: str,
        env: Any,
        config: TabularConfig | None = None,
        *,
        policy: np.ndarray | None = None,
    ) -> None:
        self.algo = _check_algo(algo)
        self.config = TabularConfig() if config is None else config
        if not isinstance(self.config, TabularConfig):
            raise ConfigError(f"config must be a TabularConfig, not {type(self.config).__name__}.")
        if policy is not None and self.algo in CONTROL:
            raise ConfigError(
                f"policy= is for prediction ('td0', 'mc-prediction'); {self.algo} learns its own."
            )
        self.env: ResolvedEnv = resolve_env(
            env, self.algo, self.config.gamma, self.config.max_steps
        )
        S, A = self.env.n_states, self.env.n_actions
        self._policy = _prediction_policy(policy, S, A) if self.algo in PREDICTION else None
        self._policy_cdf = policy_cdf(self._policy) if self._policy is not None else None
        self._tables = self._initial_tables(S, A)
        self._rng = seed_rng(self.config.seed)
        self.episodes_done = 0
        self.steps_done = 0
        self._returns: list[np.ndarray] = []
        self._lengths: list[np.ndarray] = []

    # ----------------------------------------------------------------- training
    def run(self, n_episodes: int) -> EpisodeBatch:
        """Run ``n_episodes`` more episodes from the current state and learn from them."""
        if isinstance(n_episodes, bool) or not isinstance(n_episodes, int | np.integer):
            raise ConfigError(f"n_episodes={n_episodes!r} must be an integer >= 1.")
        if n_episodes < 1:
            raise ConfigError(f"n_episodes={n_episodes} must be >= 1.")
        n = int(n_episodes)
        returns = np.zeros(n, dtype=np.float64)
        lengths = np.zeros(n, dtype=np.int64)
        epsilons = self.config.epsilons(self.episodes_done, n)
        updates_before = int(self._visits().sum())
        steps, abs_error = self._learn(epsilons, returns, lengths)
        updates = int(self._visits().sum()) - updates_before
        self.episodes_done += n
        self.steps_done += int(steps)
        self._returns.append(returns)
        self._lengths.append(lengths)
        return EpisodeBatch(
            returns=returns,
            lengths=lengths,
            epsilon=float(epsilons[-1]) if self.algo in CONTROL else 0.0,
            td_error=float(abs_error) / max(updates, 1),
        )

    def _learn(
        self, epsilons: np.ndarray, returns: np.ndarray, lengths: np.ndarray
    ) -> tuple[int, float]:
        compiled, plain = _LOOPS[self.algo]
        fast = self.env.model is not None
        loop = compiled if fast else plain
        env = self.env.model if fast else self.env.gym
        t, rng, c = self._tables, self._rng, self.config
        alpha = 0.0 if c.alpha is None else float(c.alpha)  # 0 selects 1/N in step_size
        common = (alpha, self.env.gamma, self.env.max_steps)
        n = epsilons.shape[0]
        match self.algo:
            case "q-learning" | "sarsa" | "expected-sarsa":
                return loop(env, t["Q"], t["visits"], rng, epsilons, *common, returns, lengths)
            case "double-q":
                return loop(
                    env, t["Q1"], t["Q2"], t["visits1"], t["visits2"], rng, epsilons, *common,
                    returns, lengths,
                )  # fmt: skip
            case "mc":
                return loop(
                    env, t["Q"], t["visits"], rng, epsilons, *common, c.first_visit, returns,
                    lengths,
                )  # fmt: skip
            case "mc-prediction":
                return loop(
                    env, t["V"], t["visits"], self._policy_cdf, rng, n, *common, c.first_visit,
                    returns, lengths,
                )  # fmt: skip
            case "td0":
                return loop(
                    env, t["V"], t["visits"], self._policy_cdf, rng, n, *common, returns, lengths
                )
        raise AssertionError(self.algo)  # unreachable: _check_algo admits only these

    def _initial_tables(self, S: int, A: int) -> dict[str, np.ndarray]:
        q0 = float(self.config.q_init)
        terminal = self.env.terminal

        def values(shape: tuple[int, ...]) -> np.ndarray:
            table = np.full(shape, q0, dtype=np.float64)
            if terminal is not None:
                table[terminal] = 0.0  # a terminal state's value is 0 by definition
            return table

        if self.algo in PREDICTION:
            return {"V": values((S,)), "visits": np.zeros(S, dtype=np.int64)}
        if self.algo == "double-q":
            return {
                "Q1": values((S, A)),
                "Q2": values((S, A)),
                "visits1": np.zeros((S, A), dtype=np.int64),
                "visits2": np.zeros((S, A), dtype=np.int64),
            }
        return {"Q": values((S, A)), "visits": np.zeros((S, A), dtype=np.int64)}

    # ----------------------------------------------------------------- state
    def state_dict(self) -> dict[str, np.ndarray | int | float]:
        """Everything needed to continue exactly: tables, visit counts, generator, counters."""
        state: dict[str, np.ndarray | int | float] = {
            name: table.copy() for name, table in self._tables.items()
        }
        state["rng"] = self._rng.copy()
        state["episodes_done"] = int(self.episodes_done)
        state["steps_done"] = int(self.steps_done)
        state["returns"] = self._all(self._returns, np.float64)
        state["lengths"] = self._all(self._lengths, np.int64)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict` (of a learner with the same algo, env and config)."""
        expected = [*self._tables, "rng", "episodes_done", "steps_done", "returns", "lengths"]
        missing = [k for k in expected if k not in state]
        if missing:
            raise CheckpointError(
                f"this {self.algo} state is missing {', '.join(missing)}; was it saved by a "
                "different algorithm?"
            )
        tables = {}
        for name, table in self._tables.items():
            loaded = np.asarray(state[name])
            if loaded.shape != table.shape:
                raise CheckpointError(
                    f"{name} has shape {loaded.shape} in the checkpoint but {table.shape} here; "
                    "the checkpoint belongs to a different environment."
                )
            tables[name] = np.array(loaded, dtype=table.dtype)
        rng = np.array(state["rng"], dtype=np.uint64)
        if rng.shape != self._rng.shape:
            raise CheckpointError(f"rng state has shape {rng.shape}; expected {self._rng.shape}.")
        self._tables, self._rng = tables, rng
        self.episodes_done = int(state["episodes_done"])
        self.steps_done = int(state["steps_done"])
        self._returns = [np.array(state["returns"], dtype=np.float64)]
        self._lengths = [np.array(state["lengths"], dtype=np.int64)]

    def _visits(self) -> np.ndarray:
        """Updates made per entry (double-q: both tables together)."""
        t = self._tables
        return t["visits1"] + t["visits2"] if self.algo == "double-q" else t["visits"]

    @staticmethod
    def _all(chunks: list[np.ndarray], dtype: type) -> np.ndarray:
        return np.concatenate(chunks).astype(dtype) if chunks else np.zeros(0, dtype=dtype)

    # ----------------------------------------------------------------- results
    def _action_values(self) -> np.ndarray | None:
        t = self._tables
        if self.algo == "double-q":
            return (t["Q1"] + t["Q2"]) / 2.0
        return t.get("Q")

    def greedy_action(self, s: int) -> int:
        """``argmax_a Q(s, a)`` (ties: the lowest index, so evaluation draws nothing).

        For prediction: the most probable action of the evaluated policy.
        """
        Q = self._action_values()
        if Q is None:
            assert self._policy is not None  # no Q: prediction, which has its policy
            row = self._policy[int(s)]
        else:
            row = Q[int(s)]
        return int(np.argmax(row))

    def result(self) -> TabularResult:
        """The tables so far, the greedy (or evaluated) policy and the training curve."""
        t = self._tables
        Q = self._action_values()
        common: dict[str, Any] = {
            "algo": self.algo,
            "returns": self._all(self._returns, np.float64),
            "lengths": self._all(self._lengths, np.int64),
            "gamma": self.env.gamma,
            "visits": self._visits().copy(),
        }
        if Q is None:
            assert self._policy is not None  # no Q: prediction, which has its policy
            return TabularResult(Q=None, V=t["V"].copy(), policy=self._policy.copy(), **common)
        return TabularResult(
            Q=Q.copy(),
            V=Q.max(axis=1),
            policy=np.argmax(Q, axis=1).astype(np.int64),
            Q1=t["Q1"].copy() if "Q1" in t else None,
            Q2=t["Q2"].copy() if "Q2" in t else None,
            **common,
        )


def _check_algo(algo: str) -> str:
    key = str(algo).strip().lower().replace("_", "-")
    if key not in ALGORITHMS:
        close = difflib.get_close_matches(key, ALGORITHMS, n=2, cutoff=0.5)
        hint = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise UnknownAlgorithmError(
            f"unknown tabular algorithm {algo!r}; use one of {', '.join(ALGORITHMS)}.{hint}"
        )
    return key


def _prediction_policy(policy: np.ndarray | None, S: int, A: int) -> np.ndarray:
    """The evaluated policy as probabilities ``[S, A]`` (None: equiprobable; int [S]: one-hot)."""
    if policy is None:
        return np.full((S, A), 1.0 / A)
    p = np.asarray(policy)
    if p.shape == (S,) and np.issubdtype(p.dtype, np.integer):
        if p.min() < 0 or p.max() >= A:
            raise ConfigError(f"policy actions must lie in [0, {A}); got {p.min()}..{p.max()}.")
        return np.eye(A)[p]
    if p.shape != (S, A):
        raise ConfigError(
            f"policy has shape {p.shape}; give int actions [S] = ({S},) or probabilities "
            f"[S, A] = ({S}, {A})."
        )
    p = p.astype(np.float64)
    sums = p.sum(axis=1)
    if not np.all(np.isfinite(p)) or p.min() < 0 or np.abs(sums - 1.0).max() > 1e-8:
        raise ConfigError(
            "policy probabilities must be finite, >= 0, and each row must sum to 1 "
            f"(row sums range {sums.min():.6g}..{sums.max():.6g})."
        )
    return p
