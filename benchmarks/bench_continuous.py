"""SAC and TD3 on Pendulum-v1: rlx vs Stable-Baselines3 with rl-baselines3-zoo's recipe.

Three runs per algorithm and seed, alternated seed by seed, each in a fresh process with one
torch thread (``deep_rl.py``):

1. **rlx on SB3's hyperparameters** (the code's speed): rlx's config set to the zoo's recipe
   and SB3's defaults for what it leaves (:func:`recipe_overrides`): SAC 256x256 networks,
   1M buffer, 100 learning starts, tau 0.005, gamma 0.99, one update per env step, the
   temperature learned from 1.0 toward -1, learning rate 1e-3 everywhere; TD3 400x300, gamma
   0.98, 200k buffer, 10,000 random steps first, Gaussian exploration noise 0.1, 200 updates
   after every 200-step episode (the zoo's ``train_freq: [1, "episode"]``,
   ``gradient_steps: -1``), learning rate 1e-3, policy delay 2, target noise 0.2 clipped at
   0.5.
2. **rlx's preset** (what a user gets): ``rlx train sac|td3 --env Pendulum-v1 --seed S``.
3. **SB3 with the zoo's recipe** (``hyperparams/sac.yml`` and ``td3.yml``, Pendulum-v1),
   as the zoo builds it. Every run trains the zoo's whole budget of 20,000 env steps.

Settings: read from both configuration objects (:func:`like_for_like`), asserted equal by
``tests/benchmarks/test_like_for_like.py``, and on the page with both values.

Measured per run: wall seconds and env steps until the mean of the last 10 training episodes
first reaches -200 (from the start of training); gradient updates per second while learning
(updates over the wall time between the first and the last reading after learning started,
env stepping included); training env steps per second over the whole budget; the stability
check (after first reaching -200, no window of 20 episodes below the floor halfway between
-200 and the random policy's return, measured here over 20 episodes). Per row: median and
min over the seeds (each seed is one repeat).

Then, isolated: gradient updates per second on a filled replay buffer (batch 256, sampling
included) at equal network sizes, 3 repeats each, median and min.

Seeds: presets are tuned on seeds 0-9; this benchmark scores them on seeds 10-12 (three: a
run of SB3's recipe takes minutes here).

Goals per algorithm: rlx on SB3's hyperparameters runs at least SB3's gradient updates per
second; rlx's preset reaches -200 no later than SB3's recipe (median seconds); the preset
stays up on every scoring seed.

Run: ``.venv/bin/python benchmarks/bench_continuous.py [--seeds 10 11 12] [--algos sac td3]``;
``--quick`` checks that it works (3 seeds, 1,000 steps, 30 isolated updates).
"""

from __future__ import annotations

import os

THREADS = 1
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, str(THREADS))

import argparse  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Mapping  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

import deep_rl  # noqa: E402  (benchmarks/deep_rl.py)
from deep_rl import schedule_text  # noqa: E402
from results import (  # noqa: E402
    check_unseen,
    differences,
    goal,
    ratio,
    settings_table,
    spread,
    tuning_seeds_text,
    write_result,
)

ENV_ID = "Pendulum-v1"
THRESHOLD, GOAL_WINDOW, STABILITY_WINDOW = -200.0, 10, 20
EPISODE_STEPS = 200  # Pendulum-v1's time limit
SCORING_SEEDS = (10, 11, 12)
PEER = "SB3"
LIBRARIES = ("torch", "gymnasium", "stable-baselines3")
QUICK_STEPS, QUICK_UPDATES = 1_000, 30
ISOLATED_UPDATES, ISOLATED_REPEATS = 300, 3

# rl-baselines3-zoo hyperparams/sac.yml and td3.yml, Pendulum-v1, as the zoo writes them
RECIPES: dict[str, dict[str, Any]] = {
    "sac": {"n_timesteps": 20_000, "policy": "MlpPolicy", "learning_rate": 1e-3},
    "td3": {
        "n_timesteps": 20_000,
        "policy": "MlpPolicy",
        "gamma": 0.98,
        "buffer_size": 200_000,
        "learning_starts": 10_000,
        "noise_type": "normal",
        "noise_std": 0.1,
        "gradient_steps": -1,
        "train_freq": [1, "episode"],
        "learning_rate": 1e-3,
        "policy_kwargs": {"net_arch": [400, 300]},
    },
}


