"""``rlx.evaluate``: roll an agent out and report mean and std of return and length.

Tabular agents step a TabularMDP or a Gymnasium env one episode at a time. Deep agents (those
with ``act_batch(obs_batch, deterministic)``) run up to ``MAX_EVAL_ENVS`` copies of the env as one
vector env and choose all their actions in one batched call per step.

:func:`final_evaluation` is how every deep agent's run ends: the trained agent's figures for
``summary.json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx.errors import ConfigError

MAX_EVAL_ENVS = 16
EVAL_SEED_OFFSET = 10_000
"""A run's final evaluation resets its envs from ``seed + EVAL_SEED_OFFSET``: other episodes
than the ones training began with, and the same ones for every run of that seed."""


@dataclass(frozen=True)
class EvalStats:
    """Returns and lengths of evaluation episodes."""

    mean_return: float
    std_return: float
    mean_length: float
    std_length: float
    episodes: int
    returns: tuple[float, ...]

    def __str__(self) -> str:
        return (
            f"return {self.mean_return:.3f} +/- {self.std_return:.3f}, "
            f"length {self.mean_length:.1f} +/- {self.std_length:.1f} "
            f"over {self.episodes} episodes"
        )


def evaluate(
    agent: Any,
    env: Any = None,
    episodes: int = 20,
    *,
    seed: int = 0,
    deterministic: bool = True,
    max_steps: int | None = None,
    trust_env_code: bool = False,
) -> EvalStats:
    """Run ``episodes`` episodes with ``agent.act(obs, deterministic)``.

    ``env`` is a Gymnasium id or env, or an ``rlx.mdp.TabularMDP``; by default the env the
    agent was trained on: rebuilt from ``agent.env_recipe`` (:mod:`rlx.core.env_recipe`,
    which ``rlx.load`` sets) when it has one, else made from ``agent.env_id``. An env whose
    recipe cannot be rebuilt raises the recipe's error, which says how to pass it. A recipe
    read from a run folder that names code (an entry point, a Gymnasium spec that is not the
    registered one) is rebuilt only with consent: ``trust_env_code=True`` here or at
    ``rlx.load``; else an EnvError names what the folder would import. Where the
    env gives action masks (:mod:`rlx.core.masks`), a deep agent's ``act_batch`` receives
    them as ``action_mask``, so that it only chooses valid actions. Episodes on a TabularMDP
    end at a terminal state or after ``max_steps`` (default: the MDP's
    ``max_episode_steps``, else 10,000). An agent with ``act_batch`` is evaluated on a vector
    env (episodes split evenly over its copies, so short episodes are not over-counted);
    episodes then end by the env's own time limit.
    """
    if episodes < 1:
        raise ConfigError(f"episodes={episodes} must be >= 1.")
    if not (hasattr(agent, "act") or hasattr(agent, "act_batch")):
        run_dir = getattr(agent, "run_dir", None) or "RUN_DIR"
        raise ConfigError(
            f"{type(agent).__name__} is not an agent that acts in an env; for a language-model "
            f"run use `rlx align eval --model {run_dir}/model --data FILE` "
            "(rlx.llm.exact_match)."
        )
    env = env if env is not None else trained_env(agent, trust_env_code)
    from rlx.core.envs import gridworld_from_id, is_gridworld_id
    from rlx.mdp import TabularMDP

    if isinstance(env, str) and is_gridworld_id(env):
        env = gridworld_from_id(env)
    if isinstance(env, TabularMDP):
        returns, lengths = _rollouts_mdp(agent, env, episodes, seed, deterministic, max_steps)
    elif hasattr(agent, "act_batch"):
        returns, lengths = _rollouts_vector(agent, env, episodes, seed, deterministic)
    else:
        returns, lengths = _rollouts_gym(agent, env, episodes, seed, deterministic)
    r, n = np.asarray(returns, dtype=float), np.asarray(lengths, dtype=float)
    return EvalStats(
        float(r.mean()), float(r.std()), float(n.mean()), float(n.std()), episodes, tuple(r)
    )


def trained_env(agent: Any, trust_env_code: bool = False) -> Any:
    """The env ``agent`` was trained on: its recipe (a plain id as the id itself, so that it
    gets the env's native vector version), cleared to build
    (:meth:`~rlx.core.env_recipe.EnvRecipe.cleared`: code a run folder names needs
    ``trust_env_code``), else its ``env_id``."""
    recipe = getattr(agent, "env_recipe", None)
    if recipe is not None:
        run_dir = getattr(agent, "run_dir", None)
        source = "this agent's env recipe" if run_dir is None else f"the run folder {run_dir}"
        return recipe.cleared(trust_env_code, source=source).as_env
    env = getattr(agent, "env_id", None)
    if env is None:
        raise ConfigError("evaluate needs an env: the agent does not record one.")
    return env


def final_evaluation(agent: Any, env: Any, run: Any, episodes: int, seed: int) -> dict[str, Any]:
    """The figures ``summary.json`` gets from a deep agent's run: ``episodes`` deterministic
    evaluation episodes of the trained ``agent`` on ``env``, seeded from
    ``seed + EVAL_SEED_OFFSET``.

    Empty when ``episodes`` is 0, and when the run was stopped early (Ctrl-C, SIGTERM, a
    doctor rule in ``stop_on``): a stopped run's policy is unfinished, and its figures would
    read as the result of a whole run; ``rlx eval RUN_DIR`` evaluates it on request.
    """
    if episodes == 0 or run.stop_requested:
        return {}
    stats = evaluate(agent, env, episodes=episodes, seed=seed + EVAL_SEED_OFFSET)
    return {
        "eval_return_mean": stats.mean_return,
        "eval_return_std": stats.std_return,
        "eval_length_mean": stats.mean_length,
        "eval_episodes": stats.episodes,
    }


def _rollouts_mdp(agent, mdp, episodes, seed, deterministic, max_steps):
    rng = np.random.default_rng(seed)
    cap = max_steps or getattr(mdp, "max_episode_steps", None) or 10_000
    returns, lengths = [], []
    for _ in range(episodes):
        s, total, t, done = mdp.reset(rng), 0.0, 0, False
        while not done and t < cap:
            s, r, done = mdp.sample(s, agent.act(s, deterministic=deterministic), rng)
            total, t = total + r, t + 1
        returns.append(total)
        lengths.append(t)
    return returns, lengths


def takes_masks(act: Any) -> bool:
    """Whether an agent's ``act`` / ``act_batch`` takes ``action_mask=`` (rlx's agents do; a
    user's own agent may not, and then acts without the env's masks)."""
    import inspect

    try:
        parameters = inspect.signature(act).parameters
    except (TypeError, ValueError):
        return False
    return "action_mask" in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


def _rollouts_gym(agent, env, episodes, seed, deterministic):
    from rlx.core.envs import make_env
    from rlx.core.masks import single_env_mask

    made = make_env(env) if isinstance(env, str) or not hasattr(env, "step") else env
    returns, lengths = [], []
    masked = takes_masks(agent.act)
    try:
        for i in range(episodes):
            obs, info = made.reset(seed=seed + i)
            total, t, done = 0.0, 0, False
            while not done:
                mask = single_env_mask(made, info) if masked else None
                options = {} if mask is None else {"action_mask": mask}
                action = agent.act(obs, deterministic=deterministic, **options)
                obs, r, terminated, truncated, info = made.step(action)
                total, t, done = total + float(r), t + 1, terminated or truncated
            returns.append(total)
            lengths.append(t)
    finally:
        if made is not env:  # an env object belongs to the caller
            made.close()
    return returns, lengths


def _rollouts_vector(agent, env, episodes, seed, deterministic):
    """Episodes from a vector env; copy ``i`` runs episodes ``i, i + n, i + 2n, ...``.

    Fixing each copy's quota up front keeps the sample unbiased: collecting the first
    ``episodes`` to finish would favour short ones.
    """
    from rlx.core.envs import EpisodeTracker, make_vec_env
    from rlx.core.masks import env_mask_size, mask_reader

    n = min(episodes, MAX_EVAL_ENVS)
    vec = make_vec_env(env, n)
    quota = np.full(n, episodes // n) + (np.arange(n) < episodes % n)
    done_count = np.zeros(n, dtype=np.int64)
    tracker = EpisodeTracker(n)
    returns, lengths = [], []
    try:
        obs, infos = vec.reset(seed=seed)
        read_masks = mask_reader(vec, infos, env_mask_size(vec, infos))
        read_masks = read_masks if takes_masks(agent.act_batch) else None
        after_done = np.zeros(n, dtype=bool)
        while (done_count < quota).any():
            options = {} if read_masks is None else {"action_mask": read_masks(infos)}
            actions = agent.act_batch(obs, deterministic=deterministic, **options)
            obs, reward, terminated, truncated, infos = vec.step(actions)
            # NEXT_STEP autoreset: a step right after a done only resets that copy
            finished = tracker.step(reward, terminated, truncated, stored=~after_done)
            keep = done_count[finished.envs] < quota[finished.envs]
            returns.extend(finished.returns[keep])
            lengths.extend(finished.lengths[keep])
            done_count[finished.envs] += 1
            after_done = terminated | truncated
    finally:
        if isinstance(env, str) or not hasattr(env, "step"):  # an env object is the caller's
            vec.close()
    return returns, lengths
