"""Atari: env steps per second of rlx's preprocessing against Stable-Baselines3's, and the
memory of the replay buffer that stores each frame once.

Protocol (one process, one thread, the same game and number of env copies for both):

- **rlx**: ``rlx.core.envs.make_vec_env(GAME, N)``, what ``rlx train dqn|ppo --env GAME``
  steps: Gymnasium's ``SyncVectorEnv`` of ``rlx.core.atari.atari_env`` copies (no-op reset,
  frame skip 4 with max-pooling, episodic life, fire reset, 84x84 grayscale, reward clipping,
  a stack of 4 frames).
- **Stable-Baselines3**: ``make_atari_env(GAME, N, vec_env_cls=DummyVecEnv)`` (its
  ``AtariWrapper``: the same wrappers) and ``VecFrameStack(4)``; the game is made with
  ``frameskip=1`` as for rlx, so both skip 4 frames per step (the v5 ids skip 4 themselves,
  and ``AtariWrapper`` would skip 4 of those).
- Both step ``--steps`` vector steps with the same pre-drawn random actions after a reset that
  is not timed; steps/s counts env steps (vector steps x N), per wall second and per second
  of this process's CPU time (steadier on a shared machine). The two alternate ``--repeats``
  times (at least 3); the table gives the median and the best (max) of each.
- The preprocessing settings of both pipelines are read from their wrapper chains
  (:func:`rlx_settings`, :func:`sb3_settings`) and must be equal: the game, its sticky
  actions, the base frame skip, no-op resets, frame skip and max-pooling, episodic life, fire
  reset, frame size and colour, reward clipping, frame stack, env copies.
- Training on Atari (rlx's DQN and PPO presets for ``ALE/*`` against the zoo's ``atari``
  recipes) takes 10M env steps a run and is not run here: the page lists where each preset
  differs from the zoo's recipe, and the training rows say "not run".
- **Memory**: the frame-once buffer (``rlx.core.frame_buffer.FrameReplayBuffer``) filled with
  ``--memory-transitions`` transitions of stacked 84x84 frames (measured: the process's
  resident memory before and after), beside what its arrays and those of
  ``rlx.core.buffers.ReplayBuffer`` (obs and next_obs stored whole) hold for 1M transitions
  (computed from their shapes). A machine without the memory for ``--memory-transitions``
  measures a tenth of it (or less), and the result file says how many.

The result goes to ``benchmarks/results/atari.json`` (``--out-dir`` elsewhere).

Run: ``.venv/bin/python benchmarks/bench_atari.py [--game ALE/Breakout-v5] [--envs 8]``; a
smoke run: ``--steps 50 --memory-transitions 2000 --out-dir /tmp/bench``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from results import (  # noqa: E402
    MIN_REPEATS,
    differences,
    goal,
    ratio,
    settings_table,
    spread,
    write_result,
)

LIBRARIES = ("torch", "gymnasium", "ale-py", "stable-baselines3", "opencv-python")
PEER = "SB3"
QUICK_STEPS, QUICK_TRANSITIONS = 50, 2_000
# rl-baselines3-zoo hyperparams/dqn.yml and ppo.yml, the ``atari`` entries, as the zoo writes them
ATARI_RECIPES: dict[str, dict[str, Any]] = {
    "dqn": {"n_timesteps": 10_000_000, "policy": "CnnPolicy", "buffer_size": 100_000,
            "learning_rate": 1e-4, "batch_size": 32, "learning_starts": 100_000,
            "target_update_interval": 1000, "train_freq": 4, "gradient_steps": 1,
            "exploration_fraction": 0.1, "exploration_final_eps": 0.01},
    "ppo": {"n_envs": 8, "n_timesteps": 10_000_000, "policy": "CnnPolicy", "n_steps": 128,
            "n_epochs": 4, "batch_size": 256, "learning_rate": "lin_2.5e-4",
            "clip_range": "lin_0.1", "vf_coef": 0.5, "ent_coef": 0.01},
}  # fmt: skip

FRAME = (84, 84)
STACK = 4
GiB = 1024**3


# ---------------------------------------------------------------------------- env steps/s
def rlx_vec_env(game: str, envs: int):
    from rlx.core.envs import make_vec_env

    return make_vec_env(game, envs)


def sb3_vec_env(game: str, envs: int):
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack

    vec = make_atari_env(game, envs, seed=0, vec_env_cls=DummyVecEnv, env_kwargs={"frameskip": 1})
    return VecFrameStack(vec, STACK)


def steps_per_s(
    library: str, game: str, envs: int, actions: np.ndarray
) -> tuple[float, float, tuple]:
    """Env steps per wall second and per CPU second over ``actions`` ``[T, N]``; and the
    observation shape seen."""
    if library == "rlx":
        vec = rlx_vec_env(game, envs)
        obs, _ = vec.reset(seed=0)
        step = vec.step
    else:
        vec = sb3_vec_env(game, envs)
        obs = vec.reset()
        step = vec.step
    start, cpu = time.perf_counter(), time.process_time()
    for a in actions:
        obs = step(a)[0]
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    vec.close()
    return actions.size / elapsed, actions.size / cpu, tuple(obs.shape[1:])


# ---------------------------------------------------------------------------- settings
def _chain(env: Any) -> list[Any]:
    """``env`` and every wrapper below it, outermost first."""
    chain = [env]
    while hasattr(chain[-1], "env"):
        chain.append(chain[-1].env)
    return chain


def _game_settings(base: Any, game: str) -> dict[str, Any]:
    return {
        "game": game,
        "sticky actions": base.ale.getFloat("repeat_action_probability"),
        "base frame skip": base._frameskip,
    }


def rlx_settings(vec: Any, game: str) -> dict[str, Any]:
    """The preprocessing rlx's vector env does, read from its first copy's wrappers."""
    chain = _chain(vec.envs[0])
    by_name = {type(w).__name__: w for w in chain}
    pre = by_name["AtariPreprocessing"]
    return {
        **_game_settings(chain[-1], game),
        "no-op reset (max no-ops)": pre.noop_max,
        "frame skip (max of last 2)": pre.frame_skip,
        "episodic life": "EpisodicLife" in by_name,
        "fire reset": "FireReset" in by_name,
        "frame": f"{pre.screen_size[0]}x{pre.screen_size[1]} "
        + ("grayscale" if pre.grayscale_obs else "colour"),
        "reward clipping": "ClipReward" in by_name,
        "frame stack": by_name["FrameStackObservation"].stack_size,
        "env copies": vec.num_envs,
    }


def sb3_settings(vec: Any, game: str) -> dict[str, Any]:
    """The same, read from SB3's ``VecFrameStack`` and its first copy's ``AtariWrapper``."""
    chain = _chain(vec.venv.envs[0])
    by_name = {type(w).__name__: w for w in chain}
    warp = by_name["WarpFrame"]
    return {
        **_game_settings(chain[-1], game),
        "no-op reset (max no-ops)": by_name["NoopResetEnv"].noop_max,
        "frame skip (max of last 2)": by_name["MaxAndSkipEnv"]._skip,
        "episodic life": "EpisodicLifeEnv" in by_name,
        "fire reset": "FireResetEnv" in by_name,
        "frame": f"{warp.height}x{warp.width} grayscale",  # WarpFrame converts to gray
        "reward clipping": "ClipRewardEnv" in by_name,
        "frame stack": vec.stacked_obs.n_stack,
        "env copies": vec.num_envs,
    }


def like_for_like(game: str, envs: int) -> list[dict[str, Any]]:
    """Both pipelines' preprocessing, setting by setting."""
    ours, theirs = rlx_vec_env(game, envs), sb3_vec_env(game, envs)
    try:
        return settings_table(rlx_settings(ours, game), sb3_settings(theirs, game))
    finally:
        ours.close()
        theirs.close()


