"""Heal (issue 42): ``rlx doctor RUN --fix`` trains a child run with the findings' changes from
the parent's last good checkpoint; ``rlx train ... --heal`` rolls a run back and changes it as
it trains. The mechanics on a toy whose KL drifts with its learning rate (milliseconds), then
the done-when on the demo's broken PPO run (``learning_rate=0.1``, 40 epochs on CartPole).
Issue 48: a blow-up in the first updates is healed at once, from a checkpoint written before
the first update (a toy whose first step is NaN, and PPO at a learning rate of 0.5)."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path

import numpy as np
import pytest

import rlx
from rlx import registry
from rlx.cli import main
from rlx.core.fields import CheckpointFields
from rlx.diagnostics.doctor import Finding
from rlx.diagnostics.rules import RULES_BY_ID, Evidence
from rlx.errors import ConfigError
from rlx.launch.heal import applicable_findings, merged_changes
from rlx.runs import read_episodes, read_summary
from tests.runs import toy_drift  # registers "toy-drift"
from tests.test_user_errors import snapshot

DENSE = {"checkpoint_every_steps": 5, "checkpoints_kept": 0}


def config(run_dir: Path) -> dict:
    return json.loads((run_dir / "config.json").read_text())


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture
def drifting(tmp_path) -> Path:
    """A toy run whose KL drifts to 1 from step 40: kl-too-high over steps 51-100."""
    run_dir = tmp_path / "drift"
    rlx.train("toy-drift", "X", run_dir=run_dir, learning_rate=1.0, progress=False,
              doctor=False, **DENSE)  # fmt: skip
    return run_dir


# ============================================================================ rlx doctor --fix
def test_fix_continues_from_the_last_good_checkpoint_with_the_change(drifting):
    before = snapshot(drifting)
    result = rlx.heal(drifting)
    child = drifting.with_name("drift-healed")
    assert result.child == child and child.is_dir()
    # kl-too-high read steps 51-100; at step 50 the rule, on the run as it stood, finds nothing
    assert (result.checkpoint, result.checkpoint_step) == ("checkpoints/step_000000000050.pt", 50)
    assert [(c.field, c.current, c.value) for c in result.changes] == [("learning_rate", 1.0, 0.3)]
    assert result.cleared and result.better
    (outcome,) = result.outcomes
    assert (outcome.rule, outcome.metric, outcome.steps) == ("kl-too-high", "approx_kl", (51, 100))
    assert outcome.before == pytest.approx(1.0) and outcome.after == pytest.approx(0.09)
    assert snapshot(drifting) == before  # the parent is left as it was

    # the child is the parent up to the checkpoint, then the changed run
    parent_rows, child_rows = rows(drifting), rows(child)
    assert [r["step"] for r in child_rows] == list(range(1, 101))
    assert child_rows[:50] == parent_rows[:50] and child_rows[60]["approx_kl"] == pytest.approx(
        0.09
    )

    record = config(child)
    lineage = record["healed_from"]
    assert lineage["parent"] == str(drifting)
    assert lineage["checkpoint"] == "checkpoints/step_000000000050.pt" and lineage["step"] == 50
    assert lineage["changes"] == [{"field": "learning_rate", "from": 1.0, "to": 0.3,
                                   "rules": ["kl-too-high"], "note": None}]  # fmt: skip
    assert lineage["findings"][0]["rule"] == "kl-too-high"
    assert record["config"]["learning_rate"] == 0.3
    assert [h["kind"] for h in record["history"]] == ["start", "heal"]
    assert record["history"][-1]["parent"] == str(drifting)
    assert read_summary(child)["healed_from"]["parent"] == str(drifting)


def test_fix_starts_over_when_no_checkpoint_comes_before_the_evidence(tmp_path):
    parent = tmp_path / "p"  # 30 s cadence: its one checkpoint is the last step
    rlx.train("toy-drift", "X", run_dir=parent, learning_rate=1.0, progress=False, doctor=False)
    result = rlx.heal(parent, tmp_path / "child")
    assert result.checkpoint is None and result.checkpoint_step == 0
    assert result.cleared and result.better
    record = config(tmp_path / "child")
    assert record["healed_from"]["checkpoint"] is None
    assert [h["kind"] for h in record["history"]] == ["heal"]
    assert record["config"]["learning_rate"] == 0.3


def test_rlx_doctor_fix_names_the_child_and_doctor_shows_its_lineage(drifting, capsys):
    capsys.readouterr()
    assert main(["doctor", str(drifting), "--fix", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    child = drifting.with_name("drift-healed")
    assert out["child"] == str(child) and out["cleared"] is True
    assert out["changes"][0]["field"] == "learning_rate"
    assert out["findings"][0] == {"rule": "kl-too-high", "symptom": "Mean KL past 0.1",
                                  "metric": "approx_kl", "steps": [51.0, 100.0], "before": 1.0,
                                  "after": pytest.approx(0.09), "cleared": True}  # fmt: skip
    assert main(["doctor", str(child)]) == 0
    text = capsys.readouterr().out
    assert (f"healed: a child of {drifting} from its checkpoint at step 50 "
            "(checkpoints/step_000000000050.pt), with learning_rate 1.0 -> 0.3 (kl-too-high)"
            ) in text  # fmt: skip
    assert "no findings" in text
    assert main(["doctor", str(child), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["healed"][0].startswith(f"a child of {drifting}")
    page = rlx.report(child).read_text()
    assert 'id="heal-' in page and "where a heal went on from a checkpoint" in page


def test_fix_prints_the_diagnosis_then_before_and_after(drifting, capsys, tmp_path):
    capsys.readouterr()
    assert main(["doctor", str(drifting), "--fix", "--run-dir", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    assert out.index("[warning] Mean KL past 0.1") < out.index("rlx doctor --fix:")
    assert f"rlx doctor --fix: {drifting} healed into {tmp_path / 'c'}" in out
    assert "  change: learning_rate 1.0 -> 0.3 (kl-too-high)" in out
    assert "cleared" in out and "better" in out


def test_a_run_without_findings_has_nothing_to_heal(tmp_path, capsys):
    run_dir = tmp_path / "calm"
    rlx.train("toy-drift", "X", run_dir=run_dir, learning_rate=0.1, progress=False, doctor=False)
    result = rlx.heal(run_dir)
    assert result.child is None and not run_dir.with_name("calm-healed").exists()
    capsys.readouterr()
    assert main(["doctor", str(run_dir), "--fix"]) == 0
    assert f"nothing to heal in {run_dir}: the doctor has no finding." in capsys.readouterr().out


def test_two_findings_naming_one_field_take_the_safer_value():
    def finding(rule: str, field: str, current, suggested) -> Finding:
        evidence = Evidence("approx_kl", 1, 2, 1.0, 0.1, "median")
        return Finding(RULES_BY_ID[rule], evidence, field, current, suggested)

    changes = merged_changes([
        finding("kl-too-high", "learning_rate", 0.1, 0.03),
        finding("clip-fraction-near-zero", "learning_rate", 0.1, 0.3),
        finding("entropy-collapse", "ent_coef", 0.0, 0.01),
        finding("value-breakdown", "learning_rate", 0.1, 0.03),
    ])  # fmt: skip
    lr, ent = changes
    assert (lr.field, lr.value, ent.field, ent.value) == ("learning_rate", 0.03, "ent_coef", 0.01)
    assert lr.rules == ("kl-too-high", "clip-fraction-near-zero", "value-breakdown")
    assert lr.note == (
        "learning_rate: kl-too-high 0.03, clip-fraction-near-zero 0.3, value-breakdown 0.03; "
        "took 0.03 (the smaller is the safer step)"
    )
    assert ent.note is None
    longer = finding("no-learning", "total_steps", 100, 200)
    applied, skipped = applicable_findings([longer, finding("kl-too-high", "num_epochs", 40, 20)],
                                           "total_steps")  # fmt: skip
    assert [f.field for f in applied] == ["num_epochs"]
    assert skipped == ["no-learning: total_steps 100 -> 200 not applied (a heal keeps the "
                       "budget; resume the run with total_steps=200 to train longer)"]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--run-dir", "{tmp}/c"],
         "--run-dir goes with --fix (it is for the healed child run); add --fix."),
        (["{run}", "--fix"], "rlx doctor --fix heals one run at a time; give one RUN folder."),
        (["--fix", "--group"], "rlx doctor --fix heals one run at a time; give one RUN folder."),
        (["--fix", "--run-dir", "{run}"], "the healed run needs a folder of its own, not {run}; "
                                          "choose another folder for it (--run-dir DIR)."),
    ],
)  # fmt: skip
def test_fix_mistakes_are_one_sentence_exit_2(drifting, tmp_path, capsys, args, message):
    before = snapshot(drifting)
    argv = ["doctor", str(drifting), *(a.format(tmp=tmp_path, run=drifting) for a in args)]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == "rlx: error: " + message.format(run=drifting)
    assert snapshot(drifting) == before and not (tmp_path / "c").exists()


def test_fix_refuses_a_child_folder_that_holds_a_run_and_foreign_logs(drifting, tmp_path, capsys):
    assert main(["doctor", str(drifting), "--fix"]) == 0
    capsys.readouterr()
    assert main(["doctor", str(drifting), "--fix"]) == 2
    child = drifting.with_name("drift-healed")
    assert capsys.readouterr().err.strip() == (
        f"rlx: error: {child} already holds a run (a heal done before?); see it with rlx doctor "
        f"{child}, or choose another folder for it (--run-dir DIR)."
    )
    logs = tmp_path / "sb3"
    logs.mkdir()
    (logs / "progress.csv").write_text("time/total_timesteps,rollout/ep_rew_mean\n1,2\n")
    assert main(["doctor", str(logs), "--fix"]) == 2
    assert capsys.readouterr().err.startswith("rlx: error: only an rlx run folder can be healed: ")


# ============================================================================ rlx train --heal
SUSTAINED = {"kl_power": 1.0}
"""A KL that drifts past 0.1 and stays there, below a one-update blow-up (KL past 1), in
proportion to the learning rate: 0.9 takes two cuts to 0.3 of it to clear (0.27, then 0.081),
and the first helps (0.8 of the way to the threshold, 0.17 left)."""


def test_heal_rolls_back_changes_and_records_every_rollback(tmp_path, capsys):
    run_dir = tmp_path / "live"
    rlx.train("toy-drift", "X", run_dir=run_dir, learning_rate=0.9, heal=True, progress=False,
              **SUSTAINED)  # fmt: skip
    err = capsys.readouterr().err
    assert "rlx heal: checkpoint_every_steps=5, checkpoints_kept=0" in err
    assert ("rlx heal: kl-too-high at step 60: back to its checkpoint at step 30 with "
            "learning_rate 0.9 -> 0.27 (1 of at most 3)") in err  # fmt: skip
    # the same rule again after its fix: left to the end, then healed from the whole run
    assert ("rlx heal: kl-too-high at the end, step 100: back to its checkpoint at step 50 with "
            "learning_rate 0.27 -> 0.081 (2 of at most 3)") in err  # fmt: skip
    summary = read_summary(run_dir)
    assert summary["status"] == "completed" and summary["doctor"] == []
    heals = summary["heal"]
    assert [(h["step"], h["when"], h["rules"], h["checkpoint"], h["from_step"]) for h in heals] == [
        (60, "live", ["kl-too-high"], "step_000000000030.pt", 30),
        (100, "end", ["kl-too-high"], "step_000000000050.pt", 50),
    ]
    assert heals[0]["changes"][0] == {"field": "learning_rate", "from": 0.9, "to": 0.27,
                                      "rules": ["kl-too-high"], "note": None}  # fmt: skip
    assert heals[0]["findings"][0]["evidence"]["step_start"] == 31
    record = config(run_dir)
    assert record["heal"] == heals and record["config"]["learning_rate"] == pytest.approx(0.081)
    kinds = [(h["kind"], h.get("checkpoint"), h.get("rolled_back_at")) for h in record["history"]]
    assert kinds == [("start", None, None), ("heal", "step_000000000030.pt", 60),
                     ("heal", "step_000000000050.pt", 100)]  # fmt: skip
    assert [r["step"] for r in rows(run_dir)] == list(range(1, 101))

    capsys.readouterr()
    assert main(["doctor", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert ("healed: at step 60 (as it trained) kl-too-high: back to its checkpoint at step 30 "
            "with learning_rate 0.9 -> 0.27") in out  # fmt: skip
    assert "healed: at step 100 (at its end) kl-too-high: back to its checkpoint at step 50" in out
    page = rlx.report(run_dir).read_text()
    assert page.count('id="heal-') == 2


def test_a_blowup_mid_run_is_named_at_its_row_and_rolled_back_to_the_checkpoint_before_it(
    tmp_path, capsys
):
    """A KL of 9 from step 40 (the learning rate squared): the blow-up is named at step 40, not
    after a trend's worth of rows, the run goes back to its checkpoint at step 35 (every 5
    steps), never to scratch, with the learning rate cut by sqrt(0.02 / 9), and ends clean."""
    run_dir = tmp_path / "blowup"
    rlx.train("toy-drift", "X", run_dir=run_dir, learning_rate=3.0, heal=True, progress=False)
    err = capsys.readouterr().err
    assert "over steps 40-40); lower the learning rate: learning_rate 3.0 -> 0.141" in err
    assert ("rlx heal: policy-blowup at step 40: back to its checkpoint at step 35 with "
            "learning_rate 3.0 -> 0.141 (1 of at most 3)") in err  # fmt: skip
    summary = read_summary(run_dir)
    (heal,) = summary["heal"]
    assert (heal["step"], heal["when"], heal["checkpoint"]) == (40, "live", "step_000000000035.pt")
    assert summary["status"] == "completed" and summary["doctor"] == []
    assert [(leg["from_step"], leg["to_step"]) for leg in summary["legs"]] == [(0, 40), (35, 100)]


def test_heal_max_caps_the_rollbacks_and_stop_on_still_stops(tmp_path):
    once = tmp_path / "once"
    rlx.train("toy-drift", "X", run_dir=once, learning_rate=0.9, heal=True, heal_max=1,
              progress=False, **SUSTAINED)  # fmt: skip
    assert len(read_summary(once)["heal"]) == 1
    assert read_summary(once)["doctor"] == ["kl-too-high"]  # 0.27: still too high

    stopped = tmp_path / "stopped"
    rlx.train("toy-drift", "X", run_dir=stopped, learning_rate=0.9, heal=True,
              stop_on=["kl-too-high"], progress=False, **SUSTAINED)  # fmt: skip
    summary = read_summary(stopped)
    assert summary["status"] == "stopped" and summary["stopped_by"] == "kl-too-high"
    assert "heal" not in summary


def test_a_callback_that_stops_the_run_is_not_healed(tmp_path):
    class StopAt70:
        def on_update(self, step, metrics):
            return step < 70

    run_dir = tmp_path / "r"
    rlx.train("toy-drift", "X", run_dir=run_dir, learning_rate=3.0, heal=True, heal_max=1,
              callbacks=[StopAt70()], progress=False)  # fmt: skip
    summary = read_summary(run_dir)
    assert summary["status"] == "stopped" and len(summary["heal"]) == 1
    assert summary["steps"] == 70


def test_a_healing_run_resumed_keeps_the_stretches_it_trained_before(tmp_path):
    """Stopped by a callback after a live heal, then resumed: summary.json's legs are the
    earlier stretches and the resumed one, its rollbacks are kept, and heal_max counts them
    (the resumed run, its one rollback spent, heals no more)."""

    class StopAt70:
        def on_update(self, step, metrics):
            return step < 70

    run_dir = tmp_path / "r"
    rlx.train("toy-drift", "X", run_dir=run_dir, learning_rate=0.9, heal=True, heal_max=1,
              callbacks=[StopAt70()], progress=False, **SUSTAINED)  # fmt: skip
    before = read_summary(run_dir)["legs"]
    assert [leg["to_step"] for leg in before] == [60, 70]  # rolled back at 60, stopped at 70
    rlx.train("toy-drift", run_dir=run_dir, resume=True, heal=True, heal_max=1,
              progress=False)  # fmt: skip
    summary = read_summary(run_dir)
    assert summary["legs"][:2] == before and len(summary["legs"]) == 3
    assert summary["legs"][-1]["to_step"] == 100 and len(summary["heal"]) == 1


def test_rlx_train_heal_on_the_command_line(tmp_path, capsys):
    run_dir = tmp_path / "cli"
    code = main(["train", "toy-drift", "--env", "X", "--run-dir", str(run_dir), "--heal",
                 "--heal-max", "1", "--learning-rate", "1", "--no-progress"])  # fmt: skip
    assert code == 0
    assert [h["rules"] for h in read_summary(run_dir)["heal"]] == [["kl-too-high"]]
    assert read_summary(run_dir)["doctor"] == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--heal-max", "2"], "--heal-max caps the rollbacks of --heal; pass --heal too"),
        (["--heal", "--seeds", "0", "1"], "--heal heals one run as it trains; heal the seeds of a "
                                          "group one run each"),
        (["--heal", "--heal-max", "-1"], "heal_max=-1 is the most rollbacks a healing run makes: "
                                         "a whole number >= 0."),
    ],
)  # fmt: skip
def test_heal_mistakes_are_one_sentence_exit_2(tmp_path, capsys, argv, message):
    capsys.readouterr()
    run_dir = tmp_path / "r"
    assert main(["train", "toy-drift", "--env", "X", "--run-dir", str(run_dir), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not run_dir.exists()


def test_heal_with_seeds_in_python_is_one_sentence(tmp_path):
    with pytest.raises(ConfigError, match=r"^heal=True heals one run as it trains; heal the seeds"):
        rlx.train("toy-drift", "X", run_dir=tmp_path / "g", seeds=[0, 1], heal=True)


# ============================================================================ the demo's broken run
BROKEN = {"learning_rate": 0.1, "num_epochs": 40, "gae_lambda": 0.8, "anneal_lr": False,
          "anneal_clip": False, "eval_episodes": 0}  # fmt: skip
"""The demo's broken PPO run (examples/demo.py), on a smaller budget."""
BUDGET = 25_000


