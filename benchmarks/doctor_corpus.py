"""The doctor's false-positive and miss rates on a corpus of real runs.

Every case trains a real run with rlx and diagnoses it with ``rlx.doctor``:

- **healthy** runs: presets and defaults that learn, on envs with a preset (CartPole, Pendulum)
  and without one (Acrobot, FrozenLake), for every family: tabular learners, DQN, PPO, A2C,
  REINFORCE, SAC, TD3, AlphaZero and MuZero (briefly), SFT, DPO and GRPO on tiny language
  models. A finding on a healthy run is a false positive.
- **broken** runs: a known cause injected (a learning rate far too high or far too low, no
  entropy bonus on a sparse env, a target net synced every step, rewards scaled 1000x, a clip
  range 40x too small, the observations flipped mid-run, the preset's old clip that collapsed
  on seed 0, a step size too small to learn, ...), each with the findings that name that
  cause. A broken run on which none of them fires is a miss; other findings are listed.

Reported per case (runs with the expected finding, other findings), per rule (false positives
on healthy runs, misses on the broken runs that expect it) and overall: the share of healthy
runs with any finding and the share of broken runs missed. ``--baseline DUMP`` adds the same
figures for another diagnosis of the same run folders (``--rediagnose --dump DUMP`` run with
an older ``rlx`` on ``PYTHONPATH``: the rates before a change of the rules).

Run, one process at a time (the runs train in sequence, one torch thread)::

    .venv/bin/python benchmarks/doctor_corpus.py [--root /tmp/rlx-doctor-corpus] [--only NAME]
    .venv/bin/python benchmarks/doctor_corpus.py --rediagnose   # the rules again, no training

``--quick`` trains the first seed of every case only (a check that the script works).
``tests/diagnostics/test_doctor_corpus.py`` rebuilds a small subset of these cases in
``make test``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RLX_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from collections.abc import Iterable, Sequence  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
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
    """One kind of run: ``algo`` on ``env`` with ``settings`` over ``seeds``.

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


DEEP = {"eval_episodes": 0}
GAMES = {"games_per_iteration": 8, "simulations": 16, "eval_simulations": 8, "batch_size": 32,
         "eval_games": 4, "eval_every": 1, "train_steps_per_iteration": 8}  # fmt: skip
DEMO_BROKEN = {"learning_rate": 0.1, "num_epochs": 40, "gae_lambda": 0.8, "clip_eps": 0.2,
               "anneal_lr": False, "anneal_clip": False}  # fmt: skip
# PPO on MountainCar without an entropy bonus: four envs of 256 steps end an episode in every
# rollout, so every update logs a return (tests/diagnostics/test_doctor.py)
MOUNTAIN_CAR_PPO = {"learning_rate": 3e-3, "num_envs": 4, "num_steps": 256,
                    "total_steps": 30_000}  # fmt: skip

