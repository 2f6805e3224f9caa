"""The doctor's false-positive and miss rates on a committed corpus of real runs, measured on a
held-out half that no rule was revised on.

Every case trains real runs and labels them:

- **healthy** runs: presets and defaults that learn, on envs with a preset (CartPole, Pendulum)
  and without one (FrozenLake), for every family: tabular learners, DQN, PPO, A2C,
  REINFORCE, SAC, TD3, AlphaZero and MuZero (briefly), SFT, DPO and GRPO on tiny language
  models. A finding on a healthy run is a false positive. A healthy case's run that collapsed
  by the benchmarks' own stability check (independent of the doctor) is labelled broken,
  expecting ``performance-collapse``.
- **broken** runs: a known cause injected (a learning rate far too high or far too low, no
  entropy bonus on a sparse env, a target net synced every step, rewards scaled 1000x, a clip
  range 40x too small, the observations flipped mid-run, the preset's old clip that collapsed
  on seed 0, a step size too small to learn, ...), each with the findings that name that
  cause. A broken run on which none of them fires is a miss; other findings are listed.
- **foreign** runs, logged by code that is not rlx's (``benchmarks/foreign_corpus.py``):
  Stable-Baselines3 PPO (``progress.csv``) and DQN (its TensorBoard logger), a CleanRL-style
  PPO loop (CleanRL's TensorBoard tags) and TRL's GRPO (``trainer_state.json``), each healthy
  and broken.

The runs' logs (metrics.jsonl, episodes.csv, config.json and summary.json of an rlx run; the
log files of a foreign one; no checkpoints or models) are committed, one ``.tar.gz`` per run,
under ``tests/diagnostics/data/doctor_corpus/runs/``, with ``manifest.json``: each run's case,
seed, label (healthy, or broken with its expected rules), cause, half, and the commit and date
that trained it.

**The split.** Whole cases (all their seeds) go to one half, by a rule recorded in the
manifest: the cases sorted by (rlx or foreign logs, healthy or broken, sha256 of the case
name) are dealt alternately to the development and the held-out half, so each of the four
strata is split as evenly as its count allows. The lists are written once in the manifest; a
case added later keeps the lists as they are and goes to the half the parity of its name's
sha256 names. **Rules are changed on the development half only**: read the development
runs' diagnoses to revise a rule, never the held-out ones. The held-out figures are what the
doctor's error rates are quoted as.

``tests/diagnostics/test_doctor_corpus.py`` rebuilds the held-out runs from the archives,
diagnoses them with today's rules and fails when their false positives or misses exceed the
bounds in ``bounds.json``; ``--record-bounds`` rewrites those bounds (and the result file the
benchmark page reads) from the committed data with the rules of the working tree: no
training, a minute or so.

Run from the repository root, one process at a time (the runs train in sequence, one torch
thread)::

    .venv/bin/python benchmarks/doctor_corpus.py --root /tmp/rlx-doctor-corpus  # train
    .venv/bin/python benchmarks/doctor_corpus.py --root /tmp/rlx-doctor-corpus --export
    .venv/bin/python benchmarks/doctor_corpus.py --record-bounds  # the rules again, no training

``--export [DIR]`` packs the run folders under ``--root`` into DIR (default the committed
corpus), writes the manifest and records the bounds. ``--quick`` trains the first seed of
every case only (a check that the script works, nothing exported). ``--baseline DUMP`` adds the
figures of another diagnosis of the same runs (``--record-bounds --dump DUMP --no-result`` run
with an older ``rlx`` on ``PYTHONPATH``: the rates before a change of the rules).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from collections.abc import Iterable, Sequence  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from datetime import datetime, timezone  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
from gymnasium import spaces  # noqa: E402

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

DEFAULT_ROOT = Path("/tmp/rlx-doctor-corpus")
SEEDS = (0, 1, 2)


# ============================================================================ injected envs
class ObservationFlip(gym.ObservationWrapper):
    """The observation negated after ``after`` steps of this env copy: a sensor whose sign
    flips mid-run, so states the critic knew now look like their mirror images."""

    def __init__(self, env: gym.Env, after: int) -> None:
        super().__init__(env)
        self.after, self.count = after, 0

    def step(self, action: Any) -> Any:
        self.count += 1
        return super().step(action)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return -observation if self.count > self.after else observation


def flipped_cartpole(after: int = 3000, **kwargs: Any) -> gym.Env:
    """CartPole-v1 whose observations flip sign after ``after`` steps of each copy."""
    return ObservationFlip(gym.make("CartPole-v1", **kwargs), after)


def scaled_rewards(env_id: str, scale: float, **kwargs: Any) -> gym.Env:
    """``env_id`` with every reward multiplied by ``scale``."""
    return gym.wrappers.TransformReward(gym.make(env_id, **kwargs), lambda r: scale * r)


class NoisyBandit(gym.Env):
    """van Hasselt's maximisation-bias setting: every action pays N(-0.05, 1), an episode ends
    with probability 0.1 per step, so Q*(s, a) < 0 for every action while the max over noisy
    estimates is biased upwards."""

    def __init__(self, n_actions: int = 64, n_states: int = 4) -> None:
        self.n_states = n_states
        self.observation_space = spaces.Box(0.0, 1.0, (n_states,), np.float32)
        self.action_space = spaces.Discrete(n_actions)
        self.s = 0

    def _obs(self) -> np.ndarray:
        obs = np.zeros(self.n_states, dtype=np.float32)
        obs[self.s] = 1.0
        return obs

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        super().reset(seed=seed)
        self.s = int(self.np_random.integers(self.n_states))
        return self._obs(), {}

    def step(self, action: Any) -> Any:
        reward = float(self.np_random.normal(-0.05, 1.0))
        terminated = bool(self.np_random.random() < 0.1)
        self.s = int(self.np_random.integers(self.n_states))
        return self._obs(), reward, terminated, False, {}


def register_envs() -> None:
    """The corpus's injected envs, under ``rlx-corpus/...`` ids (solved thresholds kept)."""
    if "rlx-corpus/FlippedCartPole-v1" in gym.registry:
        return
    gym.register("rlx-corpus/FlippedCartPole-v1", entry_point=flipped_cartpole,
                 reward_threshold=475.0)  # fmt: skip
    gym.register("rlx-corpus/CartPoleRewards1000x-v1",
                 entry_point=lambda **kw: scaled_rewards("CartPole-v1", 1000.0, **kw),
                 reward_threshold=475_000.0)  # fmt: skip
    gym.register("rlx-corpus/NoisyBandit-v0", entry_point=NoisyBandit, max_episode_steps=100)


