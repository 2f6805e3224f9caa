"""PPO and A2C on CartPole-v1: rlx vs Stable-Baselines3 with rl-baselines3-zoo's recipe.

Three runs per algorithm and seed, alternated seed by seed so that a busy moment of the
machine hits all of them, each in a fresh process with one torch thread (``deep_rl.py``):

1. **rlx on SB3's hyperparameters** (the code's speed): rlx's config with every field the
   zoo's recipe sets, and SB3's defaults for what the recipe leaves (:func:`recipe_overrides`),
   over rlx's preset, at the recipe's budget.
2. **rlx's preset** (what a user gets): ``rlx train ALGO --env CartPole-v1 --seed S`` with no
   other flag, at the preset's budget (100k env steps for PPO, 500k for A2C: the recipe's).
   Where the preset equals the recipe, rows 1 and 2 are one run.
3. **SB3 with the zoo's recipe** (``hyperparams/ppo.yml`` and ``a2c.yml``, CartPole-v1), as
   the zoo builds it, for the recipe's whole budget.

Settings (both sides read from the configuration objects, :func:`like_for_like`; the tests in
``tests/benchmarks/test_like_for_like.py`` assert them equal): PPO 8 env copies x 32 steps,
minibatch 256, 20 epochs, gamma 0.98, GAE lambda 0.8, entropy 0, value 0.5, gradient norm
0.5, learning rate 1e-3 and clip 0.2 both linear to 0, advantages normalised, separate policy
and value MLPs of 64x64 tanh, no observation normalisation, 100k env steps; A2C 8 x 5 steps,
gamma 0.99, lambda 1, entropy 0, value 0.5, gradient norm 0.5, RMSprop 7e-4 (alpha 0.99),
64x64 tanh, 500k env steps. One torch thread, CPU, both.

Measured per run: wall seconds and env steps until the mean of the last 20 training episodes
first reaches 475 (from the start of training), training env steps per second over the
whole budget, and the stability check (``deep_rl.stability``: after first reaching 475, no
window of 20 episodes below 237.5, over the whole budget). Reported per row: median and min
over the seeds (each seed is one repeat), seeds reaching 475 and staying up, and the ratios to
SB3's row. Also the raw env ceiling: Gymnasium's natively vectorised CartPole (8 copies)
stepped with random actions and nothing else, 3 repeats.

Seeds: the seeds each preset's tuning and retuning looked at are listed in
``benchmarks/seen_seeds.json`` (PPO's: 0-9, then 11, 14 and 19 when its clip range was retuned,
then 20-39 for its step size; A2C's: 0-9, then 40-49 where it was scored and fell, then 50-59
for its retuning); this benchmark scores them on seeds 80-89 and refuses seeds the registry
lists.

Goals per algorithm: rlx on SB3's hyperparameters trains at least as many env steps per
second as SB3; rlx's preset reaches 475 no later than SB3's recipe (median seconds); the
preset stays up on every scoring seed.

The result goes to ``benchmarks/results/policy_gradient.json``; its figures hold what ``rlx
recommend`` reads (the env, the goal and rlx's preset's median seconds to it per algorithm).

Run: ``.venv/bin/python benchmarks/bench_policy_gradient.py [--seeds 80 ... 89]
[--algos ppo a2c]``; ``--quick`` checks that it works (3 seeds, 5k steps).
"""

from __future__ import annotations

import os

THREADS = 1
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, str(THREADS))

import argparse  # noqa: E402
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

ENV_ID = "CartPole-v1"
THRESHOLD, BASELINE, WINDOW = 475.0, 0.0, 20
SCORING_SEEDS = tuple(range(80, 90))
PEER = "SB3"
LIBRARIES = ("torch", "gymnasium", "stable-baselines3")
QUICK_STEPS = 5_000

