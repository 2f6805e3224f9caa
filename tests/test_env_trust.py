"""A run folder is data: a folder from a paper, a model hub or a colleague is attacked here as its
author could attack it, by rewriting its ``config.json`` to name code (``os:system`` with a
command, a Gymnasium spec whose entry point or wrapper is not Gymnasium's, an id ``module:Env``
whose module runs on import, a run from before recipes were recorded). Each hostile code would
write a marker file; none may be written by ``rlx.load``, ``rlx.evaluate``, a resume
(``rlx.train(..., resume=True)``), ``rlx doctor``, ``rlx report``, ``rlx eval`` or
``rlx train --resume``. The refusal is one sentence naming what the folder would import and how
to allow it (``trust_env_code=True`` in Python, ``--trust-env-code`` on the command line).

Beside each attack the honest case: the same hostile folder runs its code once the user consents
(so the attack is real and consent is the only gate), an honest entry point rebuilds with
consent or when the env is named again, and a registered id needs no consent at all."""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import gymnasium as gym
import pytest

import rlx
from rlx.cli import main
from rlx.core.env_recipe import EnvRecipe, recipe_of
from rlx.core.envs import make_env
from rlx.errors import CheckpointError, EnvError
from tests.conftest import RLX, ROOT
from tests.toy_envs import ChainEnv

HONEST = "tests.test_env_trust:make_chain"
HONEST_KWARGS = {"n": 4, "limit": 7}
QUICK = {"total_steps": 300, "learning_starts": 100, "log_every": 100, "eval_episodes": 0,
         "progress": False}  # fmt: skip
RESUME = ["--total-steps", "400", "--no-progress"]


def make_chain(n: int = 8, limit: int = 20) -> gym.Env:
    """An honest factory of the user's package."""
    return gym.wrappers.TimeLimit(ChainEnv(n), limit)


def plant(env: gym.Env, path: str) -> gym.Env:
    """A hostile "wrapper": writes the marker when called, hands the env back untouched."""
    Path(path).write_text("ran")
    return env


@pytest.fixture(scope="module")
def honest_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("honest") / "run"
    rlx.train("dqn", HONEST, env_kwargs=HONEST_KWARGS, run_dir=run, seed=0, **QUICK)
    return run


@pytest.fixture(scope="module")
def id_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("id") / "run"
    rlx.train("dqn", "CartPole-v1", run_dir=run, seed=0, **QUICK)
    return run