# ---------------------------------------------------------------------------- configurations
def recipe_overrides(algo: str, budget: int | None = None) -> dict[str, Any]:
    """rlx fields equal to the zoo's recipe, and to SB3's defaults where it sets nothing,
    covering every field of rlx's preset. TD3's one-episode train frequency with
    ``gradient_steps=-1`` is, for Pendulum's fixed 200-step episodes, 200 updates every 200
    env steps."""
    recipe = RECIPES[algo]
    lr = recipe["learning_rate"]
    common = {
        "total_steps": budget or recipe["n_timesteps"],
        "num_envs": 1,
        "actor_learning_rate": lr,
        "critic_learning_rate": lr,
        "gamma": recipe.get("gamma", 0.99),
        "tau": 0.005,
        "buffer_size": recipe.get("buffer_size", 1_000_000),
        "batch_size": 256,
        "hidden_sizes": tuple(recipe.get("policy_kwargs", {}).get("net_arch", (256, 256))),
    }
    if algo == "sac":
        return {**common, "learning_starts": 100, "train_freq": 1, "gradient_steps": 1,
                "alpha": 1.0, "autotune": True, "target_entropy": None}  # fmt: skip
    return {**common, "learning_starts": recipe["learning_starts"], "train_freq": EPISODE_STEPS,
            "gradient_steps": EPISODE_STEPS, "exploration_noise": recipe["noise_std"],
            "policy_noise": 0.2, "noise_clip": 0.5, "policy_delay": 2}  # fmt: skip


def rlx_config(algo: str, overrides: Mapping[str, Any]) -> Any:
    """rlx's config as ``rlx.train`` builds it: defaults, the env's preset, ``overrides``."""
    from rlx import registry

    return registry.make_config(registry.get(algo), ENV_ID, dict(overrides))[0]


def sb3_model(algo: str, recipe: Mapping[str, Any] | None = None) -> Any:
    """SB3's model as the benchmark's child process builds it (constructed, not trained)."""
    import stable_baselines3 as sb3
    from stable_baselines3.common.env_util import make_vec_env

    recipe = recipe or RECIPES[algo]
    env = make_vec_env(ENV_ID, n_envs=recipe.get("n_envs", 1), seed=0)
    cls = getattr(sb3, algo.upper())
    return cls(recipe["policy"], env, seed=0, device="cpu", verbose=0,
               **deep_rl.sb3_constructor_kwargs(recipe, env.action_space.shape[0]))  # fmt: skip


def rlx_settings(algo: str, config: Any) -> dict[str, Any]:
    """The settings that change the work, from rlx's config object (SAC's temperature steps
    at the critic's learning rate; its target entropy None means minus the action size, 1)."""
    settings = {
        "total env steps": config.total_steps,
        "env copies": config.num_envs,
        "actor learning rate": schedule_text(lambda p: config.actor_learning_rate),
        "critic learning rate": schedule_text(lambda p: config.critic_learning_rate),
        "gamma": config.gamma,
        "tau": config.tau,
        "replay buffer": config.buffer_size,
        "batch size": config.batch_size,
        "learning starts": config.learning_starts,
        "train every (env steps)": config.train_freq,
        "gradient steps per training": config.gradient_steps,
        "actor / critic hidden sizes": f"{list(config.hidden_sizes)} / {list(config.hidden_sizes)}",
        "critics": 2,
        "torch threads": int(os.environ["RLX_NUM_THREADS"]),
        "device": "cpu" if config.device in ("auto", "cpu") else config.device,
    }
    if algo == "sac":
        target = -1.0 if config.target_entropy is None else config.target_entropy
        settings |= {
            "temperature": "learned" if config.autotune else "fixed",
            "initial temperature": config.alpha,
            "temperature learning rate": config.critic_learning_rate,
            "target entropy": target,
        }
    else:
        settings |= {
            "exploration noise": f"normal {config.exploration_noise:g}",
            "policy delay": config.policy_delay,
            "target policy noise": config.policy_noise,
            "target noise clip": config.noise_clip,
        }
    return settings


