"""``rlx tune --jobs K --ray ADDRESS``: the study's workers as Ray tasks (local Ray, in a
private network namespace), writing one study and an rlx run folder per trial."""

from __future__ import annotations

import json

import pytest

import rlx

pytestmark = pytest.mark.ray
optuna = pytest.importorskip("optuna")


def test_trials_run_as_ray_tasks_into_one_study_and_its_run_folders(tmp_path):
    study_dir = tmp_path / "study"
    result = rlx.tune("ppo", "CartPole-v1", study_dir=study_dir, trials=4, total_steps=1_000,
                      evaluations=1, eval_episodes=2, jobs=2, ray="local")  # fmt: skip
    assert result.count("complete") + result.count("pruned") == 4
    folders = sorted(p.name for p in study_dir.glob("trial-*"))
    assert folders == [f"trial-{n:04d}" for n in range(4)]
    for folder in folders:
        summary = json.loads((study_dir / folder / "summary.json").read_text())
        assert summary["tune"]["trial"] == int(folder.split("-")[1])
    workers = {t.user_attrs["worker"]["pid"] for t in rlx.tune.create_study(study_dir).trials}
    assert len(workers) == 2  # two Ray tasks, two processes, one storage
    assert (study_dir / "best.yaml").is_file()
