"""DQN on CartPole-v1: rlx vs Stable-Baselines3 with rl-baselines3-zoo's recipe.

Three runs per seed, alternated seed by seed, each in a fresh process with one torch thread
(``deep_rl.py``):

1. **rlx on SB3's hyperparameters** (the code's speed): rlx's config set to the zoo's recipe
   and to SB3's DQN for what the recipe leaves (:func:`recipe_overrides`): vanilla DQN target
   (SB3 has no Double DQN), Huber loss, 1-step returns, no observation normalisation, a
   constant learning rate, one env.
2. **rlx's preset** (what a user gets): ``rlx train dqn --env CartPole-v1 --seed S``, with
   its own budget (the preset's ``total_steps``).
3. **SB3 with the zoo's recipe** (``hyperparams/dqn.yml``, CartPole-v1: 50k steps, lr 2.3e-3,
   batch 64, buffer 100k, learning_starts 1000, gamma 0.99, target update every 10 steps,
   train_freq 256, gradient_steps 128, exploration fraction 0.16 to 0.04, net_arch
   [256, 256]), as the zoo builds it, for the whole budget.

Settings (both sides read from the configuration objects, :func:`like_for_like`; asserted equal
by ``tests/benchmarks/test_like_for_like.py``) are on the page with both values.

Measured per run: wall seconds and env steps until the mean of the last 20 training episodes
first reaches 475 (from the start of training), training env steps per second over the whole
budget, and the stability check (after first reaching 475, no window of 20 episodes below
237.5, over the whole budget). Per row: median and min over the seeds (each seed is one
repeat), seeds reaching and staying up, ratios to SB3's row.

Seeds: the preset is tuned on seeds 0-9; this benchmark scores it on seeds 10-14 (five: a
run of SB3's recipe takes minutes here).

Goals: rlx on SB3's hyperparameters trains at least SB3's env steps/s; rlx's preset reaches
475 no later than SB3's recipe (median seconds; a side that never reaches it is slower); the
preset stays up on every scoring seed.

The result goes to ``benchmarks/results/dqn.json``; its figures hold what ``rlx recommend``
reads. Run: ``.venv/bin/python benchmarks/bench_dqn.py [--seeds 10 11 12 13 14]``;
``--quick`` checks that it works (3 seeds, 3k steps).
"""

from __future__ import annotations

import os

THREADS = 1
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, str(THREADS))

import argparse  # noqa: E402
import inspect  # noqa: E402
import sys  # noqa: E402
from collections.abc import Mapping  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import deep_rl  # noqa: E402  (benchmarks/deep_rl.py)
from deep_rl import schedule_text  # noqa: E402
from results import (  # noqa: E402
    check_unseen,
    differences,
    goal,
    ratio,
    settings_table,
    tuning_seeds_text,
    write_result,
)

ENV_ID = "CartPole-v1"
THRESHOLD, BASELINE, WINDOW = 475.0, 0.0, 20
SCORING_SEEDS = (10, 11, 12, 13, 14)
PEER = "SB3"
LIBRARIES = ("torch", "gymnasium", "stable-baselines3")
QUICK_STEPS = 3_000

# rl-baselines3-zoo hyperparams/dqn.yml, CartPole-v1, as the zoo writes it
RECIPE: dict[str, Any] = {
    "n_envs": 1,
    "n_timesteps": 50_000,
    "policy": "MlpPolicy",
    "learning_rate": 2.3e-3,
    "batch_size": 64,
    "buffer_size": 100_000,
    "learning_starts": 1_000,
    "gamma": 0.99,
    "target_update_interval": 10,
    "train_freq": 256,
    "gradient_steps": 128,
    "exploration_fraction": 0.16,
    "exploration_final_eps": 0.04,
    "policy_kwargs": {"net_arch": [256, 256]},
}


def recipe_overrides(budget: int | None = None) -> dict[str, Any]:
    """rlx's DQN fields equal to the zoo's recipe, and to SB3's DQN where the recipe sets
    nothing, covering every field of rlx's preset."""
    return {
        "total_steps": budget or RECIPE["n_timesteps"],
        "num_envs": RECIPE["n_envs"],
        "learning_rate": RECIPE["learning_rate"],
        "learning_rate_end": None,
        "batch_size": RECIPE["batch_size"],
        "buffer_size": RECIPE["buffer_size"],
        "learning_starts": RECIPE["learning_starts"],
        "gamma": RECIPE["gamma"],
        "sync_every": RECIPE["target_update_interval"],
        "tau": 1.0,
        "train_freq": RECIPE["train_freq"],
        "gradient_steps": RECIPE["gradient_steps"],
        "epsilon_start": 1.0,
        "epsilon_end": RECIPE["exploration_final_eps"],
        "exploration_fraction": RECIPE["exploration_fraction"],
        "hidden_sizes": tuple(RECIPE["policy_kwargs"]["net_arch"]),
        "double": False,
        "dueling": False,
        "loss": "huber",
        "max_grad_norm": 10.0,
        "n_step": 1,
        "normalize_obs": False,
        "scale_rewards": False,
        "reward_clip": None,
    }