def sb3_settings(algo: str, model: Any, recipe: Mapping[str, Any] | None = None) -> dict:
    """The same settings, read from SB3's constructed model (an episode-long train frequency
    counted in Pendulum's 200 steps; ``gradient_steps=-1``: as many as env steps collected)."""
    recipe = recipe or RECIPES[algo]
    freq = model.train_freq
    every = freq.frequency * (EPISODE_STEPS if freq.unit.value == "episode" else 1)
    arch = model.policy.net_arch
    actor, critic = (arch["pi"], arch["qf"]) if isinstance(arch, dict) else (arch, arch)
    settings = {
        "total env steps": recipe["n_timesteps"],
        "env copies": model.n_envs,
        "actor learning rate": schedule_text(model.lr_schedule),
        "critic learning rate": schedule_text(model.lr_schedule),
        "gamma": model.gamma,
        "tau": model.tau,
        "replay buffer": model.buffer_size,
        "batch size": model.batch_size,
        "learning starts": model.learning_starts,
        "train every (env steps)": every,
        "gradient steps per training": every if model.gradient_steps < 0 else model.gradient_steps,
        "actor / critic hidden sizes": f"{list(actor)} / {list(critic)}",
        "critics": model.policy.critic.n_critics,
        "torch threads": THREADS,  # the child process sets it
        "device": str(model.device),
    }
    if algo == "sac":
        learned = model.ent_coef_optimizer is not None
        settings |= {
            "temperature": "learned" if learned else "fixed",
            "initial temperature": round(math.exp(model.log_ent_coef.item()), 6),
            "temperature learning rate": model.ent_coef_optimizer.defaults["lr"],
            "target entropy": float(model.target_entropy),
        }
    else:
        noise = model.action_noise
        settings |= {
            "exploration noise": f"normal {float(noise._sigma[0]):g}",
            "policy delay": model.policy_delay,
            "target policy noise": model.target_policy_noise,
            "target noise clip": model.target_noise_clip,
        }
    return settings


def like_for_like(algo: str, budget: int | None = None) -> list[dict[str, Any]]:
    """rlx on SB3's hyperparameters against SB3's recipe, setting by setting."""
    recipe = {**RECIPES[algo], **({"n_timesteps": budget} if budget else {})}
    rlx = rlx_settings(algo, rlx_config(algo, recipe_overrides(algo, budget)))
    return settings_table(rlx, sb3_settings(algo, sb3_model(algo, recipe), recipe))


def preset_vs_recipe(algo: str) -> list[dict[str, Any]]:
    """Where rlx's preset differs from the recipe (both as rlx settings)."""
    preset = rlx_settings(algo, rlx_config(algo, {}))
    return differences(preset, rlx_settings(algo, rlx_config(algo, recipe_overrides(algo))))


# ---------------------------------------------------------------------------- measurements
def random_policy_return(episodes: int = 20) -> float:
    """Mean return of uniformly random actions on Pendulum-v1 (the stability floor's base)."""
    import gymnasium as gym

    env = gym.make(ENV_ID)
    env.action_space.seed(0)
    total = 0.0
    for episode in range(episodes):
        env.reset(seed=episode)
        done = False
        while not done:
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            total += float(reward)
            done = terminated or truncated
    return total / episodes


def updates_per_s(curve: deep_rl.Curve) -> float:
    """Gradient updates per second between the first and the last reading after learning
    started (env stepping and acting included, as training runs)."""
    learning = [(t, n) for t, n in curve.extra["update_readings"] if n > 0]
    if len(learning) < 2 or learning[-1][0] <= learning[0][0]:
        return math.nan
    (t0, n0), (t1, n1) = learning[0], learning[-1]
    return (n1 - n0) / (t1 - t0)


def isolated_rlx(algo: str, hidden: tuple[int, ...], batch: int, n: int) -> float:
    """rlx gradient updates per second on a filled replay buffer, sampling included."""
    import torch

    from rlx.agents.sac import SACConfig, SACLearner
    from rlx.agents.td3 import TD3Config, TD3Learner
    from rlx.core.buffers import ReplayBuffer
    from rlx.core.off_policy import replay_batches

    torch.set_num_threads(THREADS)
    rng = np.random.default_rng(0)
    buffer = ReplayBuffer(10_000, (3,), np.float32, action_shape=(1,), action_dtype=np.float32)
    for _ in range(2_000):
        obs = rng.normal(size=(1, 3)).astype(np.float32)
        buffer.add(obs, rng.uniform(-1, 1, (1, 1)), rng.normal(size=1), obs,
                   np.zeros(1, bool), np.zeros(1, bool))  # fmt: skip
    if algo == "sac":
        learner = SACLearner(SACConfig(hidden_sizes=hidden, batch_size=batch), 3, 1)
    else:
        learner = TD3Learner(TD3Config(hidden_sizes=hidden, batch_size=batch), 3, 1)

    def steps(k: int) -> None:
        for _ in range(k):
            (minibatch,) = replay_batches(buffer.sample(batch, rng), 1, batch)
            learner.update(minibatch)

    steps(20)
    t0 = time.perf_counter()
    steps(n)
    return n / (time.perf_counter() - t0)


