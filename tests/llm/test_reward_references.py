"""GRPO's reward functions as ``package.module:function`` references: a Python function is
recorded by its reference (or as not importable), a run folder resumes from it with consent,
the command line takes a reference with --trust-env-code, a bad one is one sentence, and a run
folder that names one imports nothing without consent. The data is named once, and a run
that resolves nothing at train time writes config.json once."""

from __future__ import annotations

import importlib
import json
import sys
import uuid

import pytest

pytest.importorskip("transformers")

import rlx
from rlx import cli, llm
from rlx.errors import ConfigError

TINY = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "max_length": 32}
FAST = {"batch_size": 2, "group_size": 2, "max_new_tokens": 3, "eval_exact_match": False,
        "progress": False}  # fmt: skip
CLI_FAST = ["--batch-size", "2", "--group-size", "2", "--max-new-tokens", "3",
            "--no-eval-exact-match", "--no-progress"]  # fmt: skip

REWARDS_MODULE = '''
def close_sum(prompts, completions, answer, **kw):
    """1 for the right sum, less the further the completion's number is from it."""
    scores = []
    for completion, right in zip(completions, answer):
        try:
            scores.append(1.0 / (1.0 + abs(float(completion.strip()) - float(right))))
        except ValueError:
            scores.append(0.0)
    return scores

NOT_A_FUNCTION = 3
'''


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("references")
    rows = llm.arithmetic(40, seed=0)
    llm.write_jsonl(root / "prompts.jsonl", rows)
    model = llm.make_tiny_lm(root / "tiny", texts=llm.task_texts(rows), **TINY)
    return root, model


def _module(tmp_path, monkeypatch, source: str) -> str:
    """A module of ``source`` importable from ``tmp_path`` under a fresh name (the fixtures
    forget it after the test)."""
    name = f"rlx_rewards_{uuid.uuid4().hex[:12]}"
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    return name


@pytest.fixture
def rewards_module(tmp_path, monkeypatch):
    name = _module(tmp_path, monkeypatch, REWARDS_MODULE)
    yield name
    sys.modules.pop(name, None)


@pytest.fixture
def hostile(tmp_path, monkeypatch):
    """A module that leaves a marker file when it is imported."""
    marker = tmp_path / "imported"
    source = (
        f"open({str(marker)!r}, 'w').close()\n\n"
        "def payload(prompts, completions, **kw):\n"
        "    return [0.0] * len(completions)\n"
    )
    name = _module(tmp_path, monkeypatch, source)
    yield name, marker
    sys.modules.pop(name, None)


def _record(run_dir):
    return json.loads((run_dir / "config.json").read_text())


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# --- Python ----------------------------------------------------------------------------------


def test_an_importable_function_is_recorded_by_reference_and_resumes_from_its_folder(
    tiny, tmp_path, rewards_module
):
    root, model = tiny
    data = root / "prompts.jsonl"
    close_sum = importlib.import_module(rewards_module).close_sum
    run = tmp_path / "r"
    llm.grpo(model, data, reward=[close_sum, "numeric"], run_dir=run, steps=1, **FAST)
    assert _record(run)["config"]["reward"] == f"{rewards_module}:close_sum,numeric"
    # the folder names code: resuming without the function imports it only with consent
    with pytest.raises(ConfigError, match="pass trust_env_code=True if you trust it") as err:
        llm.grpo("", data, run_dir=run, resume=True, steps=2, progress=False)
    assert "\n" not in str(err.value)
    result = llm.grpo("", data, run_dir=run, resume=True, steps=2, progress=False,
                      trust_env_code=True)  # fmt: skip
    assert result.status == "completed"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert {"reward/close_sum", "reward/numeric"} <= set(rows[-1])
    # a reference given as text in Python is the caller's own code: imported as given
    llm.grpo(model, data, reward=f"{rewards_module}:close_sum", run_dir=tmp_path / "t",
             steps=1, **FAST)  # fmt: skip
    assert _record(tmp_path / "t")["config"]["reward"] == f"{rewards_module}:close_sum"


