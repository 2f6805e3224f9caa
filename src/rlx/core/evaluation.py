"""``rlx.evaluate``: roll an agent out and report mean and std of return and length.

Tabular agents step a TabularMDP or a Gymnasium env one episode at a time. Deep agents (those
with ``act_batch(obs_batch, deterministic)``) run up to ``MAX_EVAL_ENVS`` copies of the env as one
vector env and choose all their actions in one batched call per step.

:func:`final_evaluation` is how every deep agent's run ends: the trained agent's figures for
``summary.json``: the mean return of ``eval_episodes`` episodes seeded apart from every
training episode and every evaluation during training (:data:`EVAL_SEED_OFFSET`), with its 95%
interval (``eval_return_low``, ``eval_return_high``: :mod:`rlx.core.intervals`) beside the
number of episodes it rests on.

An agent evaluated on another env than its own is checked first (:func:`check_spaces`): an env
whose observation or action space differs from the one it trained on is an EnvError naming
both, never a shape error from deep inside a network.

``video=True`` (or a ``.gif`` file) also records the agent (:mod:`rlx.core.video`): into
``RUN_DIR/videos/eval-step<N>.gif`` of the run folder it was loaded from by default.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlx import metrics as M
from rlx.core.intervals import mean_interval
from rlx.core.masks import takes_masks
from rlx.errors import ConfigError, EnvError, RLXError
from rlx.runs.handle import RunHandle

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
    video: Path | None = None
    """the clip recorded beside the episodes (``video=``), if one was"""

    @property
    def interval(self) -> tuple[float, float]:
        """The 95% interval of the mean return (Student's t over the episodes;
        :func:`rlx.core.intervals.mean_interval`), NaNs for one episode."""
        return mean_interval(self.returns)

    def __str__(self) -> str:
        return (
            f"return {self.mean_return:.3f} +/- {self.std_return:.3f}, "
            f"length {self.mean_length:.1f} +/- {self.std_length:.1f} "
            f"over {self.episodes} episodes"
        ) + ("" if self.video is None else f"; video {self.video}")


def evaluate(
    agent: Any,
    env: Any = None,
    episodes: int = 20,
    *,
    seed: int = 0,
    deterministic: bool = True,
    max_steps: int | None = None,
    trust_env_code: bool = False,
    video: bool | str | Path | None = None,
    video_options: Any = None,
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

    ``video`` records ``video_options.episodes`` more episodes from ``seed``
    (:class:`rlx.core.video.VideoOptions`) on the env made to draw its frames, first, so that
    an env that cannot draw stops the evaluation before it runs (RenderError): True writes
    ``RUN_DIR/videos/eval-step<N>.gif`` of the agent's run folder, a path writes that GIF.
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
    if env is None:
        env = trained_env(agent, trust_env_code)
    else:
        check_spaces(agent, env)
    from rlx.core.envs import gridworld_from_id, is_gridworld_id
    from rlx.mdp import TabularMDP

    clip = None
    target = _video_target(agent, video)
    if target is not None:
        from rlx.core.video import VideoOptions, record_episodes

        options = video_options or VideoOptions()
        root = getattr(agent, "run_dir", None) if video is True else None  # its run folder
        clip = record_episodes(agent, env, target, options, seed=seed,
                               deterministic=deterministic, root=root)  # fmt: skip
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
        float(r.mean()), float(r.std()), float(n.mean()), float(n.std()), episodes, tuple(r),
        video=None if clip is None else clip.path,
    )  # fmt: skip


def _video_target(agent: Any, video: Any) -> Path | None:
    """The GIF ``video=`` asks for; True: the clip of the agent's checkpoint in its run folder
    (:func:`rlx.runs.folder.video_file`)."""
    from rlx.core.video import video_target
    from rlx.runs.folder import video_file

    run_dir = getattr(agent, "run_dir", None)
    default = (
        None if run_dir is None else video_file(run_dir, getattr(agent, "checkpoint_step", None))
    )
    return video_target(video, default)


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


def check_spaces(agent: Any, env: Any) -> None:
    """EnvError when ``env``'s observation or action space differs from those of the env
    ``agent`` was trained on (their types and shapes; bounds may differ), naming both.

    The agent's env is built only where that runs no code a run folder names (a registered
    Gymnasium id); where it cannot be built, or ``env`` is the agent's own, nothing is checked
    here, and an agent that cannot act on the env's first observation is the same EnvError
    (:func:`_rollouts_vector`)."""
    trained = _trained_id(agent)
    if trained is None or _label(env) == trained:
        return
    from rlx.core.envs import env_spaces, is_gridworld_id
    from rlx.mdp import TabularMDP

    if is_gridworld_id(trained) or isinstance(env, TabularMDP):
        return
    if isinstance(env, str) and is_gridworld_id(env):
        return
    try:
        own = env_spaces(trained)
    except RLXError:  # the agent's env is not here (an extra, a plug-in): nothing to compare
        return
    given = env_spaces(env)
    if not all(map(same_space, own, given)):
        raise EnvError(
            f"the agent was trained on {trained} (observations {_short(own[0])}, actions "
            f"{_short(own[1])}), and {_label(env)} has observations {_short(given[0])} and "
            f"actions {_short(given[1])}: evaluate it on an env with the spaces it was trained on."
        )


def same_space(a: Any, b: Any) -> bool:
    """Whether an agent of space ``a`` can take ``b``: the same type and shape (the same
    number of choices, the same keys)."""
    import gymnasium as gym

    if type(a) is not type(b):
        return False
    if isinstance(a, gym.spaces.Dict):
        return a.keys() == b.keys() and all(same_space(a[k], b[k]) for k in a)
    if isinstance(a, gym.spaces.Tuple):
        return len(a) == len(b) and all(map(same_space, a, b))
    if isinstance(a, gym.spaces.Discrete):
        return int(a.n) == int(b.n)
    if isinstance(a, gym.spaces.MultiDiscrete):
        return np.array_equal(a.nvec, b.nvec)
    return a.shape == b.shape


def _short(space: Any) -> str:
    """A space in a few words: a Box by its shape, the others as Gymnasium writes them."""
    if type(space).__name__ == "Box":
        return f"Box of shape {tuple(space.shape)}"
    return str(space)


def _trained_id(agent: Any) -> str | None:
    """The registered Gymnasium id the agent was trained on, when building it runs no code
    a run folder names; None otherwise."""
    from rlx.core.env_recipe import is_entry_point, module_of_id

    recipe = getattr(agent, "env_recipe", None)
    if recipe is not None:
        if recipe.kind != "id" or recipe.kwargs or recipe.code():
            return None
        return recipe.target
    env_id = getattr(agent, "env_id", None)
    if not isinstance(env_id, str) or is_entry_point(env_id) or module_of_id(env_id):
        return None
    return env_id


def _label(env: Any) -> str:
    """A printable name of an env given as an id, a recipe, an env or a factory."""
    if isinstance(env, str):
        return env
    label = getattr(env, "label", None)
    if isinstance(label, str):
        return label
    spec = getattr(env, "spec", None)
    return getattr(spec, "id", None) or getattr(env, "__name__", None) or type(env).__name__


def _cannot_act(agent: Any, env: Any, spaces: tuple[Any, Any], exc: Exception) -> EnvError:
    """The EnvError of an agent that fails on an env's first observation."""
    trained = getattr(agent, "env_id", None) or "another env"
    return EnvError(
        f"the agent trained on {trained} cannot act on {_label(env)} (observations "
        f"{_short(spaces[0])}, actions {_short(spaces[1])}): {type(exc).__name__}: {exc}; "
        "evaluate it on an env with the spaces it was trained on."
    )