register_envs()


# ============================================================================ the cases
@dataclass(frozen=True)
class Case:
    """One kind of run: ``algo`` on ``env`` with ``settings`` over ``seeds``, logged by
    ``source`` (rlx, or another library's logger: :mod:`foreign_corpus` trains those).

    ``expect``: the findings that name the injected ``cause`` (any one of them counts as
    caught); empty for a healthy run, on which any finding is a false positive.
    """

    name: str
    algo: str
    env: str
    settings: dict[str, Any] = field(default_factory=dict)
    expect: tuple[str, ...] = ()
    cause: str = ""
    seeds: tuple[int, ...] = SEEDS
    source: str = "rlx"  # who wrote the logs: rlx, sb3, tensorboard (not rlx's) or trl

    @property
    def healthy(self) -> bool:
        return not self.expect

    @property
    def preset(self) -> bool:
        """Whether rlx has a preset for this algorithm on this env."""
        from rlx import registry

        try:
            algorithm = registry.get(self.algo)
        except Exception:
            return False
        return registry.preset_for(algorithm, self.env)[0] is not None if self.env else False


LEARNING_RATE_TOO_HIGH = ("policy-blowup", "kl-too-high", "entropy-collapse", "no-learning")
"""The findings that name a learning rate far too high: a blow-up in one update, a sustained
KL, the entropy it destroys, the return that never moves (policy-blowup joined with the rule,
before the corpus was exported: its fix is the step size these cases inject)."""
DEEP = {"eval_episodes": 0}
GAMES = {"games_per_iteration": 8, "simulations": 16, "eval_simulations": 8, "batch_size": 32,
         "eval_games": 4, "eval_every": 1, "train_steps_per_iteration": 8}  # fmt: skip
DEMO_BROKEN = {"learning_rate": 0.1, "num_epochs": 40, "gae_lambda": 0.8, "clip_eps": 0.2,
               "anneal_lr": False, "anneal_clip": False}  # fmt: skip
# PPO on MountainCar without an entropy bonus: four envs of 256 steps end an episode in every
# rollout, so every update logs a return (tests/diagnostics/test_doctor.py)
# (rl-baselines3-zoo's preset, which a new run gets on MountainCar since rlx keeps none, would
# normalise observations and rewards and change GAE and the epochs: the case pins rlx's defaults
# for those, so the one cause it injects is the missing entropy bonus)
MOUNTAIN_CAR_PPO = {"learning_rate": 3e-3, "num_envs": 4, "num_steps": 256,
                    "total_steps": 30_000, "normalize_obs": False, "normalize_rewards": False,
                    "gae_lambda": 0.95, "num_epochs": 10}  # fmt: skip

