"""One doctor (issue 48): the live doctor reads what ``rlx doctor`` reads of the run folder (the
logged rows, and every finished episode where the rows hold too few returns), so
``summary.json``'s ``doctor`` is ``rlx.doctor(run_dir)``'s finding ids, for every family of
algorithm, a resumed run included; and a blow-up is named at the row it happens."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import rlx
from rlx import metrics as M
from rlx.diagnostics import doctor as D
from rlx.diagnostics.doctor import LiveDoctor, diagnose, is_immediate
from rlx.diagnostics.rules import RULES, RULES_BY_ID
from rlx.diagnostics.series import GrowingSeries, RunLog, Series
from rlx.diagnostics.sources import RETURN_POINTS, read_run, with_episodes
from rlx.runs import read_metrics, read_summary

TICTACTOE = {"iterations": 2, "games_per_iteration": 8, "simulations": 8, "eval_simulations": 8,
             "train_steps_per_iteration": 5, "batch_size": 32, "eval_every": 1,
             "eval_games": 4}  # fmt: skip
"""AlphaZero on tictactoe, as briefly as its tests train it."""
FLAT_Q = {"episodes": 3000, "alpha": 1e-6, "eval_episodes": 0}
"""Q-learning that learns nothing: 6 rows of 500-episode means (too few for the return's
rules), 3,000 episodes that show a flat return."""

FAMILIES = {
    "q-learning": ("q-learning", "FrozenLake-v1", FLAT_Q),
    "dqn": ("dqn", "CartPole-v1", {"total_steps": 3000, "learning_starts": 500, "log_every": 250,
                                   "eval_episodes": 0}),
    "ppo": ("ppo", "CartPole-v1", {"total_steps": 5000, "eval_episodes": 0}),
    "a2c": ("a2c", "CartPole-v1", {"total_steps": 3000, "eval_episodes": 0}),
    "sac": ("sac", "Pendulum-v1", {"total_steps": 600, "learning_starts": 200, "log_every": 50,
                                   "eval_episodes": 0}),
    "alphazero": ("alphazero", "tictactoe", TICTACTOE),
}  # fmt: skip


@pytest.fixture
def finals(monkeypatch) -> list[D.Diagnosis]:
    """Every live doctor's final diagnosis (what ``summary.json`` records), as it was made."""
    made: list[D.Diagnosis] = []
    final = LiveDoctor.final

    def recording(self: LiveDoctor) -> D.Diagnosis:
        diagnosis = final(self)
        made.append(diagnosis)
        return diagnosis

    monkeypatch.setattr(LiveDoctor, "final", recording)
    return made


def assert_one_verdict(run_dir: Path, live: D.Diagnosis) -> list[str]:
    """``summary.json``'s ``doctor`` is ``rlx.doctor``'s finding ids, and the live doctor's
    final diagnosis read the very series ``rlx doctor`` reads, and found the same."""
    after = rlx.doctor(run_dir)
    ids = [f.rule.id for f in after.findings]
    assert read_summary(run_dir)["doctor"] == ids
    assert sorted(live.log.metrics) == sorted(after.log.metrics)
    for name, series in after.log.metrics.items():
        seen = live.log.metrics[name]
        assert np.array_equal(seen.steps, series.steps), name
        assert np.array_equal(seen.values, series.values, equal_nan=True), name
    assert [f.to_dict() for f in live.findings] == [f.to_dict() for f in after.findings]
    return ids


def rows_only(run_dir: Path) -> RunLog:
    """The run as the live doctor read it before issue 48: the logged rows alone."""
    log = read_run(run_dir)
    points = read_metrics(run_dir)
    log.metrics = {k: Series.from_pairs(v) for k, v in points.items()}
    return log


# ============================================================================ every family
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_summary_doctor_equals_rlx_doctor(family, tmp_path, finals):
    algo, env, config = FAMILIES[family]
    run_dir = tmp_path / family
    rlx.train(algo, env, run_dir=run_dir, seed=0, progress=False, **config)
    assert_one_verdict(run_dir, finals[-1])


def test_a_language_model_stage_whose_config_is_completed_as_it_trains(tmp_path, finals):
    """SFT on a tiny model, its steps chosen from the data while it trains (the config the
    doctor fits its fixes to is the one ``config.json`` ends with)."""
    pytest.importorskip("transformers")
    from rlx import llm

    rows = llm.arithmetic_sft(48, seed=0)
    llm.write_jsonl(tmp_path / "sft.jsonl", rows)
    model = llm.make_tiny_lm(tmp_path / "tiny", texts=llm.task_texts(rows), hidden_size=32,
                             num_layers=2, num_heads=2, max_length=32)  # fmt: skip
    run_dir = tmp_path / "sft"
    llm.sft(model, tmp_path / "sft.jsonl", run_dir=run_dir, batch_size=16, epochs=2.0,
            eval_every=3, eval_exact_match=False, progress=False)  # fmt: skip
    recorded = json.loads((run_dir / "config.json").read_text())["config"]
    assert recorded["steps"] > 0  # chosen from the data as it trained
    assert_one_verdict(run_dir, finals[-1])
    assert finals[-1].log.config["steps"] == recorded["steps"]


