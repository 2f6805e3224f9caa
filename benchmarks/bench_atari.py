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
  times; the best of each is kept (the run least disturbed by the rest of the machine).
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

import numpy as np  # noqa: E402

from results import write_result  # noqa: E402  (benchmarks/results.py)

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
COLUMNS = ["pipeline", "game", "env copies", "env steps/s", "env steps per CPU s", "observation"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--game", default="ALE/Breakout-v5")
    parser.add_argument("--envs", type=int, default=8, help="env copies, both pipelines")
    parser.add_argument("--steps", type=int, default=2_000, help="vector steps timed")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs of each, alternated")
    parser.add_argument(
        "--memory-transitions",
        type=int,
        default=1_000_000,
        help="transitions the frame-once buffer is filled with (0: skip)",
    )
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where atari.json goes (default: benchmarks/results)")  # fmt: skip
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    from rlx.core.atari import register_atari_games

    if not register_atari_games():
        raise SystemExit("ale-py is not installed: pip install 'rlx[atari]'")
    import gymnasium as gym

    n_actions = gym.make(args.game).action_space.n
    actions = np.random.default_rng(0).integers(0, n_actions, size=(args.steps, args.envs))
    rows, figures = [], {}
    pipelines = {"rlx": "rlx (make_vec_env)",
                 "SB3": "Stable-Baselines3 (AtariWrapper + VecFrameStack)"}  # fmt: skip
    best: dict[str, tuple[float, float, tuple]] = {}
    for _ in range(args.repeats):
        for library, label in pipelines.items():
            sps, cpu_sps, shape = steps_per_s(library, args.game, args.envs, actions)
            print(f"{label:50} {sps:>8,.0f} env steps/s {cpu_sps:>8,.0f} per CPU s", flush=True)
            seen = best.get(library, (0.0, 0.0, shape))
            best[library] = (max(sps, seen[0]), max(cpu_sps, seen[1]), shape)
    for library, label in pipelines.items():
        sps, cpu_sps, shape = best[library]
        rows.append([label, args.game, args.envs, round(sps), round(cpu_sps),
                     "x".join(map(str, shape))])  # fmt: skip
        figures[f"{library}_env_steps_per_s"] = round(sps)
        figures[f"{library}_env_steps_per_cpu_s"] = round(cpu_sps)
    figures["rlx_steps_per_s_ratio"] = round(
        figures["rlx_env_steps_per_s"] / figures["SB3_env_steps_per_s"], 3
    )
    figures["rlx_steps_per_cpu_s_ratio"] = round(
        figures["rlx_env_steps_per_cpu_s"] / figures["SB3_env_steps_per_cpu_s"], 3
    )
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
    write_result(
        "atari",
        title="Atari: env steps/s of rlx's preprocessing and Stable-Baselines3's AtariWrapper",
        columns=COLUMNS,
        rows=rows,
        figures=figures,
        notes=(
            f"{args.steps} vector steps of {args.envs} copies of {args.game} with the same "
            f"random actions, one process, one thread, best of {args.repeats} alternated runs; "
            "the game made with frameskip=1 for both, "
            "which then skip 4 frames with max-pooling. Memory: the frame-once replay buffer's "
            "resident size when filled, and both buffers' arrays for 1M transitions."
        ),
        out_dir=args.out_dir,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
