"""GRPO over episodes as an ordinary rlx run (``grpo-episodes``): ``rlx.train``,
``rlx.llm.grpo(model, env=...)``, ``rlx align grpo --env`` and ``rlx train grpo-episodes`` all
write the run folder (config, metrics, summary with the held-out success rate and its interval,
checkpoints, the model); a stopped run resumes exactly; env code named on the command line is
imported only with ``--trust-env-code``; a bad env is one sentence."""

from __future__ import annotations

import json
import sys
import uuid

import pytest

pytest.importorskip("transformers")

import torch

import rlx
from rlx import cli, llm
from rlx import metrics as M
from rlx.errors import ConfigError, EnvError
from rlx.llm.text_env import TEXT_ENVS, HiddenNumberEnv

TEXTS = ["0123456789 find-: higher lower correct a number next"]
FAST = {"batch_size": 2, "group_size": 2, "max_new_tokens": 3, "eval_episodes": 3,
        "device": "cpu", "progress": False}  # fmt: skip
CLI_FAST = ["--batch-size", "1", "--group-size", "2", "--max-new-tokens", "3",
            "--eval-episodes", "2", "--device", "cpu", "--no-progress", "--steps", "1"]  # fmt: skip
TIMINGS = {M.GENERATION_S, M.UPDATE_S, "wall_s", "time_s", "step_s"}