# rl-baselines3-zoo hyperparams/ppo.yml and a2c.yml, CartPole-v1, as the zoo writes them
RECIPES: dict[str, dict[str, Any]] = {
    "ppo": {
        "n_envs": 8,
        "n_timesteps": 100_000,
        "policy": "MlpPolicy",
        "n_steps": 32,
        "batch_size": 256,
        "gae_lambda": 0.8,
        "gamma": 0.98,
        "n_epochs": 20,
        "ent_coef": 0.0,
        "learning_rate": "lin_0.001",
        "clip_range": "lin_0.2",
    },
    "a2c": {"n_envs": 8, "n_timesteps": 500_000, "policy": "MlpPolicy", "ent_coef": 0.0},
}


# ---------------------------------------------------------------------------- configurations
def recipe_overrides(algo: str, budget: int | None = None) -> dict[str, Any]:
    """rlx config fields equal to the zoo's recipe, and to SB3's defaults where the recipe
    sets nothing, covering every field of rlx's preset (so none of it leaks in)."""
    recipe = RECIPES[algo]
    common = {
        "total_steps": budget or recipe["n_timesteps"],
        "num_envs": recipe["n_envs"],
        "gamma": recipe.get("gamma", 0.99),
        "ent_coef": recipe.get("ent_coef", 0.0),
        "vf_coef": 0.5,
        "max_grad_norm": 0.5,
        "hidden_sizes": (64, 64),
        "activation": "tanh",
        "normalize_obs": False,
        "normalize_rewards": False,
    }
    if algo == "ppo":
        return {
            **common,
            "num_steps": recipe["n_steps"],
            "minibatch_size": recipe["batch_size"],
            "num_epochs": recipe["n_epochs"],
            "gae_lambda": recipe["gae_lambda"],
            "learning_rate": 1e-3,
            "anneal_lr": True,
            "clip_eps": 0.2,
            "anneal_clip": True,
            "normalize_advantages": True,
            "target_kl": None,
            "clip_value": None,
        }
    return {
        **common,
        "num_steps": 5,
        "gae_lambda": 1.0,
        "learning_rate": 7e-4,
        "rmsprop_alpha": 0.99,
        "anneal_lr": False,
        "normalize_advantages": False,
    }


def rlx_config(algo: str, overrides: Mapping[str, Any], env_id: str = ENV_ID) -> Any:
    """rlx's config as ``rlx.train`` builds it: defaults, the env's preset, ``overrides``."""
    from rlx import registry

    return registry.make_config(registry.get(algo), env_id, dict(overrides))[0]


def sb3_model(algo: str, recipe: Mapping[str, Any] | None = None) -> Any:
    """SB3's model as the benchmark's child process builds it (constructed, not trained)."""
    import stable_baselines3 as sb3
    from stable_baselines3.common.env_util import make_vec_env

    recipe = recipe or RECIPES[algo]
    env = make_vec_env(ENV_ID, n_envs=recipe["n_envs"], seed=0)
    cls = getattr(sb3, algo.upper())
    return cls(recipe["policy"], env, seed=0, device="cpu", verbose=0,
               **deep_rl.sb3_constructor_kwargs(recipe))  # fmt: skip


def rlx_settings(algo: str, config: Any) -> dict[str, Any]:
    """The settings that change the work, from rlx's config object."""
    from rlx.core.optim import annealed

    def schedule(value: float, anneal: bool) -> str:
        total = config.total_steps
        return schedule_text(lambda p: annealed(value, round((1 - p) * total), total, anneal))

    hidden = list(config.hidden_sizes)
    settings = {
        "total env steps": config.total_steps,
        "env copies": config.num_envs,
        "steps per env copy per update": config.num_steps,
        "gamma": config.gamma,
        "GAE lambda": config.gae_lambda,
        "entropy coefficient": config.ent_coef,
        "value coefficient": config.vf_coef,
        "max gradient norm": config.max_grad_norm,
        "learning rate": schedule(config.learning_rate, config.anneal_lr),
        "normalize advantages": config.normalize_advantages,
        "policy / value hidden sizes": f"{hidden} / {hidden}",
        "activation": config.activation,
        "observation normalisation": bool(config.normalize_obs),  # None: off for discrete
        "reward normalisation": config.normalize_rewards,
        "torch threads": int(os.environ["RLX_NUM_THREADS"]),
        "device": "cpu" if config.device in ("auto", "cpu") else config.device,
    }
    if algo == "ppo":
        settings |= {
            "minibatch size": config.minibatch_size,
            "epochs per update": config.num_epochs,
            "clip range": schedule(config.clip_eps, config.anneal_clip),
            "target KL": config.target_kl,
            "value clipping": config.clip_value,
            "optimizer": "Adam",
        }
    else:
        settings |= {"optimizer": f"RMSprop alpha {config.rmsprop_alpha:g}"}
    return settings


