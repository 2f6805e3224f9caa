"""What the deep-RL benchmarks share (bench_dqn.py, bench_policy_gradient.py,
bench_continuous.py): training curves, the goal and stability checks, and runs of rlx and of
Stable-Baselines3 each in a fresh process with one torch thread.

**rlx** runs ``rlx.train(algo, env, total_steps=N, seed=S, run_dir=..., **overrides)`` in a
fresh process: with no overrides that is exactly ``rlx train ALGO --env ENV --seed S
--total-steps N`` (defaults, then the env's preset); with overrides that set every field of
the preset it is rlx on the peer's hyperparameters. Episodes and the clock come from the run
folder: ``episodes.csv`` (``wall_s`` from the start of training: run folder, envs, networks,
every update) and the last line of ``metrics.jsonl`` (the end of training; the final
evaluation is not counted).

**Stable-Baselines3** runs in a fresh process as rl-baselines3-zoo builds it: the recipe as
the zoo's ``hyperparams/*.yml`` writes it (``lin_`` schedules, ``noise_type`` and
``noise_std``, ``policy_kwargs``), turned into constructor arguments by
:func:`sb3_constructor_kwargs` (what the zoo's ``ExperimentManager`` does), an env from
``make_vec_env(env, n_envs, seed)``, then ``model.learn(n_timesteps)`` for the whole budget. Its
clock starts before the env and model are built; a callback records each finished episode
(step, seconds, return) from the Monitor's ``info["episode"]``; ``torch._dynamo``, which
``torch.optim`` imports on first use, is imported before the clock, as rlx's process does.

Both run the whole budget (no stop at the goal), so the stability check sees all of it.
"""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from results import ratio, spread

WINDOW = 20
"""Episodes in the moving mean the goal and the stability check read."""


# ---------------------------------------------------------------------------- curves
@dataclass
class Curve:
    """One training run: each finished episode's env step, wall seconds and return."""

    row: str
    algo: str
    seed: int
    steps: np.ndarray
    wall: np.ndarray
    returns: np.ndarray
    total_steps: int
    total_wall: float
    process_s: float
    extra: dict[str, Any] = field(default_factory=dict)

    def first_reaching(self, threshold: float, window: int = WINDOW) -> tuple[int, float] | None:
        """(env steps, wall s) when the mean of the last ``window`` episodes first reaches
        ``threshold``; None if it never does."""
        index = first_index(self.returns, threshold, window)
        if index is None:
            return None
        return int(self.steps[index]), float(self.wall[index])

    @property
    def steps_per_s(self) -> float:
        """Training env steps per second over the whole budget."""
        return self.total_steps / self.total_wall if self.total_wall > 0 else math.nan


def rolling_means(returns: np.ndarray, window: int = WINDOW) -> np.ndarray:
    """The mean of each ``window`` consecutive returns (empty when there are fewer)."""
    if len(returns) < window:
        return np.zeros(0)
    return np.convolve(returns, np.ones(window) / window, mode="valid")


def first_index(returns: np.ndarray, threshold: float, window: int = WINDOW) -> int | None:
    """Index of the episode at which the last-``window`` mean first reaches ``threshold``."""
    hit = np.flatnonzero(rolling_means(returns, window) >= threshold)
    return None if len(hit) == 0 else int(hit[0]) + window - 1


def stability(
    returns: np.ndarray, threshold: float, baseline: float, window: int = WINDOW
) -> dict[str, Any]:
    """The stability check: after the last-``window`` mean first reaches ``threshold``, no
    later window of ``window`` episodes may have a mean below half the threshold, measured from
    ``baseline`` (the random policy's return: ``floor = baseline + (threshold - baseline) / 2``;
    with baseline 0 this is half the threshold).

    Returns ``{"reached", "stable", "floor", "lowest_after", "lowest_at_episode"}``;
    ``stable`` is None when the threshold was never reached (nothing to stay at).
    """
    floor = baseline + (threshold - baseline) / 2
    means = rolling_means(returns, window)
    hit = np.flatnonzero(means >= threshold)
    if len(hit) == 0:
        return {"reached": False, "stable": None, "floor": floor, "lowest_after": None,
                "lowest_at_episode": None}  # fmt: skip
    after = means[hit[0] :]
    lowest = int(np.argmin(after))
    return {
        "reached": True,
        "stable": bool(after[lowest] >= floor),
        "floor": floor,
        "lowest_after": round(float(after[lowest]), 1),
        "lowest_at_episode": int(hit[0]) + lowest + window - 1,
    }