RLX_CASES: tuple[Case, ...] = (
    # ------------------------------------------------------------------ healthy
    Case("q-learning FrozenLake", "q-learning", "FrozenLake-v1", {"episodes": 3000}),
    Case("sarsa FrozenLake", "sarsa", "FrozenLake-v1", {"episodes": 3000}),
    Case("expected-sarsa FrozenLake", "expected-sarsa", "FrozenLake-v1", {"episodes": 3000}),
    Case("double-q FrozenLake", "double-q", "FrozenLake-v1", {"episodes": 3000}),
    # the preset's whole budget: make demo's run (its explained variance swings below -3 once
    # the task is solved, while the critic's error is all but 0)
    Case("ppo CartPole (preset)", "ppo", "CartPole-v1", {**DEEP}),
    Case("ppo Acrobot", "ppo", "Acrobot-v1", {"total_steps": 60_000, **DEEP}),
    Case("a2c CartPole (preset)", "a2c", "CartPole-v1", {"total_steps": 100_000, **DEEP}),
    Case("reinforce CartPole", "reinforce", "CartPole-v1", {"total_steps": 100_000, **DEEP}),
    Case("dqn CartPole (preset)", "dqn", "CartPole-v1", {**DEEP}),
    Case("dqn Acrobot", "dqn", "Acrobot-v1", {"total_steps": 50_000, **DEEP}),
    Case("sac Pendulum (preset)", "sac", "Pendulum-v1", {**DEEP}, seeds=(0, 1)),
    Case("td3 Pendulum (preset)", "td3", "Pendulum-v1", {**DEEP}, seeds=(0, 1)),
    Case("alphazero tic-tac-toe", "alphazero", "tictactoe", {"iterations": 12, **GAMES},
         seeds=(0,)),
    Case("muzero tic-tac-toe", "muzero", "tictactoe",
         {"iterations": 12, "buffer_size": 2000, **GAMES}, seeds=(0,)),
    Case("sft tiny model", "sft", "sft.jsonl", {"steps": 150, "batch_size": 16}, seeds=(0, 1)),
    Case("dpo tiny model", "dpo", "prefs.jsonl", {"steps": 40, "batch_size": 16, "model": "sft"},
         seeds=(0, 1)),
    Case("grpo tiny model", "grpo", "prompts.jsonl",
         {"steps": 20, "batch_size": 32, "group_size": 8, "max_new_tokens": 4, "model": "sft"},
         seeds=(0, 1)),
    # ------------------------------------------------------------------ broken
    Case("ppo CartPole lr 0.1, 40 epochs", "ppo", "CartPole-v1",
         {**DEMO_BROKEN, "total_steps": 30_000, **DEEP}, expect=("policy-blowup", "kl-too-high"),
         cause="learning rate far too high, too many epochs"),
    Case("ppo CartPole lr 1e-7", "ppo", "CartPole-v1",
         {"learning_rate": 1e-7, "total_steps": 20_000, **DEEP},
         expect=("clip-fraction-near-zero", "no-learning"), cause="learning rate far too low"),
    Case("ppo CartPole clip 0.005", "ppo", "CartPole-v1",
         {"clip_eps": 0.005, "anneal_clip": False, "total_steps": 30_000, **DEEP},
         expect=("clip-fraction-high",), cause="clip range far too small"),
    Case("ppo MountainCar no entropy bonus", "ppo", "MountainCar-v0",
         {**MOUNTAIN_CAR_PPO, "ent_coef": 0.0, **DEEP},
         expect=("entropy-collapse", "no-learning"),
         cause="entropy coefficient 0 on a sparse reward"),
    Case("ppo CartPole old preset clip 0.2", "ppo", "CartPole-v1",
         {"clip_eps": 0.2, "total_steps": 100_000, **DEEP}, expect=("performance-collapse",),
         cause="the preset's old clip of 0.2, which fell from 500 to 37 near step 54k on seed 0",
         seeds=(0,)),
    Case("ppo CartPole observations flip", "ppo", "rlx-corpus/FlippedCartPole-v1",
         {"env_kwargs": {"after": 3000}, "num_envs": 8, "num_steps": 32, "minibatch_size": 256,
          "num_epochs": 12, "gamma": 0.98, "gae_lambda": 0.9, "ent_coef": 0.0,
          "learning_rate": 5e-3, "clip_eps": 0.1, "total_steps": 60_000, **DEEP},
         expect=("value-breakdown", "performance-collapse"),
         cause="the observations flip sign mid-run (the preset's settings otherwise)"),
    Case("ppo CartPole rewards 1000x", "ppo", "rlx-corpus/CartPoleRewards1000x-v1",
         {"num_envs": 8, "num_steps": 32, "minibatch_size": 256, "num_epochs": 12,
          "gamma": 0.98, "gae_lambda": 0.9, "ent_coef": 0.0, "learning_rate": 5e-3,
          "clip_eps": 0.1, "total_steps": 40_000, **DEEP},
         expect=("critic-not-learning",), cause="rewards 1000x, not normalised"),
    Case("a2c CartPole lr 0.05", "a2c", "CartPole-v1",
         {"learning_rate": 0.05, "total_steps": 50_000, **DEEP},
         expect=LEARNING_RATE_TOO_HIGH,
         cause="learning rate far too high"),
    Case("reinforce CartPole lr 0.1", "reinforce", "CartPole-v1",
         {"learning_rate": 0.1, "total_steps": 50_000, **DEEP},
         expect=LEARNING_RATE_TOO_HIGH,
         cause="learning rate far too high"),
    Case("dqn CartPole target synced every step", "dqn", "CartPole-v1",
         {"sync_every": 1, "learning_rate": 3e-3, "learning_rate_end": None, "n_step": 1,
          "total_steps": 50_000, **DEEP},
         expect=("dqn-diverges", "q-diverges"), cause="no target network, a large step"),
    Case("dqn noisy bandit vanilla", "dqn", "rlx-corpus/NoisyBandit-v0",
         {"double": False, "total_steps": 2400, "num_envs": 4, "learning_starts": 500,
          "learning_rate": 3e-3, "train_freq": 2, "sync_every": 200,
          "exploration_fraction": 0.2, "batch_size": 32, "log_every": 60, **DEEP},
         expect=("q-overestimation",), cause="vanilla DQN on noisy rewards (max bias)"),
    Case("dqn MountainCar", "dqn", "MountainCar-v0", {"total_steps": 50_000, **DEEP},
         expect=("no-learning",), cause="epsilon-greedy never reaches a sparse reward"),
    Case("sac MountainCarContinuous", "sac", "MountainCarContinuous-v0",
         {"total_steps": 20_000, **DEEP}, expect=("no-learning", "entropy-collapse"),
         cause="a local optimum: standing still costs less than exploring", seeds=(0,)),
    Case("sac Pendulum critic lr 1.0", "sac", "Pendulum-v1",
         {"critic_learning_rate": 1.0, "actor_learning_rate": 1.0, **DEEP},
         expect=("q-diverges", "dqn-diverges", "non-finite", "no-learning"),
         cause="learning rates far too high", seeds=(0,)),
    Case("q-learning FrozenLake alpha 1e-6", "q-learning", "FrozenLake-v1",
         {"episodes": 3000, "alpha": 1e-6}, expect=("no-learning",),
         cause="step size far too small"),
    Case("grpo tiny model, 2 samples per group", "grpo", "prompts.jsonl",
         {"steps": 20, "batch_size": 8, "group_size": 2, "max_new_tokens": 4, "model": "base"},
         expect=("zero-spread-groups",),
         cause="two samples per group on prompts the untrained model never solves",
         seeds=(0, 1)),
)  # fmt: skip
"""The cases rlx trains and logs, healthy ones first."""

SB3_PPO_LR = "learning rate 0.05 (the zoo's 1e-3 x50, linear to 0)"
FOREIGN_CASES: tuple[Case, ...] = (
    # ------------------------------------------------------------------ healthy
    Case("sb3 ppo CartPole (zoo)", "sb3-ppo", "CartPole-v1", {"total_steps": 60_000},
         seeds=(0, 1), source="sb3"),
    Case("sb3 dqn CartPole (zoo)", "sb3-dqn", "CartPole-v1", {"total_steps": 50_000},
         seeds=(0, 1), source="tensorboard"),
    Case("cleanrl-style ppo CartPole", "cleanrl-ppo", "CartPole-v1", {"total_steps": 50_000},
         seeds=(0, 1), source="tensorboard"),
    Case("trl grpo tiny model", "trl-grpo", "prompts.jsonl",
         {"steps": 20, "batch_size": 16, "group_size": 8, "model": "sft"}, seeds=(0, 1),
         source="trl"),
    # ------------------------------------------------------------------ broken
    Case("sb3 ppo CartPole lr 0.05", "sb3-ppo", "CartPole-v1",
         {"total_steps": 60_000, "learning_rate": 0.05},
         expect=LEARNING_RATE_TOO_HIGH, cause=SB3_PPO_LR,
         seeds=(0, 1), source="sb3"),
    Case("sb3 dqn CartPole lr 1e-7", "sb3-dqn", "CartPole-v1",
         {"total_steps": 30_000, "learning_rate": 1e-7}, expect=("no-learning",),
         cause="learning rate far too low", seeds=(0, 1), source="tensorboard"),
    Case("cleanrl-style ppo CartPole lr 0.1, 10 epochs", "cleanrl-ppo", "CartPole-v1",
         {"total_steps": 50_000, "learning_rate": 0.1, "update_epochs": 10},
         expect=LEARNING_RATE_TOO_HIGH,
         cause="learning rate far too high, too many epochs", seeds=(0, 1),
         source="tensorboard"),
    Case("trl grpo tiny model, 2 samples per group", "trl-grpo", "prompts.jsonl",
         {"steps": 20, "batch_size": 8, "group_size": 2, "model": "base"},
         expect=("zero-spread-groups",),
         cause="two samples per group on prompts the untrained model never solves",
         seeds=(0, 1), source="trl"),
)  # fmt: skip
"""The cases whose logs no rlx code writes (:mod:`foreign_corpus` trains them)."""

