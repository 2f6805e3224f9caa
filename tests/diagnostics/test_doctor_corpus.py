"""The doctor on a small, representative part of its corpus of real runs
(``benchmarks/doctor_corpus.py``, whose result file gives the rates on the whole corpus).

Two halves:

- **rebuilt**: the corpus's quick cases train here, on the test's seed: healthy runs (tabular
  Q-learning on FrozenLake, PPO on CartPole with its preset) must get no finding, broken runs
  (a learning rate far too high or far too low, a step size of 1e-6, observations that flip
  mid-run, vanilla DQN on noisy rewards, rewards 1000x) the finding that names their cause.
- **recorded**: the metrics of corpus runs too long for ``make test`` (DQN on Acrobot and
  MountainCar, SAC on MountainCarContinuous and Pendulum, TD3, the PPO run that collapsed on
  seed 0 with the preset's old clip of 0.2, the ``make demo`` PPO run whose explained variance
  swings below -3 once it is solved), kept in ``data/corpus_runs.json`` as the runs logged them
  (``python benchmarks/doctor_corpus.py --record ...`` wrote it): each must get exactly the
  findings the corpus expects, with fixes in the run's own terms.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import rlx
from rlx.diagnostics.doctor import diagnose
from rlx.diagnostics.series import RunLog, Series
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import doctor_corpus as corpus

RECORDED = Path(__file__).parent / "data" / "corpus_runs.json"
CASES = {case.name: case for case in corpus.CASES}

# case -> budget for make test (None: the corpus's own); every one a few seconds
REBUILT: dict[str, dict | None] = {
    "q-learning FrozenLake": None,
    "ppo CartPole (preset)": {"total_steps": 30_000},
    "ppo CartPole lr 0.1, 40 epochs": {"total_steps": 12_000},
    "ppo CartPole lr 1e-7": {"total_steps": 12_000},
    "q-learning FrozenLake alpha 1e-6": None,
    "ppo CartPole observations flip": None,
    "dqn noisy bandit vanilla": None,
    "ppo CartPole rewards 1000x": {"total_steps": 20_000},
}


def ids(findings) -> list[str]:
    return [finding.rule.id for finding in findings]


@pytest.mark.parametrize("name", sorted(REBUILT))
def test_a_rebuilt_corpus_run_gets_the_findings_its_cause_calls_for(name, tmp_path, train_seed):
    case = CASES[name]
    budget = REBUILT[name]
    if budget is not None:
        case = corpus.Case(case.name, case.algo, case.env, {**case.settings, **budget},
                           case.expect, case.cause)  # fmt: skip
    run_dir = corpus.run_case(case, train_seed, tmp_path / "run")
    found = ids(rlx.doctor(run_dir))
    if case.healthy:
        assert found == [], found
    else:
        assert set(case.expect) & set(found), (case.expect, found)


# ---------------------------------------------------------------------------- recorded runs
def recorded_runs() -> list[dict]:
    return json.loads(RECORDED.read_text())["runs"]


def log_of(run: dict) -> RunLog:
    metrics = {
        name: Series(np.array(points[0], dtype=float), np.array(points[1], dtype=float))
        for name, points in run["metrics"].items()
    }
    return RunLog(Path(run["folder"]), "rlx", metrics, algo=run["algo"], env=run["env"],
                  config=run["config"])  # fmt: skip


RUNS = {run["folder"]: run for run in recorded_runs()}


@pytest.mark.parametrize("folder", sorted(RUNS))
def test_a_recorded_corpus_run_gets_exactly_the_findings_it_should(folder):
    run = RUNS[folder]
    assert ids(diagnose(log_of(run))) == run["expected"]


def test_the_recording_covers_healthy_and_broken_runs_of_several_families():
    runs = list(RUNS.values())
    assert {run["algo"] for run in runs} >= {"dqn", "sac", "td3", "ppo"}
    assert any(run["expected"] == [] for run in runs)
    assert {rule for run in runs for rule in run["expected"]} >= {
        "no-learning", "performance-collapse", "q-diverges"}  # fmt: skip


def recorded(case: str) -> RunLog:
    return log_of(next(run for run in RUNS.values() if run["case"] == case))


def test_dqn_on_acrobot_whose_q_comes_down_to_the_returns_is_no_overestimation():
    """Q starts near 0, above Acrobot's returns of -1 per step, and falls towards them as the
    critic learns: no max-operator bias, however far above the returns it still is."""
    log = recorded("dqn Acrobot")
    q, g = log.get("q_start"), log.get("mc_return")
    assert np.median(q.last(0.5).values) - np.median(g.last(0.5).values) > 30  # far above
    assert q.values[-1] < q.values[len(q) // 2] - 5  # and falling
    assert "q-overestimation" not in ids(diagnose(log))


def test_sac_standing_still_on_mountain_car_continuous_is_no_learning_in_sac_terms():
    """SAC learns to stand still (training return -33 -> -0.8, deterministic -0.002) on an env
    solved at 90: no learning of the task, and every fix is SAC's (its target entropy, its
    own learning rates or budget), never Double DQN or an entropy bonus c_e."""
    diagnosis = diagnose(recorded("sac MountainCarContinuous"))
    assert "no-learning" in ids(diagnosis)
    for finding in diagnosis:
        assert "Double DQN" not in finding.change() and "c_e" not in finding.change()
        assert finding.field in diagnosis.log.config


def test_the_ppo_run_that_collapsed_is_named_with_the_clip_that_fixed_it():
    """The preset's old clip of 0.2 on seed 0: 500, then down to about 30 near step 52k, then
    back. The finding names the collapsed stretch and the change the preset made since."""
    diagnosis = diagnose(recorded("ppo CartPole old preset clip 0.2"))
    finding = next(f for f in diagnosis if f.rule.id == "performance-collapse")
    assert 45_000 < finding.evidence.step_start < finding.evidence.step_end < 70_000
    assert (finding.field, finding.current, finding.suggested) == ("clip_eps", 0.2, 0.1)


def test_the_demos_ppo_run_whose_critic_has_nothing_left_to_explain_is_healthy():
    """The preset's PPO on CartPole (``make demo``'s run): once at 500 its explained variance
    swings far below 0, hundreds of updates below -2, while its value loss is all but 0. The
    returns stopped varying; the critic did not break."""
    log = recorded("ppo CartPole (preset)")
    explained, loss = log.get("explained_variance").values, log.get("value_loss").values
    assert (explained < -2).sum() > 50
    assert np.median(loss[-100:]) < 1e-3 * loss.max()
    assert ids(diagnose(log)) == []


def test_a_critic_whose_observations_flip_breaks_down():
    """Observations negated mid-run (seed 0): the explained variance falls from above 0.5 to
    below 0 with a value loss above any the critic made while it learned; the fix lowers the
    run's own learning rate."""
    diagnosis = diagnose(recorded("ppo CartPole observations flip"))
    finding = next(f for f in diagnosis if f.rule.id == "value-breakdown")
    assert finding.evidence.value < 0
    assert finding.field == "learning_rate" and finding.suggested < finding.current
