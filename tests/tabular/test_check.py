"""The DP oracle of the learning tests: `check` must tell an optimal table from a worse one.

Every tabular learning test trusts ``check``'s optimal-action share and greedy-policy gap; these
tests give it policies whose answers are known without it."""

from __future__ import annotations

import numpy as np
import pytest

from rlx import planning
from rlx.mdp import GridWorld
from rlx.tabular import check
from rlx.tabular.learner import TabularResult


@pytest.fixture(scope="module")
def solved() -> tuple[GridWorld, np.ndarray, np.ndarray]:
    mdp = GridWorld(4, 4, gamma=0.9)
    V_star = planning.value_iteration(mdp, tol=1e-12).V
    return mdp, V_star, mdp.q_from_v(V_star)


def _result(Q: np.ndarray, policy: np.ndarray, gamma: float) -> TabularResult:
    empty = np.zeros(0)
    return TabularResult("q-learning", Q, Q.max(axis=1), policy, empty, empty, gamma)


def test_the_optimal_table_scores_full_marks(solved):
    mdp, _, Q_star = solved
    report = check(_result(Q_star, Q_star.argmax(axis=1), mdp.gamma), mdp)
    assert report.optimal_action_share == 1.0
    assert report.policy_value_gap == pytest.approx(0.0, abs=1e-9)
    assert report.max_abs_v_error == pytest.approx(0.0, abs=1e-9)


def test_worse_actions_lower_the_share_and_open_a_value_gap(solved):
    mdp, V_star, Q_star = solved
    live = np.flatnonzero(~mdp.terminal)
    policy = Q_star.argmax(axis=1)
    # three states with a strictly worse action (some GridWorld states have all-equal ones)
    spoiled = [s for s in live if Q_star[s].min() < V_star[s] - 1e-3][:3]
    assert len(spoiled) == 3
    for s in spoiled:
        policy[s] = Q_star[s].argmin()
    report = check(_result(Q_star, policy, mdp.gamma), mdp)
    assert report.optimal_action_share == pytest.approx((len(live) - 3) / len(live))
    # V^pi(s) <= Q*(s, pi(s)) since V^pi <= V*: the gap at a spoiled state is at least this
    lower_bound = max(V_star[s] - Q_star[s, policy[s]] for s in spoiled)
    assert report.policy_value_gap >= lower_bound - 1e-9
    assert report.mean_value_gap > 0
