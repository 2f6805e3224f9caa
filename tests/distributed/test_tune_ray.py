"""``rlx tune --jobs K --ray ADDRESS``: the study's workers as Ray tasks (local Ray, in a
private network namespace), writing one study and a seed group per trial; the held-out check
runs once, after the tasks, in the process that called ``rlx tune``."""

from __future__ import annotations

import json
import os

import pytest

import rlx

pytestmark = pytest.mark.ray
optuna = pytest.importorskip("optuna")


def test_trials_run_as_ray_tasks_into_one_study_and_its_run_folders(tmp_path):
    study_dir = tmp_path / "study"
    result = rlx.tune("ppo", "CartPole-v1", study_dir=study_dir, trials=4, total_steps=1_000,
                      evaluations=1, eval_episodes=2, jobs=2, ray="local",
                      heldout_seeds=2)  # fmt: skip
    assert result.count("complete") + result.count("pruned") == 4
    folders = sorted(p.name for p in study_dir.glob("trial-*"))
    assert folders == [f"trial-{n:04d}" for n in range(4)]
    for folder in folders:  # each task ran whole trials: every seed's note names its trial
        group = json.loads((study_dir / folder / "group.json").read_text())
        assert group["seeds"] == [0, 1, 2]
        for seed in group["seeds"]:
            summary_file = study_dir / folder / f"seed-{seed}" / "summary.json"
            if summary_file.is_file():
                summary = json.loads(summary_file.read_text())
                assert summary["tune"]["trial"] == int(folder.split("-")[1])
                assert summary["tune"]["seed"] == seed
    workers = {t.user_attrs["worker"]["pid"] for t in rlx.tune.create_study(study_dir).trials}
    assert len(workers) == 2  # two Ray tasks, two processes, one storage
    assert os.getpid() not in workers
    assert (study_dir / "best.yaml").is_file()
    if result.best is not None:  # the check: once, here, after the tasks
        assert result.heldout is not None and result.heldout.seeds == [10_000, 10_001]
        assert (study_dir / "heldout.json").is_file()
