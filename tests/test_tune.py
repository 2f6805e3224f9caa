"""``rlx tune``: Optuna studies with the doctor as a second pruner (issue 42).

The claims, each on a budget of seconds: on CartPole the study's best beats the defaults on
the same budget and seed; a trial with ``learning_rate=1`` is pruned by the doctor, which
names its finding; a study resumes after Ctrl-C (and after a kill) with no trial repeated;
two worker processes share one study; ``best.yaml`` trains again with ``rlx train --config``;
every space gives configs its algorithm takes; bad input is one sentence.
"""

from __future__ import annotations

import json
import signal
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
                        seed=train_seed)  # fmt: skip
    study.enqueue_trial({"learning_rate": 1.0})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = rlx.tune(study_dir=study_dir)
    return result


# ---------------------------------------------------------------------------- the claims
def test_the_studys_best_beats_the_defaults_on_cartpole(tmp_path, train_seed):
    """16 trials of 3,000 steps against what `rlx train ppo --env CartPole-v1` runs (the
    defaults and the env's preset) on the same budget and seed; held on seeds 0-2."""
    budget, episodes = 3_000, 10
    result = rlx.tune(
        "ppo", "CartPole-v1", study_dir=tmp_path / "study", trials=16, total_steps=budget,
        seed=train_seed, evaluations=2, eval_episodes=episodes,
    )  # fmt: skip
    rlx.train("ppo", "CartPole-v1", run_dir=tmp_path / "defaults", total_steps=budget,
              seed=train_seed, eval_episodes=episodes, progress=False)  # fmt: skip
    defaults = json.loads((tmp_path / "defaults" / "summary.json").read_text())
    assert result.best is not None and result.count("complete") + result.count("pruned") == 16
    assert result.best.value >= defaults["eval_return_mean"] + 25, (result.best, defaults)
    assert (tmp_path / "study" / "best.yaml").is_file()


def test_a_trial_with_learning_rate_1_is_pruned_by_the_doctor(diverging_study):
    trial = diverging_study.trials[0]
    assert trial.config["learning_rate"] == 1.0
    assert trial.state == "pruned" and trial.pruned_by == "doctor"
    assert trial.finding["rule"] in rlx.tune.FATAL_RULES
    assert trial.finding["symptom"] and trial.finding["evidence"]["metric"]
    summary = json.loads((trial.run_dir / "summary.json").read_text())
    assert summary["status"] == "stopped" and summary["steps"] < 10_000  # stopped early
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
    assert summary["eval_return_mean"] == pytest.approx(best.value)
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
               "--trials", "3", "--total-steps", "3000", "--evaluations", "1"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    running = study_dir / "trial-0001" / "metrics.jsonl"
    deadline = time.monotonic() + 120
    while not running.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in err
    stopped = rlx.tune.read_study(study_dir)
    assert [t.state for t in stopped.trials][1] == "failed"
    assert json.loads((study_dir / "trial-0001" / "summary.json").read_text())["status"] == (
        "interrupted"
    )
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
               "--trials", "1", "--total-steps", "3000", "--evaluations", "1"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    running = study_dir / "trial-0000" / "metrics.jsonl"
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
                      evaluations=1, eval_episodes=2, jobs=2)  # fmt: skip
    assert result.count("complete") + result.count("pruned") == 4
    assert [t.number for t in result.trials] == [0, 1, 2, 3]
    folders = sorted(p.name for p in study_dir.glob("trial-*"))
    assert folders == ["trial-0000", "trial-0001", "trial-0002", "trial-0003"]
    assert all((study_dir / f / "summary.json").is_file() for f in folders)
    study = rlx.tune.create_study(study_dir)
    workers = {t.user_attrs["worker"]["pid"] for t in study.trials}
    assert len(workers) == 2  # both processes ran trials, into one storage
    assert len(list(study_dir.glob("*.journal"))) == 1


def test_a_tabular_study_prunes_on_the_training_return(tmp_path):
    result = rlx.tune("q-learning", "FrozenLake-v1", study_dir=tmp_path / "study", trials=3,
                      episodes=1_000, eval_episodes=20,
                      env_kwargs={"is_slippery": False})  # fmt: skip
    assert result.count("complete") + result.count("pruned") == 3
    assert all(t.intermediate for t in result.trials)  # the training return, row by row
    assert result.best is not None and 0.0 <= result.best.value <= 1.0
    assert "alpha" in result.best.config and result.best.config["episodes"] == 1_000


# ---------------------------------------------------------------------------- the spaces
ENVS = {"sac": "Pendulum-v1", "td3": "Pendulum-v1", "ppo": "CartPole-v1", "a2c": "CartPole-v1",
        "dqn": "CartPole-v1"}  # fmt: skip


@pytest.mark.parametrize("algo", sorted(rlx.tune.SPACES))
@pytest.mark.parametrize("budget", [5_000, 1_000_000])
def test_every_space_gives_configs_its_algorithm_takes(algo, budget):
    from rlx import registry
    from rlx.tune import StudySettings, Suggest, _base_config, base_budget, space_for

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
        suggest = Suggest(trial, base.__dict__, (), base_budget(base))
        space_for(algo).sample(suggest)
        assert suggest.fields and set(suggest.fields) <= fields
        config, _ = registry.make_config(spec, env, {**settings.fixed, **suggest.fields})
        assert config is not None
        study.tell(trial, 0.0)


def test_a_field_given_is_fixed_for_every_trial_and_left_out_of_the_search():
    from rlx import registry
    from rlx.tune import StudySettings, Suggest, _base_config, base_budget, space_for

    settings = StudySettings("ppo", "CartPole-v1", trials=1, total_steps=10_000,
                             fixed={"learning_rate": 1e-3, "hidden_sizes": (32,)})  # fmt: skip
    base = _base_config(registry.get("ppo"), settings)
    trial = optuna.create_study().ask()
    suggest = Suggest(trial, base.__dict__, settings.fixed, base_budget(base))
    space_for("ppo").sample(suggest)
    assert "learning_rate" not in trial.params and "net_arch" not in trial.params
    assert "learning_rate" not in suggest.fields and "hidden_sizes" not in suggest.fields


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
        "assert 'optuna' not in sys.modules and 'rlx.tune' not in sys.modules\n"
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