# ============================================================================ the old disagreement
def test_a_return_rule_the_rows_are_too_few_for_fires_on_the_episodes_live_too(tmp_path, finals):
    """Q-learning with a step size of 1e-6 learns nothing. Its rows are 6 means of 500
    episodes each, fewer than the return's rules read (``rlx doctor`` reads the 3,000 episodes
    instead); the live doctor used to read the rows only, so ``summary.json`` said nothing
    while ``rlx doctor`` named the flat return."""
    run_dir = tmp_path / "flat"
    rlx.train("q-learning", "FrozenLake-v1", run_dir=run_dir, seed=0, progress=False, **FLAT_Q)
    assert len(read_metrics(run_dir)[M.EPISODE_RETURN]) < RETURN_POINTS  # the rows: too few
    ids = assert_one_verdict(run_dir, finals[-1])
    assert "no-learning" in ids and "no-learning" in read_summary(run_dir)["doctor"]
    assert "no-learning" not in {f.rule.id for f in diagnose(rows_only(run_dir))}  # before


def test_a_resumed_run_reads_the_episodes_before_its_checkpoint(tmp_path, finals, monkeypatch):
    """Stopped after 1,500 episodes and resumed to 3,000: the resumed run's doctor starts from
    the rows and the episodes logged before the checkpoint, and its verdict is the folder's."""
    log = rlx.runs.Run.log

    def log_then_stop(self, step, metrics):
        values = log(self, step, metrics)
        self.stop_requested = self.stop_requested or metrics.get(M.EPISODES, 0) >= 1500
        return values

    run_dir = tmp_path / "r"
    with monkeypatch.context() as patch:
        patch.setattr(rlx.runs.Run, "log", log_then_stop)
        rlx.train("q-learning", "FrozenLake-v1", run_dir=run_dir, seed=0, progress=False,
                  **FLAT_Q)  # fmt: skip
    assert read_summary(run_dir)["status"] == "interrupted"
    rlx.train("q-learning", "FrozenLake-v1", run_dir=run_dir, resume=True, progress=False)
    assert read_summary(run_dir)["status"] == "completed"
    ids = assert_one_verdict(run_dir, finals[-1])
    assert "no-learning" in ids
    assert len(finals[-1].log.metrics[M.EPISODE_RETURN]) == 3000  # both parts' episodes


# ============================================================================ blow-ups, at once
def test_a_nan_is_named_at_its_row_and_the_doctor_stops_the_run(tmp_path, capsys):
    """A run whose loss turns NaN at step 7 of a check every 10 rows: the non-finite rule is
    checked on every row, so its line names step 7 as the row comes, before the run ends."""
    assert is_immediate(RULES_BY_ID["non-finite"])
    lines: list[str] = []
    live = LiveDoctor("ppo", "CartPole-v1", {"learning_rate": 0.1}, every=10,
                      stop_on=["non-finite"], printer=lines.append)  # fmt: skip
    for step in range(1, 7):
        live.observe(step, {M.LOSS: 1.0})
    assert not lines
    live.observe(7, {M.LOSS: float("nan")})
    assert len(lines) == 1 and "NaN or inf" in lines[0] and "over steps 7-7" in lines[0]
    assert live.stop is not None and live.stop.evidence.step_start == 7
    assert live.stop.evidence.step_end == 7


def test_immediate_rules_run_on_every_row_the_others_on_their_schedule(monkeypatch):
    """An immediate rule (the rule table's ``immediate``) is checked on each row; the live
    rules that judge a trend, every ``every`` rows early on."""
    calls: dict[str, int] = {"immediate": 0, "scheduled": 0}
    kl = RULES_BY_ID["kl-too-high"]

    def counting(kind: str, check):
        def wrapped(log):
            calls[kind] += 1
            return check(log)

        return wrapped

    import dataclasses

    fast = dataclasses.replace(kl, id="kl-fast", check=counting("immediate", kl.check))
    object.__setattr__(fast, "immediate", True)
    slow = dataclasses.replace(kl, check=counting("scheduled", kl.check))
    object.__setattr__(slow, "immediate", False)
    others = [r for r in RULES if r.id != "kl-too-high"]
    monkeypatch.setattr(D, "RULES", (fast, slow, *others))
    live = LiveDoctor("ppo", "CartPole-v1", {}, every=5, printer=lambda line: None)
    for step in range(1, 21):
        live.observe(step, {M.APPROX_KL: 0.01})
    assert calls == {"immediate": 20, "scheduled": 4}