def test_a_lambda_is_recorded_as_not_importable_and_a_resume_without_it_says_so(tiny, tmp_path):
    root, model = tiny
    data = root / "prompts.jsonl"
    llm.grpo(model, data, reward=lambda prompts, completions, **kw: [1.0] * len(completions),
             run_dir=tmp_path / "r", steps=1, **FAST)  # fmt: skip
    recorded = _record(tmp_path / "r")["config"]["reward"]
    assert recorded == "<python callable lambda: not importable>"
    for consent in (False, True):  # no consent can import what has no reference
        with pytest.raises(ConfigError, match=r"pass it again \(reward=\.\.\.\)") as err:
            llm.grpo("", data, run_dir=tmp_path / "r", resume=True, steps=2, progress=False,
                     trust_env_code=consent)  # fmt: skip
        assert "\n" not in str(err.value) and recorded in str(err.value)


BAD_REFERENCES = [
    ("no_such_module_rlx:close_sum", "does not import"),
    ("{module}:missing", "has no 'missing'"),
    ("{module}:NOT_A_FUNCTION", "not callable"),
]


@pytest.mark.parametrize(("template", "says"), BAD_REFERENCES)
def test_a_bad_reference_is_one_sentence_naming_it(tiny, tmp_path, rewards_module, template, says):
    root, model = tiny
    reference = template.format(module=rewards_module)
    with pytest.raises(ConfigError, match=says) as err:
        llm.grpo(model, root / "prompts.jsonl", reward=reference, run_dir=tmp_path / "r",
                 steps=1, **FAST)  # fmt: skip
    message = str(err.value)
    assert reference in message and "package.module:function" in message and "\n" not in message
    assert not (tmp_path / "r").exists()  # refused before the run started


# --- the command line --------------------------------------------------------------------------


def test_the_cli_takes_a_reference_with_trust_env_code_only(tiny, tmp_path, rewards_module,
                                                            capsys):  # fmt: skip
    root, model = tiny
    reference = f"{rewards_module}:close_sum"
    run = tmp_path / "r"
    train = ["align", "grpo", "--model", str(model), "--data", str(root / "prompts.jsonl"),
             "--reward", reference, "--run-dir", str(run), "--steps", "1", *CLI_FAST]  # fmt: skip
    capsys.readouterr()
    assert cli.main(train) == 2
    line = _one_line(capsys.readouterr().err)
    assert reference in line and "--trust-env-code" in line and "trust_env_code" not in line
    assert rewards_module not in sys.modules and not run.exists()
    assert cli.main([*train, "--trust-env-code"]) == 0
    capsys.readouterr()
    record = _record(run)
    assert record["config"]["reward"] == reference
    assert record["env"] == str(root / "prompts.jsonl")  # the data, named once
    resume = ["align", "grpo", "--resume", "--run-dir", str(run), "--steps", "2", *CLI_FAST]
    sys.modules.pop(rewards_module)
    assert cli.main(resume) == 2  # the folder names code: the flag again, or nothing runs
    assert "--trust-env-code" in _one_line(capsys.readouterr().err)
    assert rewards_module not in sys.modules
    assert cli.main([*resume, "--trust-env-code"]) == 0
    assert json.loads((run / "summary.json").read_text())["steps"] == 2
    # a bad reference, trusted, is one sentence too
    swap = {reference: f"{rewards_module}:missing", str(run): str(tmp_path / "b")}
    capsys.readouterr()
    assert cli.main([swap.get(a, a) for a in train] + ["--trust-env-code"]) == 2
    assert "has no 'missing'" in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "b").exists()


# --- a run folder is data ------------------------------------------------------------------------


