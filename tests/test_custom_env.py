"""Your own env, reproducibly: ``rlx.train`` takes an entry point ``package.module:factory``
with env_kwargs (the CLI's ``--env``/``--env-kwargs``), a callable or an env object;
``config.json`` records how to build the env again, so ``rlx eval`` and ``--resume`` use the
same env from the run folder alone (an entry point with the user's consent, ``trust_env_code=True``
or ``--trust-env-code``: a run folder is data, tests/test_env_trust.py attacks it), and an env
that cannot be rebuilt is an error that says how to pass it, never a silent evaluation of another
env."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import rlx
from rlx.cli import main
from rlx.core.env_recipe import EnvRecipe, recipe_of
from tests.toy_envs import ChainEnv

ENTRY = "tests.test_custom_env:make_chain"


def make_chain(n: int = 8, limit: int = 20) -> gym.Env:
    """A factory as a user's package would have one: a corridor of ``n`` states."""
    return gym.wrappers.TimeLimit(ChainEnv(n), limit)


QUICK = {"total_steps": 600, "learning_starts": 100, "log_every": 200, "eval_episodes": 0,
         "progress": False}  # fmt: skip


def test_an_entry_point_with_kwargs_trains_and_evaluates_from_the_run_folder_alone(tmp_path):
    run = tmp_path / "chain"
    rlx.train("dqn", ENTRY, env_kwargs={"n": 4, "limit": 7}, run_dir=run, seed=0, **QUICK)
    record = json.loads((run / "config.json").read_text())
    assert record["env"] == ENTRY
    assert record["env_recipe"] == {"kind": "entry_point", "target": ENTRY,
                                    "kwargs": {"n": 4, "limit": 7}, "reason": ""}  # fmt: skip
    agent = rlx.load(run, trust_env_code=True)
    assert agent.env_recipe.make().unwrapped.n == 4
    assert main(["eval", str(run), "--episodes", "3", "--json", "--trust-env-code"]) == 0


def test_the_agent_train_returns_evaluates_on_its_own_env_with_no_env_named(tmp_path):
    agent = rlx.train("dqn", ENTRY, env_kwargs={"n": 4, "limit": 7}, run_dir=tmp_path / "c",
                      seed=0, **QUICK)  # fmt: skip
    assert agent.env_recipe.make().unwrapped.n == 4
    assert rlx.evaluate(agent, episodes=3).mean_length <= 7  # the recorded limit, not 20


def test_an_env_class_is_a_factory_not_an_env(tmp_path):
    agent = rlx.train("dqn", ChainEnv, env_kwargs={"n": 3}, run_dir=tmp_path / "cls", seed=0,
                      **{**QUICK, "total_steps": 300})  # fmt: skip
    assert agent.env_recipe.target == "tests.toy_envs:ChainEnv"
    assert rlx.evaluate(agent, episodes=2, max_steps=50).episodes == 2


def test_eval_json_is_one_object_naming_the_rebuilt_env(tmp_path, capsys):
    run = tmp_path / "chain"
    rlx.train("dqn", ENTRY, env_kwargs={"n": 4, "limit": 7}, run_dir=run, seed=0, **QUICK)
    capsys.readouterr()
    assert main(["eval", str(run), "--episodes", "4", "--json", "--trust-env-code"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {"mean", "std", "episodes", "mean_length", "env"}
    assert result["episodes"] == 4 and result["env"]["kwargs"] == {"n": 4, "limit": 7}
    assert result["mean_length"] <= 7  # the recorded time limit, not the factory's default


def test_the_cli_takes_an_entry_point_and_typed_env_kwargs(tmp_path):
    run = tmp_path / "cli"
    args = ["train", "dqn", "--env", ENTRY, "--env-kwargs", "n=5", "limit=9", "--run-dir",
            str(run), "--total-steps", "300", "--learning-starts", "100", "--eval-episodes",
            "0", "--no-progress"]  # fmt: skip
    assert main(args) == 0
    recipe = json.loads((run / "config.json").read_text())["env_recipe"]
    assert recipe["kwargs"] == {"n": 5, "limit": 9}  # read as numbers
    resumed = ["train", "dqn", "--run-dir", str(run), "--resume", "--total-steps", "400",
               "--no-progress", "--trust-env-code"]  # fmt: skip
    assert main(resumed) == 0  # rebuilt from the recipe, not from the label
    assert json.loads((run / "summary.json").read_text())["steps"] == 400


def test_a_wrapped_env_object_is_rebuilt_with_its_wrappers(tmp_path, capsys):
    """An object whose Gymnasium spec can be written as JSON is rebuilt from it: here the time
    limit of 9 steps that the plain id would not have."""
    env = gym.wrappers.TimeLimit(gym.make("CartPole-v1"), 9)
    run = tmp_path / "short"
    rlx.train("dqn", env, run_dir=run, seed=0, **QUICK)
    assert json.loads((run / "config.json").read_text())["env_recipe"]["kind"] == "gymnasium_spec"
    capsys.readouterr()
    assert main(["eval", str(run), "--episodes", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mean_length"] <= 9


def test_an_env_that_cannot_be_rebuilt_is_never_replaced_silently(tmp_path, capsys):
    """A reward-scaled CartPole (a wrapper holding a lambda) trains, but evaluating its run
    folder alone refuses rather than evaluate plain CartPole; --env makes it explicit."""
    env = gym.wrappers.TransformReward(gym.make("CartPole-v1"), lambda r: 10.0 * r)
    run = tmp_path / "scaled"
    rlx.train("dqn", env, run_dir=run, seed=0, **QUICK)
    recipe = json.loads((run / "config.json").read_text())["env_recipe"]
    assert recipe["kind"] == "unrebuildable" and "JSON" in recipe["reason"]
    capsys.readouterr()
    assert main(["eval", str(run), "--episodes", "2"]) == 2
    err = capsys.readouterr().err
    assert "cannot be built again" in err and "--env package.module:factory" in err
    assert main(["eval", str(run), "--episodes", "2", "--env", "CartPole-v1"]) == 0
    with pytest.raises(rlx.errors.EnvError, match="pass it"):
        rlx.train("dqn", run_dir=run, resume=True, total_steps=700)


@pytest.mark.parametrize(
    ("env", "kind"),
    [
        ("CartPole-v1", "id"),
        (ENTRY, "entry_point"),
        (make_chain, "entry_point"),
        (lambda: make_chain(3), "unrebuildable"),
        (gym.make("CartPole-v1"), "gymnasium_spec"),
        (ChainEnv(3), "unrebuildable"),
    ],
    ids=["id", "entry point", "function", "lambda", "made env", "bare env"],
)
def test_each_kind_of_env_gets_its_recipe(env, kind):
    recipe = recipe_of(env)
    assert recipe.kind == kind
    assert EnvRecipe.from_record(recipe.record()) == recipe
    if recipe.rebuildable and kind != "id":
        assert recipe.make().action_space.n == 2


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("tests.no_such_module:make", "cannot import 'tests.no_such_module'"),
        ("tests.test_custom_env:no_such_factory", "has no 'no_such_factory'"),
        ("tests.test_custom_env:ENTRY", "not callable"),
    ],
)
def test_a_bad_entry_point_is_one_sentence(target, message):
    with pytest.raises(rlx.errors.EnvError, match=message):
        recipe_of(target).make()
