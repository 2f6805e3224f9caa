"""Seeds as a first-class axis (issue 39): ``rlx train --seeds``, and the report and the doctor
of a seed group.

The statistics (:mod:`rlx.diagnostics.stats`) are checked against numbers worked out by hand;
the group against tiny budgets: a group of three seeds, two at a time, writes three run folders
and ``group.json``; a seed that fails leaves the others; Ctrl-C stops every seed with its
checkpoint; ``--resume`` continues every seed. The report and the doctor read groups built by
hand, one seed deliberately broken.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from gymnasium.envs.classic_control import CartPoleEnv

import rlx
from rlx.cli import main
from rlx.diagnostics import stats
from rlx.diagnostics.group_doctor import doctor_group, fences, seeds_that_differ
from rlx.errors import ConfigError, RunError
from rlx.launch.seed_groups import SeedGroup
from rlx.runs.group import SeedEntry, new_group, read_group, write_group

ROOT = Path(__file__).resolve().parents[1]
RLX = [sys.executable, "-m", "rlx.cli"]
TINY_PPO = ["--num-envs", "1", "--num-steps", "32", "--minibatch-size", "32"]


def refused(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    """What ``rlx ARGV`` says on stderr as it exits 2."""
    capsys.readouterr()
    assert main(argv) == 2
    return capsys.readouterr().err


# ============================================================================ statistics
def test_iqm_is_the_mean_of_the_middle_half():
    assert stats.iqm([1, 2, 3, 4, 100]) == 3.0  # cut 1 from each end of 5: mean(2, 3, 4)
    assert stats.iqm([4, 1, 3, 2]) == 2.5  # cut 1 of 4 from each end: mean(2, 3)
    assert stats.iqm([8, 1, 7, 2, 6, 3, 5, 4]) == 4.5  # cut 2 of 8: mean(3, 4, 5, 6)
    assert stats.iqm([5, 7, 9]) == 7.0  # floor(3 / 4) = 0: nothing to cut
    per_row = stats.iqm([[1, 2, 3, 4, 100], [0, 0, 0, 0, 0]], axis=1)
    np.testing.assert_array_equal(per_row, [3.0, 0.0])


def test_bootstrap_interval_of_hand_worked_samples():
    assert stats.bootstrap_ci([2.0, 2.0, 2.0]) == (2.0, 2.0)  # every resample is the same
    low, high = stats.bootstrap_ci([5.0])
    assert np.isnan(low) and np.isnan(high)  # one seed: nothing to resample
    # stratified: each stratum keeps its three runs, so every resample's mean is exactly 5;
    # pooled, a resample may draw mostly zeros or mostly tens
    assert stats.bootstrap_ci([0, 0, 0], [10, 10, 10], statistic=stats.mean) == (5.0, 5.0)
    low, high = stats.bootstrap_ci([0, 0, 0, 10, 10, 10], statistic=stats.mean)
    assert low < 3.5 and high > 6.5
    # the percentile interval contains the IQM, and a lone outlier barely moves the IQM's
    low, high = stats.bootstrap_ci([10, 11, 12, 13, -500])
    assert low <= stats.iqm([10, 11, 12, 13, -500]) <= high and high <= 13


def test_bootstrap_interval_of_a_mean_matches_the_normal_one_on_a_large_sample():
    data = np.random.default_rng(0).normal(3.0, 2.0, size=400)
    low, high = stats.bootstrap_ci(data, statistic=stats.mean, resamples=4000)
    half = 1.96 * data.std(ddof=1) / np.sqrt(len(data))  # the textbook interval
    assert low == pytest.approx(data.mean() - half, abs=0.15 * half)
    assert high == pytest.approx(data.mean() + half, abs=0.15 * half)


def test_mean_curve_interpolates_onto_the_common_span_and_resamples_whole_seeds():
    a = ([0, 10], [0, 10])  # y = step
    b = ([0, 5, 10, 20], [0, 0, 10, 99])  # flat, then up; runs longer than a
    band = stats.mean_curve([a, b], points=3)
    np.testing.assert_array_equal(band.steps, [0, 5, 10])  # the span both reach
    np.testing.assert_array_equal(band.per_seed, [[0, 5, 10], [0, 0, 10]])
    np.testing.assert_array_equal(band.mean, [0, 2.5, 10])
    # at step 5 a resample is {5, 5}, {5, 0} or {0, 0}: means 5, 2.5, 0 -> [0, 5]
    np.testing.assert_array_equal(band.low, [0, 0, 10])
    np.testing.assert_array_equal(band.high, [0, 5, 10])
    with pytest.raises(ValueError, match="share no span"):
        stats.align_curves([([0, 1], [0, 1]), ([2, 3], [0, 1])])


def test_moving_average_and_tukey_fences():
    np.testing.assert_array_equal(stats.moving_average([1, 2, 3, 4], 2), [1, 1.5, 2.5, 3.5])
    # Q1 = 2, Q3 = 4, IQR = 2: fences 2 - 3 and 4 + 3
    assert stats.tukey_fences([1, 2, 3, 4, 100]) == (-1.0, 7.0)


def test_seeds_that_differ_names_outliers_and_findings_on_some_seeds():
    finals = {"seed 0": 100.0, "seed 1": 104.0, "seed 2": 98.0, "seed 3": 102.0, "seed 4": 3.0}
    fired = {"seed 0": {"a"}, "seed 1": {"a", "b"}, "seed 2": {"a"}, "seed 3": set(),
             "seed 4": {"a"}}  # fmt: skip
    found = seeds_that_differ(finals, fired)
    assert [(d.kind, d.seeds) for d in found] == [
        ("final-return", ("seed 4",)),
        ("finding", ("seed 3",)),  # a fires on every seed but 3
        ("finding", ("seed 1",)),  # b fires on seed 1 only
    ]
    assert "below the group's lower fence" in found[0].reason
    assert found[1].reason.startswith("a fires on every seed but seed 3")
    assert found[2].reason.startswith("b fires on seed 1 only")
    # quartiles that coincide do not make a half-point difference an outlier
    assert seeds_that_differ({f"seed {i}": 500.0 for i in range(4)} | {"seed 4": 499.5}, {}) == []
    low, high = fences([500.0, 500.0, 500.0, 500.0])
    assert low < 500.0 < high


# ============================================================================ groups by hand
def write_run(folder: Path, seed: int, returns: list[float], *, algo: str = "ppo",
              env: str = "CartPole-v1", evaluation: float | None = None) -> None:  # fmt: skip
    """An rlx run folder with these training returns, one episode per 100 steps."""
    folder.mkdir(parents=True)
    config = {"seed": seed, "learning_rate": 0.001}
    (folder / "config.json").write_text(json.dumps({"algo": algo, "env": env, "seed": seed,
                                                    "config": config}))  # fmt: skip
    steps = [100 * (i + 1) for i in range(len(returns))]
    rows = ["step,wall_s,return,length"]
    rows += [f"{s},{s / 1000},{r},{max(r, 1)}" for s, r in zip(steps, returns, strict=True)]
    (folder / "episodes.csv").write_text("\n".join(rows) + "\n")
    logged = [{"step": s, "wall_s": s / 1000, "episode_return": (returns[i - 1] + returns[i]) / 2}
              for i, s in enumerate(steps) if i % 2]  # fmt: skip
    (folder / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in logged))
    summary = {"algo": algo, "env": env, "seed": seed, "steps": steps[-1], "status": "completed"}
    if evaluation is not None:
        summary["eval_return_mean"] = evaluation
    (folder / "summary.json").write_text(json.dumps(summary))


def learning(seed: int, episodes: int = 100, broken: bool = False) -> list[float]:
    """Returns rising from 10 to about 200; a broken seed reaches 200 early, holds it, and
    collapses for good after its middle."""
    rng = np.random.default_rng(seed)
    curve = np.linspace(10, 200, episodes) + rng.normal(0, 5, episodes)
    if broken:
        third = episodes // 3
        curve[:third] = np.linspace(10, 200, third)
        curve[third:] = 200 + rng.normal(0, 5, episodes - third)
        curve[episodes // 2 :] = 9 + rng.normal(0, 1, episodes - episodes // 2)
    return [round(float(x), 3) for x in curve]


def make_group(path: Path, seeds=(0, 1, 2, 3, 4), broken=None, algo="ppo") -> Path:
    """A group folder as ``rlx train --seeds`` leaves it, seed ``broken`` collapsing."""
    record = new_group(path, algo, "CartPole-v1", list(seeds), command="by hand")
    for seed in seeds:
        returns = learning(seed + (100 if algo != "ppo" else 0), broken=seed == broken)
        write_run(path / f"seed-{seed}", seed, returns, algo=algo,
                  evaluation=float(np.mean(returns[-10:])))  # fmt: skip
        record = record.with_entry(SeedEntry(seed, f"seed-{seed}", "completed"))
    write_group(record)
    return path


def test_the_doctor_names_the_broken_seed_in_one_block(tmp_path, capsys):
    group = make_group(tmp_path / "ppo", broken=3)
    diagnosis = doctor_group(group)
    named = {seed for d in diagnosis.differences for seed in d.seeds}
    assert named == {"seed 3"}
    kinds = {d.kind for d in diagnosis.differences}
    assert "final-return" in kinds and "finding" in kinds  # its return collapses: a rule fires
    assert main(["doctor", str(group)]) == 0
    out = capsys.readouterr().out
    block = out[out.index("rlx doctor: seed group") :]
    assert "seeds that behave differently:" in block and "seed 3: final return" in block
    assert out.count("rlx doctor: ppo CartPole-v1") == 5  # each seed's diagnosis before it
    assert main(["doctor", str(group), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert {s for d in payload["differing_seeds"] for s in d["seeds"]} == {"seed 3"}
    assert payload["final_returns"]["source"] == "eval_return_mean"
    assert len(payload["seeds"]) == 5 and "diagnosis" in payload["seeds"][0]


def test_a_healthy_group_has_no_seed_that_differs(tmp_path):
    group = make_group(tmp_path / "ppo")
    diagnosis = doctor_group(group)
    assert diagnosis.differences == []
    assert "no seed behaves differently" in str(diagnosis)
    assert rlx.SeedGroup.read(group).doctor().differences == []
    for call in (rlx.doctor, rlx.report):  # single-run functions point to the group's own
        with pytest.raises(ConfigError, match=r"is a seed group: rlx\.SeedGroup\.read\("):
            call(group)


def test_the_report_of_a_group_shows_the_interval_and_the_iqm(tmp_path, capsys):
    group = make_group(tmp_path / "ppo", broken=3)
    assert main(["report", str(group)]) == 0
    page = (group / "report.html").read_text()
    assert "report written to" in capsys.readouterr().out
    finals = doctor_group(group).finals
    row = page[page.index('<tr data-group="ppo">') :]
    row = row[: row.index("</tr>")]
    assert f'<td class="iqm">{finals.iqm:.4g}</td>' in row
    assert f"[{finals.iqm_ci[0]:.4g}, {finals.iqm_ci[1]:.4g}]" in row
    assert finals.iqm_ci[0] <= finals.iqm <= finals.iqm_ci[1]
    assert "95% bootstrap band" in page and "interquartile mean" in page
    assert 'data-metric="episode_return"' in page and "<svg" in page
    assert 'data-seeds="seed 3"' in page  # the seed that differs, on the page too


def test_several_groups_overlay_and_run_folders_make_a_group(tmp_path, capsys):
    ppo = make_group(tmp_path / "ppo")
    a2c = make_group(tmp_path / "a2c", algo="a2c")
    out = tmp_path / "compare.html"
    assert main(["report", str(ppo), str(a2c), "--out", str(out)]) == 0
    page = out.read_text()
    assert '<tr data-group="ppo">' in page and '<tr data-group="a2c">' in page
    runs = [str(ppo / f"seed-{s}") for s in range(3)]
    assert main(["report", "--group", *runs, "--out", str(tmp_path / "runs.html")]) == 0
    assert 'data-group="ppo"' in (tmp_path / "runs.html").read_text()  # named by their folder
    assert main(["doctor", "--group", *runs]) == 0
    assert "seed group ppo CartPole-v1 (ppo), 3 seeds" in capsys.readouterr().out
    assert "compares seed groups with seed groups" in refused(["report", str(ppo), runs[0]], capsys)


# ============================================================================ training groups
def test_a_group_trains_its_seeds_in_parallel_and_resumes_every_seed(tmp_path, monkeypatch,
                                                                       capsys):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    argv = ["train", "q-learning", "--env", "FrozenLake-v1", "--episodes", "100"]
    assert main([*argv, "--seeds", "0", "1", "2", "--jobs", "2", "--run-dir", "g"]) == 0
    out, err = capsys.readouterr()
    assert "3 seeds, 2 at a time" in err and "rlx report g" in out
    record = read_group("g")
    assert record.seeds == [0, 1, 2] and record.algo == "q-learning"
    assert [e.status for e in record.runs] == ["completed"] * 3
    for seed in (0, 1, 2):
        config = json.loads((tmp_path / f"g/seed-{seed}/config.json").read_text())
        assert config["config"]["seed"] == seed and config["config"]["episodes"] == 100
    data = json.loads((tmp_path / "g/group.json").read_text())
    assert data["command"].endswith("--seeds 0 1 2 --jobs 2 --run-dir g")
    assert [r["run_dir"] for r in data["runs"]] == ["seed-0", "seed-1", "seed-2"]
    # the same command again is refused; a resume with a larger budget continues every seed
    said = refused([*argv, "--seeds", "0", "1", "2", "--run-dir", "g"], capsys)
    assert "g already holds a seed group; pass --resume to continue its seeds" in said
    # (one after another in this process, with a seed 3 new to the group)
    resume = ["train", "q-learning", "--resume", "--run-dir", "g", "--episodes", "150"]
    assert main([*resume, "--seeds", "3", "--jobs", "1"]) == 0
    for seed in (0, 1, 2):
        config = json.loads((tmp_path / f"g/seed-{seed}/config.json").read_text())
        assert [h["kind"] for h in config["history"]] == ["start", "resume"]
        assert config["config"]["episodes"] == 150
    config = json.loads((tmp_path / "g/seed-3/config.json").read_text())
    assert config["config"]["seed"] == 3 and config["config"]["episodes"] == 150
    assert config["env"] == "FrozenLake-v1"  # the group's env, recorded in group.json
    assert [h["kind"] for h in read_group("g").extra["history"]] == ["start", "resume"]
    group = SeedGroup.read("g")
    assert group.seeds == [0, 1, 2, 3] and sorted(group.agents()) == [0, 1, 2, 3]
    assert len(group.doctor().seeds) == 4 and group.report() == Path("g/report.html")


class FailsOnSeedOne(CartPoleEnv):
    """CartPole that cannot be reset with seed 1: the seed-1 run of a group fails."""

    def reset(self, *, seed=None, options=None):
        if seed == 1:
            raise RuntimeError("this env refuses seed 1")
        return super().reset(seed=seed, options=options)


def test_a_failed_seed_leaves_the_others_and_ctrl_c_stops_every_seed(tmp_path):
    """Seeds 0-2 at once: seed 1 fails at its start; once 0 and 2 have logged and seed 1's
    failure is recorded, one SIGINT to the group's process stops both with a checkpoint; the
    exit code says interrupted. (Waiting for the record, not for time: seeds 0 and 2 may log
    before seed 1's process has reported its error, and a SIGINT then ends it first.)"""
    env = {**__import__("os").environ, "PYTHONPATH": str(ROOT), "RLX_NUM_THREADS": "1"}
    command = [*RLX, "train", "ppo", "--env", "tests.test_seed_groups:FailsOnSeedOne",
               *TINY_PPO, "--total-steps", "1000000", "--seeds", "0", "1", "2", "--jobs", "3",
               "--run-dir", "g", "--no-progress"]  # fmt: skip
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 120
    logged = [tmp_path / f"g/seed-{seed}/metrics.jsonl" for seed in (0, 2)]

    def seed_one_failed() -> bool:
        try:
            return {e.seed: e.status for e in read_group(tmp_path / "g").runs}.get(1) == "failed"
        except RunError:  # not written yet
            return False

    while not (all(p.exists() and p.stat().st_size for p in logged) and seed_one_failed()):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the seeds did not start"
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in out
    runs = {e.seed: e for e in read_group(tmp_path / "g").runs}
    assert runs[1].status == "failed" and runs[1].error == "RuntimeError: this env refuses seed 1"
    for seed in (0, 2):
        assert runs[seed].status == "interrupted"
        summary = json.loads((tmp_path / f"g/seed-{seed}/summary.json").read_text())
        assert summary["status"] == "interrupted" and summary["steps"] > 0
        assert any((tmp_path / f"g/seed-{seed}/checkpoints").glob("step_*.pt"))
    assert "stopping every seed" in err and "[seed 1] RuntimeError: this env refuses" in err


def test_in_python_a_group_returns_its_seeds(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    class FailOnSeedOne:
        def on_start(self, step, info):
            if info["run_dir"].name == "seed-1":
                raise RuntimeError("a callback refused seed 1")

    group = rlx.train("q-learning", "FrozenLake-v1", seeds=[0, 1, 2], episodes=30,
                      run_dir="py", progress=False, callbacks=[FailOnSeedOne()])  # fmt: skip
    assert isinstance(group, SeedGroup) and group.seeds == [0, 1, 2]
    assert [run.status for run in group.runs] == ["completed", "failed", "completed"]
    assert group.failed[0].error == "RuntimeError: a callback refused seed 1"
    assert "train one after another" in capsys.readouterr().err  # callbacks: in this process
    assert group.load(0).run_dir == Path("py/seed-0")
    assert "seed group py: q-learning on FrozenLake-v1, 3 seeds" in str(group)


# ============================================================================ mistakes
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["--seed", "1", "--seeds", "0", "1"],
            "--seed trains one run and --seeds one run per seed",
        ),
        (["--jobs", "2"], "--jobs sets how many seeds of --seeds train at once; pass --seeds"),
        (["--seeds", "0", "0"], "--seeds names seed 0 twice"),
        (["--seeds"], "--seeds needs at least one seed"),
        (["--seeds", "0", "--jobs", "0"], "--jobs N is how many seeds train at once"),
        (["--seeds", "x"], "--seeds expects a whole number"),
        (["--seeds", "0", "-1"], "--seeds: each seed is a whole number >= 0, not -1"),
    ],
)
def test_seed_flags_answer_a_mistake_with_one_sentence(args, says, tmp_path, monkeypatch,
                                                      capsys):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    said = refused(["train", "q-learning", "--env", "FrozenLake-v1", *args], capsys)
    assert said.startswith(f"rlx: error: {says}") and said.count("\n") == 1
    assert not any(tmp_path.iterdir())  # nothing written


