"""The doctor: each rule fires on a synthetic series showing its symptom and stays silent on
a healthy one; real runs with broken configs get the expected findings and healthy default
runs none; the CLI, ``--strict`` and ``--json``; the live checks and ``stop_on``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import rlx
from rlx import cli
from rlx import metrics as M
from rlx.diagnostics.doctor import LiveDoctor, diagnose
from rlx.diagnostics.rules import RULES, RULES_BY_ID
from rlx.diagnostics.series import RunLog, Series
from rlx.errors import ConfigError
from tests.toy_envs import NoisyBanditEnv

N = 60
STEPS = np.arange(1, N + 1, dtype=float) * 1000
RNG = np.random.default_rng(0)


def log_of(algo=None, env=None, config=None, **series) -> RunLog:
    metrics = {k: Series(STEPS[: len(v)], np.asarray(v, dtype=float)) for k, v in series.items()}
    return RunLog(Path("synthetic"), "rlx", metrics, algo=algo, env=env, config=config or {})


def fired(log: RunLog) -> set[str]:
    return {f.rule.id for f in diagnose(log).findings}


def noise(scale=1.0, n=N):
    return RNG.normal(0, scale, n)


LEARNING = np.linspace(20, 480, N) + noise(10)  # a return that improves
HEALTHY_PPO = {
    M.APPROX_KL: 0.015 + np.abs(noise(0.005)),
    M.CLIP_FRACTION: 0.12 + np.abs(noise(0.03)),
    M.ENTROPY: np.linspace(0.69, 0.3, N),
    M.EXPLAINED_VARIANCE: np.clip(np.linspace(0.2, 0.95, N) + noise(0.05), -1, 1),
    M.EPISODE_RETURN: LEARNING,
}

# rule id -> (symptom series, what the run was)
SYMPTOMS = {
    "kl-too-high": dict(HEALTHY_PPO, **{M.APPROX_KL: np.r_[np.full(30, 0.02), np.full(30, 0.3)]}),
    "clip-fraction-near-zero": dict(HEALTHY_PPO, **{M.CLIP_FRACTION: np.full(N, 0.001)}),
    "clip-fraction-high": dict(HEALTHY_PPO, **{M.CLIP_FRACTION: np.linspace(0.2, 0.8, N)}),
    "reward-hacking": {
        M.REWARD: np.linspace(0, 5, N) + noise(0.1),
        M.GOLD_REWARD: np.r_[np.linspace(0.2, 0.6, 30), np.linspace(0.6, 0.3, 30)],
    },
    "length-bias": {
        M.REWARD: np.linspace(0, 5, N) + noise(0.1),
        M.RESPONSE_LENGTH: np.linspace(20, 80, N) + noise(1),
    },
    "q-overestimation": {
        M.Q_START: np.linspace(1, 8, N),
        M.MC_RETURN: np.full(N, 1.0) + noise(0.1),
    },
    "dqn-diverges": {M.TD_ERROR: np.r_[np.full(30, 0.1), np.geomspace(0.1, 1e4, 30)]},
    "q-diverges": {M.Q_MEAN: np.r_[np.full(30, 1.0), np.geomspace(1, 1e5, 30)]},
    "entropy-collapse": dict(
        HEALTHY_PPO,
        **{
            M.ENTROPY: np.r_[np.full(10, 0.69), np.geomspace(0.69, 0.01, 50)],
            M.EPISODE_RETURN: np.r_[np.linspace(20, 60, 20), np.full(40, 60.0) + noise(1, 40)],
        },
    ),
    "kl-ref-drift": {M.KL_REF: np.linspace(0.1, 12, N)},
    "zero-spread-groups": {M.FRAC_ZERO_STD_GROUPS: np.full(N, 0.8)},
    "truncated-completions": {M.TRUNCATED_FRACTION: np.full(N, 0.8)},
    "critic-not-learning": dict(HEALTHY_PPO, **{M.EXPLAINED_VARIANCE: -0.1 + noise(0.02)}),
    "non-finite": dict(
        HEALTHY_PPO, **{M.APPROX_KL: np.r_[np.full(40, 0.01), [np.nan], np.full(19, 0.01)]}
    ),
    "no-learning": {M.EPISODE_RETURN: 22 + noise(5)},
    # PPO's critic explains 90% of the returns for half the run, then -50% for ten updates
    # while its error stays at its learning-phase size
    "value-breakdown": dict(
        HEALTHY_PPO,
        **{
            M.EXPLAINED_VARIANCE: np.r_[np.full(30, 0.9), np.full(10, -0.5), np.full(20, 0.9)]
            + noise(0.02),
            M.VALUE_LOSS: np.full(N, 0.5) + np.abs(noise(0.05)),
        },
    ),
    # CartPole's return climbs to 500, holds it, falls to 40 and climbs back
    "performance-collapse": {
        M.EPISODE_RETURN: np.r_[
            np.linspace(20, 500, 15), np.full(20, 500.0), np.full(10, 40.0), np.full(15, 500.0)
        ]
        + noise(5),
    },
}
HEALTHY = {
    "ppo": HEALTHY_PPO,
    "rlhf": {
        M.REWARD: np.linspace(0, 2, N) + noise(0.1),
        M.GOLD_REWARD: np.linspace(0.2, 0.7, N) + noise(0.01),
        M.RESPONSE_LENGTH: 20 + noise(1),
        M.REWARD_LENGTH_CORR: noise(0.2),
        M.KL_REF: np.linspace(0, 3, N),
    },
    "dqn": {
        M.Q_START: np.linspace(0, 9, N) + noise(0.2),
        M.MC_RETURN: np.linspace(0, 9.5, N) + noise(0.5),
        M.TD_ERROR: np.linspace(0.1, 0.8, N) + np.abs(noise(0.05)),
        M.Q_MEAN: np.linspace(0, 10, N),
        M.EPISODE_RETURN: LEARNING,
    },
    "grpo": {M.FRAC_ZERO_STD_GROUPS: np.full(N, 0.2), M.KL_REF: np.full(N, 0.5)},
    "solved, deterministic at the end": dict(
        HEALTHY_PPO,
        **{
            M.ENTROPY: np.geomspace(0.69, 0.02, N),
            M.EPISODE_RETURN: np.r_[np.linspace(20, 500, 30), np.full(30, 500.0)],
            M.EXPLAINED_VARIANCE: np.r_[np.full(40, 0.9), np.full(20, 0.0)],
        },
    ),
    # solved: the returns stop varying, the explained variance swings far below 0 while the
    # critic's error shrinks to almost nothing; the return dips once, by a few percent
    "solved, explained variance swinging below 0": dict(
        HEALTHY_PPO,
        **{
            M.EXPLAINED_VARIANCE: np.r_[np.full(30, 0.9), -3 + noise(1, 30)],
            M.VALUE_LOSS: np.r_[np.full(30, 0.3), np.full(30, 1e-6)] * (1 + np.abs(noise(0.2))),
            M.EPISODE_RETURN: np.r_[np.linspace(20, 500, 25), np.full(35, 500.0)]
            - np.r_[np.zeros(40), np.full(5, 30.0), np.zeros(15)],
        },
    ),
}

# rules added with issue 48 (tests/diagnostics/test_rules_converge.py tests each further)
SYMPTOMS.update(
    {
        # PPO at learning rate 0.5: a KL of 95 in the first update, then a frozen policy
        "policy-blowup": dict(HEALTHY_PPO, **{M.APPROX_KL: np.r_[95.0, np.full(N - 1, 1e-4)]}),
        # DPO: the chosen answers' log-ratio to the reference falls to -3 nats (beta 0.1) while
        # the pairs are separated
        "likelihood-displacement": {
            M.CHOSEN_REWARD: np.linspace(0, -0.3, N) + noise(0.01),
            M.PAIR_ACCURACY: np.clip(np.linspace(0.6, 0.98, N) + noise(0.01), 0, 1),
        },
        # CartPole held at 150 for 60,000 steps, where a published DQN reached 500 in 50,000
        "below-published": {M.EPISODE_RETURN: 150 + noise(10)},
        # a language model acting over episodes: nearly every episode cut by its budget, and
        # nearly every tool call failing
        "episodes-never-end": {M.EPISODE_TRUNCATED_FRACTION: np.full(N, 0.97)},
        "tool-calls-fail": {M.TOOL_ERROR_RATE: np.clip(0.9 + noise(0.02), 0, 1)},
    }
)


def test_every_rule_has_a_symptom_case():
    assert set(SYMPTOMS) == set(RULES_BY_ID)


@pytest.mark.parametrize("rule_id", sorted(SYMPTOMS))
def test_rule_fires_on_its_symptom(rule_id):
    algo = "rlhf-ppo" if rule_id == "kl-ref-drift" else None
    log = log_of(algo=algo, env="CartPole-v1", **SYMPTOMS[rule_id])
    assert rule_id in fired(log)


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_rules_stay_silent_on_healthy_series(name):
    assert fired(log_of(env="CartPole-v1", **HEALTHY[name])) == set()


def test_reward_hacking_needs_a_drop_beyond_the_noise_of_the_gold_reward():
    """One lucky evaluation (1 of 16 prompts right, then none) is no finding; exact match
    sliding from 0.55 to 0.05 under sampling noise of 16 prompts is."""
    rng = np.random.default_rng(3)
    climbing = np.linspace(0, 3, 12)
    lucky = np.r_[0.0, 0.0, 0.0625, np.zeros(9)]
    assert "reward-hacking" not in fired(log_of(reward=climbing, gold_reward=lucky))
    sliding = rng.binomial(16, np.linspace(0.55, 0.05, 12)) / 16
    assert "reward-hacking" in fired(log_of(reward=climbing, gold_reward=sliding))


def test_kl_too_high_also_reads_the_first_half_of_the_run():
    """A KL far past 0.1 through the first half, then 0 once the policy froze: the early
    level is the finding (the last half's median alone would miss it)."""
    kl = np.r_[np.full(30, 0.5) + np.abs(noise(0.05, 30)), np.zeros(30)]
    finding = next(
        f
        for f in diagnose(log_of("ppo", **dict(HEALTHY_PPO, **{M.APPROX_KL: kl}))).findings
        if f.rule.id == "kl-too-high"
    )
    assert finding.evidence.statistic == "median of the first 50% (above)"


def test_reward_hacking_also_reads_the_held_out_exact_match():
    """Against a learned reward model the sampled answers can keep their gold reward while the
    greedy answers on held-out prompts get worse (measured on arithmetic: gold 0.16 -> 0.23,
    exact match 55% -> 47%): the drop of ``exact_match``, logged at each evaluation, is the
    evidence then."""
    reward = np.linspace(-2, -1, N) + noise(0.05)
    gold = 0.2 + noise(0.01)
    evals = {M.EXACT_MATCH: Series(STEPS[5::6], np.linspace(0.55, 0.45, 10) + noise(0.005, 10))}
    log = log_of("rlhf-ppo", **{M.REWARD: reward, M.GOLD_REWARD: gold})
    assert "reward-hacking" not in fired(log)
    log.metrics.update(evals)
    finding = next(f for f in diagnose(log).findings if f.rule.id == "reward-hacking")
    assert finding.evidence.metric == M.EXACT_MATCH
    rising = {M.EXACT_MATCH: Series(STEPS[5::6], np.linspace(0.55, 0.65, 10))}
    log.metrics.update(rising)
    assert "reward-hacking" not in fired(log)


def test_length_bias_reads_the_reward_models_own_pay_for_length():
    """Measured on RLHF-PPO runs of 30 steps: against a length-biased reward model the
    responses grow about +30% and the score correlates with length within a step (median
    0.57); against a reward model of the sums (median -0.32) or the exact-match verifier (0.0)
    it does not. The trend rule alone needs +50% and a Spearman of 0.8."""
    rng = np.random.default_rng(4)
    grows = np.r_[3.7, 3.8, 4.1, 4.5, 4.8, 5.1, np.full(24, 5.0)] + rng.normal(0, 0.2, 30)
    reward = np.r_[np.linspace(-1.0, 1.6, 6), np.full(24, 2.0)] + rng.normal(0, 0.2, 30)
    paid = 0.55 + rng.normal(0, 0.2, 30)
    assert "length-bias" in fired(log_of(response_length=grows, reward=reward,
                                         reward_length_corr=paid))  # fmt: skip
    assert "length-bias" not in fired(log_of(response_length=grows, reward=reward))
    unpaid = rng.normal(0, 0.2, 30)
    assert "length-bias" not in fired(log_of(response_length=grows, reward=reward,
                                             reward_length_corr=unpaid))  # fmt: skip
    flat = 3.6 + rng.normal(0, 0.15, 30)
    assert "length-bias" not in fired(log_of(response_length=flat, reward=reward,
                                             reward_length_corr=paid))  # fmt: skip


def test_too_few_points_say_nothing():
    log = log_of(**{M.APPROX_KL: [0.5, 0.5, 0.5], M.CLIP_FRACTION: [0.9, 0.9]})
    assert fired(log) == set()


def test_a_finding_cites_evidence_and_a_concrete_change():
    log = log_of(algo="ppo", config={"learning_rate": 0.001, "num_epochs": 10},
                 **SYMPTOMS["kl-too-high"])  # fmt: skip
    (finding,) = diagnose(log)  # a Diagnosis iterates over its findings
    assert finding.evidence.metric == M.APPROX_KL
    assert finding.evidence.threshold == 0.1 and finding.evidence.value == pytest.approx(0.3)
    assert finding.evidence.step_start == 31000 and finding.evidence.step_end == 60000
    assert (finding.current, finding.suggested) == (0.001, 0.0003)
    assert "learning_rate 0.001 -> 0.0003" in finding.line()


def test_every_rule_is_data_with_a_fix():
    for rule in RULES:
        assert rule.symptom and rule.cause and rule.fix and rule.severity in ("error", "warning")


# ---------------------------------------------------------------------------- real runs
def train(tmp_path, name, algo, env, *, seed, **config):
    run_dir = tmp_path / name
    rlx.train(algo, env, run_dir=run_dir, progress=False, seed=seed, **config)
    return rlx.doctor(run_dir)


def test_ppo_with_a_very_high_learning_rate_and_many_epochs(tmp_path, capsys, train_seed):
    """Learning rate 0.1 and 40 epochs: the KL explodes in the first updates (the live doctor
    says so as it happens), then the policy freezes near-deterministic while poor, where the
    KL and the clip fraction fall to about 0 (every ratio is 1 when pi(a|s) is 1). The final
    diagnosis must still name the KL (its median over the first half is 0.25) with a lower
    learning rate as the fix, and must not advise raising it."""
    # the demo's broken run (examples/demo.py), every setting it depends on spelled out: the
    # clip too, since the preset's became 0.1 (with it, seed 1's policy froze before its KL
    # had been past 0.1 for long enough to be named live)
    diagnosis = train(tmp_path, "hot", "ppo", "CartPole-v1", seed=train_seed, learning_rate=0.1,
                      num_epochs=40, gae_lambda=0.8, clip_eps=0.2, anneal_lr=False,
                      anneal_clip=False, total_steps=30_000, eval_episodes=0)  # fmt: skip
    assert "Mean KL past 0.1" in capsys.readouterr().err
    ids = {f.rule.id for f in diagnosis.findings}
    assert "kl-too-high" in ids and "clip-fraction-near-zero" not in ids, ids
    for finding in diagnosis.findings:
        if finding.field == "learning_rate":
            assert finding.suggested < 0.1


def test_a_near_deterministic_policy_is_no_timid_update():
    """A clip fraction of 0 with the entropy all but gone: the ratio is 1 because pi(a|s) is,
    so 'raise the learning rate' would be wrong; the collapse is named instead when the return
    is still short of the solved level, even while it creeps up."""
    collapsing = np.r_[np.linspace(0.69, 1e-5, 10), np.full(N - 10, 1e-5)]
    creeping = np.linspace(20, 150, N) + noise(5)
    frozen = dict(HEALTHY_PPO, **{M.CLIP_FRACTION: np.full(N, 0.001), M.ENTROPY: collapsing,
                                  M.EPISODE_RETURN: creeping})  # fmt: skip
    ids = fired(log_of("ppo", "CartPole-v1", **frozen))
    assert "clip-fraction-near-zero" not in ids and "entropy-collapse" in ids
    # the same collapse on a task that gets solved is no finding
    solved = dict(
        frozen, **{M.EPISODE_RETURN: np.r_[np.linspace(20, 500, 20), np.full(N - 20, 500)]}
    )
    assert "entropy-collapse" not in fired(log_of("ppo", "CartPole-v1", **solved))


def test_ppo_with_a_tiny_learning_rate(tmp_path, train_seed):
    diagnosis = train(tmp_path, "cold", "ppo", "CartPole-v1", seed=train_seed, learning_rate=1e-7,
                      total_steps=20_000, eval_episodes=0)  # fmt: skip
    assert "clip-fraction-near-zero" in {f.rule.id for f in diagnosis.findings}


def test_ppo_without_entropy_bonus_on_mountain_car_is_named_as_failing(tmp_path, train_seed):
    """Without an entropy bonus PPO does not find the flag within 30,000 steps (150 episodes):
    the return stays at -200. (The test ran 60,000 steps and claimed the flag is never
    reached; seed 1 reaches it at step 41,512, and then the doctor rightly stays quiet. In
    30,000 steps seeds 0-4 never do.) Four envs of 256 steps keep PPO's 1,024 samples per
    update and end an episode in every rollout, so each of the 29 updates logs a return (the
    doctor reads at least 20). Whether the policy's entropy also collapses depends on the
    trajectory, so the doctor must name the failure either way: the collapse, with the entropy
    bonus as the fix, or a return that never moved."""
    # rlx's defaults besides these (the zoo's MountainCar-v0 preset, which normalises and
    # learns the task, is what a plain `rlx train ppo --env MountainCar-v0` gets)
    diagnosis = train(tmp_path, "ent0", "ppo", "MountainCar-v0", seed=train_seed, ent_coef=0.0,
                      learning_rate=3e-3, num_envs=4, num_steps=256, total_steps=30_000,
                      gae_lambda=0.95, num_epochs=10, normalize_obs=None,
                      normalize_rewards=False, eval_episodes=0)  # fmt: skip
    ids = {f.rule.id for f in diagnosis.findings}
    assert ids & {"entropy-collapse", "no-learning"}, ids
    for finding in diagnosis.findings:
        if finding.rule.id == "entropy-collapse":
            assert (finding.current, finding.suggested) == (0.0, 0.01)


def test_vanilla_dqn_on_noisy_rewards_overestimates_and_double_dqn_does_not(tmp_path, train_seed):
    """Every action of 64 pays N(-0.05, 1), so Q* < 0, while the max over noisy estimates climbs
    above the returns observed. The rule asks for a gap that is not closing, so the run stops
    while Q still climbs (2,400 steps: 8,000 reach the point where Q comes back down towards
    the returns, which is a critic still learning, not a finding)."""
    config = dict(total_steps=2400, num_envs=4, learning_starts=500, learning_rate=3e-3,
                  train_freq=2, sync_every=200, exploration_fraction=0.2, batch_size=32,
                  eval_episodes=0, log_every=60)  # fmt: skip
    found = {}
    for double in (False, True):
        run_dir = tmp_path / f"double-{double}"
        rlx.train("dqn", NoisyBanditEnv(n_actions=64), run_dir=run_dir, seed=train_seed,
                  double=double,
                  progress=False, **config)  # fmt: skip
        findings = rlx.doctor(run_dir).findings
        found[double] = next((f for f in findings if f.rule.id == "q-overestimation"), None)
    vanilla, double = found[False], found[True]
    assert vanilla is not None and (vanilla.current, vanilla.suggested) == (False, True)
    assert "double False -> True" in vanilla.line()
    # on every-action-pays-noise rewards Double DQN still overestimates, less; with no switch
    # left to flip, the fix names the next field this run has: a smaller step
    smaller_step = ("learning_rate", 9e-4)
    assert double is None or (double.evidence.value < vanilla.evidence.value
                              and (double.field, double.suggested) == smaller_step)  # fmt: skip


def test_healthy_default_ppo_run_has_no_findings(tmp_path, train_seed):
    diagnosis = train(tmp_path, "ok", "ppo", "CartPole-v1", seed=train_seed, total_steps=40_000)
    assert diagnosis.findings == []


def test_healthy_q_learning_run_has_no_findings(tmp_path, train_seed):
    diagnosis = train(tmp_path, "ql", "q-learning", "FrozenLake-v1", seed=train_seed,
                      episodes=3000)  # fmt: skip
    assert diagnosis.findings == []


# ---------------------------------------------------------------------------- CLI and live
def write_run(folder: Path, rows: list[dict], algo="ppo") -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(
        {"algo": algo, "env": "CartPole-v1", "config": {"learning_rate": 0.001}}))  # fmt: skip
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_cli_doctor_json_and_strict(tmp_path, capsys):
    kl = [{"step": i, M.APPROX_KL: 0.3 if i > 10 else 0.01} for i in range(1, 21)]
    run = write_run(tmp_path / "kl", kl)
    assert cli.main(["doctor", str(run), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert [f["rule"] for f in payload["findings"]] == ["kl-too-high"]
    assert cli.main(["doctor", str(run), "--strict"]) == 0  # a warning, not an error
    out = capsys.readouterr().out
    assert "Mean KL past 0.1" in out and "learning_rate 0.001 -> 0.0003" in out
    nan = write_run(tmp_path / "nan", [{"step": i, M.LOSS: float("nan") if i == 7 else 1.0}
                                       for i in range(1, 21)])  # fmt: skip
    assert cli.main(["doctor", str(nan), "--strict"]) == 1
    assert "NaN or inf" in capsys.readouterr().out
    assert cli.main(["doctor", str(tmp_path / "missing")]) == 2


def test_live_doctor_prints_a_finding_once(tmp_path):
    lines = []
    live = LiveDoctor("ppo", "CartPole-v1", {"learning_rate": 0.01}, every=5, printer=lines.append)
    for step in range(1, 61):
        live.observe(step, {M.APPROX_KL: 0.3, M.CLIP_FRACTION: 0.2})
    assert len(lines) == 1 and "Mean KL past 0.1" in lines[0]
    assert live.stop is None


def test_stop_on_ends_the_run_with_a_checkpoint(tmp_path, train_seed):
    run_dir = tmp_path / "stopped"
    rlx.train("ppo", "CartPole-v1", run_dir=run_dir, progress=False, seed=train_seed,
              learning_rate=0.03, num_epochs=40, anneal_lr=False, anneal_clip=False,
              total_steps=100_000, eval_episodes=0, stop_on=["kl-too-high"])  # fmt: skip
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stopped_by"] == "kl-too-high" and summary["status"] == "stopped"
    assert summary["steps"] < 100_000
    assert (run_dir / "checkpoints" / "latest").exists()
    with pytest.raises(ConfigError, match="unknown rule"):
        rlx.train("ppo", "CartPole-v1", run_dir=tmp_path / "x", stop_on=["kl-too-hgh"])


def test_cli_exits_3_when_a_stop_on_rule_ends_the_run(tmp_path, train_seed):
    """A doctor stop is told apart from Ctrl-C (130) and from a completed run (0).

    The run is the demo's broken one, every setting the KL depends on spelled out (the
    CartPole preset's clip of 0.1 and its annealing kept the KL of a learning rate of 0.03
    under 0.1, so the run completed): learning rate 0.1, 40 epochs, clip 0.2, nothing
    annealed, whose KL is past 0.1 from its first updates."""
    from rlx.cli import main

    code = main(["train", "ppo", "--env", "CartPole-v1", "--run-dir", str(tmp_path / "s"),
                 "--learning-rate", "0.1", "--num-epochs", "40", "--gae-lambda", "0.8",
                 "--clip-eps", "0.2", "--no-anneal-lr", "--no-anneal-clip",
                 "--total-steps", "30000", "--eval-episodes", "0", "--no-progress",
                 "--stop-on", "kl-too-high", "--seed", str(train_seed)])  # fmt: skip
    assert code == 3
    summary = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert summary["status"] == "stopped" and summary["stopped_by"] == "kl-too-high"
    assert summary["steps"] < 30_000


def test_a_resumed_run_is_judged_whole(tmp_path, monkeypatch):
    """The final findings of a run stopped and resumed are those of the whole run.

    The run is built so that only the whole series holds the finding: a toy algorithm logs
    ``approx_kl`` 0.3 (past the rule's 0.1) at steps 21-32 and 0.01 elsewhere, 40 steps in all,
    stopped at step 30 and resumed. Over the whole run the median of the last half (steps
    21-40, 12 of 20 high) is past 0.1; the resumed part alone (steps 31-40, 2 high) is not,
    in either half. So ``kl-too-high`` in the summary, with evidence from both parts, shows
    the resumed run's doctor read the rows logged before the checkpoint. (It used to train PPO
    with a huge step size and expect KL or entropy findings: one float trajectory, which on
    another CPU's kernels ended in ``no-learning`` instead.)
    """
    from tests.runs import toy_algorithm  # noqa: F401  (registers "toy-counter")

    kl = tuple(0.3 if 21 <= step <= 32 else 0.01 for step in range(1, 41))
    log = rlx.runs.Run.log

    def log_then_stop(self, step, metrics):
        values = log(self, step, metrics)
        self.stop_requested = self.stop_requested or step >= 30
        return values

    run_dir = tmp_path / "r"
    with monkeypatch.context() as patch:
        patch.setattr(rlx.runs.Run, "log", log_then_stop)
        rlx.train("toy-counter", "Toy-v0", run_dir=run_dir, total_steps=40, approx_kl=kl,
                  progress=False)  # fmt: skip
    assert json.loads((run_dir / "summary.json").read_text())["steps"] == 30
    rlx.train("toy-counter", "Toy-v0", run_dir=run_dir, resume=True, progress=False)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 40
    findings = rlx.doctor(run_dir).findings
    assert summary["doctor"] == [f.rule.id for f in findings]
    assert "kl-too-high" in summary["doctor"]
    evidence = next(f.evidence for f in findings if f.rule.id == "kl-too-high")
    assert evidence.step_start <= 30 < evidence.step_end  # rows of both parts
    # the construction: the resumed part on its own holds no such finding
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == list(range(1, 41))
    assert "kl-too-high" not in fired(log_of(approx_kl=[r[M.APPROX_KL] for r in rows[30:]]))


def test_cli_report_and_recommend(tmp_path, capsys):
    kl = [{"step": i, M.APPROX_KL: 0.3 if i > 10 else 0.01} for i in range(1, 21)]
    run = write_run(tmp_path / "kl", kl)
    assert cli.main(["report", str(run)]) == 0
    page = (run / "report.html").read_text()
    assert 'data-rule="kl-too-high"' in page
    assert cli.main(["recommend", "CartPole-v1"]) == 0
    out = capsys.readouterr().out
    assert "dqn" in out and "rlx train ppo --env CartPole-v1" in out  # measured: ppo sooner
    assert cli.main(["recommend", "FrozenLake-v1", "--no-model", "--safety-critical"]) == 0
    assert "sarsa" in capsys.readouterr().out
    assert cli.main(["recommend", "NoSuchEnv-v9"]) == 2


@pytest.mark.parametrize("rule", ["reward-hacking", "kl-ref-drift"])
def test_beta_advice_doubles_beta_and_starts_a_zero_beta_at_the_usual_low_end(rule):
    change = RULES_BY_ID[rule].change_for
    assert change({"beta": 0.05}) == ("beta", 0.05, 0.1)
    assert change({"beta": 0.0}) == ("beta", 0.0, 0.01)  # doubling zero would advise no change
    assert change({}) == (None, None, None)


def test_critic_rule_leaves_rlhf_alone_where_saturated_rewards_make_ev_meaningless():
    """At a saturated reward the returns of an RLHF batch barely vary and EV swings to -500
    on a healthy run; the rule judges PPO and A2C on control tasks only."""
    swings = np.r_[np.full(8, 0.1), np.full(32, -300.0)]
    assert "critic-not-learning" not in fired(log_of(algo="rlhf-ppo", explained_variance=swings))
    assert "critic-not-learning" in fired(log_of(algo="ppo", explained_variance=swings))


# --- fixes name fields the run's own config has -------------------------------------------------


def test_overestimation_falls_back_to_q_mean_where_q_start_is_not_logged():
    """Another library logs Q of the actions taken, not Q(s_0, a_0): the rule still reads it."""
    observed = np.full(N, 10.0) + noise(0.5)
    log = log_of(algo="dqn", q_mean=np.full(N, 30.0), mc_return=observed)
    assert "q-overestimation" in fired(log)
    assert "q-overestimation" not in fired(log_of(algo="dqn", q_mean=observed, mc_return=observed))


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"double": False, "learning_rate": 1e-3}, ("double", False, True)),
        ({"double": True, "learning_rate": 1e-3}, ("learning_rate", 1e-3, 3e-4)),
        ({"critic_learning_rate": 1e-3, "tau": 0.005}, ("critic_learning_rate", 1e-3, 3e-4)),
    ],
)
def test_a_fix_names_the_first_field_the_run_can_change(config, expected):
    assert RULES_BY_ID["q-overestimation"].change_for(config) == expected
