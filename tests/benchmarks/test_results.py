"""Result files carry what a reviewer needs, and the benchmark page shows it without computing
or estimating anything."""

from __future__ import annotations

import json
import math
import sys

import pytest

from tests.benchmarks import conftest  # noqa: F401  (benchmarks/ on sys.path)
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "docs"))
import gen_pages
import results

CPUINFO = """processor\t: 0
model name\t: Some EPYC
flags\t\t: fpu sse4_2 avx avx2 fma avx512f avx512bw avx512_bf16 amx_tile
processor\t: 1
model name\t: Some EPYC
flags\t\t: fpu sse4_2 avx avx2 fma avx512f avx512bw avx512_bf16 amx_tile
"""


def test_the_cpu_record_names_the_instruction_sets_that_change_kernels():
    cpu = results.cpu(CPUINFO)
    assert cpu["model"] == "Some EPYC"
    assert cpu["kernel_flags"] == ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw",
                                   "avx512_bf16", "amx_tile"]  # fmt: skip


def test_versions_come_from_package_metadata_not_from_imports():
    """trl is not imported by this test, and is still named with its installed version."""
    pytest.importorskip("trl")
    from importlib.metadata import version

    found = results.versions(["trl", "no-such-distribution-xyz"])
    assert found["trl"] == version("trl")
    assert found["rlx"] == version("rlx") and found["numpy"] == version("numpy")
    assert found["no-such-distribution-xyz"] == "not installed"


def test_a_folder_outside_git_has_no_commit(tmp_path):
    assert GIT_STATE(tmp_path) == {"commit": None, "dirty": None, "dirty_paths": []}


def test_spread_counts_a_missed_run_as_slowest_and_never_estimates():
    figure = results.spread([3.0, 1.0, 2.0])
    assert (figure["min"], figure["median"], figure["max"]) == (1.0, 2.0, 3.0)
    assert figure["spread"] == 1.0 and figure["n"] == 3
    assert results.spread([1.0, None, 2.0])["median"] == 2.0  # None: slower than any
    assert results.spread([1.0, None, None])["median"] is None  # most missed: no median
    assert results.spread([1.0, math.nan])["min"] == 1.0
    assert results.ratio(None, 2.0) is None and results.ratio(3.0, 2.0) == 1.5


def test_settings_that_must_match_and_do_not_are_refused():
    rows = results.settings_table({"bf16": False, "steps": 20}, {"bf16": True, "steps": 20})
    assert [r["equal"] for r in rows] == [False, True]
    with pytest.raises(ValueError, match="bf16: rlx False, peer True"):
        results.check_like_for_like(rows)
    assert results.differences({"epochs": 12, "lr": 1e-3}, {"epochs": 20, "lr": 1e-3}) == [
        {"setting": "epochs", "preset": 12, "recipe": 20}
    ]


GIT_STATE = results.git_state


@pytest.fixture(autouse=True)
def committed(monkeypatch):
    """The record tests run from whatever tree the suite runs in: a clean one unless a test
    says otherwise."""
    state = GIT_STATE()
    clean = {**state, "dirty": False, "dirty_paths": []}
    monkeypatch.setattr(results, "git_state", lambda root=results.ROOT: dict(clean))
    monkeypatch.delenv(results.ALLOW_UNCOMMITTED, raising=False)
    return state


def test_the_git_state_names_the_commit_and_the_changed_files(tmp_path, committed):
    state = committed
    assert len(state["commit"]) == 40 and isinstance(state["dirty"], bool)
    assert state["dirty"] == bool(state["dirty_paths"])


def test_a_record_from_uncommitted_source_is_refused_unless_allowed_and_then_says_so(
    tmp_path, monkeypatch
):
    changed = ["src/rlx/core/ppo.py", "benchmarks/results/x.json", "notes.txt"]
    dirty = {"commit": "a" * 40, "dirty": True, "dirty_paths": changed}
    monkeypatch.setattr(results, "git_state", lambda root=results.ROOT: dict(dirty))
    with pytest.raises(RuntimeError, match=r"uncommitted source changes \(src/rlx/core/ppo.py\)"):
        record(tmp_path)
    assert not (tmp_path / "bench_x.json").exists()
    record(tmp_path, repeats=1, quick=True)  # a quick check records nothing the page shows
    monkeypatch.setenv(results.ALLOW_UNCOMMITTED, "1")
    data = json.loads(record(tmp_path).read_text())
    assert data["git"]["uncommitted_source"] is True
    assert "measured from uncommitted source" in gen_pages.benchmarks_page(tmp_path)
    # only what the benchmarks write themselves, or files outside the source: a clean record
    dirty["dirty_paths"] = ["benchmarks/results/x.json", "notes.txt"]
    monkeypatch.delenv(results.ALLOW_UNCOMMITTED)
    assert json.loads(record(tmp_path).read_text())["git"]["uncommitted_source"] is False