def isolated_sb3(algo: str, net_arch: list[int], batch: int, n: int) -> float:
    """SB3 gradient updates per second: ``model.train(gradient_steps=n)`` on a filled buffer."""
    import gymnasium as gym
    import torch
    from stable_baselines3 import SAC, TD3

    torch.set_num_threads(THREADS)
    cls = SAC if algo == "sac" else TD3
    model = cls("MlpPolicy", gym.make(ENV_ID), learning_starts=2_000, batch_size=batch,
                policy_kwargs={"net_arch": net_arch}, seed=0, device="cpu")  # fmt: skip
    model.learn(2_000)  # random actions into the buffer, no update yet
    model.train(gradient_steps=20, batch_size=batch)
    t0 = time.perf_counter()
    model.train(gradient_steps=n, batch_size=batch)
    return n / (time.perf_counter() - t0)


def isolated_table(algos: list[str], n: int) -> dict[str, Any]:
    """Updates per second at equal network sizes (SB3's default and rlx's preset sizes),
    ``ISOLATED_REPEATS`` alternated repeats each: median and min."""
    sizes = {"sac": [[256, 256], [64, 64]], "td3": [[400, 300], [64, 64]]}
    rows = []
    for algo in algos:
        for hidden in sizes[algo]:
            sb3, ours = [], []
            for _ in range(ISOLATED_REPEATS):
                sb3.append(isolated_sb3(algo, hidden, 256, n))
                ours.append(isolated_rlx(algo, tuple(hidden), 256, n))
            s, o = spread(sb3), spread(ours)
            rows.append([f"{algo.upper()} {hidden}", s["median"], s["min"], o["median"], o["min"],
                         ratio(o["median"], s["median"])])  # fmt: skip
            print(f"isolated {algo} {hidden}: SB3 {s['median']:,.0f}/s, rlx {o['median']:,.0f}/s")
    return {
        "title": f"Gradient updates per second on a filled replay buffer, equal network sizes "
                 f"(batch 256, sampling included, {n} updates, {ISOLATED_REPEATS} repeats)",
        "columns": ["algorithm, hidden sizes", "SB3 median", "SB3 min", "rlx median", "rlx min",
                    "rlx / SB3 (medians)"],
        "rows": rows,
    }  # fmt: skip


# ---------------------------------------------------------------------------- main
ROW_CODE = f"rlx on {PEER}'s hyperparameters"
ROW_PRESET = "rlx preset"
ROW_PEER = f"{PEER}, zoo recipe"


def run_algo(algo: str, seeds: list[int], budget: int | None) -> dict[str, list[deep_rl.Curve]]:
    recipe = {**RECIPES[algo], **({"n_timesteps": budget} if budget else {})}
    code = recipe_overrides(algo, budget)
    preset_budget = budget or rlx_config(algo, {}).total_steps
    curves: dict[str, list[deep_rl.Curve]] = {ROW_CODE: [], ROW_PRESET: [], ROW_PEER: []}
    for seed in seeds:
        for row in (ROW_CODE, ROW_PRESET, ROW_PEER):
            if row == ROW_CODE:
                curve = deep_rl.run_rlx(row, algo, ENV_ID, seed, code["total_steps"], code)
            elif row == ROW_PRESET:
                curve = deep_rl.run_rlx(row, algo, ENV_ID, seed, preset_budget, {})
            else:
                curve = deep_rl.run_sb3(row, algo, ENV_ID, seed, recipe)
            curves[row].append(curve)
            hit = curve.first_reaching(THRESHOLD, GOAL_WINDOW)
            print(f"{algo} {row:32} seed {seed}: "
                  f"{'not reached' if hit is None else f'{hit[1]:.1f} s, {hit[0]:,} steps'}, "
                  f"{updates_per_s(curve):,.0f} updates/s", flush=True)  # fmt: skip
    return curves