def test_group_folders_are_checked_at_the_door(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rlx.train("q-learning", "FrozenLake-v1", episodes=5, run_dir="single", progress=False)
    argv = ["train", "q-learning", "--env", "FrozenLake-v1", "--seeds", "0"]
    said = refused([*argv, "--run-dir", "single"], capsys)
    assert "single holds a single run, not a seed group; choose another folder" in said
    said = refused(["train", "q-learning", "--resume", "--seeds", "0", "--run-dir", "new"], capsys)
    assert "--resume needs a seed group to continue, but new holds no group.json" in said
    with pytest.raises(RunError, match="resume=True needs a seed group to continue"):
        rlx.train("q-learning", resume=True, seeds=[0], run_dir="new")
    # a run's config.json as --config: its settings for every seed, the seeds given win
    config = ["--config", "single/config.json", "--jobs", "1", "--run-dir", "from-config"]
    assert main(["train", "q-learning", "--seeds", "3", "4", *config]) == 0
    for seed in (3, 4):
        recorded = json.loads((tmp_path / f"from-config/seed-{seed}/config.json").read_text())
        assert (recorded["config"]["seed"], recorded["config"]["episodes"]) == (seed, 5)
    shutil.rmtree(tmp_path / "from-config")
    with pytest.raises(ConfigError, match=r"seed=\.\.\. trains one run and seeds=\[\.\.\.\] one"):
        rlx.train("q-learning", "FrozenLake-v1", seed=1, seeds=[0, 1], run_dir="x")
    with pytest.raises(ConfigError, match="has no config field 'episods'"):  # planned first
        rlx.train("q-learning", "FrozenLake-v1", seeds=[0, 1], episods=5, run_dir="x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["single"]