def rlx_config(overrides: Mapping[str, Any], env_id: str = ENV_ID) -> Any:
    """rlx's config as ``rlx.train`` builds it: defaults, the env's preset, ``overrides``."""
    from rlx import registry

    return registry.make_config(registry.get("dqn"), env_id, dict(overrides))[0]


def sb3_model(recipe: Mapping[str, Any] | None = None) -> Any:
    """SB3's DQN as the benchmark's child process builds it (constructed, not trained)."""
    from stable_baselines3 import DQN
    from stable_baselines3.common.env_util import make_vec_env

    recipe = recipe or RECIPE
    env = make_vec_env(ENV_ID, n_envs=recipe["n_envs"], seed=0)
    return DQN(recipe["policy"], env, seed=0, device="cpu", verbose=0,
               **deep_rl.sb3_constructor_kwargs(recipe))  # fmt: skip


def rlx_settings(config: Any) -> dict[str, Any]:
    """The settings that change the work, from rlx's config object."""
    lr_end = config.learning_rate if config.learning_rate_end is None else config.learning_rate_end
    return {
        "total env steps": config.total_steps,
        "env copies": config.num_envs,
        "learning rate": schedule_text(lambda p: lr_end + (config.learning_rate - lr_end) * p),
        "batch size": config.batch_size,
        "replay buffer": config.buffer_size,
        "learning starts": config.learning_starts,
        "gamma": config.gamma,
        "target update every (env steps)": config.sync_every,
        "target update tau": config.tau,
        "train every (env steps)": config.train_freq,
        "gradient steps per training": config.gradient_steps,
        "epsilon start": config.epsilon_start,
        "epsilon end": config.epsilon_end,
        "epsilon decay share": config.exploration_fraction,
        "hidden sizes": list(config.hidden_sizes),
        "dueling head": config.dueling,
        "target": "double" if config.double else "vanilla",
        "loss": config.loss,
        "max gradient norm": config.max_grad_norm,
        "n-step returns": config.n_step,
        "observation normalisation": config.normalize_obs,
        "reward scaling": config.scale_rewards or config.reward_clip is not None,
        "torch threads": int(os.environ["RLX_NUM_THREADS"]),
        "device": "cpu" if config.device in ("auto", "cpu") else config.device,
    }


