"""How close a tabular learner came to dynamic programming on the same MDP.

"Check a tabular agent against the DP value V*" (docs: Questions and tips): V* and Q* come from
value iteration, the learned greedy policy is evaluated exactly, and the report says how far
the learner's values and its policy are from optimal.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlx.errors import ConfigError
from rlx.mdp.tabular import TabularMDP
from rlx.tabular.learner import TabularResult

# Q*(s, a) within this of max_a Q*(s, a) counts as optimal: several actions tie in many MDPs.
OPTIMAL_TIE_TOL = 1e-6
_DP_TOL = 1e-10


@dataclass(frozen=True)
class CheckReport:
    """A learner's distance to DP over the non-terminal states.

    For prediction results the action fields are None and the reference is ``V^pi``.
    """

    algo: str
    max_abs_v_error: float
    """max_s |V(s) - V_ref(s)|, V_ref = V* (control) or V^pi (prediction)"""
    optimal_action_share: float | None
    """share of states whose greedy action is optimal (within 1e-6 of max_a Q*(s, a))"""
    policy_value_gap: float | None
    """max_s |V^greedy(s) - V*(s)| (inf if the greedy policy never terminates somewhere, gamma 1)"""
    mean_value_gap: float | None
    """sum_s mu(s) (V*(s) - V^greedy(s)), mu the initial distribution"""
    n_states: int
    """non-terminal states checked"""
    reference: str
    """'V*' or 'V^pi'"""

    def __str__(self) -> str:
        rows = [(f"max |V - {self.reference}|", f"{self.max_abs_v_error:.6g}")]
        if self.optimal_action_share is not None:
            rows += [
                ("optimal greedy actions", f"{100 * self.optimal_action_share:.1f}%"),
                ("greedy policy value gap", f"max {self.policy_value_gap:.6g}"),
                ("  from the start states", f"{self.mean_value_gap:.6g}"),
            ]
        head = f"{self.algo} vs dynamic programming ({self.n_states} non-terminal states):"
        return "\n".join([head] + [f"  {name:<26}{value}" for name, value in rows])


def check(result: TabularResult, mdp: TabularMDP) -> CheckReport:
    """Compare ``result`` with DP on ``mdp`` (with the discount the learner used)."""
    from rlx import planning

    if result.V.shape != (mdp.n_states,):
        raise ConfigError(
            f"the result has {result.V.shape[0]} states but the MDP has {mdp.n_states}; "
            "check it against the MDP it was trained on."
        )
    mdp = _with_gamma(mdp, result.gamma)
    live = ~mdp.terminal
    if result.is_prediction:
        V_pi = planning.policy_evaluation(mdp, result.policy, tol=_DP_TOL)
        return CheckReport(
            algo=result.algo,
            max_abs_v_error=_max_abs(result.V - V_pi, live),
            optimal_action_share=None,
            policy_value_gap=None,
            mean_value_gap=None,
            n_states=int(live.sum()),
            reference="V^pi",
        )
    V_star = planning.value_iteration(mdp, tol=_DP_TOL).V
    Q_star = mdp.q_from_v(V_star)
    greedy = np.asarray(result.policy, dtype=np.int64)
    V_greedy = _greedy_policy_value(mdp, greedy)
    return CheckReport(
        algo=result.algo,
        max_abs_v_error=_max_abs(result.V - V_star, live),
        optimal_action_share=_optimal_action_share(Q_star, greedy, live),
        policy_value_gap=_max_abs(V_greedy - V_star, live),
        mean_value_gap=_mean_gap(mdp.initial, V_star - V_greedy),
        n_states=int(live.sum()),
        reference="V*",
    )


def _with_gamma(mdp: TabularMDP, gamma: float) -> TabularMDP:
    if gamma == mdp.gamma:
        return mdp
    return TabularMDP(
        mdp.P_stacked, mdp.R, gamma, terminal=mdp.terminal, initial=mdp.initial, name=mdp.name
    )


def _max_abs(x: np.ndarray, mask: np.ndarray) -> float:
    return float(np.max(np.abs(x[mask]))) if mask.any() else 0.0


def _mean_gap(initial: np.ndarray, gap: np.ndarray) -> float:
    starts = initial > 0  # skip 0 * inf where a never-started state has an infinite gap
    return float(np.sum(initial[starts] * gap[starts]))


def _optimal_action_share(Q_star: np.ndarray, greedy: np.ndarray, live: np.ndarray) -> float:
    states = np.flatnonzero(live)
    chosen = Q_star[states, greedy[states]]
    return float(np.mean(chosen >= Q_star[states].max(axis=1) - OPTIMAL_TIE_TOL))


def _greedy_policy_value(mdp: TabularMDP, greedy: np.ndarray) -> np.ndarray:
    """``V^greedy``; with gamma 1, -inf where the policy can never reach a terminal state.

    There the undiscounted return is an endless sum (infinite, or undefined) and the policy's
    Bellman system is singular, so it is not solved: the gap is reported as infinite.
    """
    from rlx import planning

    proper = _reaches_terminal(mdp, greedy)
    if mdp.gamma < 1.0 or proper.all():
        return np.asarray(planning.policy_evaluation(mdp, greedy, tol=_DP_TOL), dtype=np.float64)
    V = np.full(mdp.n_states, -np.inf)
    V[mdp.terminal] = 0.0
    return V


def _reaches_terminal(mdp: TabularMDP, policy: np.ndarray) -> np.ndarray:
    """States from which a terminal state is reached with positive probability under ``policy``."""
    S = mdp.n_states
    P_pi = mdp.P_stacked[policy * S + np.arange(S)]
    reached = mdp.terminal.copy()
    while True:
        grown = reached | (P_pi @ reached.astype(np.float64) > 0)
        if (grown == reached).all():
            return reached
        reached = grown