def sb3_settings(algo: str, model: Any, recipe: Mapping[str, Any] | None = None) -> dict:
    """The same settings, read from SB3's constructed model."""
    recipe = recipe or RECIPES[algo]
    arch = model.policy.net_arch
    settings = {
        "total env steps": recipe["n_timesteps"],
        "env copies": model.n_envs,
        "steps per env copy per update": model.n_steps,
        "gamma": model.gamma,
        "GAE lambda": model.gae_lambda,
        "entropy coefficient": model.ent_coef,
        "value coefficient": model.vf_coef,
        "max gradient norm": model.max_grad_norm,
        "learning rate": schedule_text(model.lr_schedule),
        "normalize advantages": model.normalize_advantage,
        "policy / value hidden sizes": f"{list(arch['pi'])} / {list(arch['vf'])}",
        "activation": model.policy.activation_fn.__name__.lower(),
        "observation normalisation": bool(recipe.get("normalize", False)),
        "reward normalisation": bool(recipe.get("normalize", False)),
        "torch threads": THREADS,  # the child process sets it
        "device": str(model.device),
    }
    if algo == "ppo":
        settings |= {
            "minibatch size": model.batch_size,
            "epochs per update": model.n_epochs,
            "clip range": schedule_text(model.clip_range),
            "target KL": model.target_kl,
            "value clipping": model.clip_range_vf,
            "optimizer": type(model.policy.optimizer).__name__,
        }
    else:
        alpha = model.policy.optimizer.defaults["alpha"]
        settings |= {"optimizer": f"{type(model.policy.optimizer).__name__} alpha {alpha:g}"}
    return settings


def like_for_like(algo: str, budget: int | None = None) -> list[dict[str, Any]]:
    """rlx on SB3's hyperparameters against SB3's recipe, setting by setting (``budget``: the
    env steps of both, default the recipe's)."""
    recipe = {**RECIPES[algo], **({"n_timesteps": budget} if budget else {})}
    rlx = rlx_settings(algo, rlx_config(algo, recipe_overrides(algo, budget)))
    return settings_table(rlx, sb3_settings(algo, sb3_model(algo, recipe), recipe))


def preset_vs_recipe(algo: str) -> list[dict[str, Any]]:
    """Where rlx's preset differs from the recipe (both as rlx settings)."""
    preset = rlx_settings(algo, rlx_config(algo, {}))
    return differences(preset, rlx_settings(algo, rlx_config(algo, recipe_overrides(algo))))


# ---------------------------------------------------------------------------- raw env
def raw_env_steps_per_s(num_envs: int = 8, vector_steps: int = 20_000) -> float:
    """Gymnasium's native vector CartPole stepped with pre-drawn random actions, nothing else."""
    import gymnasium as gym

    env = gym.make_vec(ENV_ID, num_envs, vectorization_mode="vector_entry_point")
    env.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, 2, size=(vector_steps, num_envs))
    start = time.perf_counter()
    for a in actions:
        env.step(a)
    elapsed = time.perf_counter() - start
    env.close()
    return vector_steps * num_envs / elapsed


# ---------------------------------------------------------------------------- runs
ROW_CODE = f"rlx on {PEER}'s hyperparameters"
ROW_PRESET = "rlx preset"
ROW_PEER = f"{PEER}, zoo recipe"