def record(tmp_path, **kwargs):
    base = dict(title="X per second", columns=["library", "steps/s"],
                rows=[["rlx", 1234.5], ["other", 617.25]], libraries=["gymnasium"], repeats=3,
                goals=[results.goal("rlx at least 2x", "ratio >= 2", 2.0, True),
                       results.goal("rlx stays up", "10/10", "9/10", False),
                       results.goal("peer trained", "measured", "not run", None)],
                peer="Other", out_dir=tmp_path)  # fmt: skip
    return results.write_result("bench_x", **{**base, **kwargs})


def test_a_result_file_records_command_commit_machine_versions_repeats_and_goals(tmp_path):
    path = record(tmp_path, settings=results.settings_table({"steps": 20}, {"steps": 20}))
    data = json.loads(path.read_text())
    assert data["schema"] == results.SCHEMA and data["quick"] is False
    assert data["command"].startswith("python ")
    assert data["git"]["commit"] and "dirty" in data["git"]
    assert data["machine"]["cpu"]["model"] and "kernel_flags" in data["machine"]["cpu"]
    assert {"rlx", "numpy", "gymnasium", "python"} <= set(data["versions"])
    assert data["repeats"] == 3 and "torch" in data["threads"]
    assert [g["met"] for g in data["goals"]] == [True, False, None]


def test_a_full_run_needs_three_repeats_and_like_for_like_settings(tmp_path):
    with pytest.raises(ValueError, match="at least 3"):
        record(tmp_path, repeats=1)
    record(tmp_path, repeats=1, quick=True)  # a quick run only checks the benchmark works
    with pytest.raises(ValueError, match="not like for like"):
        record(tmp_path, settings=results.settings_table({"bf16": False}, {"bf16": True}))
    with pytest.raises(ValueError, match="met="):
        record(tmp_path, goals=[{"goal": "g", "target": "t", "measured": 1, "met": "yes"}])


def test_quick_results_go_apart_from_the_ones_the_page_shows(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "QUICK_RESULTS", tmp_path / "quick")
    path = results.write_result("bench_q", title="Q", columns=["a"], rows=[[1]], libraries=[],
                                repeats=1, goals=[], peer="P", quick=True)  # fmt: skip
    assert path.parent == tmp_path / "quick"


def test_the_page_shows_each_goal_met_or_missed_and_the_record(tmp_path):
    record(
        tmp_path,
        settings=results.settings_table({"precision": "fp32"}, {"precision": "fp32"}),
        preset_differences=results.differences({"epochs": 12}, {"epochs": 20}),
    )
    page = gen_pages.benchmarks_page(tmp_path)
    for text in (
        "## X per second", "| rlx | 1,234 |",
        "| rlx at least 2x | ratio >= 2 | 2 | met |",
        "| rlx stays up | 10/10 | 9/10 | **missed** |",
        "| peer trained | measured | not run | not run |",
        "| bench_x | rlx stays up | 10/10 | 9/10 | **missed** |",  # the summary at the top
        "| precision | `fp32` | `fp32` | yes |", "| epochs | `12` | `20` |",
        "repeats 3", "commit `", "versions python", "AVX",
    ):  # fmt: skip
        assert text in page, text


def test_the_page_lists_benchmarks_without_a_result_file_as_not_run(tmp_path):
    record(tmp_path)
    page = gen_pages.benchmarks_page(tmp_path)
    assert "Not run under these rules yet" in page and "`benchmarks/bench_dqn.py`" in page


def test_the_page_marks_a_quick_run(tmp_path):
    record(tmp_path, quick=True, repeats=1)
    assert "**Quick run**" in gen_pages.benchmarks_page(tmp_path)


def test_seeds_a_presets_tuning_looked_at_are_refused_and_an_old_record_on_them_is_marked(
    tmp_path,
):
    registry = tmp_path / "seen.json"
    registry.write_text(json.dumps({
        "presets": {"ppo CartPole-v1": {"seeds": "0-9, 11, 14", "history": "h"}},
        "scored_by": {"bench_x": ["ppo CartPole-v1"]},
    }))  # fmt: skip
    assert results.seed_list("0-2, 11, 20-21") == [0, 1, 2, 11, 20, 21]
    assert results.seen_seeds("ppo CartPole-v1", registry) == {*range(10), 11, 14}
    assert results.seen_seeds("dqn CartPole-v1", registry) == set()
    assert results.seen_in_record("bench_x", [10, 11, 12], registry) == {"ppo CartPole-v1": [11]}
    assert results.seen_in_record("bench_x", [40, 41], registry) == {}
    assert results.seen_in_record("other", [11], registry) == {}