def copy_run(base: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(base, run, symlinks=True)
    return run


def rewrite(run: Path, **fields) -> None:
    """Edit ``config.json`` as a folder's author could; a field set to None is removed."""
    path = run / "config.json"
    record = json.loads(path.read_text())
    for key, value in fields.items():
        if value is None:
            record.pop(key, None)
        else:
            record[key] = value
    path.write_text(json.dumps(record))


def cartpole_spec(**changes) -> dict:
    return {**json.loads(gym.spec("CartPole-v1").to_json()), **changes}


def evil_module(tmp_path: Path, marker: Path, monkeypatch) -> str:
    """A module on sys.path that writes the marker when imported (an attacker who can place a
    file where Python looks, e.g. beside a script); a fresh name for each test."""
    name = f"rlx_evil_{uuid.uuid4().hex}"
    (tmp_path / f"{name}.py").write_text(f"open({str(marker)!r}, 'w').write('imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


HOSTILE = ("entry point", "spec entry point", "spec wrapper", "id module", "legacy id module")


def hostile_folder(case: str, base: Path, tmp_path: Path, monkeypatch) -> tuple[Path, Path, str]:
    """A copy of an honest run whose config.json names hostile code: the folder, the marker the
    code writes when it runs, and the text the refusal must name."""
    run, marker = copy_run(base, tmp_path), tmp_path / "MARKER"
    command = {"command": f"touch {marker}"}
    if case == "entry point":
        recipe = {"kind": "entry_point", "target": "os:system", "kwargs": command, "reason": ""}
        rewrite(run, env_recipe=recipe)
        return run, marker, f"'os:system' with {command!r}"
    if case == "spec entry point":
        spec = cartpole_spec(entry_point="os:system", kwargs=command)
        rewrite(run, env_recipe={"kind": "gymnasium_spec", "target": json.dumps(spec)})
        return run, marker, "'os:system'"
    if case == "spec wrapper":
        wrapper = {"name": "Plant", "entry_point": "tests.test_env_trust:plant",
                   "kwargs": {"path": str(marker)}}  # fmt: skip
        spec = cartpole_spec(additional_wrappers=[wrapper])
        rewrite(run, env_recipe={"kind": "gymnasium_spec", "target": json.dumps(spec)})
        return run, marker, "'tests.test_env_trust:plant'"
    module = evil_module(tmp_path, marker, monkeypatch)
    if case == "id module":
        rewrite(run, env_recipe={"kind": "id", "target": f"{module}:Evil-v0"})
    else:  # a run written before recipes were recorded: its env id is all there is
        rewrite(run, env_recipe=None, env=f"{module}:Evil-v0")
    return run, marker, f"'{module}'"


def refused(message: str, named: str, consent: str) -> bool:
    return named in message and consent in message and "consent" in message


# ---------------------------------------------------------------------------- attacks
@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_folder_runs_no_code_in_python(case, honest_run, tmp_path, monkeypatch):
    run, marker, named = hostile_folder(case, honest_run, tmp_path, monkeypatch)
    before = (run / "config.json").read_text()
    agent = rlx.load(run)  # reads the recipe as data; builds and imports nothing
    with pytest.raises(EnvError) as evaluating:
        rlx.evaluate(agent, episodes=1)
    assert refused(str(evaluating.value), named, "trust_env_code=True")
    assert str(run) in str(evaluating.value)  # which folder asks
    with pytest.raises(EnvError) as resuming:
        rlx.train("dqn", run_dir=run, resume=True, total_steps=400, progress=False)
    assert refused(str(resuming.value), named, "trust_env_code=True")
    with pytest.raises(EnvError, match="trust_env_code=True"):
        agent.env_recipe.make()  # every path that builds goes through the same gate
    assert rlx.doctor(run) is not None
    assert not marker.exists()
    assert (run / "config.json").read_text() == before  # a refused resume changed nothing


@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_folder_runs_no_code_on_the_command_line(
    case, honest_run, tmp_path, monkeypatch, capsys
):
    run, marker, named = hostile_folder(case, honest_run, tmp_path, monkeypatch)
    for command in (["eval", str(run)], ["train", "dqn", "--run-dir", str(run), "--resume",
                                         *RESUME]):  # fmt: skip
        capsys.readouterr()
        assert main(command) == 2, command
        err = capsys.readouterr().err
        assert refused(err, named, "--trust-env-code"), err
        assert "trust_env_code=True" not in err  # the flag, not the Python argument
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert main(["doctor", str(run)]) == 0
    assert main(["report", str(run)]) == 0
    assert not marker.exists()


def test_the_doctor_looks_a_hostile_id_up_without_importing_it(tmp_path, monkeypatch, capsys):
    """A folder made by hand to steer the doctor into reading its env id: an entropy that
    collapses while the return is flat sends the entropy rule to Gymnasium for the env's
    solved threshold, a lookup of the id that must not import the module the id names."""
    from rlx.diagnostics import rules

    marker = tmp_path / "MARKER"
    module = evil_module(tmp_path, marker, monkeypatch)
    run = tmp_path / "run"
    run.mkdir()
    config = {"algo": "ppo", "env": f"{module}:Evil-v0", "config": {"learning_rate": 3e-4}}
    (run / "config.json").write_text(json.dumps(config))
    rows = [{"step": 100 * i, "wall_s": i, "episode_return": 1.0 + 0.01 * (i % 3),
             "entropy": 1.0 if i < 6 else 0.001} for i in range(60)]  # fmt: skip
    (run / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    looked_up = []
    solved_threshold = rules._solved_threshold
    monkeypatch.setattr(rules, "_solved_threshold",
                        lambda env: looked_up.append(env) or solved_threshold(env))  # fmt: skip
    rlx.doctor(run)
    assert main(["doctor", str(run)]) == 0
    assert main(["report", str(run)]) == 0
    assert f"{module}:Evil-v0" in looked_up  # the doctor did read the folder's id
    assert not marker.exists() and module not in sys.modules


@pytest.mark.parametrize("case", HOSTILE)
def test_the_same_hostile_folder_runs_its_code_once_trusted(
    case, honest_run, tmp_path, monkeypatch
):
    """The control: each attack above is real, and consent is the one gate in its way."""
    run, marker, _ = hostile_folder(case, honest_run, tmp_path, monkeypatch)
    with contextlib.suppress(Exception):  # os.system returns no env, an unregistered id fails
        rlx.evaluate(rlx.load(run, trust_env_code=True), episodes=1)
    if not marker.exists():  # a vector env looks an id up first; one env (a tabular run's,
        with contextlib.suppress(Exception):  # the spaces' probe) is made by gym.make
            make_env(rlx.load(run, trust_env_code=True).env_recipe.cleared().as_env)
    assert marker.exists()


def test_the_rlx_command_refuses_in_one_line_with_exit_2(honest_run, tmp_path, monkeypatch):
    """The real process, not main() in this one: exit 2, one line, no traceback, no command."""
    run, marker, named = hostile_folder("entry point", honest_run, tmp_path, monkeypatch)
    result = subprocess.run([*RLX, "eval", str(run)], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 2
    assert refused(result.stderr, named, "--trust-env-code") and "Traceback" not in result.stderr
    assert not marker.exists()


@pytest.mark.parametrize(
    ("recipe", "named"),
    [
        ({"kind": "id", "target": "os:system"}, "'os'"),
        ({"kind": "gymnasium_spec",
          "target": json.dumps(cartpole_spec(vector_entry_point="os:system"))},
         "vector entry point"),
        ({"kind": "gymnasium_spec", "target": json.dumps(cartpole_spec(id="Hostile-v0"))},
         "'Hostile-v0', an id not registered"),
        ({"kind": "gymnasium_spec", "target": json.dumps(cartpole_spec(
            additional_wrappers=[{"name": "X", "entry_point": "gymnasium:make",
                                  "kwargs": {"id": "m:E-v0"}}]))},
         "'gymnasium:make'"),
    ],
    ids=["os:system id", "vector entry point", "unregistered spec id", "non-wrapper gymnasium"],
)  # fmt: skip
def test_more_recipes_that_name_code_need_consent(recipe, named):
    loaded = EnvRecipe.from_record(recipe)
    with pytest.raises(EnvError) as refusal:
        loaded.cleared()
    assert refused(str(refusal.value), named, "trust_env_code=True")
    assert loaded.cleared(trust_env_code=True).trusted


@pytest.mark.parametrize(
    ("recipe", "message"),
    [
        ("os:system", "is a str, not a JSON object"),
        ({"kind": "exec", "target": "os:system"}, "unknown kind 'exec'"),
        ({"kind": "entry_point", "target": 42}, "target of type int"),
        ({"kind": "entry_point", "target": "os:system", "kwargs": ["touch x"]},
         "kwargs of type list"),
        ({"kind": "entry_point", "target": "__import__('os').system('x')"},
         "not package.module:factory"),
        ({"kind": "id", "target": ""}, "has no target"),
        ({"kind": "gymnasium_spec", "target": "{not json"}, "not JSON"),
        ({"kind": "gymnasium_spec", "target": json.dumps(cartpole_spec(entry_point=7))},
         "entry_point is not a str"),
        ({"kind": "gymnasium_spec",
          "target": json.dumps(cartpole_spec(additional_wrappers=["os:system"]))},
         "wrapper that is not"),
        ({"kind": "gymnasium_spec", "target": json.dumps(cartpole_spec(id="bad id!"))},
         "Gymnasium cannot read"),
    ],
)  # fmt: skip
def test_a_malformed_recipe_is_one_sentence_not_a_traceback(
    recipe, message, honest_run, tmp_path, capsys
):
    run = copy_run(honest_run, tmp_path)
    rewrite(run, env_recipe=recipe)
    with pytest.raises(CheckpointError, match=message):
        rlx.load(run)
    capsys.readouterr()
    assert main(["eval", str(run)]) == 2
    err = capsys.readouterr().err
    assert "env recipe" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert main(["doctor", str(run)]) == 0  # the doctor reads metrics, never the recipe


# ---------------------------------------------------------------------------- honest folders
def test_an_honest_entry_point_names_itself_and_rebuilds_with_consent(honest_run, tmp_path):
    run = copy_run(honest_run, tmp_path)
    with pytest.raises(EnvError) as refusal:
        rlx.evaluate(rlx.load(run), episodes=1)
    assert refused(str(refusal.value), f"'{HONEST}' with {HONEST_KWARGS!r}", "trust_env_code")
    agent = rlx.load(run, trust_env_code=True)
    assert rlx.evaluate(agent, episodes=2).mean_length <= HONEST_KWARGS["limit"]
    assert rlx.evaluate(rlx.load(run), episodes=2, trust_env_code=True).episodes == 2
    rlx.train("dqn", run_dir=run, resume=True, trust_env_code=True, total_steps=400,
              progress=False)  # fmt: skip
    assert json.loads((run / "summary.json").read_text())["steps"] == 400


def test_an_honest_entry_point_rebuilds_with_the_flag(honest_run, tmp_path, capsys):
    run = copy_run(honest_run, tmp_path)
    capsys.readouterr()
    assert main(["eval", str(run), "--episodes", "2", "--json", "--trust-env-code"]) == 0
    assert json.loads(capsys.readouterr().out)["env"]["target"] == HONEST
    resume = ["train", "dqn", "--run-dir", str(run), "--resume", "--trust-env-code", *RESUME]
    assert main(resume) == 0
    assert json.loads((run / "summary.json").read_text())["steps"] == 400


def test_naming_the_env_again_needs_no_consent(honest_run, tmp_path):
    run = copy_run(honest_run, tmp_path)
    named = ["--env", HONEST, "--env-kwargs", "n=4", "limit=7"]
    assert main(["eval", str(run), "--episodes", "2", *named]) == 0
    assert main(["train", "dqn", "--run-dir", str(run), "--resume", *named, *RESUME]) == 0
    factory = functools.partial(make_chain, **HONEST_KWARGS)
    assert rlx.evaluate(rlx.load(run), factory, episodes=2).episodes == 2
    rlx.train("dqn", HONEST, env_kwargs=HONEST_KWARGS, run_dir=run, resume=True,
              total_steps=500, progress=False)  # fmt: skip
    assert json.loads((run / "summary.json").read_text())["steps"] == 500


def test_a_registered_id_needs_no_consent(id_run, tmp_path):
    run = copy_run(id_run, tmp_path)
    assert rlx.evaluate(rlx.load(run), episodes=2).episodes == 2
    assert main(["eval", str(run), "--episodes", "2"]) == 0
    assert main(["train", "dqn", "--run-dir", str(run), "--resume", *RESUME]) == 0
    rlx.train("dqn", run_dir=run, resume=True, total_steps=500, progress=False)
    assert json.loads((run / "summary.json").read_text())["steps"] >= 500  # whole vector steps


@pytest.mark.parametrize(
    "env",
    [
        gym.wrappers.TimeLimit(gym.make("CartPole-v1"), 9),
        gym.wrappers.RecordEpisodeStatistics(gym.make("FrozenLake-v1", map_name="8x8")),
        "openspiel:tic_tac_toe",
    ],
    ids=["registered spec", "spec with a gymnasium wrapper", "openspiel game"],
)
def test_gymnasiums_own_envs_read_from_a_folder_name_no_code(env):
    recorded = EnvRecipe.from_record(recipe_of(env).record())
    assert not recorded.trusted and recorded.code() == []
    assert recorded.cleared().trusted