def run_algo(algo: str, seeds: list[int], budget: int | None, extra: dict[str, Any]) -> dict:
    """Every row's curves for ``algo`` over ``seeds``, alternated seed by seed."""
    recipe = dict(RECIPES[algo])
    if budget is not None:
        recipe["n_timesteps"] = budget
    code = recipe_overrides(algo, budget)
    preset_budget = budget or rlx_config(algo, {}).total_steps
    preset = {**extra, "total_steps": preset_budget}
    same = rlx_settings(algo, rlx_config(algo, preset)) == rlx_settings(
        algo, rlx_config(algo, code)
    )
    curves: dict[str, list[deep_rl.Curve]] = {ROW_CODE: [], ROW_PRESET: [], ROW_PEER: []}
    for seed in seeds:
        runs = [(ROW_CODE, lambda s=seed: deep_rl.run_rlx(ROW_CODE, algo, ENV_ID, s,
                                                          code["total_steps"], code))]  # fmt: skip
        if not same:
            runs.append((ROW_PRESET, lambda s=seed: deep_rl.run_rlx(
                ROW_PRESET, algo, ENV_ID, s, preset_budget, extra)))  # fmt: skip
        runs.append((ROW_PEER, lambda s=seed: deep_rl.run_sb3(ROW_PEER, algo, ENV_ID, s, recipe)))
        for row, run in runs:
            curve = run()
            curves[row].append(curve)
            hit = curve.first_reaching(THRESHOLD)
            print(f"{algo} {row:32} seed {seed}: "
                  f"{'not reached' if hit is None else f'{hit[1]:.2f} s, {hit[0]:,} steps'}, "
                  f"{curve.steps_per_s:,.0f} steps/s", flush=True)  # fmt: skip
    if same:
        curves[ROW_PRESET] = curves[ROW_CODE]
    return {"curves": curves, "preset_is_recipe": same}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SCORING_SEEDS))
    parser.add_argument("--algos", nargs="+", choices=tuple(RECIPES), default=list(RECIPES))
    parser.add_argument("--total-steps", type=int, default=None,
                        help="one budget for every run (default: the recipe's and the "
                             "preset's)")  # fmt: skip
    parser.add_argument("--ppo-overrides", nargs="+", default=[], metavar="KEY=VALUE",
                        help="config fields for rlx's PPO preset row, e.g. num_epochs=8 (to "
                             "try a preset on the tuning seeds before it is one)")  # fmt: skip
    parser.add_argument("--quick", action="store_true",
                        help=f"3 seeds, {QUICK_STEPS:,} steps: checks that it works")  # fmt: skip
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where policy_gradient.json goes (default benchmarks/results, "
                             "--quick: benchmarks/results/quick)")  # fmt: skip
    args = parser.parse_args()
    presets = [f"{algo} {ENV_ID}" for algo in args.algos]
    check_unseen(presets, args.seeds)  # never on seeds a preset's tuning looked at
    tuning_seeds = tuning_seeds_text(presets)
    if args.quick:
        args.seeds, args.total_steps = args.seeds[:3], args.total_steps or QUICK_STEPS
    extra = {"ppo": parse_overrides(args.ppo_overrides), "a2c": {}}

    raw = spread([raw_env_steps_per_s() for _ in range(3)])
    rows, goals, details, tables = [], [], {}, []
    figures: dict[str, Any] = {"preset_tuning_seeds": tuning_seeds, "scoring_seeds": args.seeds}
    settings, preset_diffs = [], []
    seconds_to_goal = {}
    for algo in args.algos:
        checked = like_for_like(algo, args.total_steps)
        settings += [{**row, "setting": f"{algo}: {row['setting']}"} for row in checked]
        diffs = preset_vs_recipe(algo) if not extra[algo] else [
            {"setting": k, "preset": v, "recipe": "(see --ppo-overrides)"}
            for k, v in extra[algo].items()
        ]  # fmt: skip
        preset_diffs += [{**d, "setting": f"{algo}: {d['setting']}"} for d in diffs]
        result = run_algo(algo, args.seeds, args.total_steps, extra[algo])
        summaries = {row: deep_rl.summarize(c, THRESHOLD, BASELINE, WINDOW)
                     for row, c in result["curves"].items()}  # fmt: skip
        details[algo] = summaries
        peer = summaries[ROW_PEER]
        label = {ROW_CODE: ROW_CODE + (" (= preset)" if result["preset_is_recipe"] else "")}
        for row in (ROW_CODE, ROW_PRESET, ROW_PEER):
            if row == ROW_PRESET and result["preset_is_recipe"]:
                continue
            rows.append(deep_rl.table_row(label.get(row, row), algo, summaries[row],
                                          None if row == ROW_PEER else peer))  # fmt: skip
        goals += algo_goals(algo, summaries, len(args.seeds))
        median_s = summaries[ROW_PRESET]["seconds_to_goal"]["median"]
        if median_s is not None:
            seconds_to_goal[algo] = median_s
    if seconds_to_goal:
        # what `rlx recommend CartPole-v1` reads to compare the methods rlx measured here
        figures.update(env=ENV_ID, goal="a last-20 mean of 475",
                       rlx_median_seconds_to_goal=seconds_to_goal)  # fmt: skip
    tables.append({
        "title": "Raw env ceiling: Gymnasium's native vector CartPole, 8 copies, random actions, "
                 "3 repeats",
        "columns": ["env steps/s, median", "min", "max"],
        "rows": [[raw["median"], raw["min"], raw["max"]]],
    })  # fmt: skip
    write_result(
        "policy_gradient",
        title="PPO and A2C on CartPole-v1: rlx vs Stable-Baselines3 with rl-zoo's recipe",
        columns=deep_rl.columns(THRESHOLD, PEER),
        rows=rows,
        libraries=LIBRARIES,
        repeats=len(args.seeds),
        seeds=args.seeds,
        goals=goals,
        peer=PEER,
        settings=settings,
        preset_differences=preset_diffs,
        extra_tables=tables,
        figures=figures,
        details=details,
        notes=(
            f"Each seed one run per row, each run in a fresh process, rows alternated seed by "
            f"seed; the whole budget runs (no stop at the goal). Time: wall seconds from the "
            f"start of training until the mean of the last {WINDOW} training episodes first "
            f"reaches {THRESHOLD:g}; env steps/s: over the whole budget. Staying up: after "
            f"first reaching {THRESHOLD:g}, no window of {WINDOW} episodes below "
            f"{BASELINE + (THRESHOLD - BASELINE) / 2:g}. Presets tuned: {tuning_seeds}, "
            f"scored on seeds {', '.join(map(str, args.seeds))}. One torch thread, CPU."
        ),
        quick=args.quick,
        out_dir=args.out_dir,
    )
    return 0


