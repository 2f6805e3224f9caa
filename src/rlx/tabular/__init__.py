"""Sample-based tabular RL: Monte Carlo, TD(0), Q-learning, SARSA, Expected SARSA, Double Q.

On a :class:`rlx.mdp.TabularMDP` (or a toy-text id with a model) whole chunks of episodes run
inside one compiled kernel that samples the model itself; on any Gymnasium env with Discrete
spaces the same episode loop runs in Python around ``env.step``.

    res = rlx.tabular.q_learning(mdp, episodes=5000, seed=0)   # res.Q, res.policy, res.returns
    print(rlx.tabular.check(res, mdp))                         # distance to dynamic programming
"""

from pathlib import Path

from rlx._kernel_cache import drop_stale_kernels
from rlx.tabular.check import CheckReport, check
from rlx.tabular.config import TabularConfig
from rlx.tabular.learner import ALGORITHMS, EpisodeBatch, TabularLearner, TabularResult
from rlx.tabular.train import (
    double_q,
    expected_sarsa,
    mc_prediction,
    monte_carlo,
    q_learning,
    sarsa,
    td0,
)

# kernels load their on-disk cache at their first call, not at import: this is early enough
# (the modules holding numba code; others, e.g. registered.py, may change without a recompile)
drop_stale_kernels(
    Path(__file__).resolve().parent,
    ("rng.py", "model.py", "explore.py", "targets.py", "environment.py", "algorithms"),
)

__all__ = [
    "ALGORITHMS",
    "CheckReport",
    "EpisodeBatch",
    "TabularConfig",
    "TabularLearner",
    "TabularResult",
    "check",
    "double_q",
    "expected_sarsa",
    "mc_prediction",
    "monte_carlo",
    "q_learning",
    "sarsa",
    "td0",
]