def atari_preset_differences(game: str) -> list[dict[str, Any]]:
    """Where rlx's ``ALE/*`` presets of DQN and PPO differ from the zoo's ``atari`` recipes
    (both as rlx settings, with the mappings of bench_dqn.py and bench_policy_gradient.py)."""
    import bench_dqn
    import bench_policy_gradient as pg

    zoo = ATARI_RECIPES["dqn"]
    dqn_recipe = {
        **bench_dqn.recipe_overrides(),
        "total_steps": zoo["n_timesteps"],
        "num_envs": zoo.get("n_envs", 1),
        "learning_rate": zoo["learning_rate"],
        "buffer_size": zoo["buffer_size"],
        "batch_size": zoo["batch_size"],
        "learning_starts": zoo["learning_starts"],
        "sync_every": zoo["target_update_interval"],
        "train_freq": zoo["train_freq"],
        "gradient_steps": zoo["gradient_steps"],
        "exploration_fraction": zoo["exploration_fraction"],
        "epsilon_end": zoo["exploration_final_eps"],
        # unused on images (the Nature CNN's features feed the output layer), as in CnnPolicy
        "hidden_sizes": bench_dqn.rlx_config({}, game).hidden_sizes,
    }
    dqn = differences(
        bench_dqn.rlx_settings(bench_dqn.rlx_config({}, game)),
        bench_dqn.rlx_settings(bench_dqn.rlx_config(dqn_recipe, game)),
    )
    zoo = ATARI_RECIPES["ppo"]
    ppo_recipe = {
        **pg.recipe_overrides("ppo"),
        "total_steps": zoo["n_timesteps"],
        "num_envs": zoo["n_envs"],
        "num_steps": zoo["n_steps"],
        "num_epochs": zoo["n_epochs"],
        "minibatch_size": zoo["batch_size"],
        "gamma": 0.99,  # SB3's default
        "gae_lambda": 0.95,  # SB3's default
        "learning_rate": float(zoo["learning_rate"].removeprefix("lin_")),
        "clip_eps": float(zoo["clip_range"].removeprefix("lin_")),
        "vf_coef": zoo["vf_coef"],
        "ent_coef": zoo["ent_coef"],
        "hidden_sizes": (),  # CnnPolicy: linear heads on the Nature CNN's features
    }
    ppo = differences(
        pg.rlx_settings("ppo", pg.rlx_config("ppo", {}, game)),
        pg.rlx_settings("ppo", pg.rlx_config("ppo", ppo_recipe, game)),
    )
    return [{**d, "setting": f"{algo}: {d['setting']}"} for algo, diffs in
            (("dqn", dqn), ("ppo", ppo)) for d in diffs]  # fmt: skip