def algo_goals(algo: str, summaries: Mapping[str, Any], n: int) -> list[dict[str, Any]]:
    """The three goals of one algorithm (module docstring)."""
    code, preset, peer = summaries[ROW_CODE], summaries[ROW_PRESET], summaries[ROW_PEER]
    sps = ratio(code["steps_per_s"]["median"], peer["steps_per_s"]["median"])
    secs = ratio(preset["seconds_to_goal"]["median"], peer["seconds_to_goal"]["median"])
    peer_reached = peer["seconds_to_goal"]["median"] is not None
    preset_reached = preset["seconds_to_goal"]["median"] is not None
    time_met = None
    if preset_reached and peer_reached:
        time_met = secs <= 1.0
    elif not preset_reached:
        time_met = False
    return [
        goal(f"{algo}: rlx on {PEER}'s hyperparameters trains at least {PEER}'s env steps/s",
             "ratio >= 1", sps, None if sps is None else sps >= 1.0),
        goal(f"{algo}: rlx's preset reaches {THRESHOLD:g} no later than {PEER}'s recipe "
             "(median seconds)", "ratio <= 1",
             secs if secs is not None else ("not reached" if not preset_reached else
                                            f"{PEER} did not reach it"), time_met),
        goal(f"{algo}: rlx's preset reaches {THRESHOLD:g} and stays up on every scoring seed",
             f"{n}/{n}", f"{preset['stable']}/{n}", preset["stable"] == n),
    ]  # fmt: skip


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as config overrides (values read as JSON where they parse)."""
    import json

    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--ppo-overrides takes KEY=VALUE pairs, got {pair!r}")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


if __name__ == "__main__":
    sys.exit(main())
