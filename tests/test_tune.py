"""``rlx tune``: Optuna studies with the doctor as a second pruner (issue 42), each trial a
seed group, the best checked against the defaults on held-out seeds.

The claims, each on a budget of seconds: on CartPole the study's best beats the defaults on
the same budget and seeds; a trial's value is the mean of its seeds' final evaluations minus
one standard error, so one lucky seed does not win over a consistent config; the median
pruner compares the same seed at the same point across trials; a trial with
``learning_rate=1`` is pruned by the doctor, which names its finding, and its other seeds do
not train; the held-out check trains on seeds no trial used, and its interval, verdict and
record are right, shown everywhere, kept on a resume, and checked as data; a study resumes
after Ctrl-C (and after a kill) with no trial repeated; two worker processes share one study;
``best.yaml`` trains again with ``rlx train --config``; every space gives configs its
algorithm takes; bad input is one sentence.
"""

from __future__ import annotations

import json
import math
import shutil
import signal
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

import rlx
from rlx.cli import main
from rlx.errors import ConfigError
from tests.conftest import RLX

optuna = pytest.importorskip("optuna")


def quiet_study(study_dir: Path, *args, **kwargs):
    """``rlx.tune.create_study`` without Optuna's warning about an enqueued value outside the
    space (``learning_rate=1`` is, on purpose)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rlx.tune.create_study(study_dir, *args, **kwargs)


@pytest.fixture(scope="module")
def diverging_study(tmp_path_factory, train_seed):
    """A PPO study on CartPole whose first trial is enqueued with ``learning_rate=1``."""
    study_dir = tmp_path_factory.mktemp("tune") / "study"
    study = quiet_study(study_dir, "ppo", "CartPole-v1", trials=2, total_steps=10_000,
                        seed=train_seed, heldout_seeds=0)  # fmt: skip
    study.enqueue_trial({"learning_rate": 1.0})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = rlx.tune(study_dir=study_dir)
    return result


# ---------------------------------------------------------------------------- the claims
def seed_summaries(run_dir: Path, seeds) -> list[dict]:
    return [json.loads((run_dir / f"seed-{s}" / "summary.json").read_text()) for s in seeds]


def mean_minus_standard_error(values) -> float:
    """By hand: the mean of the values minus their sample standard deviation over sqrt(n)."""
    return statistics.mean(values) - statistics.stdev(values) / math.sqrt(len(values))


def test_the_studys_best_beats_the_defaults_on_cartpole(tmp_path, train_seed):
    """16 trials of 3,000 steps, each on seeds S, S+1, S+2, against what `rlx train ppo --env
    CartPole-v1` runs (the defaults and the env's preset) on the same budget and seeds, by the
    same statistic (the mean minus one standard error); held on seeds 0-2. (The held-out check
    is the next tests'.)"""
    budget, episodes = 3_000, 10
    result = rlx.tune(
        "ppo", "CartPole-v1", study_dir=tmp_path / "study", trials=16, total_steps=budget,
        seed=train_seed, evaluations=2, eval_episodes=episodes, heldout_seeds=0,
    )  # fmt: skip
    seeds = [train_seed, train_seed + 1, train_seed + 2]
    rlx.train("ppo", "CartPole-v1", run_dir=tmp_path / "defaults", total_steps=budget,
              seeds=seeds, jobs=1, eval_episodes=episodes, progress=False)  # fmt: skip
    defaults = [s["eval_return_mean"] for s in seed_summaries(tmp_path / "defaults", seeds)]
    assert result.best is not None and result.count("complete") + result.count("pruned") == 16
    assert result.best.seeds == seeds
    assert result.best.value >= mean_minus_standard_error(defaults) + 25, (result.best, defaults)
    assert (tmp_path / "study" / "best.yaml").is_file()


def test_a_trial_with_learning_rate_1_is_pruned_by_the_doctor(diverging_study):
    trial = diverging_study.trials[0]
    assert trial.config["learning_rate"] == 1.0
    assert trial.state == "pruned" and trial.pruned_by == "doctor"
    assert trial.finding["rule"] in rlx.tune.FATAL_RULES
    assert trial.finding["symptom"] and trial.finding["evidence"]["metric"]
    first, *others = trial.seeds
    summary = json.loads((trial.run_dir / f"seed-{first}" / "summary.json").read_text())
    assert summary["status"] == "stopped" and summary["steps"] < 10_000  # stopped early
    # the trial is pruned on its first seed: the others never train
    group = json.loads((trial.run_dir / "group.json").read_text())
    assert [r["status"] for r in group["runs"]] == ["stopped"] + ["pending"] * len(others)
    assert not any((trial.run_dir / f"seed-{s}").exists() for s in others)
    assert trial.seed_values == [None] * len(trial.seeds)
    assert summary["stopped_by"] == trial.finding["rule"]
    assert summary["tune"]["pruned_by"] == trial.finding["rule"]
    assert trial.finding["rule"] in summary["tune"]["finding"] or summary["tune"]["finding"]
    assert "the doctor" in str(diverging_study)


def test_the_report_shows_the_trials_and_the_best_curve(diverging_study, tmp_path, capsys):
    study_dir = diverging_study.study_dir
    assert main(["report", str(study_dir)]) == 0
    page = (study_dir / "report.html").read_text()
    pruned = diverging_study.trials[0]
    assert f'data-trial="{pruned.number}" data-rule="{pruned.finding["rule"]}"' in page
    assert page.count('<tr class="trial') == len(diverging_study.trials)
    assert '<section id="best">' in page and 'data-metric="episode_return"' in page
    for trial in diverging_study.trials:
        assert (trial.run_dir / "report.html").is_file()
        assert f'href="{trial.run_dir.name}/report.html"' in page


def test_best_yaml_trains_again_with_rlx_train_config(diverging_study, tmp_path, capsys):
    best = diverging_study.best
    best_file = diverging_study.best_file
    assert best is not None and best_file.is_file()
    run_dir = tmp_path / "again"
    assert main(["train", "--config", str(best_file), "--run-dir", str(run_dir),
                 "--no-progress"]) == 0  # fmt: skip
    record = json.loads((run_dir / "config.json").read_text())
    assert record["algo"] == "ppo" and record["env"] == "CartPole-v1"
    for name, value in best.config.items():
        assert record["config"][name] == value, name
    summary = json.loads((run_dir / "summary.json").read_text())
    assert record["seed"] == best.seeds[0]  # best.yaml's seed: the first of the trial's
    assert summary["eval_return_mean"] == pytest.approx(best.seed_values[0])
    # a flag beside the file wins over it; a run folder's config.json is a config file too
    other = tmp_path / "other"
    assert main(["train", "ppo", "--config", str(run_dir / "config.json"), "--run-dir",
                 str(other), "--total-steps", "512", "--no-progress"]) == 0  # fmt: skip
    record = json.loads((other / "config.json").read_text())
    assert record["config"]["total_steps"] == 512
    assert record["config"]["learning_rate"] == best.config["learning_rate"]


def test_a_study_resumes_after_ctrl_c_with_no_trial_repeated(tmp_path):
    study_dir = tmp_path / "study"
    command = [*RLX, "tune", "ppo", "--env", "CartPole-v1", "--study-dir", str(study_dir),
               "--trials", "3", "--total-steps", "3000", "--evaluations", "1",
               "--heldout-seeds", "0"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    running = study_dir / "trial-0001" / "seed-0" / "metrics.jsonl"
    deadline = time.monotonic() + 120
    while not running.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in err
    stopped = rlx.tune.read_study(study_dir)
    assert [t.state for t in stopped.trials][1] == "failed"
    interrupted = study_dir / "trial-0001" / "seed-0" / "summary.json"
    assert json.loads(interrupted.read_text())["status"] == "interrupted"
    group = json.loads((study_dir / "trial-0001" / "group.json").read_text())
    assert [r["status"] for r in group["runs"]] == ["interrupted", "pending", "pending"]
    result = rlx.tune(study_dir=study_dir)  # the same folder: resumes
    finished = [t for t in result.trials if t.state in ("complete", "pruned")]
    assert len(finished) == 3 and result.count("failed") == 1
    assert [t.number for t in result.trials] == [0, 1, 2, 3]
    params = [json.dumps(t.params, sort_keys=True) for t in finished]
    assert len(set(params)) == len(params)
    assert len({t.run_dir for t in result.trials}) == 4


def test_a_trial_left_running_by_a_killed_process_is_marked_failed(tmp_path):
    study_dir = tmp_path / "study"
    command = [*RLX, "tune", "ppo", "--env", "CartPole-v1", "--study-dir", str(study_dir),
               "--trials", "1", "--total-steps", "3000", "--evaluations", "1",
               "--heldout-seeds", "0"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    running = study_dir / "trial-0000" / "seed-0" / "metrics.jsonl"
    deadline = time.monotonic() + 120
    while not running.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    process.kill()
    process.wait(timeout=60)
    assert [t.state for t in rlx.tune.read_study(study_dir).trials] == ["running"]
    result = rlx.tune(study_dir=study_dir)
    assert result.trials[0].state == "failed"
    assert "ended before it did" in result.trials[0].error
    assert result.count("complete") + result.count("pruned") == 1


def test_two_worker_processes_share_one_study(tmp_path):
    study_dir = tmp_path / "study"
    result = rlx.tune("ppo", "CartPole-v1", study_dir=study_dir, trials=4, total_steps=1_000,
                      evaluations=1, eval_episodes=2, jobs=2, heldout_seeds=2)  # fmt: skip
    assert result.count("complete") + result.count("pruned") == 4
    assert [t.number for t in result.trials] == [0, 1, 2, 3]
    folders = sorted(p.name for p in study_dir.glob("trial-*"))
    assert folders == ["trial-0000", "trial-0001", "trial-0002", "trial-0003"]
    assert all((study_dir / f / "group.json").is_file() for f in folders)
    assert all((study_dir / f / "seed-0" / "summary.json").is_file() for f in folders)
    study = rlx.tune.create_study(study_dir)
    workers = {t.user_attrs["worker"]["pid"] for t in study.trials}
    assert len(workers) == 2  # both processes ran trials, into one storage
    assert len(list(study_dir.glob("*.journal"))) == 1
    for trial in result.trials:  # whole trials: every seed group is the study's seeds
        assert json.loads((trial.run_dir / "group.json").read_text())["seeds"] == [0, 1, 2]
    # the held-out check ran once, after the trials, in this process
    if result.best is not None:
        assert result.heldout is not None and result.heldout.seeds == [10_000, 10_001]


def test_a_tabular_study_prunes_on_the_training_return(tmp_path):
    result = rlx.tune("q-learning", "FrozenLake-v1", study_dir=tmp_path / "study", trials=3,
                      episodes=1_000, eval_episodes=20,
                      env_kwargs={"is_slippery": False})  # fmt: skip
    assert result.count("complete") + result.count("pruned") == 3
    assert all(t.intermediate for t in result.trials)  # the training return, row by row
    assert result.best is not None and 0.0 <= result.best.value <= 1.0
    assert "alpha" in result.best.config and result.best.config["episodes"] == 1_000


# ---------------------------------------------------------------------------- seed groups
GOOD_PPO = {
    "n_steps": 32,
    "one_minus_gamma": 0.01,
    "one_minus_gae_lambda": 0.05,
    "learning_rate": 1e-3,
    "ent_coef": 1e-3,
    "batch_size": 64,
    "clip_range": 0.2,
    "n_epochs": 10,
    "max_grad_norm": 0.5,
    "net_arch": "small",
    "activation_fn": "tanh",
}
"""A PPO trial that learns CartPole in a small budget (the zoo's parameter names)."""
HELDOUT = [10_000, 10_001, 10_002]


@pytest.fixture(scope="module")
def checked_study(tmp_path_factory):
    """One PPO trial (seeds 0-2) and the held-out check on three seeds, a few seconds."""
    study_dir = tmp_path_factory.mktemp("checked") / "study"
    study = quiet_study(study_dir, "ppo", "CartPole-v1", trials=1, total_steps=1_500,
                        evaluations=1, eval_episodes=3, heldout_seeds=3)  # fmt: skip
    study.enqueue_trial(GOOD_PPO)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = rlx.tune(study_dir=study_dir)
    assert result.best is not None and result.heldout is not None, result
    return result


def test_a_trials_value_is_the_mean_minus_one_standard_error_of_its_seeds(checked_study):
    (trial,) = checked_study.trials
    assert trial.state == "complete" and trial.seeds == [0, 1, 2]
    summaries = seed_summaries(trial.run_dir, trial.seeds)
    values = [summary["eval_return_mean"] for summary in summaries]  # each run's own figure
    assert [summary["seed"] for summary in summaries] == [0, 1, 2]
    assert trial.seed_values == pytest.approx(values)
    assert trial.value == pytest.approx(mean_minus_standard_error(values))
    for seed, value, summary in zip(trial.seeds, values, summaries, strict=True):
        note = summary["tune"]
        assert (note["trial"], note["seed"], note["state"]) == (0, seed, "complete")
        assert note["seed_value"] == pytest.approx(value)
        assert note["trial_value"] == pytest.approx(trial.value)
    attrs = rlx.tune.create_study(checked_study.study_dir).trials[0].user_attrs
    assert attrs["seeds"] == [0, 1, 2] and attrs["seed_values"] == pytest.approx(values)
    group = json.loads((trial.run_dir / "group.json").read_text())
    assert group["seeds"] == [0, 1, 2] and {r["status"] for r in group["runs"]} == {"completed"}
    line = next(x for x in str(checked_study).splitlines() if x.startswith("  trial 0"))
    assert " ".join(f"{v:.4g}" for v in values) in line


def test_the_statistic_by_hand():
    from rlx.launch.tune import trial_value

    # one seed 0.8 above two equal ones: the mean rises by 0.8/3 and so does the standard error
    assert trial_value([0.9, 0.1, 0.1]) == pytest.approx(0.1)
    assert trial_value([0.3, 0.3, 0.3]) == pytest.approx(0.3)
    # (2 + 4 + 9) / 3 = 5; sd = sqrt((9 + 1 + 16) / 2) = sqrt(13); 5 - sqrt(13) / sqrt(3)
    assert trial_value([2, 4, 9]) == pytest.approx(5 - math.sqrt(13 / 3))
    assert trial_value([7.5]) == 7.5


def test_a_lucky_seed_does_not_win_over_a_consistent_config(tmp_path, monkeypatch):
    """Two trials of one config; the seeds' values forced: trial 0 has one lucky seed (the
    study's own, the one a trial of one seed would train on), trial 1 is consistent. The mean
    and the lucky seed alone favour trial 0; the study picks trial 1."""
    import rlx.launch.tune as tune_module

    forced = {"trial-0000": [0.9, 0.1, 0.1], "trial-0001": [0.3, 0.3, 0.3]}

    def forced_value(run_dir, seed, settings):
        return forced[run_dir.parent.name][seed - settings.seed]

    monkeypatch.setattr(tune_module, "seed_value", forced_value)
    params = {"alpha": 0.5, "exploration_fraction": 0.3, "exploration_final_eps": 0.05,
              "gamma": 0.99}  # fmt: skip
    study_dir = tmp_path / "study"
    study = quiet_study(study_dir, "q-learning", "FrozenLake-v1", trials=2, episodes=500,
                        eval_episodes=5, env_kwargs={"is_slippery": False},
                        heldout_seeds=0)  # fmt: skip
    study.enqueue_trial(params)
    study.enqueue_trial(params)  # the same config: the same rows, so the median pruner agrees
    result = rlx.tune(study_dir=study_dir)
    lucky, steady = result.trials
    assert [lucky.state, steady.state] == ["complete", "complete"]
    assert statistics.mean(lucky.seed_values) > statistics.mean(steady.seed_values)
    assert lucky.seed_values[0] > max(steady.seed_values)
    assert lucky.value == pytest.approx(0.1) and steady.value == pytest.approx(0.3)
    assert result.best is steady


def test_the_median_pruner_compares_the_same_seed_at_the_same_point(tmp_path):
    """Seeds train one after another: the k-th evaluation of the seed at index i is step
    i * (evaluations + 1) + k, and each seed's first evaluations // 3 are not judged."""
    from rlx import registry
    from rlx.launch.tune import StudySettings, TrialPruner, _base_config

    settings = StudySettings("ppo", "CartPole-v1", trials=2, total_steps=3_000, evaluations=3)
    config = _base_config(registry.get("ppo"), settings).__dict__
    study = optuna.create_study(
        direction="maximize",
        pruner=optuna.pruners.MedianPruner(n_startup_trials=1, n_warmup_steps=1),
    )

    def run(pruner, per_seed):
        """Feed the pruner seed after seed; returns the (seed index, k) that stopped it."""
        for i, evaluations in enumerate(per_seed):
            pruner.on_start(0, {"run_dir": tmp_path / f"seed-{i}", "resumed": False})
            for k, value in enumerate(evaluations):
                if pruner.on_eval(100 * (k + 1), {"eval_return_mean": value}) is False:
                    return i, k
        return None

    steady = study.ask()
    pruner = TrialPruner(steady, "ppo", "CartPole-v1", config, on_eval=True, evaluations=3)
    assert run(pruner, [[10, 20, 30], [100, 200, 300], [10, 20, 30]]) is None
    study.tell(steady, 1.0)
    assert sorted(study.trials[0].intermediate_values) == [0, 1, 2, 4, 5, 6, 8, 9, 10]
    # the second trial matches seed 0, then falls short on seed 1 (which is the other's best):
    # its k=0 there is seed 1's warm-up (not judged), its k=1 is pruned against step 5 (200)
    other = study.ask()
    pruner = TrialPruner(other, "ppo", "CartPole-v1", config, on_eval=True, evaluations=3)
    assert run(pruner, [[10, 20, 30], [50, 60, 70], [10, 20, 30]]) == (1, 1)
    reported = study.trials[1].intermediate_values
    assert pruner.pruned and sorted(reported) == [0, 1, 2, 4, 5]
    assert reported[4] == 50 and reported[5] == 60


# ---------------------------------------------------------------------------- held out
def test_the_held_out_seeds_are_none_a_trial_trained_on(checked_study):
    study_dir = checked_study.study_dir
    record = json.loads((study_dir / "heldout.json").read_text())
    assert record["seeds"] == HELDOUT
    used = set()
    for trial in checked_study.trials:
        group = json.loads((trial.run_dir / "group.json").read_text())
        used |= set(trial.seeds) | set(group["seeds"])
        used |= {json.loads((run / "config.json").read_text())["seed"]
                 for _, run in trial.seed_runs()}  # fmt: skip
    assert used == {0, 1, 2} and set(record["trial_seeds"]) == used
    assert not used & set(record["seeds"])
    for side in ("defaults", "trial-0000"):
        folder = study_dir / "heldout" / side
        assert json.loads((folder / "group.json").read_text())["seeds"] == HELDOUT
        runs = [json.loads((folder / f"seed-{s}" / "config.json").read_text()) for s in HELDOUT]
        assert [r["seed"] for r in runs] == HELDOUT
        assert all(r["config"]["eval_every"] in (None, 0) for r in runs)  # as rlx train does
    # the defaults: what `rlx train ppo --env CartPole-v1 --total-steps 1500` trains
    assert record["defaults"]["config"] == {"total_steps": 1_500, "eval_episodes": 3}
    assert record["best"]["config"] == {
        k: v for k, v in checked_study.best.config.items() if k != "seed"
    }


def welch_by_hand(a, b):
    """Welch's t interval of mean(a) - mean(b) at 95%, written out."""
    from scipy.stats import t

    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    d = statistics.mean(a) - statistics.mean(b)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = t.ppf(0.975, df) * math.sqrt(va + vb)
    return d, d - half, d + half


def test_the_held_out_check_is_in_the_result_best_yaml_and_the_report(checked_study, capsys):
    import html

    check = checked_study.heldout
    study_dir = checked_study.study_dir
    best = [s["eval_return_mean"] for s in seed_summaries(study_dir / "heldout/trial-0000",
                                                          HELDOUT)]  # fmt: skip
    defaults = [s["eval_return_mean"] for s in seed_summaries(study_dir / "heldout/defaults",
                                                              HELDOUT)]  # fmt: skip
    assert check.best.values == pytest.approx(best)
    assert check.defaults.values == pytest.approx(defaults)
    d, low, high = welch_by_hand(best, defaults)
    assert check.difference == pytest.approx(d)
    assert check.interval == pytest.approx((low, high))
    verdict = ("beats the defaults" if low > 0 else "worse than the defaults" if high < 0
               else "no better than the defaults (interval includes 0)")  # fmt: skip
    assert check.verdict == verdict and not check.same_config
    # str(result)
    text = str(checked_study)
    assert (f"difference {d:+.4g}, 95% interval [{low:.4g}, {high:.4g}] (Welch's t); "
            f"verdict: {verdict}.") in text  # fmt: skip
    assert "10000-10002" in text and "held out:" in text
    # best.yaml: comments, and still a config file rlx train reads
    best_yaml = checked_study.best_file.read_text()
    assert f"# difference of the means {d:+.6g}, 95% interval [{low:.6g}, {high:.6g}]" in best_yaml
    assert f"# verdict: {verdict}." in best_yaml
    assert "no trial trained on (10000-10002; the trials used 0-2)" in best_yaml
    # the report
    assert main(["report", str(study_dir)]) == 0
    page = (study_dir / "report.html").read_text()
    assert '<section id="heldout">' in page
    assert f'<p class="verdict" data-verdict="{html.escape(verdict)}">' in page
    assert html.escape(f"95% interval [{low:.4g}, {high:.4g}] (Welch's t)") in page
    assert page.count('<tr class="trial') == 1


def test_best_yaml_with_the_held_out_check_trains_again(checked_study, tmp_path, capsys):
    run_dir = tmp_path / "again"
    assert main(["train", "--config", str(checked_study.best_file), "--run-dir", str(run_dir),
                 "--total-steps", "256", "--no-progress"]) == 0  # fmt: skip
    record = json.loads((run_dir / "config.json").read_text())
    assert record["config"]["learning_rate"] == checked_study.best.config["learning_rate"]


class StoppedError(ConfigError):
    """The spy's refusal: rlx.train was called."""


def spy_train(monkeypatch) -> list[dict]:
    calls: list[dict] = []

    def spy(*args, **kwargs):
        calls.append(kwargs)
        raise StoppedError("a seed group was trained.")

    import rlx.launch.tune as tune_module

    monkeypatch.setattr(tune_module, "train_group", spy)  # the one way a study trains
    return calls


def test_a_resumed_study_does_not_train_the_held_out_check_again(checked_study, tmp_path,
                                                                 monkeypatch):  # fmt: skip
    folder = tmp_path / "study"
    shutil.copytree(checked_study.study_dir, folder, symlinks=True)
    before = (folder / "heldout.json").read_bytes()
    calls = spy_train(monkeypatch)
    result = rlx.tune(study_dir=folder)
    assert calls == [] and (folder / "heldout.json").read_bytes() == before
    assert result.heldout is not None
    assert result.heldout.best.values == checked_study.heldout.best.values
    assert result.heldout.interval == pytest.approx(checked_study.heldout.interval)
    # other held-out seeds: the check trains again (here: the spy says it was asked to)
    with pytest.raises(StoppedError):
        rlx.tune(study_dir=folder, heldout_seeds=2)
    assert calls[-1]["seeds"] == [10_000, 10_001]
    assert Path(calls[-1]["run_dir"]).parent == folder / "heldout"


def hostile_records(honest: dict) -> dict[str, object]:
    def edited(**changes):
        record = json.loads(json.dumps(honest))
        for path, value in changes.items():
            *parents, last = path.split("__")
            target = record
            for name in parents:
                target = target[name]
            target[last] = value
        return record

    return {
        "not-json": "{not json",
        "a-list": [1, 2],
        "another-kind": edited(kind="something else"),
        "values-as-text": edited(best__values=["1", "2", "3"]),
        "too-few-values": edited(defaults__values=[1.0]),
        "a-run-dir-outside": edited(best__run_dir="../elsewhere"),
        "seeds-a-trial-used": edited(seeds=[0, 1, 2]),
        "one-seed": edited(seeds=[10_000]),
        "no-trial-number": edited(best_trial="best"),
        "deep": "[" * 100_000 + "]" * 100_000,
        "a-huge-number": '{"kind": "rlx tune held-out check", "seeds": [' + "9" * 5000 + "]}",
        "a-link": None,
    }


HOSTILE = ["not-json", "a-list", "another-kind", "values-as-text", "too-few-values",
           "a-run-dir-outside", "seeds-a-trial-used", "one-seed", "no-trial-number", "deep",
           "a-huge-number", "a-link"]  # fmt: skip


@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_held_out_record_is_one_sentence(checked_study, tmp_path, capsys,
                                                   monkeypatch, case):  # fmt: skip
    folder = tmp_path / "study"
    shutil.copytree(checked_study.study_dir, folder, symlinks=True)
    honest = json.loads((folder / "heldout.json").read_text())
    record = hostile_records(honest)[case]
    (folder / "heldout.json").unlink()
    if case == "a-link":
        secret = tmp_path / "secret.json"
        secret.write_text(json.dumps(honest))
        (folder / "heldout.json").symlink_to(secret)
    else:
        text = record if isinstance(record, str) else json.dumps(record)
        (folder / "heldout.json").write_text(text)
    calls = spy_train(monkeypatch)
    with pytest.raises(ConfigError) as error:
        rlx.tune(study_dir=folder)
    message = str(error.value)
    assert "heldout.json" in message and "\n" not in message, message
    assert calls == []  # nothing trained on the record's word
    code = main(["report", str(folder)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "heldout.json" in err, err


def test_a_best_config_that_is_the_defaults_says_so(tmp_path):
    """Every field the space samples fixed by the user: the best trial's config is the
    defaults', which train once on the held-out seeds."""
    study_dir = tmp_path / "study"
    result = rlx.tune("q-learning", "FrozenLake-v1", study_dir=study_dir, trials=1,
                      episodes=500, eval_episodes=5, env_kwargs={"is_slippery": False},
                      heldout_seeds=2, alpha=0.5, epsilon_schedule="linear",
                      exploration_fraction=0.3, epsilon_end=0.05, gamma=0.99)  # fmt: skip
    check = result.heldout
    assert result.best is not None and check is not None and check.same_config
    assert check.verdict == "is the defaults' config"
    assert check.best.values == check.defaults.values and len(check.defaults.values) == 2
    assert not (study_dir / "heldout" / "trial-0000").exists()
    assert "is the defaults' config" in str(result)
    assert "is the defaults' config" in result.best_file.read_text()


# ---------------------------------------------------------------------------- the spaces
ENVS = {"sac": "Pendulum-v1", "td3": "Pendulum-v1", "ppo": "CartPole-v1", "a2c": "CartPole-v1",
        "dqn": "CartPole-v1"}  # fmt: skip


@pytest.mark.parametrize("algo", sorted(rlx.tune.SPACES))
@pytest.mark.parametrize("budget", [5_000, 1_000_000])
def test_every_space_gives_configs_its_algorithm_takes(algo, budget):
    from rlx import registry
    from rlx.launch.search_space import TrialSampler, base_budget, space_for
    from rlx.launch.tune import StudySettings, _base_config

    spec = registry.get(algo)
    env = ENVS.get(algo, "FrozenLake-v1")
    tabular = algo not in ENVS
    settings = StudySettings(algo, env, trials=1, total_steps=None if tabular else budget,
                             fixed={"episodes": budget // 100} if tabular else {})  # fmt: skip
    base = _base_config(spec, settings)
    fields = {f for f in base.__dataclass_fields__}
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(25):
        trial = study.ask()
        sampler = TrialSampler(trial, base.__dict__, (), base_budget(base))
        space_for(algo).sample(sampler)
        assert sampler.fields and set(sampler.fields) <= fields
        config, _ = registry.make_config(spec, env, {**settings.fixed, **sampler.fields})
        assert config is not None
        study.tell(trial, 0.0)


def test_a_field_given_is_fixed_for_every_trial_and_left_out_of_the_search():
    from rlx import registry
    from rlx.launch.search_space import TrialSampler, base_budget, space_for
    from rlx.launch.tune import StudySettings, _base_config

    settings = StudySettings("ppo", "CartPole-v1", trials=1, total_steps=10_000,
                             fixed={"learning_rate": 1e-3, "hidden_sizes": (32,)})  # fmt: skip
    base = _base_config(registry.get("ppo"), settings)
    trial = optuna.create_study().ask()
    sampler = TrialSampler(trial, base.__dict__, settings.fixed, base_budget(base))
    space_for("ppo").sample(sampler)
    assert "learning_rate" not in trial.params and "net_arch" not in trial.params
    assert "learning_rate" not in sampler.fields and "hidden_sizes" not in sampler.fields


def test_an_algorithm_without_a_space_names_those_with_one(tmp_path):
    with pytest.raises(ConfigError) as error:
        rlx.tune("reinforce", "CartPole-v1", study_dir=tmp_path / "s", trials=2)
    message = str(error.value)
    assert message.startswith("rlx tune has no search space for reinforce; spaces exist for")
    for algo in ("ppo", "a2c", "dqn", "sac", "td3", "q-learning", "sarsa"):
        assert algo in message
    assert not (tmp_path / "s").exists()


def test_import_rlx_imports_no_optuna_and_rlx_tune_no_torch():
    code = (
        "import sys, rlx\n"
        "assert 'optuna' not in sys.modules and 'rlx.launch.tune' not in sys.modules\n"
        "assert callable(rlx.tune) and callable(rlx.tune.read_study)\n"
        "heavy = {'optuna', 'torch', 'yaml'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    process = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert process.returncode == 0, process.stderr


# ---------------------------------------------------------------------------- bad input
@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("configs")
    texts = {
        "not_yaml.yaml": "algo: ppo\nconfig: [unclosed\n",
        "unknown.yaml": "algo: ppo\nenv: CartPole-v1\nconfig:\n  lr: 0.001\n",
        "wrong_type.yaml": "algo: ppo\nenv: CartPole-v1\nconfig:\n  learning_rate: fast\n",
        "a_list.yaml": "- ppo\n- CartPole-v1\n",
        "no_algo.yaml": "learning_rate: 0.001\n",
        "dqn.yaml": "algo: dqn\nenv: CartPole-v1\n",
        "code_env.yaml": "algo: ppo\nenv: evil.module:make\n",
    }
    for name, text in texts.items():
        (root / name).write_text(text)
    made = {name.split(".")[0]: root / name for name in texts}
    made["root"] = root
    return made


TUNE = ["tune", "ppo", "--env", "CartPole-v1", "--study-dir", "{root}/study-{case}"]
CASES = [
    (
        ["tune", "reinforce", "--env", "CartPole-v1", "--study-dir", "{root}/s-{case}"],
        "rlx tune has no search space for reinforce; spaces exist for ppo",
    ),
    (["tune", "ppo", "--env", "CartPole-v1"], "the following arguments are required: --study-dir"),
    (["tune", "ppo", "--study-dir", "{root}/s-{case}"], "a new one needs an algorithm and an env"),
    ([*TUNE, "--trials", "0"], "trials=0 must be a whole number >= 1"),
    ([*TUNE, "--jobs", "0"], "jobs=0 must be a whole number >= 1"),
    ([*TUNE, "--seeds-per-trial", "0"], "seeds_per_trial=0: each trial trains on a seed group"),
    ([*TUNE, "--seeds-per-trial", "-2"], "seeds_per_trial=-2: each trial trains on a seed"),
    ([*TUNE, "--heldout-seeds", "-1"], "heldout_seeds=-1 must be a whole number >= 0"),
    ([*TUNE, "--heldout-seeds", "1"], "heldout_seeds=1 gives no interval"),
    ([*TUNE, "--trials", "many"], "--trials expects a whole number"),
    ([*TUNE, "--lr", "0.1"], "rlx tune ppo has no flag --lr; did you mean --learning-rate?"),
    ([*TUNE, "--num-envs", "0"], "num_envs=0"),
    (
        ["tune", "no-such-algo", "--env", "CartPole-v1", "--study-dir", "{root}/s"],
        "unknown algorithm 'no-such-algo'",
    ),
    (
        ["train", "--config", "{root}/missing.yaml"],
        "config file {root}/missing.yaml does not exist.",
    ),
    (["train", "--config", "{not_yaml}"], "config file {not_yaml} is not YAML"),
    (
        ["train", "--config", "{unknown}", "--run-dir", "{root}/r"],
        "config file {unknown}: ppo has no config field 'lr'; did you mean learning_rate?",
    ),
    (
        ["train", "--config", "{wrong_type}", "--run-dir", "{root}/r"],
        "config file {wrong_type}: learning_rate='fast' must be a number (got str).",
    ),
    (["train", "--config", "{a_list}"], "holds a list, not a mapping of settings"),
    (["train", "--config", "{no_algo}"], "names no algorithm; give it first: rlx train ALGO"),
    (["train", "ppo", "--config", "{dqn}"], "holds a dqn config, not a ppo one"),
    (
        ["train", "--config", "{code_env}", "--run-dir", "{root}/r"],
        "names the env 'evil.module:make', which is code to import",
    ),
    (["train", "ppo", "--config", "{root}"], "is a folder without a config.json"),
]


@pytest.mark.parametrize(("args", "message"), CASES, ids=[" ".join(c[0][:3]) for c in CASES])
def test_bad_input_is_one_sentence_exit_2(args, message, files, capsys, request):
    names = {k: str(v) for k, v in files.items()}
    case = request.node.callspec.id.replace(" ", "_")
    argv = [a.format(case=case, **names) for a in args]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("rlx: error: "), err
    assert message.format(**names) in err, err
    assert not (files["root"] / "r").exists()


def test_a_resumed_study_refuses_other_settings(diverging_study, capsys):
    study_dir = str(diverging_study.study_dir)
    argv = [
        "tune",
        "ppo",
        "--env",
        "CartPole-v1",
        "--study-dir",
        study_dir,
        "--total-steps",
        "5000",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "holds a study of ppo on CartPole-v1 with total_steps=10000, not 5000" in err
    assert main(["tune", "dqn", "--env", "CartPole-v1", "--study-dir", study_dir]) == 2
    assert "with algo='ppo', not 'dqn'" in capsys.readouterr().err


def test_a_bad_study_folder_is_one_sentence(tmp_path, capsys):
    (tmp_path / "trial-0000").mkdir()
    argv = ["tune", "ppo", "--env", "CartPole-v1", "--study-dir", str(tmp_path)]
    assert main(argv) == 2
    assert "holds trial folders but no study.journal" in capsys.readouterr().err
    assert main(["tune", "--study-dir", str(tmp_path / "none")]) == 2
    assert "holds no study to resume" in capsys.readouterr().err


def test_tune_help_explains_the_seed_groups_and_the_held_out_check(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["tune", "ppo", "--help"])
    assert exit_.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--seeds-per-trial N" in out and "--heldout-seeds N" in out
    assert "mean minus one standard error" in out
    assert "which no trial used" in out and "0 skips the check" in out