def summarize(curves: list[deep_rl.Curve], baseline: float) -> dict[str, Any]:
    """The row's figures (``deep_rl.summarize`` at the goal window, the stability check at
    its own window) and its gradient updates per second."""
    out = deep_rl.summarize(curves, THRESHOLD, baseline, GOAL_WINDOW)
    checks = [deep_rl.stability(c.returns, THRESHOLD, baseline, STABILITY_WINDOW) for c in curves]
    out["stable"] = sum(bool(c["stable"]) for c in checks)
    for seed_figures, check in zip(out["per_seed"], checks, strict=True):
        seed_figures.update(check)
    out["updates_per_s"] = spread([updates_per_s(c) for c in curves])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SCORING_SEEDS))
    parser.add_argument("--algos", nargs="+", choices=tuple(RECIPES), default=list(RECIPES))
    parser.add_argument("--isolated", type=int, default=ISOLATED_UPDATES,
                        help="gradient updates per isolated timing (0: skip)")  # fmt: skip
    parser.add_argument("--quick", action="store_true",
                        help=f"3 seeds, {QUICK_STEPS:,} steps: checks that it works")  # fmt: skip
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where continuous.json goes (default benchmarks/results, --quick: "
                             "benchmarks/results/quick)")  # fmt: skip
    args = parser.parse_args()
    presets = [f"{algo} {ENV_ID}" for algo in args.algos]
    check_unseen(presets, args.seeds)  # never on seeds a preset's tuning looked at
    tuning_seeds = tuning_seeds_text(presets)
    budget = None
    if args.quick:
        args.seeds, budget = args.seeds[:3], QUICK_STEPS
        args.isolated = min(args.isolated, QUICK_UPDATES)
    baseline = random_policy_return()
    floor = baseline + (THRESHOLD - baseline) / 2
    print(f"random policy: {baseline:.0f} a episode; stability floor {floor:.0f}")
    rows, goals, settings, diffs, details = [], [], [], [], {}
    n = len(args.seeds)
    for algo in args.algos:
        checked = like_for_like(algo, budget)
        settings += [{**r, "setting": f"{algo}: {r['setting']}"} for r in checked]
        diffs += [{**d, "setting": f"{algo}: {d['setting']}"} for d in preset_vs_recipe(algo)]
        curves = run_algo(algo, args.seeds, budget)
        summaries = {row: summarize(c, baseline) for row, c in curves.items()}
        details[algo] = summaries
        peer = summaries[ROW_PEER]
        for row in (ROW_CODE, ROW_PRESET, ROW_PEER):
            s = summaries[row]
            cells = deep_rl.table_row(row, algo, s, None if row == ROW_PEER else peer)
            ups = s["updates_per_s"]
            cells.append(f"{ups['median']:,.0f} ({ups['min']:,.0f})" if ups["median"] else "-")
            rows.append(cells)
        ups = ratio(summaries[ROW_CODE]["updates_per_s"]["median"], peer["updates_per_s"]["median"])
        preset_s = summaries[ROW_PRESET]["seconds_to_goal"]["median"]
        peer_s = peer["seconds_to_goal"]["median"]
        if preset_s is None:
            measured, met = "preset did not reach it", False
        elif peer_s is None:
            measured, met = f"{preset_s:.3g} s; {PEER} did not reach it", True
        else:
            measured, met = ratio(preset_s, peer_s), preset_s <= peer_s
        stable = summaries[ROW_PRESET]["stable"]
        goals += [
            goal(f"{algo}: rlx on {PEER}'s hyperparameters runs at least {PEER}'s gradient "
                 "updates/s", "ratio >= 1", ups, None if ups is None else ups >= 1.0),
            goal(f"{algo}: rlx's preset reaches {THRESHOLD:g} no later than {PEER}'s recipe "
                 "(median s)", "ratio <= 1", measured, met),
            goal(f"{algo}: rlx's preset reaches {THRESHOLD:g} and stays up on every scoring "
                 "seed", f"{n}/{n}", f"{stable}/{n}", stable == n),
        ]  # fmt: skip
    tables = [isolated_table(args.algos, args.isolated)] if args.isolated else []
    write_result(
        "continuous",
        title="SAC and TD3 on Pendulum-v1: rlx vs Stable-Baselines3 with rl-zoo's recipe",
        columns=[*deep_rl.columns(THRESHOLD, PEER), "gradient updates/s, median (min)"],
        rows=rows,
        libraries=LIBRARIES,
        repeats=n,
        seeds=args.seeds,
        goals=goals,
        peer=PEER,
        settings=settings,
        preset_differences=diffs,
        extra_tables=tables,
        figures={
            "preset_tuning_seeds": tuning_seeds,
            "scoring_seeds": args.seeds,
            "random_policy_return": round(baseline, 1),
            "stability_floor": round(floor, 1),
        },
        details=details,
        notes=(
            f"Each seed one run per row, each in a fresh process, rows alternated seed by "
            f"seed; every run trains the whole budget ({budget or 20_000:,} env steps). Time: "
            f"wall seconds from the start of training until the mean of the last "
            f"{GOAL_WINDOW} training episodes first reaches {THRESHOLD:g}. Staying up: after "
            f"first reaching it, no window of {STABILITY_WINDOW} episodes below {floor:.0f} "
            f"(halfway from the random policy's {baseline:.0f}, measured here). Presets tuned "
            f"on {tuning_seeds}, scored on seeds {', '.join(map(str, args.seeds))}. One "
            "torch thread, CPU."
        ),
        quick=args.quick,
        out_dir=args.out_dir,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