# ---------------------------------------------------------------------------- memory
def resident_bytes() -> int:
    """This process's resident memory (Linux)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


def available_bytes() -> int:
    """Memory the OS can still give (Linux's MemAvailable)."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def replay_bytes(capacity: int, envs: int) -> dict[str, int]:
    """What each buffer's arrays hold for ``capacity`` transitions of ``envs`` copies, from
    their shapes (checked against buffers built at a small capacity): a million would not
    fit in memory as a ReplayBuffer."""
    from rlx.core.buffers import ReplayBuffer
    from rlx.core.frame_buffer import POOL_MARGIN, FrameReplayBuffer

    def sizes(capacity: int) -> dict[str, int]:
        rows = -(-capacity // envs)
        frame, flags = FRAME[0] * FRAME[1], 8 + 4 + 1 + 1  # action, reward, two flags
        pool = rows + rows // POOL_MARGIN + 2 * STACK
        return {
            "ReplayBuffer": rows * envs * (2 * STACK * frame + flags),
            "FrameReplayBuffer": pool * envs * frame + rows * envs * (2 * STACK * 8 + flags),
        }

    small = 1_000
    plain = ReplayBuffer(small, (STACK, *FRAME), np.uint8, num_envs=envs)
    arrays = (plain.obs, plain.next_obs, plain.actions, plain.rewards, plain.terminated,
              plain.truncated)  # fmt: skip
    frames = FrameReplayBuffer(small, (STACK, *FRAME), np.uint8, num_envs=envs)
    assert sizes(small) == {
        "ReplayBuffer": sum(a.nbytes for a in arrays),
        "FrameReplayBuffer": frames.nbytes,
    }
    return sizes(capacity)


def measured_frame_buffer_bytes(capacity: int, envs: int, episode: int = 1_000) -> int:
    """Resident memory a filled :class:`FrameReplayBuffer` takes: ``capacity`` transitions of
    stacked frames over episodes of ``episode`` steps (frames drawn once from a small set:
    their content does not change the memory)."""
    from rlx.core.frame_buffer import FrameReplayBuffer

    rng = np.random.default_rng(0)
    palette = rng.integers(0, 256, (61, *FRAME), dtype=np.uint8)
    before = resident_bytes()
    buffer = FrameReplayBuffer(capacity, (STACK, *FRAME), np.uint8, num_envs=envs)
    actions = np.zeros(envs, dtype=np.int64)
    rewards = np.zeros(envs, dtype=np.float32)
    flags = np.zeros(envs, dtype=bool)
    obs = np.repeat(palette[np.arange(envs) % len(palette)][:, None], STACK, axis=1)
    for t in range(-(-capacity // envs)):
        new = palette[(t * envs + np.arange(envs) * 7) % len(palette)]
        nxt = np.concatenate([obs[:, 1:], new[:, None]], axis=1)
        ends = (t + 1) % episode == 0
        buffer.add(obs, actions, rewards, nxt, flags | ends, flags)
        obs = np.repeat(new[:, None], STACK, axis=1) if ends else nxt
    assert len(buffer) == buffer.capacity
    return resident_bytes() - before


# ---------------------------------------------------------------------------- main
COLUMNS = ["pipeline", "game", "env copies", "env steps/s, median", "env steps/s, max",
           "env steps per CPU s, median", "observation"]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--game", default="ALE/Breakout-v5")
    parser.add_argument("--envs", type=int, default=8, help="env copies, both pipelines")
    parser.add_argument("--steps", type=int, default=2_000, help="vector steps timed")
    parser.add_argument("--repeats", type=int, default=MIN_REPEATS,
                        help="timed runs of each, alternated")  # fmt: skip
    parser.add_argument(
        "--memory-transitions",
        type=int,
        default=1_000_000,
        help="transitions the frame-once buffer is filled with (0: skip)",
    )
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_STEPS} steps, {QUICK_TRANSITIONS:,} transitions: checks "
                             "that it works")  # fmt: skip
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where atari.json goes (default: benchmarks/results, --quick: "
                             "benchmarks/results/quick)")  # fmt: skip
    args = parser.parse_args()
    if args.quick:
        args.steps = min(args.steps, QUICK_STEPS)
        args.memory_transitions = min(args.memory_transitions, QUICK_TRANSITIONS)
    import torch

    torch.set_num_threads(1)
    from rlx.core.atari import register_atari_games

    if not register_atari_games():
        raise SystemExit("ale-py is not installed: pip install 'rlx[atari]'")
    import gymnasium as gym

    settings = like_for_like(args.game, args.envs)
    n_actions = gym.make(args.game).action_space.n
    actions = np.random.default_rng(0).integers(0, n_actions, size=(args.steps, args.envs))
    pipelines = {"rlx": "rlx (make_vec_env)",
                 "SB3": "Stable-Baselines3 (AtariWrapper + VecFrameStack)"}  # fmt: skip
    wall: dict[str, list[float]] = {lib: [] for lib in pipelines}
    cpu: dict[str, list[float]] = {lib: [] for lib in pipelines}
    shapes: dict[str, tuple] = {}
    for _ in range(args.repeats):
        for library, label in pipelines.items():
            sps, cpu_sps, shapes[library] = steps_per_s(library, args.game, args.envs, actions)
            wall[library].append(sps)
            cpu[library].append(cpu_sps)
            print(f"{label:50} {sps:>8,.0f} env steps/s {cpu_sps:>8,.0f} per CPU s", flush=True)
    rows, figures = [], {}
    for library, label in pipelines.items():
        w, c = spread(wall[library]), spread(cpu[library])
        rows.append([label, args.game, args.envs, w["median"], w["max"], c["median"],
                     "x".join(map(str, shapes[library]))])  # fmt: skip
        figures[f"{library}_env_steps_per_s"] = w
        figures[f"{library}_env_steps_per_cpu_s"] = c
    for algo in ("dqn", "ppo"):
        rows.append([f"training {algo}: rlx preset vs {PEER} zoo recipe", args.game, "-",
                     "not run (10M env steps a run)", "-", "-", "-"])  # fmt: skip
    wall_ratio = ratio(spread(wall["rlx"])["median"], spread(wall["SB3"])["median"])
    cpu_ratio = ratio(spread(cpu["rlx"])["median"], spread(cpu["SB3"])["median"])
    figures["rlx_steps_per_s_ratio"] = wall_ratio
    figures["rlx_steps_per_cpu_s_ratio"] = cpu_ratio
    million = replay_bytes(1_000_000, 1)
    figures["replay_gib_1m_computed"] = {k: round(v / GiB, 2) for k, v in million.items()}
    print(
        "a 1M-transition replay buffer of 4x84x84 uint8 observations (computed): "
        + ", ".join(f"{k} {v / GiB:.2f} GiB" for k, v in million.items())
    )
    transitions = args.memory_transitions
    # a machine without the memory measures a tenth, and says so
    while transitions and replay_bytes(transitions, args.envs)["FrameReplayBuffer"] * 1.25 > (
        available_bytes()
    ):
        transitions //= 10
    if transitions:
        measured = measured_frame_buffer_bytes(transitions, args.envs)
        computed = replay_bytes(transitions, args.envs)["FrameReplayBuffer"]
        figures["frame_buffer_measured"] = {
            "transitions": transitions,
            "env_copies": args.envs,
            "resident_gib": round(measured / GiB, 3),
            "computed_gib": round(computed / GiB, 3),
        }
        print(
            f"FrameReplayBuffer filled with {transitions:,} transitions "
            f"({args.envs} copies): {measured / GiB:.3f} GiB resident "
            f"(its arrays: {computed / GiB:.3f} GiB)"
        )
    goals = [
        goal("rlx's Atari pipeline steps at least SB3's env steps per CPU second (medians)",
             "ratio >= 1", cpu_ratio, None if cpu_ratio is None else cpu_ratio >= 1.0),
        goal("rlx's presets trained against the zoo's Atari recipes", "measured",
             "not run (10M env steps a run)", None),
    ]  # fmt: skip
    write_result(
        "atari",
        title="Atari: env steps/s of rlx's preprocessing and Stable-Baselines3's AtariWrapper",
        columns=COLUMNS,
        rows=rows,
        libraries=LIBRARIES,
        repeats=args.repeats,
        goals=goals,
        peer=PEER,
        settings=settings,
        preset_differences=atari_preset_differences(args.game),
        figures=figures,
        notes=(
            f"{args.steps} vector steps of {args.envs} copies of {args.game} with the same "
            f"random actions, one process, one thread, {args.repeats} alternated runs of each; "
            "the game made with frameskip=1 for both, which then skip 4 frames with "
            "max-pooling (rlx asks the game for grayscale screens, SB3 for colour ones it "
            "converts). Memory: the frame-once replay buffer's resident size when filled, "
            "and both buffers' arrays for 1M transitions. Training is not run: the preset "
            "differences below are what the two training rows would compare."
        ),
        quick=args.quick,
        out_dir=args.out_dir,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