CASES: tuple[Case, ...] = RLX_CASES + FOREIGN_CASES
"""Every case of the corpus."""


# ============================================================================ running
LANGUAGE_STAGES = frozenset({"sft", "rm", "dpo", "grpo", "rlhf-ppo"})


def run_case(case: Case, seed: int, run_dir: Path, llm_root: Path | None = None) -> Path:
    """Train one seed of ``case`` into ``run_dir`` (started over when it exists)."""
    import rlx

    settings = dict(case.settings)
    if case.source != "rlx":
        from foreign_corpus import train

        return train(case.algo, seed, run_dir, settings, llm_root or run_dir.parent / "_llm")
    env: Any = case.env
    if case.algo in LANGUAGE_STAGES:
        from corpus_models import language_files

        files = language_files(llm_root or run_dir.parent / "_llm")
        env = files[case.env]
        settings["model"] = str(files[settings.pop("model", "base")])
    rlx.train(case.algo, env, run_dir=run_dir, seed=seed, progress=False, doctor=False,
              overwrite=True, **settings)  # fmt: skip
    return run_dir


def folder_name(case: Case, seed: int) -> str:
    safe = "".join(c if c.isalnum() else "-" for c in case.name.lower()).strip("-")
    return f"{safe}-s{seed}"


def diagnose(run_dir: Path) -> list[str]:
    import rlx

    return [finding.rule.id for finding in rlx.doctor(run_dir)]


def collapsed(run_dir: Path, env_id: str) -> bool | None:
    """The benchmarks' own stability check (``deep_rl.stability``), independent of the doctor:
    after the mean of 20 training episodes first reaches the env's solved threshold, did a
    later 20 fall below half of it, measured from the first 20 episodes' mean? None where the
    env has no threshold or the threshold was never reached, and for a success-or-failure
    return (two values: FrozenLake's 0 or 1), whose 20-episode mean swings by more than half
    of any threshold by chance."""
    from deep_rl import stability
    from rlx.runs import folder

    try:
        threshold = gym.spec(env_id).reward_threshold
    except Exception:
        return None
    rows = folder.read_episodes(run_dir) if threshold is not None else []
    if len(rows) < 40:
        return None
    returns = np.array([ret for _, ret, _ in rows], dtype=float)
    if len(np.unique(returns)) <= 2:
        return None
    check = stability(returns, float(threshold), float(returns[:20].mean()))
    return None if check["stable"] is None else not check["stable"]


# ============================================================================ the archive
DATA = HERE.parent / "tests" / "diagnostics" / "data" / "doctor_corpus"
"""The committed corpus: ``manifest.json``, ``bounds.json`` and ``runs/<run>.tar.gz``."""
MANIFEST = "manifest.json"
BOUNDS = "bounds.json"
ARCHIVES = "runs"
TRAINED = "_trained.json"
"""Beside the run folders under ``--root``: which commit trained each run, when, how long."""
RLX_FILES = ("config.json", "metrics.jsonl", "episodes.csv", "summary.json")
"""What the doctor reads of an rlx run (checkpoints, models and videos stay behind)."""
SIGNIFICANT = 6
"""Digits kept of each float in ``metrics.jsonl`` (kept in full where rounding would change
a diagnosis of the run)."""
DEVELOPMENT, HELD_OUT = "development", "held-out"


def run_files(run_dir: Path, source: str) -> dict[str, bytes]:
    """The files of a run the doctor reads, by path inside the run folder."""
    if source == "rlx":
        return {name: (run_dir / name).read_bytes() for name in RLX_FILES
                if (run_dir / name).is_file()}  # fmt: skip
    from rlx.diagnostics.foreign import find_logs

    found = [path for paths in find_logs(run_dir).values() for path in paths]
    return {path.relative_to(run_dir).as_posix(): path.read_bytes() for path in sorted(found)}


def rounded_metrics(text: str, digits: int = SIGNIFICANT) -> str:
    """``metrics.jsonl`` with every float to ``digits`` significant digits (integers, NaN and
    infinities as they were)."""

    def short(value: Any) -> Any:
        if isinstance(value, float) and np.isfinite(value):
            return float(f"{value:.{digits}g}")
        return value

    lines = []
    for line in text.splitlines():
        if line.strip():
            row = json.loads(line)
            line = json.dumps({k: short(v) for k, v in row.items()}, separators=(",", ":"))
        lines.append(line)
    return "\n".join(lines) + "\n"


def pack(files: dict[str, bytes]) -> bytes:
    """A ``.tar.gz`` of ``files`` that is the same bytes for the same files (no dates, owners
    or modes of the machine that wrote it)."""
    import gzip
    import io
    import tarfile

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(files[name]), 0o644, 0
            tar.addfile(info, io.BytesIO(files[name]))
    return gzip.compress(raw.getvalue(), compresslevel=9, mtime=0)


MAX_FILE_BYTES = 8 << 20
"""The most a run's log file may hold unpacked (the corpus's largest are tens of kilobytes)."""
MAX_RUN_BYTES = 32 << 20
"""The most a run's archive may unpack to."""