def test_a_run_folder_naming_a_reference_imports_nothing_without_consent(tiny, tmp_path, hostile,
                                                                        capsys):  # fmt: skip
    root, model = tiny
    module, marker = hostile
    data = root / "prompts.jsonl"
    run = tmp_path / "r"
    llm.grpo(model, data, reward="numeric", run_dir=run, steps=1, **FAST)
    record = _record(run)
    record["config"]["reward"] = f"{module}:payload"  # a folder from someone else
    (run / "config.json").write_text(json.dumps(record))
    with pytest.raises(ConfigError, match="trust_env_code=True"):
        llm.grpo("", data, run_dir=run, resume=True, steps=2, progress=False)
    with pytest.raises(ConfigError, match="only when you give it"):
        rlx.train("grpo", run_dir=run, resume=True, steps=2, progress=False)
    capsys.readouterr()
    assert cli.main(["align", "grpo", "--resume", "--run-dir", str(run), "--steps", "2",
                     "--no-progress"]) == 2  # fmt: skip
    assert "--trust-env-code" in _one_line(capsys.readouterr().err)
    assert not marker.exists() and module not in sys.modules
    assert _record(run)["config"]["reward"] == f"{module}:payload"  # the refusals left it be
    # with consent, the folder's reward is imported and the run continues
    llm.grpo("", data, run_dir=run, resume=True, steps=2, progress=False, trust_env_code=True)
    assert marker.exists()


# --- the data named once, config.json written once ---------------------------------------------


def test_the_data_is_named_once_as_the_runs_env(tiny, tmp_path, monkeypatch):
    faces = importlib.import_module("rlx.align")
    root, model = tiny
    calls = []
    real = faces.train

    def spy(algo, env, **kwargs):
        calls.append((env, kwargs))
        return real(algo, env, **kwargs)

    monkeypatch.setattr(faces, "train", spy)
    data = root / "prompts.jsonl"
    llm.grpo(model, data, run_dir=tmp_path / "f", steps=1, **FAST)
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    llm.grpo(model, rows, reward="numeric", run_dir=tmp_path / "m", steps=1, **FAST)
    assert all("data" not in kwargs for _, kwargs in calls)  # the env alone carries it
    assert calls[0][0] == str(data)
    for run, name in ((tmp_path / "f", str(data)), (tmp_path / "m", f"<list of {len(rows)} rows>")):
        assert _record(run)["env"] == name
        assert json.loads((run / "summary.json").read_text())["env"] == name
    assert _record(tmp_path / "f")["config"]["data"] == str(data)


def test_config_json_is_written_once_when_nothing_is_chosen_at_train_time(tiny, tmp_path,
                                                                         monkeypatch):  # fmt: skip
    run_module = importlib.import_module("rlx.runs.run")
    root, model = tiny
    writes = []
    real = run_module.write_json_atomic

    def counting(path, data, *args, **kwargs):
        if path.name == "config.json":
            writes.append(path.parent.name)
        return real(path, data, *args, **kwargs)

    monkeypatch.setattr(run_module, "write_json_atomic", counting)
    data = root / "prompts.jsonl"
    given = {"steps": 1, "learning_rate": 1e-3, "device": "cpu", "precision": "fp32"}
    llm.grpo(model, data, run_dir=tmp_path / "once", **given, **FAST)
    assert writes == ["once"]
    # a step size left to the run is chosen from the model: recorded when it is known
    llm.grpo(model, data, run_dir=tmp_path / "twice", steps=1, device="cpu", precision="fp32",
             **FAST)  # fmt: skip
    assert writes == ["once", "twice", "twice"]
    assert _record(tmp_path / "twice")["config"]["learning_rate"] == pytest.approx(2e-4)
    sft_rows = llm.arithmetic_sft(40, seed=0)
    llm.write_jsonl(tmp_path / "sft.jsonl", sft_rows)
    llm.sft(model, tmp_path / "sft.jsonl", run_dir=tmp_path / "sft", batch_size=4,
            eval_exact_match=False, progress=False, **given)  # fmt: skip
    assert writes[3:] == ["sft"]