# ---------------------------------------------------------------------------- rlx
RLX_SCRIPT = r"""
import json, sys
import rlx
algo, env_id, budget, seed, run_dir = sys.argv[1:6]
overrides = {k: tuple(v) if isinstance(v, list) else v for k, v in json.loads(sys.argv[6]).items()}
rlx.train(algo, env_id, total_steps=int(budget), seed=int(seed), run_dir=run_dir, progress=False,
          **overrides)
"""


def run_rlx(
    row: str,
    algo: str,
    env_id: str,
    seed: int,
    total_steps: int,
    overrides: Mapping[str, Any],
    workdir: Path | None = None,
) -> Curve:
    """Train rlx in a fresh process (see the module docstring) and read its run folder;
    ``total_steps`` is the budget (a ``total_steps`` in ``overrides`` is left out)."""
    overrides = {k: v for k, v in overrides.items() if k != "total_steps"}
    with tempfile.TemporaryDirectory(prefix=f"bench-{algo}-", dir=workdir) as tmp:
        run_dir = Path(tmp) / "run"
        command = [sys.executable, "-c", RLX_SCRIPT, algo, env_id, str(total_steps), str(seed),
                   str(run_dir), json.dumps(dict(overrides))]  # fmt: skip
        start = time.perf_counter()
        proc = subprocess.run(command, capture_output=True, text=True)
        process_s = time.perf_counter() - start
        if proc.returncode != 0:
            raise RuntimeError(f"rlx {algo} seed {seed} failed:\n{proc.stderr[-3000:]}")
        with (run_dir / "episodes.csv").open() as f:
            episodes = [r for r in csv.DictReader(f) if r.get("length")]
        metrics = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
        config = json.loads((run_dir / "config.json").read_text())
        summary = json.loads((run_dir / "summary.json").read_text())
    last = metrics[-1]
    updates = [(m["wall_s"], int(m["gradient_steps"])) for m in metrics if "gradient_steps" in m]
    return Curve(
        row, algo, seed,
        np.array([int(r["step"]) for r in episodes]),
        np.array([float(r["wall_s"]) for r in episodes]),
        np.array([float(r["return"]) for r in episodes]),
        int(last["step"]), float(last["wall_s"]), process_s,
        {"update_readings": updates, "config": config.get("config", config),
         "eval_mean": summary.get("eval_return_mean"), "preset": config.get("preset"),
         "preset_source": config.get("preset_source")},
    )  # fmt: skip


# ---------------------------------------------------------------------------- SB3
def sb3_constructor_kwargs(recipe: Mapping[str, Any], action_dim: int | None = None) -> dict:
    """The zoo's recipe (``hyperparams/<algo>.yml`` entry) as SB3 constructor arguments, as
    the zoo's ``ExperimentManager`` turns it: ``lin_X`` becomes a linear schedule from X to 0
    over the progress, ``noise_type``/``noise_std`` an action-noise object, ``train_freq``
    lists a tuple; ``n_envs`` and ``n_timesteps`` are not constructor arguments."""
    kwargs: dict[str, Any] = {}
    noise_type = recipe.get("noise_type")
    for key, value in recipe.items():
        if key in ("n_envs", "n_timesteps", "policy", "noise_type", "noise_std", "normalize"):
            continue
        if key == "policy_kwargs" and isinstance(value, str):
            kwargs[key] = policy_kwargs(value)
        elif isinstance(value, str) and value.startswith("lin_"):
            kwargs[key] = linear_schedule(float(value.removeprefix("lin_")))
        elif key == "train_freq" and isinstance(value, (list, tuple)):
            kwargs[key] = tuple(value)
        else:
            kwargs[key] = value
    if noise_type is not None:
        from stable_baselines3.common.noise import NormalActionNoise

        if noise_type != "normal" or action_dim is None:
            raise ValueError(f"noise_type {noise_type!r} needs 'normal' and an action size")
        std = float(recipe["noise_std"])
        kwargs["action_noise"] = NormalActionNoise(np.zeros(action_dim), std * np.ones(action_dim))
    return kwargs