def unpack(archive: Path, run_dir: Path) -> Path:
    """The run folder ``run_dir`` rebuilt from ``archive``: its regular files only, each at a
    relative path inside ``run_dir``, at most :data:`MAX_FILE_BYTES` each and
    :data:`MAX_RUN_BYTES` in all. Anything else (a link, a device, an absolute path, a ``..``,
    a file past the caps, a name that is also a folder) is refused with the archive's name as
    a ``ValueError``, and nothing of it is left: the folder is built aside and moved into place
    whole. Written out member by member, not with ``extractall``: its ``filter="data"`` exists
    only from Python 3.11.4 and 3.10.12, and rlx runs on 3.10."""
    import shutil
    import tarfile
    import tempfile

    run_dir.parent.mkdir(parents=True, exist_ok=True)
    aside = Path(tempfile.mkdtemp(prefix=".unpack-", dir=run_dir.parent))
    try:
        total = 0
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                parts = Path(member.name).parts
                if (not member.isfile() or not parts or Path(member.name).is_absolute()
                        or ".." in parts):  # fmt: skip
                    raise ValueError(f"{archive.name}: {member.name!r} is not a run's log file")
                source = tar.extractfile(member)
                data = source.read(MAX_FILE_BYTES + 1) if source is not None else b""
                total += len(data)
                if len(data) > MAX_FILE_BYTES or total > MAX_RUN_BYTES:
                    raise ValueError(f"{archive.name}: {member.name!r} unpacks past the caps")
                target = aside.joinpath(*parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
        if run_dir.exists():
            shutil.rmtree(run_dir)
        aside.rename(run_dir)
    except OSError as exc:  # a name that is a file and a folder, an unreadable archive
        raise ValueError(f"{archive.name}: not a run's archive ({exc})") from exc
    except tarfile.TarError as exc:
        raise ValueError(f"{archive.name}: not a run's archive ({exc})") from exc
    finally:
        shutil.rmtree(aside, ignore_errors=True)
    return run_dir


def read_manifest(data: Path = DATA) -> dict[str, Any]:
    return json.loads((data / MANIFEST).read_text())


def rebuild(data: Path, runs: Iterable[dict[str, Any]], into: Path) -> dict[str, Path]:
    """Each of ``runs`` (manifest entries) rebuilt from its archive under ``into``."""
    return {run["run"]: unpack(data / run["archive"], into / run["run"]) for run in runs}


# ============================================================================ the split
def _digest(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8")).hexdigest()


def stratum(case: Case) -> tuple[bool, bool]:
    """(foreign logs, broken): the four groups the split keeps even."""
    return case.source != "rlx", not case.healthy


SPLIT_RULE = (
    "Whole cases, all their seeds, go to one half. The cases are sorted by (logs written by "
    "rlx before another library's, healthy before broken, the sha256 hex digest of the case "
    "name) and dealt alternately, development first, so each of the four groups is split as "
    "evenly as its count allows. The lists below are fixed once written: a case added later "
    "goes to the development half when the sha256 of its name is even, to the held-out half "
    "when odd. Rules are changed on the development half only."
)


def deal(cases: Sequence[Case]) -> dict[str, str]:
    """Case name -> half, by :data:`SPLIT_RULE`'s dealing."""
    ordered = sorted(cases, key=lambda c: (*stratum(c), _digest(c.name)))
    return {c.name: (DEVELOPMENT, HELD_OUT)[i % 2] for i, c in enumerate(ordered)}


def later_half(name: str) -> str:
    """The half of a case added after the split: the parity of its name's sha256."""
    return HELD_OUT if int(_digest(name), 16) % 2 else DEVELOPMENT


def split(cases: Sequence[Case], recorded: dict[str, Any] | None = None) -> dict[str, Any]:
    """The split of ``cases``: the recorded one where there is one (a case it lacks goes by
    :func:`later_half`), else :func:`deal` over all of them."""
    if recorded:
        dealt = list(recorded["dealt"])
        halves = {name: DEVELOPMENT for name in recorded[DEVELOPMENT]}
        halves |= {name: HELD_OUT for name in recorded[HELD_OUT]}
        halves |= {c.name: later_half(c.name) for c in cases if c.name not in halves}
    else:
        dealt = [c.name for c in cases]
        halves = deal(cases)
    return {
        "rule": SPLIT_RULE,
        "dealt": dealt,
        DEVELOPMENT: [name for name, half in halves.items() if half == DEVELOPMENT],
        HELD_OUT: [name for name, half in halves.items() if half == HELD_OUT],
    }


# ============================================================================ the rates
COLLAPSED = ("performance-collapse",)
"""What a run of a healthy case that collapsed (the stability check) expects."""


@dataclass
class Outcome:
    """One run of the corpus (its manifest entry) and the findings the doctor named on it."""

    run: dict[str, Any]
    findings: list[str]

    @property
    def expect(self) -> list[str]:
        return self.run["expect"]

    @property
    def healthy(self) -> bool:
        return not self.expect

    @property
    def caught(self) -> bool:
        return bool(set(self.expect) & set(self.findings))

    @property
    def others(self) -> list[str]:
        return [f for f in self.findings if f not in self.expect]


def label(case: Case, collapsed_run: bool | None) -> dict[str, Any]:
    """A run's label: healthy (expects nothing), or broken with the rules that name its cause
    (a healthy case's run that collapsed expects :data:`COLLAPSED`)."""
    if case.healthy and collapsed_run:
        return {"label": "broken", "expect": list(COLLAPSED),
                "cause": "collapsed by the stability check (a healthy case's run)"}  # fmt: skip
    if case.healthy:
        return {"label": "healthy", "expect": [], "cause": ""}
    return {"label": "broken", "expect": list(case.expect), "cause": case.cause}


def rates(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Healthy runs, those with any finding (false positives) and their share; broken runs,
    those where none of the expected rules fired (misses) and their share; and which runs."""
    healthy = [o for o in outcomes if o.healthy]
    broken = [o for o in outcomes if not o.healthy]
    flagged = [o.run["run"] for o in healthy if o.findings]
    missed = [o.run["run"] for o in broken if not o.caught]
    return {
        "healthy_runs": len(healthy),
        "false_positives": len(flagged),
        "false_positive_rate": round(len(flagged) / len(healthy), 3) if healthy else None,
        "broken_runs": len(broken),
        "misses": len(missed),
        "miss_rate": round(len(missed) / len(broken), 3) if broken else None,
        "false_positive_runs": flagged,
        "missed_runs": missed,
    }


def per_rule(outcomes: Sequence[Outcome]) -> list[list[Any]]:
    """One row per rule: the healthy runs it fired on, the broken runs that expect it, those
    where it fired, and those missed (none of their expected rules fired)."""
    from rlx.diagnostics.rules import RULES

    rows = []
    for rule in RULES:
        fp = sum(rule.id in o.findings for o in outcomes if o.healthy)
        expecting = [o for o in outcomes if rule.id in o.expect]
        fired = sum(rule.id in o.findings for o in expecting)
        missed = sum(not o.caught for o in expecting)
        rows.append([rule.id, fp, len(expecting), fired, missed])
    return rows


def per_case(outcomes: Sequence[Outcome]) -> list[list[Any]]:
    """One row per case: its half, who logged it, what was injected, what it expects, and how
    its runs fared."""
    by_name = {c.name: c for c in CASES}
    rows = []
    for name in dict.fromkeys(o.run["case"] for o in outcomes):
        runs = [o for o in outcomes if o.run["case"] == name]
        case = by_name.get(name)
        healthy = [o for o in runs if o.healthy]
        broken = [o for o in runs if not o.healthy]
        verdicts = []
        if healthy:
            verdicts.append(
                f"{sum(not o.findings for o in healthy)}/{len(healthy)} without findings"
            )
        if broken:
            verdicts.append(f"{sum(o.caught for o in broken)}/{len(broken)} caught")
        collapsed_runs = sum(o.run.get("collapsed") is True for o in runs)
        if collapsed_runs:
            verdicts.append(f"{collapsed_runs} collapsed by the stability check")
        others = Counter(f for o in runs for f in (o.findings if o.healthy else o.others))
        first = runs[0].run
        rows.append([
            name, first["half"], first["source"], first["algo"],
            (case.cause if case else "") or "healthy",
            ", ".join(case.expect if case else ()) or "none",
            "; ".join(verdicts), ", ".join(f"{k} x{v}" for k, v in sorted(others.items())) or "-",
        ])  # fmt: skip
    return rows


def diagnose_corpus(data: Path = DATA, half: str | None = None) -> list[Outcome]:
    """Every run of the committed corpus (of one half, when given) rebuilt from its archive
    in a temporary folder and diagnosed with the rules of this ``rlx``."""
    import tempfile

    runs = [r for r in read_manifest(data)["runs"] if half is None or r["half"] == half]
    with tempfile.TemporaryDirectory(prefix="rlx-doctor-corpus-") as tmp:
        folders = rebuild(data, runs, Path(tmp))
        return [Outcome(run, diagnose(folders[run["run"]])) for run in runs]


# ============================================================================ training
def train(cases: Sequence[Case], root: Path, seeds: Sequence[int] | None) -> None:
    """Train every seed of ``cases`` (those in ``seeds``, when given) into ``root``, seed by
    seed over the cases, and note which commit trained each run in ``root/_trained.json``."""
    from results import git_state

    trained_file = root / TRAINED
    root.mkdir(parents=True, exist_ok=True)
    for seed in sorted({s for c in cases for s in c.seeds}):
        for case in cases:
            if seed not in case.seeds or (seeds is not None and seed not in seeds):
                continue
            run_dir = root / folder_name(case, seed)
            git = git_state()
            date = datetime.now(timezone.utc).isoformat(timespec="seconds")
            started = time.perf_counter()
            run_case(case, seed, run_dir, root / "_llm")
            seconds = round(time.perf_counter() - started, 1)
            trained = json.loads(trained_file.read_text()) if trained_file.exists() else {}
            trained[run_dir.name] = {"commit": git["commit"], "dirty_paths": git["dirty_paths"],
                                     "date": date, "seconds": seconds}  # fmt: skip
            trained_file.write_text(json.dumps(trained, indent=1, sort_keys=True) + "\n")
            outcome = Outcome({"run": run_dir.name, **label(case, collapsed_of(case, run_dir))},
                              diagnose(run_dir))  # fmt: skip
            verdict = ("ok" if not outcome.findings else "FALSE POSITIVE") if outcome.healthy \
                else ("caught" if outcome.caught else "MISSED")  # fmt: skip
            print(f"{run_dir.name}: {verdict} {outcome.findings} ({seconds} s)", flush=True)


def collapsed_of(case: Case, run_dir: Path) -> bool | None:
    """The stability check of an rlx run of a healthy case (None for the rest)."""
    if case.source != "rlx" or not case.healthy:
        return None
    return collapsed(run_dir, case.env)


# ============================================================================ exporting
def export(cases: Sequence[Case], root: Path, data: Path) -> dict[str, Any]:
    """Pack every trained run of ``cases`` under ``root`` into ``data/runs``, one archive per
    run, and write ``data/manifest.json``: each run's case, seed, label, half and provenance,
    the split, and the runs left out (not trained, or training did not finish). An archive is
    checked to rebuild a folder the doctor diagnoses as it does the original."""
    import tempfile

    old = read_manifest(data) if (data / MANIFEST).exists() else {}
    the_split = split(cases, old.get("split"))
    halves = {name: half for half in (DEVELOPMENT, HELD_OUT) for name in the_split[half]}
    trained = json.loads((root / TRAINED).read_text()) if (root / TRAINED).exists() else {}
    (data / ARCHIVES).mkdir(parents=True, exist_ok=True)
    runs, left_out = [], []
    for case in cases:
        for seed in case.seeds:
            run_dir = root / folder_name(case, seed)
            files = run_files(run_dir, case.source) if run_dir.is_dir() else {}
            summary = json.loads(files.get("summary.json", b"{}"))
            if not files or (case.source == "rlx" and summary.get("status") != "completed"):
                why = "not trained" if not files else f"training ended {summary.get('status')}"
                left_out.append({"case": case.name, "seed": seed, "why": why})
                continue
            runs.append(export_run(case, seed, run_dir, files, data, halves[case.name],
                                   trained.get(run_dir.name)))  # fmt: skip
            print(f"{run_dir.name}: {runs[-1]['bytes']} bytes", flush=True)
    keep = {run["archive"] for run in runs}
    for stale in (data / ARCHIVES).glob("*.tar.gz"):
        if f"{ARCHIVES}/{stale.name}" not in keep:
            stale.unlink()
    with tempfile.TemporaryDirectory() as tmp:  # the whole corpus rebuilds
        rebuild(data, runs, Path(tmp))
    manifest = {
        "about": "The doctor corpus: real runs, labelled, split once into a development and a "
        "held-out half (benchmarks/doctor_corpus.py's docstring says how they were made).",
        "commands": {
            "train": "python benchmarks/doctor_corpus.py --root /tmp/rlx-doctor-corpus",
            "export": "python benchmarks/doctor_corpus.py --root /tmp/rlx-doctor-corpus --export",
            "record_bounds": "python benchmarks/doctor_corpus.py --record-bounds",
        },
        "exported": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "split": the_split,
        "counts": counts(runs),
        "left_out": left_out,
        "runs": runs,
    }
    (data / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(run["bytes"] for run in runs)
    print(f"exported {len(runs)} runs ({total / 1e6:.2f} MB), left out {len(left_out)}")
    return manifest


def export_run(case: Case, seed: int, run_dir: Path, files: dict[str, bytes], data: Path,
               half: str, trained: dict[str, Any] | None) -> dict[str, Any]:  # fmt: skip
    """One run's archive (its metrics rounded where that changes no diagnosis) and its
    manifest entry."""
    import tempfile

    found = diagnose(run_dir)
    archive = data / ARCHIVES / f"{run_dir.name}.tar.gz"
    rounded = "metrics.jsonl" in files
    if rounded:
        small = rounded_metrics(files["metrics.jsonl"].decode("utf-8")).encode("utf-8")
        archive.write_bytes(pack({**files, "metrics.jsonl": small}))
        with tempfile.TemporaryDirectory() as tmp:
            rounded = diagnose(unpack(archive, Path(tmp) / run_dir.name)) == found
    if not rounded:
        archive.write_bytes(pack(files))
    config = json.loads(files.get("config.json", b"{}"))
    created = config.get("created")
    return {
        "run": run_dir.name,
        "case": case.name,
        "seed": seed,
        "half": half,
        "source": case.source,
        "algo": config.get("algo", case.algo),
        "env": config.get("env", case.env),
        **label(case, collapsed_of(case, run_dir)),
        "collapsed": collapsed_of(case, run_dir),
        "trained": trained or {"commit": None, "date": created},
        "archive": f"{ARCHIVES}/{archive.name}",
        "files": sorted(files),
        "rounded": rounded,
        "bytes": archive.stat().st_size,
        "sha256": hashlib.sha256(archive.read_bytes()).hexdigest(),
    }


def counts(runs: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Runs per half: healthy, broken, and those of them whose logs are not rlx's."""
    out = {}
    for half in (DEVELOPMENT, HELD_OUT):
        mine = [r for r in runs if r["half"] == half]
        out[half] = {
            "cases": len({r["case"] for r in mine}),
            "healthy_runs": sum(r["label"] == "healthy" for r in mine),
            "broken_runs": sum(r["label"] == "broken" for r in mine),
            "foreign_healthy_runs": sum(r["label"] == "healthy" and r["source"] != "rlx"
                                        for r in mine),
            "foreign_broken_runs": sum(r["label"] == "broken" and r["source"] != "rlx"
                                       for r in mine),
        }  # fmt: skip
    return out


# ============================================================================ the bounds
def record_bounds(
    data: Path = DATA,
    *,
    result: bool = True,
    dump: Path | None = None,
    baseline: Path | None = None,
    baseline_label: str | None = None,
) -> dict[str, Any]:
    """Diagnose the committed corpus with today's rules and write ``data/bounds.json``: each
    half's false positives and misses (the held-out ones are the bounds the test holds later
    rules to), every run's findings, and the rules' commit; then the result file the benchmark
    page reads, and the page."""
    from results import git_state

    manifest = read_manifest(data)
    started = time.perf_counter()
    outcomes = diagnose_corpus(data)
    seconds = round(time.perf_counter() - started, 1)
    by_half = {half: [o for o in outcomes if o.run["half"] == half]
               for half in (HELD_OUT, DEVELOPMENT)}  # fmt: skip
    findings = {o.run["run"]: o.findings for o in outcomes}
    git = git_state()
    bounds = {
        "about": "The doctor's false positives (healthy runs with any finding) and misses "
        "(broken runs none of whose expected rules fired) on each half of the committed "
        "corpus, with the rules of the commit below. The test fails when the held-out half "
        "gets more of either; rewrite with the command below after a change of the rules.",
        "command": "python benchmarks/doctor_corpus.py --record-bounds",
        "recorded": {
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "rules_commit": git["commit"],
            "dirty_paths": git["dirty_paths"],
            "seconds": seconds,
        },
        HELD_OUT: rates(by_half[HELD_OUT]),
        DEVELOPMENT: rates(by_half[DEVELOPMENT]),
        "findings": findings,
    }
    (data / BOUNDS).write_text(json.dumps(bounds, indent=1) + "\n")
    for half in (HELD_OUT, DEVELOPMENT):
        figures = bounds[half]
        print(f"{half}: false positives {figures['false_positives']}/{figures['healthy_runs']}, "
              f"misses {figures['misses']}/{figures['broken_runs']}")  # fmt: skip
    if dump:
        dump.write_text(json.dumps({"findings": findings}, indent=1) + "\n")
    if result:
        write_corpus_result(manifest, by_half, baseline, baseline_label)
    return bounds


def trained_line(manifest: dict[str, Any]) -> str:
    """Which commits trained the runs, and when (first to last)."""
    trained = [r["trained"] for r in manifest["runs"]]
    commits = sorted({str(t.get("commit"))[:10] for t in trained})
    dates = sorted(str(t.get("date"))[:10] for t in trained if t.get("date"))
    span = f"{dates[0]} to {dates[-1]}" if dates and dates[0] != dates[-1] else dates[0]
    return f"trained at commit {', '.join(commits)} on {span}"


def write_corpus_result(
    manifest: dict[str, Any],
    by_half: dict[str, list[Outcome]],
    baseline: Path | None,
    baseline_label: str | None,
) -> None:
    """``benchmarks/results/doctor_corpus.json``: the held-out figures as the goals, both
    halves per case, the held-out half per rule."""
    from results import goal, write_result

    held, dev = rates(by_half[HELD_OUT]), rates(by_half[DEVELOPMENT])
    summary = ["healthy_runs", "false_positives", "false_positive_rate", "broken_runs",
               "misses", "miss_rate"]  # fmt: skip
    extra = [
        {"title": "Each half: false positives (healthy runs with any finding) and misses "
                  "(broken runs where none of the expected rules fired)",
         "columns": ["figure", HELD_OUT, DEVELOPMENT],
         "rows": [[k, held[k], dev[k]] for k in summary]},
        {"title": "Held-out half, per rule",
         "columns": ["rule", "healthy runs it fired on", "broken runs expecting it",
                     "of those, it fired", "missed (no expected finding)"],
         "rows": per_rule(by_half[HELD_OUT])},
        {"title": "Held-out runs the doctor gets wrong",
         "columns": ["run", "label", "expected", "findings"],
         "rows": [[o.run["run"], o.run["label"], ", ".join(o.expect) or "none",
                   ", ".join(o.findings) or "none"]
                  for o in by_half[HELD_OUT] if (o.findings if o.healthy else not o.caught)]},
    ]  # fmt: skip
    figures = {f"held_out_{k}": held[k] for k in summary}
    figures |= {f"development_{k}": dev[k] for k in summary}
    if baseline:
        before_findings = json.loads(baseline.read_text())["findings"]
        before = {
            half: rates([Outcome(o.run, before_findings.get(o.run["run"], []))
                         for o in by_half[half]])
            for half in (HELD_OUT, DEVELOPMENT)
        }  # fmt: skip
        extra.append({
            "title": f"The same runs diagnosed by other rules ({baseline_label or baseline.name})"
                     " and by these",
            "columns": ["figure", f"{HELD_OUT} before", f"{HELD_OUT} now",
                        f"{DEVELOPMENT} before", f"{DEVELOPMENT} now"],
            "rows": [[k, before[HELD_OUT][k], held[k], before[DEVELOPMENT][k], dev[k]]
                     for k in summary],
        })  # fmt: skip
    outcomes = [*by_half[DEVELOPMENT], *by_half[HELD_OUT]]
    write_result(
        "doctor_corpus",
        title="The doctor on a committed corpus of real runs: false positives and misses on "
        "the held-out half",
        columns=["case", "half", "logs", "algorithm", "injected cause", "expected finding",
                 "result", "findings (healthy) / other findings (broken)"],
        rows=per_case(sorted(outcomes, key=lambda o: (o.run["half"] != HELD_OUT,
                                                      o.run["label"] == "broken"))),
        libraries=("torch", "gymnasium", "transformers", "stable_baselines3", "trl"),
        repeats=len(SEEDS),
        seeds=list(SEEDS),
        goals=[
            goal("no finding on a healthy held-out run", "false positive rate 0",
                 held["false_positive_rate"], held["false_positives"] == 0),
            goal("every broken held-out run named", "miss rate 0", held["miss_rate"],
                 held["misses"] == 0),
        ],
        peer="none (the doctor against the causes injected)",
        notes=(
            f"The corpus: {len(manifest['runs'])} real runs ({trained_line(manifest)}), "
            "committed with their labels under `tests/diagnostics/data/doctor_corpus/`, and "
            "re-diagnosed here by `rlx doctor` with the rules of the commit below. Healthy "
            "runs use a preset or the defaults; a finding on one is a false positive. Broken "
            "runs have a known cause injected and list the findings that name it; a broken "
            "run with none of them is a miss. A healthy case's run that collapsed by the "
            "benchmarks' own stability check counts as broken, expecting "
            "performance-collapse. Some runs' logs were written by other libraries "
            "(Stable-Baselines3's CSV and TensorBoard loggers, a CleanRL-style loop's "
            "TensorBoard tags, TRL's trainer_state.json). Whole cases were split once into a "
            "development half, on which rules may be revised, and a held-out half, which "
            "the goals below are measured on: " + SPLIT_RULE + " "
            "`tests/diagnostics/test_doctor_corpus.py` fails when a change of the rules gets "
            "more false positives or misses on the held-out half than recorded in "
            "`bounds.json`; `benchmarks/doctor_corpus.py --record-bounds` re-records them."
        ),
        figures=figures,
        extra_tables=extra,
        details={"runs": {o.run["run"]: o.findings for o in outcomes},
                 "left_out": manifest.get("left_out", [])},
    )  # fmt: skip
    import subprocess

    subprocess.run([sys.executable, str(HERE.parent / "docs" / "gen_pages.py"), "benchmarks"],
                   check=True, cwd=HERE.parent)  # fmt: skip


# ============================================================================ main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--root",
        type=Path,
        default=DEFAULT_ROOT,
        help="scratch folder for the run folders (default %(default)s)",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=None,
        help="cases whose name contains this text (repeat for several)",
    )
    parser.add_argument(
        "--seeds", default=None, help="train only these of each case's seeds, e.g. 0,1"
    )
    parser.add_argument(
        "--quick", action="store_true", help="train the first seed of every case only"
    )
    parser.add_argument(
        "--export",
        nargs="?",
        type=Path,
        const=DATA,
        default=None,
        help="pack the run folders under --root into this folder (default the committed "
        "corpus), write its manifest and record the bounds; train nothing",
    )
    parser.add_argument(
        "--record-bounds",
        action="store_true",
        help="diagnose the committed corpus with today's rules, write bounds.json, the "
        "result file and the benchmark page; train nothing",
    )
    parser.add_argument(
        "--data", type=Path, default=DATA, help="the committed corpus (default %(default)s)"
    )
    parser.add_argument(
        "--dump", type=Path, default=None, help="also write {run: findings} here (for --baseline)"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a --dump of an earlier diagnosis of the same runs: its rates are reported "
        "beside these",
    )
    parser.add_argument(
        "--baseline-label",
        default=None,
        help="what the --baseline diagnosis was (the rules of which commit)",
    )
    parser.add_argument("--no-result", action="store_true", help="write no result file")
    args = parser.parse_args()  # fmt: skip

    import torch

    torch.set_num_threads(1)
    cases = [c for c in CASES if args.only is None or any(o in c.name for o in args.only)]
    if args.record_bounds or args.export is not None:
        if args.export is not None:
            export(cases, args.root, args.export)
        record_bounds(args.export or args.data, result=not args.no_result, dump=args.dump,
                      baseline=args.baseline, baseline_label=args.baseline_label)  # fmt: skip
        return
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else None
    if args.quick:
        cases = [Case(**{**c.__dict__, "seeds": c.seeds[:1]}) for c in cases]
    train(cases, args.root, seeds)


if __name__ == "__main__":
    main()