ACTING_ERRORS = (RuntimeError, ValueError, IndexError, TypeError, KeyError)
"""What an agent raises for observations of another shape than it was trained on."""


def final_evaluation(
    agent: Any, env: Any, run: RunHandle, episodes: int, seed: int
) -> dict[str, Any]:
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
    low, high = stats.interval
    return {
        M.EVAL_RETURN_MEAN: stats.mean_return,
        M.EVAL_RETURN_STD: stats.std_return,
        M.EVAL_RETURN_LOW: low,
        M.EVAL_RETURN_HIGH: high,
        M.EVAL_LENGTH_MEAN: stats.mean_length,
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
                try:
                    action = agent.act(obs, deterministic=deterministic, **options)
                except ACTING_ERRORS as exc:
                    if i or t:  # it acted on this env before: not a mismatch of spaces
                        raise
                    spaces = made.observation_space, made.action_space
                    raise _cannot_act(agent, env, spaces, exc) from exc
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
        first = True
        while (done_count < quota).any():
            options = {} if read_masks is None else {"action_mask": read_masks(infos)}
            try:
                actions = agent.act_batch(obs, deterministic=deterministic, **options)
            except ACTING_ERRORS as exc:
                if not first:  # it acted on this env before: not a mismatch of spaces
                    raise
                spaces = vec.single_observation_space, vec.single_action_space
                raise _cannot_act(agent, env, spaces, exc) from exc
            first = False
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
