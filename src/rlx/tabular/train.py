"""One call per algorithm: build a :class:`TabularLearner`, run ``episodes``, return the result.

    res = rlx.tabular.q_learning(mdp, episodes=5000, seed=0, alpha=0.1, epsilon=0.1)

Keyword arguments are :class:`TabularConfig` fields.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from rlx.errors import ConfigError
from rlx.tabular.config import TabularConfig
from rlx.tabular.learner import TabularLearner, TabularResult

_FIELDS = tuple(f.name for f in dataclasses.fields(TabularConfig))


def _train(algo: str, env: Any, policy: np.ndarray | None = None, **fields: Any) -> TabularResult:
    unknown = sorted(set(fields) - set(_FIELDS))
    if unknown:
        raise ConfigError(
            f"{algo} has no setting {', '.join(unknown)}; the settings are {', '.join(_FIELDS)}."
        )
    config = TabularConfig(**fields)
    learner = TabularLearner(algo, env, config, policy=policy)
    learner.run(config.episodes)
    return learner.result()


def q_learning(
    env_or_mdp: Any, episodes: int = 5000, seed: int = 0, **config_fields: Any
) -> TabularResult:
    """Q-learning: ``Q(s, a) += alpha [r + gamma max_a' Q(s', a') - Q(s, a)]``."""
    return _train("q-learning", env_or_mdp, episodes=episodes, seed=seed, **config_fields)


def sarsa(
    env_or_mdp: Any, episodes: int = 5000, seed: int = 0, **config_fields: Any
) -> TabularResult:
    """SARSA: ``Q(s, a) += alpha [r + gamma Q(s', a') - Q(s, a)]``, ``a'`` the next action taken."""
    return _train("sarsa", env_or_mdp, episodes=episodes, seed=seed, **config_fields)


def expected_sarsa(
    env_or_mdp: Any, episodes: int = 5000, seed: int = 0, **config_fields: Any
) -> TabularResult:
    """Expected SARSA: ``Q(s, a) += alpha [r + gamma sum_a' pi(a'|s') Q(s', a') - Q(s, a)]``."""
    return _train("expected-sarsa", env_or_mdp, episodes=episodes, seed=seed, **config_fields)


def double_q(
    env_or_mdp: Any, episodes: int = 5000, seed: int = 0, **config_fields: Any
) -> TabularResult:
    """Double Q: ``Q1(s, a) += alpha [r + gamma Q2(s', argmax Q1(s', .)) - Q1(s, a)]`` or swap."""
    return _train("double-q", env_or_mdp, episodes=episodes, seed=seed, **config_fields)


def monte_carlo(
    env_or_mdp: Any,
    episodes: int = 5000,
    seed: int = 0,
    first_visit: bool = True,
    **config_fields: Any,
) -> TabularResult:
    """On-policy Monte Carlo control: ``Q(s, a) += alpha [G - Q(s, a)]``, ``G = r + gamma * G``."""
    return _train(
        "mc", env_or_mdp, episodes=episodes, seed=seed, first_visit=first_visit, **config_fields
    )


def mc_prediction(
    env: Any,
    policy: np.ndarray | None = None,
    episodes: int = 5000,
    seed: int = 0,
    first_visit: bool = True,
    **config_fields: Any,
) -> TabularResult:
    """Monte Carlo prediction of ``policy`` (None: equiprobable): ``V(s) += alpha [G - V(s)]``."""
    return _train(
        "mc-prediction", env, policy=policy, episodes=episodes, seed=seed,
        first_visit=first_visit, **config_fields,
    )  # fmt: skip


def td0(
    env: Any,
    policy: np.ndarray | None = None,
    episodes: int = 5000,
    seed: int = 0,
    **config_fields: Any,
) -> TabularResult:
    """TD(0) prediction of ``policy``: ``V(s) += alpha [r + gamma V(s') - V(s)]``"""
    return _train("td0", env, policy=policy, episodes=episodes, seed=seed, **config_fields)