def policy_kwargs(text: str) -> dict[str, Any]:
    """The zoo's ``policy_kwargs: "dict(net_arch=[64, 64], activation_fn=nn.ReLU)"`` as the zoo
    reads it (an expression over ``dict`` and ``torch.nn``): the carried YAML files are the
    benchmark's own, trusted input, unlike the files rlx itself reads
    (:mod:`rlx.launch.zoo` parses them without evaluating anything)."""
    from torch import nn

    return eval(text, {"__builtins__": {}}, {"dict": dict, "nn": nn})


def normalize_kwargs(recipe: Mapping[str, Any]) -> dict[str, Any] | None:
    """The zoo's ``normalize`` (``true`` or a dict string) as ``VecNormalize`` arguments, with
    the recipe's gamma for the reward's discounted return, as the zoo passes it; None without."""
    value = recipe.get("normalize")
    if not value:
        return None
    kwargs = eval(value, {"__builtins__": {}}, {}) if isinstance(value, str) else {}
    if "gamma" in recipe:
        kwargs.setdefault("gamma", float(recipe["gamma"]))
    return kwargs


class linear_schedule:  # noqa: N801  (the zoo's name; an object so that it pickles)
    """The zoo's ``lin_X``: ``progress_remaining * X`` (X at the start, 0 at the end)."""

    def __init__(self, initial: float) -> None:
        self.initial = initial

    def __call__(self, progress_remaining: float) -> float:
        return progress_remaining * self.initial

    def __repr__(self) -> str:
        return f"lin_{self.initial:g}"


SB3_SCRIPT = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np, torch
torch.set_num_threads(1)
import torch._dynamo  # torch.optim imports it on first use: off the clock, as for rlx
import gymnasium as gym
import stable_baselines3 as sb3
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from deep_rl import sb3_constructor_kwargs

algo, env_id, seed = sys.argv[2], sys.argv[3], int(sys.argv[4])
recipe = json.loads(sys.argv[5])


class EpisodeLog(BaseCallback):
    def __init__(self, start):
        super().__init__()
        self.start, self.rows, self.updates = start, [], []

    def _on_step(self):
        for info in self.locals["infos"]:
            if "episode" in info:
                now = time.perf_counter() - self.start
                self.rows.append((self.num_timesteps, now, float(info["episode"]["r"])))
                self.updates.append((now, int(getattr(self.model, "_n_updates", 0))))
        return True


from deep_rl import normalize_kwargs
from stable_baselines3.common.vec_env import VecNormalize
eval_episodes, eval_offset = int(sys.argv[6]), int(sys.argv[7])

start = time.perf_counter()
env = make_vec_env(env_id, n_envs=recipe.get("n_envs", 1), seed=seed)
norm = normalize_kwargs(recipe)
if norm is not None:
    env = VecNormalize(env, **norm)
action_dim = env.action_space.shape[0] if env.action_space.shape else None
cls = getattr(sb3, algo.upper())
model = cls(recipe.get("policy", "MlpPolicy"), env, seed=seed, device="cpu", verbose=0,
            **sb3_constructor_kwargs(recipe, action_dim))
log = EpisodeLog(start)
model.learn(int(recipe["n_timesteps"]), callback=log)
seconds = time.perf_counter() - start
returns = []
if eval_episodes:  # off the clock: deterministic episodes seeded apart from training
    from stable_baselines3.common.evaluation import evaluate_policy
    test = make_vec_env(env_id, n_envs=1, seed=seed + eval_offset)
    if norm is not None:
        test = VecNormalize(test, training=False, norm_reward=False, **norm)
        test.obs_rms = env.obs_rms
    returns, _ = evaluate_policy(model, test, n_eval_episodes=eval_episodes, deterministic=True,
                                 return_episode_rewards=True)
print(json.dumps({"rows": log.rows, "updates": log.updates, "steps": int(model.num_timesteps),
                  "seconds": seconds, "eval_returns": [float(r) for r in returns]}))