def sb3_settings(model: Any, recipe: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The same settings, read from SB3's constructed DQN (its loss and target from the code
    of ``DQN.train``: smooth L1, the target network's max)."""
    recipe = recipe or RECIPE
    source = inspect.getsource(type(model).train)
    return {
        "total env steps": recipe["n_timesteps"],
        "env copies": model.n_envs,
        "learning rate": schedule_text(model.lr_schedule),
        "batch size": model.batch_size,
        "replay buffer": model.buffer_size,
        "learning starts": model.learning_starts,
        "gamma": model.gamma,
        "target update every (env steps)": model.target_update_interval,
        "target update tau": model.tau,
        "train every (env steps)": model.train_freq.frequency,
        "gradient steps per training": model.gradient_steps,
        "epsilon start": model.exploration_initial_eps,
        "epsilon end": model.exploration_final_eps,
        "epsilon decay share": model.exploration_fraction,
        "hidden sizes": list(model.policy.net_arch),
        "dueling head": False,
        "target": _sb3_target(source),
        "loss": "huber" if "smooth_l1_loss" in source else "unknown",
        "max gradient norm": model.max_grad_norm,
        "n-step returns": getattr(model, "n_steps", 1),
        "observation normalisation": bool(recipe.get("normalize", False)),
        "reward scaling": bool(recipe.get("normalize", False)),
        "torch threads": THREADS,  # the child process sets it
        "device": str(model.device),
    }  # fmt: skip


def _sb3_target(train_source: str) -> str:
    """SB3's DQN target, read from the code of its ``train``: the target network's max over
    actions (vanilla) unless the online network picks the action (argmax: double)."""
    if "argmax" in train_source:
        return "double"
    return "vanilla" if "q_net_target" in train_source and ".max(dim=1)" in train_source else "?"


def like_for_like(budget: int | None = None) -> list[dict[str, Any]]:
    """rlx on SB3's hyperparameters against SB3's recipe, setting by setting."""
    recipe = {**RECIPE, **({"n_timesteps": budget} if budget else {})}
    rlx = rlx_settings(rlx_config(recipe_overrides(budget)))
    return settings_table(rlx, sb3_settings(sb3_model(recipe), recipe))


def preset_vs_recipe() -> list[dict[str, Any]]:
    """Where rlx's preset differs from the recipe (both as rlx settings)."""
    return differences(rlx_settings(rlx_config({})), rlx_settings(rlx_config(recipe_overrides())))


ROW_CODE = f"rlx on {PEER}'s hyperparameters"
ROW_PRESET = "rlx preset"
ROW_PEER = f"{PEER}, zoo recipe"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SCORING_SEEDS))
    parser.add_argument("--quick", action="store_true",
                        help=f"3 seeds, {QUICK_STEPS:,} steps: checks that it works")  # fmt: skip
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where dqn.json goes (default benchmarks/results, --quick: "
                             "benchmarks/results/quick)")  # fmt: skip
    args = parser.parse_args()
    presets = [f"{algo} {ENV_ID}" for algo in ["dqn"]]
    check_unseen(presets, args.seeds)  # never on seeds a preset's tuning looked at
    tuning_seeds = tuning_seeds_text(presets)
    budget = None
    if args.quick:
        args.seeds, budget = args.seeds[:3], QUICK_STEPS
    recipe = {**RECIPE, **({"n_timesteps": budget} if budget else {})}
    code = recipe_overrides(budget)
    preset_budget = budget or rlx_config({}).total_steps
    settings = like_for_like(budget)
    curves: dict[str, list[deep_rl.Curve]] = {ROW_CODE: [], ROW_PRESET: [], ROW_PEER: []}
    for seed in args.seeds:  # interleaved, so machine load hits every row alike
        for row in (ROW_CODE, ROW_PRESET, ROW_PEER):
            if row == ROW_CODE:
                curve = deep_rl.run_rlx(row, "dqn", ENV_ID, seed, code["total_steps"], code)
            elif row == ROW_PRESET:
                curve = deep_rl.run_rlx(row, "dqn", ENV_ID, seed, preset_budget, {})
            else:
                curve = deep_rl.run_sb3(row, "dqn", ENV_ID, seed, recipe)
            curves[row].append(curve)
            hit = curve.first_reaching(THRESHOLD)
            print(f"{row:32} seed {seed}: "
                  f"{'not reached' if hit is None else f'{hit[1]:.2f} s, {hit[0]:,} steps'}, "
                  f"{curve.steps_per_s:,.0f} steps/s", flush=True)  # fmt: skip
    summaries = {
        row: deep_rl.summarize(c, THRESHOLD, BASELINE, WINDOW) for row, c in curves.items()
    }
    peer = summaries[ROW_PEER]
    rows = [
        deep_rl.table_row(row, "dqn", summaries[row], None if row == ROW_PEER else peer)
        for row in (ROW_CODE, ROW_PRESET, ROW_PEER)
    ]
    n = len(args.seeds)
    sps = ratio(summaries[ROW_CODE]["steps_per_s"]["median"], peer["steps_per_s"]["median"])
    preset_s = summaries[ROW_PRESET]["seconds_to_goal"]["median"]
    peer_s = peer["seconds_to_goal"]["median"]
    if preset_s is None:
        time_measured, time_met = "preset did not reach it", False
    elif peer_s is None:
        time_measured, time_met = f"{preset_s:.3g} s; {PEER} did not reach it", True
    else:
        time_measured, time_met = ratio(preset_s, peer_s), preset_s <= peer_s
    goals = [
        goal(f"rlx on {PEER}'s hyperparameters trains at least {PEER}'s env steps/s",
             "ratio >= 1", sps, None if sps is None else sps >= 1.0),
        goal(f"rlx's preset reaches {THRESHOLD:g} no later than {PEER}'s recipe (median s)",
             "ratio <= 1", time_measured, time_met),
        goal(f"rlx's preset reaches {THRESHOLD:g} and stays up on every scoring seed",
             f"{n}/{n}", f"{summaries[ROW_PRESET]['stable']}/{n}",
             summaries[ROW_PRESET]["stable"] == n),
    ]  # fmt: skip
    figures: dict[str, Any] = {"preset_tuning_seeds": tuning_seeds, "scoring_seeds": args.seeds}
    if preset_s is not None:
        # what `rlx recommend CartPole-v1` reads to compare the methods rlx measured here
        figures.update(env=ENV_ID, goal="a last-20 mean of 475",
                       rlx_median_seconds_to_goal={"dqn": preset_s})  # fmt: skip
    write_result(
        "dqn",
        title="DQN on CartPole-v1: rlx vs Stable-Baselines3 with rl-zoo's recipe",
        columns=deep_rl.columns(THRESHOLD, PEER),
        rows=rows,
        libraries=LIBRARIES,
        repeats=n,
        seeds=args.seeds,
        goals=goals,
        peer=PEER,
        settings=settings,
        preset_differences=preset_vs_recipe(),
        figures=figures,
        details=summaries,
        notes=(
            f"Each seed one run per row, each in a fresh process, rows alternated seed by seed; "
            f"every run trains its whole budget (the preset's {preset_budget:,} env steps, the "
            f"recipe's {code['total_steps']:,}). Time: wall seconds from the start of training "
            f"until the mean of the last {WINDOW} training episodes first reaches "
            f"{THRESHOLD:g}; env steps/s over the whole budget. Staying up: after first "
            f"reaching {THRESHOLD:g}, no window of {WINDOW} episodes below "
            f"{(THRESHOLD + BASELINE) / 2:g}. Preset tuned: {tuning_seeds}, scored on "
            f"seeds {', '.join(map(str, args.seeds))}. One torch thread, CPU."
        ),
        quick=args.quick,
        out_dir=args.out_dir,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