def test_the_registry_refuses_the_seeds_the_ppo_preset_was_retuned_on(tmp_path):
    with pytest.raises(SystemExit, match=r"ppo CartPole-v1: seeds 11, 14 were looked at"):
        results.check_unseen(["ppo CartPole-v1"], [10, 11, 12, 14])
    results.check_unseen(["ppo CartPole-v1", "dqn CartPole-v1"], range(40, 50))
    mark = "**Scored on seeds its preset's tuning looked at**"
    assert mark not in gen_pages.benchmarks_page()  # every record is scored on unseen seeds
    # the policy-gradient record as it was before its rerun (seeds 10-19) is marked
    record = results.RESULTS / "policy_gradient.json"
    old = json.loads(record.read_text()) | {"seeds": list(range(10, 20))}
    (tmp_path / "policy_gradient.json").write_text(json.dumps(old))
    assert f"{mark} (ppo CartPole-v1: 11, 14, 19" in gen_pages.benchmarks_page(tmp_path)


def test_every_language_model_benchmark_starts_its_clocks_after_the_same_imports():
    """Both sides of bench_llm, bench_lora, bench_grpo and bench_agents import clocks.MODULES
    before any clock starts (TRL's trainers load lazily: a clock started before them pays for
    them)."""
    import clocks

    assert {"trl.trainer.dpo_trainer", "peft", "datasets", "rlx.llm.stages.grpo"} <= set(
        clocks.MODULES
    )
    for name in ("bench_llm", "bench_lora", "bench_grpo", "bench_agents"):
        source = (ROOT / "benchmarks" / f"{name}.py").read_text()
        assert "import_everything()" in source, name
        assert "slow to import" not in source, name  # the per-side imports it replaces


def test_changed_paths_are_read_whole_renames_and_odd_names_included(tmp_path):
    """A rename into src/ and names git would quote (spaces, non-ASCII) are source changes."""
    import subprocess

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "t@t")
    git("config", "user.name", "t")
    (tmp_path / "notes.txt").write_text("a")
    git("add", ".")
    git("commit", "-qm", "one")
    (tmp_path / "src").mkdir()
    git("mv", "notes.txt", "src/moved.py")
    (tmp_path / "src" / "new file.py").write_text("b")
    (tmp_path / "src" / "café.py").write_text("c")
    state = GIT_STATE(tmp_path)
    assert state["dirty"] is True
    assert {"src/moved.py", "notes.txt", "src/new file.py", "src/café.py"} <= set(
        state["dirty_paths"]
    )
    assert {"src/moved.py", "src/new file.py", "src/café.py"} <= set(
        results.uncommitted_source(state)
    )


def test_the_zoo_record_keeps_earlier_pairs_with_the_commit_they_were_measured_at(tmp_path):
    """bench_zoo.py runs some pairs at a time: the pairs of the existing full record on the same
    seeds that it does not rerun are kept, each with its own commit and date."""
    import bench_zoo

    old = {
        "quick": False, "seeds": [300, 301, 302], "date": "2026-12-01T00:00:00+00:00",
        "git": {"commit": "a" * 40},
        "details": {
            "ppo:CartPole-v1": {"rlx": {"mean": 500.0}},
            "dqn:CartPole-v1": {"rlx": {"mean": 300.0}, "measured": {"commit": "b" * 40,
                                                                    "date": "2026-12-02"}},
        },
    }  # fmt: skip
    path = tmp_path / "zoo.json"
    path.write_text(json.dumps(old))
    kept = bench_zoo.earlier_pairs([300, 301, 302], ["a2c:CartPole-v1"], path)
    assert kept["ppo:CartPole-v1"]["measured"] == {"commit": "a" * 40,
                                                   "date": "2026-12-01T00:00:00+00:00"}  # fmt: skip
    assert kept["dqn:CartPole-v1"]["measured"]["commit"] == "b" * 40
    # a pair run again is not kept; other seeds, a quick record, no record: nothing kept
    assert list(bench_zoo.earlier_pairs([300, 301, 302], ["dqn:CartPole-v1"], path)) == [
        "ppo:CartPole-v1"
    ]
    assert bench_zoo.earlier_pairs([1, 2, 3], [], path) == {}
    path.write_text(json.dumps({**old, "quick": True}))
    assert bench_zoo.earlier_pairs([300, 301, 302], [], path) == {}
    assert bench_zoo.earlier_pairs([300, 301, 302], [], tmp_path / "none.json") == {}


def test_every_benchmark_script_imports():
    """A script whose imports a refactor broke is found here, not when a rerun is due
    (bench_alphazero_selfplay imported a module that had been renamed)."""
    import importlib

    from tests.benchmarks.conftest import BENCHMARKS

    scripts = sorted(p.stem for p in BENCHMARKS.glob("*.py"))
    assert "bench_alphazero_selfplay" in scripts and len(scripts) > 20
    for name in scripts:
        importlib.import_module(name)