CASES: tuple[Case, ...] = (
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
         {**DEMO_BROKEN, "total_steps": 30_000, **DEEP}, expect=("kl-too-high",),
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
         expect=("kl-too-high", "entropy-collapse", "no-learning"),
         cause="learning rate far too high"),
    Case("reinforce CartPole lr 0.1", "reinforce", "CartPole-v1",
         {"learning_rate": 0.1, "total_steps": 50_000, **DEEP},
         expect=("kl-too-high", "entropy-collapse", "no-learning"),
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
"""Every case of the corpus, healthy ones first."""


# ============================================================================ running
LANGUAGE_STAGES = frozenset({"sft", "rm", "dpo", "grpo", "rlhf-ppo"})
EASY = {"low": 1, "high": 20}
"""The language-model cases' additions."""


def language_files(root: Path, seed: int = 0) -> dict[str, Path]:
    """The data files, a tiny base model and an SFT model of it (built once under ``root``)."""
    from rlx import llm

    root.mkdir(parents=True, exist_ok=True)
    files = {
        "sft.jsonl": root / "sft.jsonl",
        "prefs.jsonl": root / "prefs.jsonl",
        "prompts.jsonl": root / "prompts.jsonl",
    }
    if not files["sft.jsonl"].exists():
        # sums of numbers up to 20, which a tiny model learns in a few hundred steps: GRPO's
        # groups then hold right and wrong answers (two-digit sums leave most groups all wrong)
        llm.write_jsonl(files["sft.jsonl"], llm.arithmetic_sft(2000, seed=0, **EASY))
        llm.write_jsonl(files["prefs.jsonl"], llm.arithmetic_preferences(400, seed=1, **EASY))
        llm.write_jsonl(files["prompts.jsonl"], llm.arithmetic(400, seed=2, **EASY))
    base = root / "base"
    if not (base / "config.json").exists():
        rows = llm.arithmetic_sft(2000, seed=0, **EASY)
        llm.make_tiny_lm(base, texts=llm.task_texts(rows), hidden_size=96, seed=seed)
    sft = root / "sft-model"
    if not (sft / "model" / "config.json").exists():
        import shutil

        shutil.rmtree(sft, ignore_errors=True)
        llm.sft(base, files["sft.jsonl"], run_dir=sft, steps=300, seed=seed, progress=False,
                eval_exact_match=False)  # fmt: skip
    return {**files, "base": base, "sft": sft / "model"}


def run_case(case: Case, seed: int, run_dir: Path, llm_root: Path | None = None) -> Path:
    """Train one seed of ``case`` into ``run_dir`` (started over when it exists)."""
    import rlx

    settings = dict(case.settings)
    env: Any = case.env
    if case.algo in LANGUAGE_STAGES:
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


# ============================================================================ the rates
COLLAPSED = ("performance-collapse",)
"""What a run of a healthy case that collapsed (the stability check) expects."""


@dataclass
class Outcome:
    """One run of one case: the findings the doctor named, and whether the run collapsed by
    the stability check (a healthy case's run that did is no healthy run)."""

    case: Case
    seed: int
    findings: list[str]
    collapsed: bool | None = None

    @property
    def expect(self) -> tuple[str, ...]:
        if self.case.healthy and self.collapsed:
            return COLLAPSED
        return self.case.expect

    @property
    def healthy(self) -> bool:
        return not self.expect

    @property
    def caught(self) -> bool:
        return bool(set(self.expect) & set(self.findings))

    @property
    def others(self) -> list[str]:
        return [f for f in self.findings if f not in self.expect]


def rates(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Overall figures: healthy runs, those with any finding and their share; broken runs,
    those missed and their share."""
    healthy = [o for o in outcomes if o.healthy]
    broken = [o for o in outcomes if not o.healthy]
    flagged = sum(bool(o.findings) for o in healthy)
    missed = sum(not o.caught for o in broken)
    return {
        "healthy_runs": len(healthy),
        "healthy_runs_with_a_finding": flagged,
        "false_positive_rate": round(flagged / len(healthy), 3) if healthy else None,
        "broken_runs": len(broken),
        "broken_runs_missed": missed,
        "miss_rate": round(missed / len(broken), 3) if broken else None,
    }


def per_rule(outcomes: Sequence[Outcome]) -> list[list[Any]]:
    """One row per rule: false positives (healthy runs it fired on), the broken runs that
    expect it, those where it fired, and misses (broken runs that expect only it... or any
    rule they expect, none of which fired)."""
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
    rows = []
    for case in list({id(o.case): o.case for o in outcomes}.values()):
        runs = [o for o in outcomes if o.case is case]
        healthy = [o for o in runs if o.healthy]
        broken = [o for o in runs if not o.healthy]
        verdicts = []
        if healthy:
            verdicts.append(
                f"{sum(not o.findings for o in healthy)}/{len(healthy)} without findings"
            )
        if broken:
            verdicts.append(f"{sum(o.caught for o in broken)}/{len(broken)} caught")
        collapsed = sum(bool(o.collapsed) for o in runs if o.case.healthy)
        if collapsed:
            verdicts.append(f"{collapsed} collapsed by the stability check")
        others = Counter(f for o in runs for f in (o.findings if o.healthy else o.others))
        rows.append([
            case.name, case.algo, "yes" if case.preset else "no",
            case.cause or "healthy", ", ".join(case.expect) or "none",
            "; ".join(verdicts), ", ".join(f"{k} x{v}" for k, v in sorted(others.items())) or "-",
        ])  # fmt: skip
    return rows


def load_dump(path: Path) -> dict[str, Any]:
    """A diagnosis dump: ``findings`` (run folder name -> rule ids) and ``collapsed``."""
    return json.loads(path.read_text())


def outcomes_from(dump: dict[str, Any], cases: Iterable[Case]) -> list[Outcome]:
    out = []
    for case in cases:
        for seed in case.seeds:
            key = folder_name(case, seed)
            if key in dump["findings"]:
                out.append(Outcome(case, seed, dump["findings"][key],
                                   dump.get("collapsed", {}).get(key)))  # fmt: skip
    return out


# ============================================================================ recording
RECORDED_METRICS = frozenset({
    "episode_return", "episode_length", "approx_kl", "clip_fraction", "entropy",
    "explained_variance", "value_loss", "q_start", "q_mean", "mc_return", "td_error", "alpha",
})  # fmt: skip
"""What the rules of deep agents read: the metrics a recorded run keeps."""


def record(cases: Sequence[Case], root: Path, out: Path) -> None:
    """The metrics (as the doctor reads them), algorithm, env and config of each case's
    first-seed run folder, with the findings the doctor names now as ``expected``: refused for
    a healthy run with a finding or a broken run without one of its expected findings."""
    from rlx.diagnostics.sources import read_run

    runs = []
    for case in cases:
        folder = root / folder_name(case, case.seeds[0])
        log = read_run(folder)
        found = diagnose(folder)
        outcome = Outcome(case, case.seeds[0], found, collapsed(folder, case.env))
        if outcome.healthy and found:
            raise SystemExit(f"{folder.name}: a healthy run with findings {found}")
        if not outcome.healthy and not outcome.caught:
            raise SystemExit(f"{folder.name}: none of {outcome.expect} in {found}")
        metrics = {
            name: [series.steps.tolist(), [float(f"{v:.6g}") for v in series.values]]
            for name, series in sorted(log.metrics.items())
            if name in RECORDED_METRICS
        }
        runs.append({"case": case.name, "seed": case.seeds[0], "folder": folder.name,
                     "algo": log.algo, "env": log.env, "config": log.config,
                     "expected": found, "metrics": metrics})  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"written_by": "python benchmarks/doctor_corpus.py --record",
                               "runs": runs}, separators=(",", ":")) + "\n")  # fmt: skip
    print(f"recorded {len(runs)} runs to {out}")


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
        "--quick",
        action="store_true",
        help="the first seed of every case; the result goes under results/quick",
    )
    parser.add_argument(
        "--rediagnose",
        action="store_true",
        help="diagnose the run folders already under --root, train nothing",
    )
    parser.add_argument(
        "--dump",
        type=Path,
        default=None,
        help="also write {run folder: findings} here (for --baseline)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a --dump of an earlier diagnosis of the same folders: its rates "
        "are reported beside these",
    )
    parser.add_argument(
        "--baseline-label",
        default=None,
        help="what the --baseline diagnosis was (the rules of which commit)",
    )
    parser.add_argument("--no-result", action="store_true", help="write no result file")
    parser.add_argument(
        "--record",
        type=Path,
        default=None,
        help="write the metrics of the selected cases' first-seed run folders "
        "to this file (tests/diagnostics/data/corpus_runs.json), train "
        "nothing",
    )
    args = parser.parse_args()  # fmt: skip

    import torch

    torch.set_num_threads(1)
    cases = [c for c in CASES if args.only is None or any(o in c.name for o in args.only)]
    if args.record:
        record(cases, args.root, args.record)
        return
    outcomes: list[Outcome] = []
    timings: dict[str, float] = {}
    for case in cases:
        for seed in case.seeds[:1] if args.quick else case.seeds:
            run_dir = args.root / folder_name(case, seed)
            started = time.perf_counter()
            if not args.rediagnose:
                run_case(case, seed, run_dir, args.root / "_llm")
            elif not (run_dir / "metrics.jsonl").exists():
                print(f"{run_dir.name}: no run folder, skipped", flush=True)
                continue
            findings = diagnose(run_dir)
            timings[run_dir.name] = round(time.perf_counter() - started, 1)
            outcome = Outcome(case, seed, findings, collapsed(run_dir, case.env))
            outcomes.append(outcome)
            verdict = ("ok" if not findings else "FALSE POSITIVE") if outcome.healthy else (
                "caught" if outcome.caught else "MISSED")  # fmt: skip
            if case.healthy and outcome.collapsed:
                verdict += " (collapsed by the stability check)"
            print(f"{run_dir.name}: {verdict} {findings} ({timings[run_dir.name]} s)", flush=True)

    dump = {
        "findings": {folder_name(o.case, o.seed): o.findings for o in outcomes},
        "collapsed": {folder_name(o.case, o.seed): o.collapsed for o in outcomes},
    }
    if args.dump:
        args.dump.write_text(json.dumps(dump, indent=1) + "\n")
    figures = rates(outcomes)
    print(json.dumps(figures))
    if args.no_result:
        return
    extra = [{"title": "Per rule: false positives on healthy runs, misses on broken runs",
              "columns": ["rule", "healthy runs it fired on", "broken runs expecting it",
                          "of those, it fired", "missed (no expected finding)"],
              "rows": per_rule(outcomes)}]  # fmt: skip
    if args.baseline:
        before = rates(outcomes_from(load_dump(args.baseline), cases))
        label = args.baseline_label or f"--baseline {args.baseline.name}"
        extra.append({
            "title": f"The same run folders diagnosed by other rules ({label}) and by these",
            "columns": ["figure", "before", "now"],
            "rows": [[k, before[k], figures[k]] for k in figures],
        })  # fmt: skip
        figures = {**figures, **{f"before_{k}": v for k, v in before.items()}}
    from results import goal, write_result

    write_result(
        "doctor_corpus",
        title="The doctor on real runs: findings on healthy runs, misses on broken ones",
        columns=["case", "algorithm", "preset", "injected cause", "expected finding",
                 "result", "findings (healthy) / other findings (broken)"],
        rows=per_case(outcomes),
        libraries=("torch", "gymnasium", "transformers"),
        repeats=min(len(c.seeds) for c in cases) if args.quick else len(SEEDS),
        seeds=list(SEEDS),
        goals=[
            goal("no finding on a healthy run", "false positive rate 0",
                 figures["false_positive_rate"], figures["healthy_runs_with_a_finding"] == 0),
            goal("every broken run named", "miss rate 0", figures["miss_rate"],
                 figures["broken_runs_missed"] == 0),
        ],
        peer="none (the doctor against the causes injected)",
        notes=(
            "Each case trains real runs with rlx (seeds 0-2, fewer for the slowest) and "
            "diagnoses them with `rlx doctor`. Healthy runs use a preset or the defaults on "
            "envs with and without a preset; a finding on one is a false positive. Broken "
            "runs have a known cause injected and list the findings that name it; a broken "
            "run with none of them is a miss. A run of a healthy case that collapsed by the "
            "benchmarks' own stability check (the mean of 20 training episodes reached the "
            "env's solved threshold, then a later 20 fell below half of it) counts as broken, "
            "expecting performance-collapse. `benchmarks/doctor_corpus.py` holds the cases; "
            "the run folders it trained are diagnosed again with `--rediagnose` after a change "
            "of the rules, and `--baseline` compares with an earlier diagnosis of the same "
            "folders."
        ),
        figures=figures,
        extra_tables=extra,
        details={"runs": dump["findings"], "collapsed": dump["collapsed"],
                 **({} if args.rediagnose else {"seconds": timings})},
        quick=args.quick,
    )  # fmt: skip


if __name__ == "__main__":
    main()