def test_growing_series_reads_as_from_pairs():
    rng = np.random.default_rng(0)
    pairs = [(float(s), float(v)) for s, v in zip(rng.integers(0, 50, 300), rng.normal(size=300),
                                                   strict=True)]  # fmt: skip
    grown = GrowingSeries()
    for step, value in pairs[:100]:
        grown.append(step, value)
    grown.extend([p[0] for p in pairs[100:]], [p[1] for p in pairs[100:]])
    expected = Series.from_pairs(pairs)  # sorted by step, ties in the order they came
    got = grown.series()
    assert np.array_equal(got.steps, expected.steps) and np.array_equal(got.values, expected.values)


def test_with_episodes_is_the_one_choice():
    """Rows with fewer returns than RETURN_POINTS give way to more episodes; never to fewer,
    and never when the rows have enough."""
    few = {M.EPISODE_RETURN: Series.from_pairs((s, 1.0) for s in range(5))}
    many = {M.EPISODE_RETURN: Series.from_pairs((s, 2.0) for s in range(40))}
    asked: list[int] = []

    def episodes(found):
        def give():
            asked.append(1)
            return found

        return give

    assert with_episodes(few, episodes(many))[M.EPISODE_RETURN] is many[M.EPISODE_RETURN]
    assert with_episodes(few, episodes({}))[M.EPISODE_RETURN] is few[M.EPISODE_RETURN]
    enough = {M.EPISODE_RETURN: Series.from_pairs((s, 1.0) for s in range(RETURN_POINTS))}
    asked.clear()
    assert with_episodes(enough, episodes(many))[M.EPISODE_RETURN] is enough[M.EPISODE_RETURN]
    assert not asked  # the episodes are not even read


def test_a_callback_with_observe_episodes_and_the_tuners_doctor_get_every_episode(tmp_path):
    """The tuner's pruner judges a trial with its own live doctor: it reads the episodes of
    ``episodes.csv`` as they are logged, as the run's doctor does."""
    from rlx.launch.tune import TrialPruner
    from rlx.runs import read_episodes

    class Episodes:
        def __init__(self) -> None:
            self.ends: list[float] = []

        def on_start(self, step, info):
            return None

        def observe_episodes(self, ends, returns, lengths):
            self.ends.extend(np.asarray(ends, dtype=float).tolist())

    seen = Episodes()
    pruner = TrialPruner(None, "ppo", "CartPole-v1", {}, on_eval=True)
    run_dir = tmp_path / "r"
    rlx.train("ppo", "CartPole-v1", run_dir=run_dir, seed=0, total_steps=2000, eval_episodes=0,
              progress=False, callbacks=[seen, pruner])  # fmt: skip
    logged = [step for step, _, _ in read_episodes(run_dir)]
    assert seen.ends == logged and len(logged) > 20
    assert len(pruner.doctor.episodes[M.EPISODE_RETURN]) == len(logged)


def test_the_live_doctor_judges_the_summary_the_run_writes():
    """Rules that read ``summary.json`` (the steps trained, the final evaluation) read the
    summary the run writes, also at the live doctor's end (``Run.finish`` hands it over): a
    flat return of about 20 on CartPole after 60,000 steps is far below the zoo's published
    DQN (500 after 50,000). The returns alone end at step 48,000, before that budget."""
    live = LiveDoctor("dqn", "CartPole-v1", {}, printer=lambda line: None)
    for i in range(1, 61):
        live.observe(i * 800, {M.EPISODE_RETURN: 20.0 + i % 3})
    assert "below-published" not in [f.rule.id for f in live.final().findings]
    live.on_summary(60_000, {"steps": 60_000, "status": "completed"})
    assert "below-published" in [f.rule.id for f in live.final().findings]
    assert "below-published" in live.summary()["doctor"]


def test_an_immediate_rule_judges_the_newest_row_alone(monkeypatch):
    """Each row's immediate check reads that row only (one point per metric), so its cost does
    not grow with the run; the blow-up is still named at its row."""
    seen: list[int] = []
    blowup = RULES_BY_ID["policy-blowup"]

    def counting(log):
        seen.append(max(len(s) for s in log.metrics.values()))
        return blowup.check(log)

    import dataclasses

    watched = dataclasses.replace(blowup, check=counting)
    others = [r for r in RULES if r.id != "policy-blowup"]
    monkeypatch.setattr(D, "RULES", (watched, *others))
    lines: list[str] = []
    live = LiveDoctor("ppo", "CartPole-v1", {}, every=10_000, printer=lines.append)
    for step in range(1, 301):
        live.observe(step, {M.APPROX_KL: 5.0 if step == 250 else 0.01, M.ENTROPY: 0.6})
    assert set(seen) == {1} and len(seen) == 250  # one point each; none after it fired
    assert live.fired["policy-blowup"].evidence.step_start == 250
    assert any("over steps 250-250" in line for line in lines)
