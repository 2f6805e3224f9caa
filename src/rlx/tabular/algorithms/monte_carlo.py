"""Monte Carlo control and prediction (Sutton & Barto, sections 5.1 and 5.4).

After each episode the returns come from the reverse sweep ``G = r + gamma * G``, and

    Q(s, a) <- Q(s, a) + alpha [G - Q(s, a)]      (control: on-policy, epsilon-greedy)
    V(s)    <- V(s)    + alpha [G - V(s)]         (prediction of a fixed policy)

at the first visit of ``(s, a)`` (or ``s``) in the episode, or at every visit; ``alpha=None``
gives the sample average ``1 / N``. A terminated episode's sweep starts from ``G = 0``; a
truncated one starts from the current estimate of the last state reached (its value under
the epsilon-greedy policy for control), because the rest of that episode was never seen.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from rlx.tabular.environment import GymEnv, env_reset, env_step
from rlx.tabular.explore import epsilon_greedy_action, sample_action
from rlx.tabular.model import ModelArrays
from rlx.tabular.targets import episode_returns_into, epsilon_greedy_expectation, step_size, td_step


@njit(cache=True)
def mark_first_visits(
    keys: np.ndarray, n: int, first_seen: np.ndarray, is_first: np.ndarray
) -> None:
    """``is_first[t]``: ``keys[t]`` does not occur in ``keys[:t]``; leaves ``first_seen`` all -1."""
    for t in range(n):
        is_first[t] = first_seen[keys[t]] < 0
        if is_first[t]:
            first_seen[keys[t]] = t
    for t in range(n):
        first_seen[keys[t]] = -1


@njit(cache=True)
def monte_carlo_update(
    table: np.ndarray,
    visits: np.ndarray,
    keys: np.ndarray,
    rewards: np.ndarray,
    n: int,
    bootstrap: float,
    first_visit: bool,
    alpha: float,
    gamma: float,
    scratch: np.ndarray,
    first_seen: np.ndarray,
    is_first: np.ndarray,
) -> float:
    """``table[k] += alpha [G_t - table[k]]`` for the visits ``k = keys[t]`` of one episode.

    ``table`` is flat (``Q.ravel()`` with keys ``s * A + a``, or ``V`` with keys ``s``).
    Returns the sum of ``|G_t - table[k]|`` over the updates made.
    """
    episode_returns_into(rewards, n, gamma, bootstrap, scratch)
    mark_first_visits(keys, n, first_seen, is_first)
    abs_error = 0.0
    for t in range(n - 1, -1, -1):
        if first_visit and not is_first[t]:
            continue
        k = keys[t]
        visits[k] += 1
        table[k], delta = td_step(table[k], scratch[t], step_size(alpha, visits[k]))
        abs_error += abs(delta)
    return abs_error


def learn_control(
    env: ModelArrays | GymEnv,
    Q: np.ndarray,
    visits: np.ndarray,
    rng: np.ndarray,
    epsilons: np.ndarray,
    alpha: float,
    gamma: float,
    max_steps: int,
    first_visit: bool,
    returns: np.ndarray,
    lengths: np.ndarray,
) -> tuple[int, float]:
    """Monte Carlo control on ``len(epsilons)`` episodes; return (steps, sum |G - Q|)."""
    n_actions = Q.shape[1]
    keys = np.empty(max_steps, dtype=np.int64)
    rewards = np.empty(max_steps, dtype=np.float64)
    scratch = np.empty(max_steps, dtype=np.float64)
    is_first = np.empty(max_steps, dtype=np.bool_)
    first_seen = np.full(Q.size, -1, dtype=np.int64)
    steps = 0
    abs_error = 0.0
    for episode in range(epsilons.shape[0]):
        epsilon = epsilons[episode]
        s = env_reset(env, rng)
        episode_return = 0.0
        t = 0
        while True:
            a = epsilon_greedy_action(Q[s], epsilon, rng)
            s_next, r, terminated, truncated = env_step(env, s, a, rng)
            keys[t] = s * n_actions + a
            rewards[t] = r
            episode_return += r
            t += 1
            if terminated or truncated or t >= max_steps:
                break
            s = s_next
        bootstrap = 0.0 if terminated else epsilon_greedy_expectation(Q[s_next], epsilon)
        abs_error += monte_carlo_update(
            Q.reshape(-1),
            visits.reshape(-1),
            keys,
            rewards,
            t,
            bootstrap,
            first_visit,
            alpha,
            gamma,
            scratch,
            first_seen,
            is_first,
        )
        returns[episode] = episode_return
        lengths[episode] = t
        steps += t
    return steps, abs_error


def learn_prediction(
    env: ModelArrays | GymEnv,
    V: np.ndarray,
    visits: np.ndarray,
    policy_cdf: np.ndarray,
    rng: np.ndarray,
    n_episodes: int,
    alpha: float,
    gamma: float,
    max_steps: int,
    first_visit: bool,
    returns: np.ndarray,
    lengths: np.ndarray,
) -> tuple[int, float]:
    """Monte Carlo prediction of ``pi`` on ``n_episodes``; return (steps, sum |G - V|)."""
    keys = np.empty(max_steps, dtype=np.int64)
    rewards = np.empty(max_steps, dtype=np.float64)
    scratch = np.empty(max_steps, dtype=np.float64)
    is_first = np.empty(max_steps, dtype=np.bool_)
    first_seen = np.full(V.size, -1, dtype=np.int64)
    steps = 0
    abs_error = 0.0
    for episode in range(n_episodes):
        s = env_reset(env, rng)
        episode_return = 0.0
        t = 0
        while True:
            a = sample_action(policy_cdf[s], rng)
            s_next, r, terminated, truncated = env_step(env, s, a, rng)
            keys[t] = s
            rewards[t] = r
            episode_return += r
            t += 1
            if terminated or truncated or t >= max_steps:
                break
            s = s_next
        bootstrap = 0.0 if terminated else V[s_next]
        abs_error += monte_carlo_update(
            V,
            visits,
            keys,
            rewards,
            t,
            bootstrap,
            first_visit,
            alpha,
            gamma,
            scratch,
            first_seen,
            is_first,
        )
        returns[episode] = episode_return
        lengths[episode] = t
        steps += t
    return steps, abs_error


learn_control_on_model = njit(cache=True)(learn_control)
learn_prediction_on_model = njit(cache=True)(learn_prediction)