FACTORY_MODULE = """
from rlx.llm.text_env import HiddenNumberEnv

def factory(hi=3):
    return HiddenNumberEnv(1, hi, max_turns=2)
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    torch.set_num_threads(1)
    return llm.make_tiny_lm(tmp_path_factory.mktemp("tiny") / "lm", texts=TEXTS,
                            hidden_size=16, num_layers=1, num_heads=2, max_length=48)  # fmt: skip


def small_number() -> HiddenNumberEnv:
    """A text env's factory at a module's top level: recorded by its import path."""
    return HiddenNumberEnv(1, 3, max_turns=2)


def rows(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]


def record(run_dir) -> dict:
    return json.loads((run_dir / "config.json").read_text())


def summary(run_dir) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def env_module(tmp_path, monkeypatch):
    """A module of the user's own with a text env's factory, importable, not yet imported."""
    name = f"episode_envs_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(FACTORY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


# --- rlx.train ----------------------------------------------------------------------------------


def test_a_run_writes_its_folder_and_logs_the_episode_figures(tiny, tmp_path):
    run = tmp_path / "run"
    result = rlx.train("grpo-episodes", "hidden-number", model=str(tiny), steps=2, run_dir=run,
                       **FAST)  # fmt: skip
    assert result.status == "completed" and (run / "model" / "config.json").exists()
    logged = rows(run)
    assert [r["step"] for r in logged] == [1, 2]
    for name in (M.EPISODE_TURNS, M.EPISODE_TRUNCATED_FRACTION, M.TURN_REWARD,
                 M.INVALID_ACTION_RATE, M.SUCCESS_RATE, M.REWARD, M.KL_REF, M.LR):  # fmt: skip
        assert all(name in r for r in logged), name
    done = summary(run)
    assert done["algo"] == "grpo-episodes" and done["steps"] == 2
    low, rate, high = (done[k] for k in (M.EVAL_SUCCESS_LOW, M.EVAL_SUCCESS_RATE,
                                         M.EVAL_SUCCESS_HIGH))  # fmt: skip
    assert 0 <= low <= rate + 1e-9 and rate <= high <= 1 and done[M.EVAL_EPISODES] == 3
    written = record(run)
    assert written["env"] == "hidden-number" and written["config"]["learning_rate"] > 0
    assert (run / "checkpoints").is_dir()
    assert rlx.load(run).tokenizer is not None  # its checkpoint loads as a model


def test_a_stopped_run_resumes_where_it_stopped_exactly(tiny, tmp_path):
    class StopAt2:
        def on_update(self, step, metrics):
            return step < 2

    whole, part = tmp_path / "whole", tmp_path / "part"
    settings = {"model": str(tiny), "steps": 4, **FAST}
    rlx.train("grpo-episodes", "hidden-number", run_dir=whole, **settings)
    rlx.train("grpo-episodes", "hidden-number", run_dir=part, callbacks=[StopAt2()], **settings)
    assert summary(part)["status"] == "stopped" and not (part / "model").exists()
    # llm.grpo without env continues the run its folder records
    result = llm.grpo("", run_dir=part, resume=True, progress=False)
    assert result.status == "completed" and (part / "model").exists()
    resumed, straight = rows(part), rows(whole)
    assert [r["step"] for r in resumed] == [1, 2, 3, 4]  # no row twice
    for a, b in zip(resumed, straight, strict=True):
        same = {k for k in a if k not in TIMINGS and isinstance(a[k], float)}
        assert same and all(a[k] == pytest.approx(b[k], abs=1e-5) for k in same), a["step"]


def test_a_bad_env_is_one_sentence_and_leaves_no_folder(tiny, tmp_path):
    run = tmp_path / "r"
    with pytest.raises(ConfigError, match="unknown text env 'hidden-numbr'") as err:
        rlx.train("grpo-episodes", "hidden-numbr", model=str(tiny), steps=1, run_dir=run,
                  **FAST)  # fmt: skip
    assert all(name in str(err.value) for name in TEXT_ENVS)
    with pytest.raises(ConfigError, match="is one env"):
        rlx.train("grpo-episodes", HiddenNumberEnv(), model=str(tiny), steps=1, run_dir=run,
                  **FAST)  # fmt: skip
    with pytest.raises(ConfigError, match="not a text env"):
        rlx.train("grpo-episodes", lambda: 3, model=str(tiny), steps=1, run_dir=run, **FAST)
    with pytest.raises(EnvError, match="takes no keyword argument 'size'"):
        rlx.train("grpo-episodes", "hidden-number", env_kwargs={"size": 3}, model=str(tiny),
                  steps=1, run_dir=run, **FAST)  # fmt: skip
    with pytest.raises(ConfigError, match="needs steps"):
        rlx.train("grpo-episodes", "hidden-number", model=str(tiny), run_dir=run, **FAST)
    assert not run.exists()


# --- rlx.llm.grpo(model, env=...) ---------------------------------------------------------------


def test_llm_grpo_with_an_env_trains_over_episodes(tiny, tmp_path):
    run = tmp_path / "r"
    result = llm.grpo(tiny, env=small_number, run_dir=run, steps=1, **FAST)
    assert result.status == "completed" and M.EVAL_SUCCESS_RATE in result.metrics
    written = record(run)
    assert written["algo"] == "grpo-episodes"
    assert written["env_recipe"]["target"].endswith("test_episode_runs:small_number")
    kw = llm.grpo(tiny, env="hidden-number", env_kwargs={"hi": 3}, run_dir=tmp_path / "kw",
                  steps=1, **FAST)  # fmt: skip
    assert kw.status == "completed"
    assert record(tmp_path / "kw")["env_recipe"]["kwargs"] == {"hi": 3}
    with pytest.raises(ConfigError, match="pass one of them"):
        llm.grpo(tiny, "prompts.jsonl", env=small_number, run_dir=tmp_path / "x", steps=1)
    with pytest.raises(ConfigError, match="scores its own episodes"):
        llm.grpo(tiny, env=small_number, reward="numeric", run_dir=tmp_path / "x", steps=1)
    assert not (tmp_path / "x").exists()


# --- the command line ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["align", "grpo"], ["train", "grpo-episodes"]])
def test_the_cli_imports_an_env_named_as_code_only_with_trust_env_code(
    tiny, tmp_path, env_module, capsys, command
):
    run = tmp_path / "r"
    entry = f"{env_module}:factory"
    argv = [*command, "--model", str(tiny), "--env", entry, "--run-dir", str(run),
            *CLI_FAST]  # fmt: skip
    capsys.readouterr()
    assert cli.main(argv) == 2
    line = one_line(capsys.readouterr().err)
    assert entry in line and "--trust-env-code" in line and "trust_env_code" not in line
    assert env_module not in sys.modules and not run.exists()
    assert cli.main([*argv, "--trust-env-code", "--env-kwargs", "hi=4"]) == 0
    written = record(run)
    assert written["algo"] == "grpo-episodes" and written["env"] == entry
    assert written["env_recipe"] == {"kind": "entry_point", "target": entry,
                                     "kwargs": {"hi": 4}, "reason": ""}  # fmt: skip
    assert summary(run)["status"] == "completed"


def test_the_cli_trains_a_built_in_env_and_refuses_an_unknown_one(tiny, tmp_path, capsys):
    align = tmp_path / "align"
    assert cli.main(["align", "grpo", "--model", str(tiny), "--env", "hidden-number",
                     "--run-dir", str(align), *CLI_FAST]) == 0  # fmt: skip
    assert summary(align)["status"] == "completed" and (align / "model").exists()
    train = tmp_path / "train"
    assert cli.main(["train", "grpo-episodes", "--model", str(tiny), "--env", "hidden-number",
                     "--run-dir", str(train), *CLI_FAST]) == 0  # fmt: skip
    assert record(train)["algo"] == "grpo-episodes"
    capsys.readouterr()
    bad = tmp_path / "bad"
    for command in (["align", "grpo"], ["train", "grpo-episodes"]):
        argv = [*command, "--model", str(tiny), "--env", "hidden-numbr"]
        assert cli.main([*argv, "--run-dir", str(bad), *CLI_FAST]) == 2
        line = one_line(capsys.readouterr().err)
        assert "'hidden-numbr'" in line and all(name in line for name in TEXT_ENVS)
    assert not bad.exists()
    for argv, says in (
        (["--env", "hidden-number"], "needs --model DIR"),
        (["--env", "hidden-number", "--model", str(tiny), "--data", "p.jsonl"], "pass one of"),
    ):
        assert cli.main(["align", "grpo", *argv, "--run-dir", str(bad)]) == 2
        assert says in one_line(capsys.readouterr().err)


def test_resuming_on_the_command_line_continues_an_episode_run(tiny, tmp_path, capsys):
    run = tmp_path / "r"
    rlx.train("grpo-episodes", "hidden-number", model=str(tiny), steps=1, run_dir=run, **FAST)
    assert cli.main(["align", "grpo", "--resume", "--run-dir", str(run), "--steps", "2",
                     "--no-progress"]) == 0  # fmt: skip
    assert [r["step"] for r in rows(run)] == [1, 2]
    assert summary(run)["steps"] == 2


@pytest.mark.parametrize("target", ["openspiel:factory", "OpenSpiel:factory"])
def test_a_folder_naming_code_as_a_game_id_imports_nothing_on_resume(tiny, tmp_path, monkeypatch,
                                                                    target):  # fmt: skip
    """A run folder is data: a recorded env id that looks like a board game's
    (``openspiel:...``) but names a module is never imported, with or without consent."""
    run = tmp_path / "run"
    rlx.train("grpo-episodes", "hidden-number", model=str(tiny), steps=1, run_dir=run, **FAST)
    module = target.split(":")[0]
    marker = tmp_path / "imported"
    (tmp_path / f"{module}.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n"
        "from rlx.llm.text_env import HiddenNumberEnv\n"
        "def factory(**kw):\n    return HiddenNumberEnv(hi=3)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    written = record(run)
    written["env"] = target
    written["env_recipe"] = {"kind": "id", "target": target, "kwargs": {}}
    (run / "config.json").write_text(json.dumps(written))
    try:
        for trust in (False, True):
            with pytest.raises((ConfigError, EnvError)):
                rlx.train("grpo-episodes", run_dir=run, resume=True, steps=2,
                          trust_env_code=trust, progress=False)  # fmt: skip
            with pytest.raises((ConfigError, EnvError)):
                llm.grpo(None, resume=True, run_dir=run, steps=2, progress=False)
        assert not marker.exists() and module not in sys.modules
    finally:
        sys.modules.pop(module, None)