"""


EVAL_SEED_OFFSET = 10_000
"""SB3's final evaluation env is made from ``seed + EVAL_SEED_OFFSET``, as rlx's."""


def run_sb3(
    row: str, algo: str, env_id: str, seed: int, recipe: Mapping[str, Any], eval_episodes: int = 0
) -> Curve:
    """Train SB3 with the zoo's ``recipe`` in a fresh process (see the module docstring); with
    ``eval_episodes``, then evaluate it deterministically, off the clock."""
    here = str(Path(__file__).resolve().parent)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", SB3_SCRIPT, here, algo, env_id, str(seed), json.dumps(recipe),
         str(eval_episodes), str(EVAL_SEED_OFFSET)],
        capture_output=True, text=True,
    )  # fmt: skip
    process_s = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"SB3 {algo} seed {seed} failed:\n{proc.stderr[-3000:]}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    rows = np.array(data["rows"], dtype=float).reshape(-1, 3)
    return Curve(
        row, algo, seed, rows[:, 0].astype(int), rows[:, 1], rows[:, 2],
        data["steps"], data["seconds"], process_s,
        {"update_readings": data["updates"], "eval_returns": data.get("eval_returns", []),
         "eval_mean": (sum(data["eval_returns"]) / len(data["eval_returns"])
                       if data.get("eval_returns") else None)},
    )  # fmt: skip


def schedule_text(value_at: Callable[[float], float]) -> str:
    """A schedule of the remaining progress (1 at the start, 0 at the end) in words."""
    start, middle, end = value_at(1.0), value_at(0.5), value_at(0.0)
    if np.isclose(start, end):
        return f"{start:g} constant"
    if np.isclose(end, 0.0) and np.isclose(middle, start / 2):
        return f"{start:g} linear to 0"
    return f"{start:g} -> {end:g}"


# ---------------------------------------------------------------------------- summaries
def summarize(
    curves: Sequence[Curve], threshold: float, baseline: float, window: int = WINDOW
) -> dict[str, Any]:
    """One row's figures over its seeds: time and env steps to the threshold (min, median,
    spread; a seed that never reaches it counts as infinitely slow), seeds reaching it, seeds
    staying up (:func:`stability`), training env steps/s, and each seed's figures."""
    hits = [c.first_reaching(threshold, window) for c in curves]
    checks = [stability(c.returns, threshold, baseline, window) for c in curves]
    return {
        "seeds": [c.seed for c in curves],
        "seconds_to_goal": spread([h[1] if h else None for h in hits]),
        "steps_to_goal": spread([h[0] if h else None for h in hits]),
        "reached": sum(h is not None for h in hits),
        "stable": sum(bool(c["stable"]) for c in checks),
        "steps_per_s": spread([c.steps_per_s for c in curves]),
        "per_seed": [
            _seed_figures(c, h, check) for c, h, check in zip(curves, hits, checks, strict=True)
        ],
    }


def _seed_figures(curve: Curve, hit: tuple[int, float] | None, check: dict) -> dict:
    """One seed's figures for the result file's details."""
    return {
        "seed": curve.seed,
        "seconds_to_goal": hit[1] if hit else None,
        "steps_to_goal": hit[0] if hit else None,
        "steps_per_s": round(curve.steps_per_s, 1),
        "total_steps": curve.total_steps,
        "train_s": round(curve.total_wall, 2),
        "process_s": round(curve.process_s, 2),
        "episodes": len(curve.returns),
        **check,
    }


def table_row(label: str, algo: str, summary: Mapping[str, Any], peer: Mapping | None) -> list:
    """A table row: the row's label, then median (min) time and steps to the goal, seeds
    reaching and staying up, median (min-max) env steps/s, and the ratios to the peer's row."""
    n = len(summary["seeds"])
    secs, steps, sps = summary["seconds_to_goal"], summary["steps_to_goal"], summary["steps_per_s"]
    time_ratio = ratio(secs["median"], peer["seconds_to_goal"]["median"]) if peer else None
    sps_ratio = ratio(sps["median"], peer["steps_per_s"]["median"]) if peer else None
    return [
        algo,
        label,
        _median_min(secs, ".3g"),
        _median_min(steps, ",.0f"),
        f"{summary['reached']}/{n}",
        f"{summary['stable']}/{n}",
        f"{sps['median']:,.0f} ({sps['min']:,.0f}-{sps['max']:,.0f})",
        "-" if time_ratio is None else time_ratio,
        "-" if sps_ratio is None else sps_ratio,
    ]


def _median_min(figure: Mapping[str, Any], spec: str) -> str:
    if figure["median"] is None:
        return "not reached (median)"
    return f"{format(figure['median'], spec)} ({format(figure['min'], spec)})"


def columns(threshold: float, peer: str) -> list[str]:
    goal = f"{threshold:g}"
    return ["algo", "run", f"time to {goal}, median (min) s", f"env steps to {goal}, median (min)",
            f"seeds reaching {goal}", "seeds staying up", "train env steps/s, median (min-max)",
            f"time to goal / {peer}'s", f"env steps/s / {peer}'s"]  # fmt: skip