def late_return(run_dir: Path) -> float:
    """The mean return of the training episodes that ended in the second half of the budget:
    the part a heal changes, over more episodes than the final tenth (less noise)."""
    returns = [ret for step, ret, _ in read_episodes(run_dir) if step > BUDGET / 2]
    return float(np.mean(returns))


@pytest.fixture(scope="module")
def broken(tmp_path_factory, train_seed) -> Path:
    run_dir = tmp_path_factory.mktemp("demo") / "broken"
    rlx.train("ppo", "CartPole-v1", run_dir=run_dir, seed=train_seed, total_steps=BUDGET,
              progress=False, doctor=False, **BROKEN)  # fmt: skip
    assert rlx.doctor(run_dir).findings  # the doctor has something to heal
    return run_dir


def test_doctor_fix_heals_the_demos_broken_ppo_run(broken, capsys):
    capsys.readouterr()
    assert main(["doctor", str(broken), "--fix", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    child = Path(result["child"])
    assert child == broken.with_name("broken-healed")
    assert result["cleared"] and not result["new_findings"]
    assert all(f["cleared"] for f in result["findings"])
    assert rlx.doctor(child).findings == []
    ret = result["return"]
    assert ret["after"] > ret["before"] + 50, ret
    assert late_return(child) > late_return(broken) + 50
    lineage = config(child)["healed_from"]
    assert lineage["parent"] == str(broken) and lineage["changes"]


def test_train_heal_heals_the_demos_broken_ppo_run_within_one_run(broken, train_seed, capsys):
    run_dir = broken.with_name("live")
    rlx.train("ppo", "CartPole-v1", run_dir=run_dir, seed=train_seed, total_steps=BUDGET,
              heal=True, progress=False, **BROKEN)  # fmt: skip
    summary = read_summary(run_dir)
    assert summary["status"] == "completed" and summary["heal"]
    assert summary["doctor"] == [] and rlx.doctor(run_dir).findings == []
    assert late_return(run_dir) > late_return(broken) + 50
    assert [h["kind"] for h in config(run_dir)["history"]][1:] == ["heal"] * len(summary["heal"])
    capsys.readouterr()
    assert main(["doctor", str(run_dir)]) == 0
    assert capsys.readouterr().out.count("\nhealed: at step ") == len(summary["heal"])
    assert 'id="heal-' in rlx.report(run_dir).read_text()


# ============================================================================ a blow-up, early
@dataclasses.dataclass(frozen=True)
class BlowupConfig(CheckpointFields):
    """Logs a NaN loss at its first step when ``learning_rate`` is above ``blows_above``."""

    total_steps: int = 50
    """steps to count"""
    learning_rate: float = 1.0
    """the step size"""
    blows_above: float = 0.5
    """the step size past which the first step's loss is NaN"""
    sleep_s: float = 0.01
    """pause per step, so that each stretch of a healed run takes measurable time"""
    seed: int = 0
    """seed"""


def _train_blowup(config: BlowupConfig, env, run):
    step = 0 if run.resumed_state is None else int(run.resumed_state["step"])
    if run.start_checkpoint_due():
        run.save_checkpoint(step, {"step": step})
    while step < config.total_steps and not run.stop_requested:
        step += 1
        time.sleep(config.sleep_s)
        nan = step == 1 and config.learning_rate > config.blows_above
        run.log(step, {"loss": math.nan if nan else 1.0 / step, "episode_return": float(step)})
        if run.checkpoint_due():
            run.save_checkpoint(step, {"step": step})
    run.save_checkpoint(step, {"step": step})
    run.finish(step, {})
    return toy_drift.DriftAgent(step)


registry.register(registry.Algorithm(
    name="toy-blowup", config=BlowupConfig, train=_train_blowup,
    load=lambda config, env_id, state: toy_drift.DriftAgent(int(state["step"])),
    summary="logs a NaN at its first step past a learning rate (tests only)",
))  # fmt: skip


def test_heal_rolls_a_nan_at_the_first_step_back_to_the_start_checkpoint(tmp_path, capsys):
    """The NaN is named at its row (step 1), the run rolls back to the checkpoint written
    before its first update with a lower learning rate and trains its budget once, not twice;
    ``wall_s`` counts both stretches."""
    run_dir = tmp_path / "nan"
    rlx.train("toy-blowup", "X", run_dir=run_dir, heal=True, progress=False)
    err = capsys.readouterr().err
    assert ("rlx doctor: error: NaN or inf in a metric (loss: non-finite value nan vs threshold "
            "0 over steps 1-1)") in err  # fmt: skip
    assert ("rlx heal: non-finite at step 1: back to its checkpoint at step 0 with "
            "learning_rate 1.0 -> 0.3 (1 of at most 3)") in err  # fmt: skip
    summary = read_summary(run_dir)
    assert summary["status"] == "completed" and summary["steps"] == 50
    assert summary["doctor"] == [] == [f.rule.id for f in rlx.doctor(run_dir)]
    (heal,) = summary["heal"]
    assert (heal["step"], heal["when"], heal["rules"]) == (1, "live", ["non-finite"])
    assert (heal["checkpoint"], heal["from_step"]) == ("step_000000000000.pt", 0)
    assert heal["findings"][0]["evidence"]["step_start"] == 1
    legs = summary["legs"]
    assert [(leg["from_step"], leg["to_step"], leg["stopped_by"]) for leg in legs] == [
        (0, 1, "non-finite"), (0, 50, None)]  # fmt: skip
    assert legs[0]["wall_s"] >= 0.01 and legs[1]["wall_s"] >= 0.5
    assert summary["wall_s"] >= sum(leg["wall_s"] for leg in legs)
    assert [r["step"] for r in rows(run_dir)] == list(range(1, 51))  # the NaN's row is gone
    assert rows(run_dir)[0]["wall_s"] >= legs[0]["wall_s"]  # the clock went on across legs
    assert config(run_dir)["config"]["learning_rate"] == 0.3


def test_a_run_that_does_not_heal_writes_no_start_checkpoint(tmp_path):
    rlx.train("toy-blowup", "X", run_dir=tmp_path / "r", learning_rate=0.1, sleep_s=0.0,
              progress=False)  # fmt: skip
    assert [p.name for p in sorted((tmp_path / "r" / "checkpoints").glob("step_*.pt"))] == [
        "step_000000000050.pt"]  # fmt: skip
    assert "legs" not in read_summary(tmp_path / "r")


HOT_BUDGET = 10_000
"""Env steps of the reported run below: enough for the healed run to learn CartPole."""


def test_ppo_at_learning_rate_half_is_healed_from_its_first_update(tmp_path, capsys, train_seed):
    """The reported run, ``rlx train ppo --env CartPole-v1 --learning-rate 0.5 --heal`` (a KL
    far past 1 in its first update): the doctor names the blow-up at that update, heal rolls
    back to the checkpoint written before it with a smaller learning rate (again, on its
    changed config, while the blow-up comes back), and the budget is trained once, not once
    per rollback; ``wall_s`` is the whole time."""
    run_dir = tmp_path / "hot"
    code = main(["train", "ppo", "--env", "CartPole-v1", "--learning-rate", "0.5", "--heal",
                 "--total-steps", str(HOT_BUDGET), "--eval-episodes", "0", "--no-progress",
                 "--seed", str(train_seed), "--run-dir", str(run_dir)])  # fmt: skip
    assert code == 0
    err = capsys.readouterr().err
    recorded = config(run_dir)["config"]
    rollout = recorded["num_envs"] * recorded["num_steps"]
    summary = read_summary(run_dir)
    heals, legs = summary["heal"], summary["legs"]
    first = heals[0]
    assert first["when"] == "live" and first["rules"] == ["policy-blowup"]
    finding = first["findings"][0]
    # named at the first update: the stretch stopped at its first logged row, which is the
    # evidence's step, and the line printed as it came says that step
    assert legs[0]["from_step"] == 0 and 0 < legs[0]["to_step"] <= rollout
    assert finding["evidence"]["step_start"] == finding["evidence"]["step_end"] == first["step"]
    assert first["step"] == legs[0]["to_step"]
    step = first["step"]
    assert f"over steps {step}-{step}); lower the learning rate: learning_rate 0.5 -> " in err
    # rolled back to the start checkpoint, a smaller learning rate each time
    assert all(h["when"] == "live" and h["from_step"] == 0 for h in heals)
    assert all(h["checkpoint"] == "step_000000000000.pt" for h in heals)
    rates = [0.5, *(h["changes"][0]["to"] for h in heals)]
    assert all(h["changes"][0]["field"] == "learning_rate" for h in heals)
    assert rates == sorted(rates, reverse=True) and len(set(rates)) == len(rates)
    assert recorded["learning_rate"] == rates[-1]
    # no second full run: each stretch rolled back was one update; the last trained the budget
    assert len(legs) == len(heals) + 1
    assert all(leg["to_step"] - leg["from_step"] <= rollout for leg in legs[:-1])
    assert legs[-1]["from_step"] == 0 and HOT_BUDGET <= legs[-1]["to_step"] <= HOT_BUDGET + rollout
    trained = sum(leg["to_step"] - leg["from_step"] for leg in legs)
    assert trained <= HOT_BUDGET + len(legs) * rollout
    assert summary["status"] == "completed" and summary["steps"] == legs[-1]["to_step"]
    # the whole wall time, every stretch counted
    assert summary["wall_s"] >= sum(leg["wall_s"] for leg in legs)
    assert summary["doctor"] == [f.rule.id for f in rlx.doctor(run_dir)]


@pytest.mark.parametrize(
    ("algo", "config"),
    [("ppo", {"total_steps": 3000}), ("dqn", {"total_steps": 1000, "learning_starts": 200})],
)
def test_the_start_checkpoint_continues_exactly(tmp_path, algo, config):
    """A run with the checkpoint a healing run writes before its first update, continued from
    it, logs what a plain run logs: rolling back to it is starting over, at no cost."""
    from rlx.launch.plan import plan, train_planned

    def logged(run_dir: Path) -> list[dict]:
        return [{k: v for k, v in row.items() if k != "wall_s"} for row in rows(run_dir)]

    plain, started = tmp_path / "plain", tmp_path / "started"
    rlx.train(algo, "CartPole-v1", run_dir=plain, seed=1, eval_episodes=0, progress=False,
              **config)  # fmt: skip
    planned = plan(algo, "CartPole-v1", run_dir=started,
                   overrides={"seed": 1, "eval_episodes": 0, **config})  # fmt: skip
    train_planned(dataclasses.replace(planned, checkpoint_at_start=True), progress=False)
    assert (started / "checkpoints" / "step_000000000000.pt").is_file()
    rlx.train(algo, run_dir=started, resume=True, resume_from=0, progress=False)
    assert logged(started) == logged(plain)


def test_the_readme_shows_what_rlx_doctor_prints_on_the_demos_broken_run(broken, train_seed,
                                                                          capsys):  # fmt: skip
    """The README's doctor block is the demo's broken run (seed 0): its lines are what ``rlx
    doctor`` prints (the first finding depends on the first update only, which the shorter
    budget here shares), words exactly, numbers within 25% (another CPU rounds otherwise)."""
    if train_seed != 0:
        pytest.skip("the README shows seed 0's run")
    from tests.conftest import ROOT
    from tests.docs.docs_examples import ELIDED, mismatch

    readme = (ROOT / "README.md").read_text()
    block = readme.split("$ rlx doctor runs/demo-ppo-broken", 1)[1].split("```", 1)[0]
    shown = [
        line if "(...)" not in line else line.split("(...)")[0].rstrip() + " " + ELIDED
        for line in block.splitlines()[2:]  # after the command and the header naming the folder
    ]
    capsys.readouterr()
    assert main(["doctor", str(broken)]) == 0
    printed = capsys.readouterr().out.splitlines()[1:]
    assert mismatch("\n".join(shown), "\n".join(printed), rel=0.25) is None, (shown, printed)
