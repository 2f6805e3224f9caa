"""Reading other libraries' logs: real Stable-Baselines3 and TRL runs made here, then files
written by hand for the corners (empty cells, NaN, eval entries, broken files)."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from rlx import metrics as M
from rlx.diagnostics.doctor import diagnose
from rlx.diagnostics.foreign import (
    MAX_DEPTH,
    SB3_ALGOS,
    TRL_ALGOS,
    guess_algo,
    read_foreign,
)
from rlx.diagnostics.sources import read_run
from rlx.errors import RunError

# TRL asks a deprecated transformers property; not this module's business
pytestmark = pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing:FutureWarning")

PPO_STEPS, PPO_ROLLOUT = 2048, 64
DPO_STEPS, DPO_EVAL_EVERY = 6, 3


def assert_same(a, b, rtol: float = 1e-6) -> None:
    """Two series with equal steps and values equal to float32 precision (TensorBoard's)."""
    np.testing.assert_array_equal(a.steps, b.steps)
    np.testing.assert_allclose(a.values, b.values, rtol=rtol, atol=1e-9)


# ---------------------------------------------------------------------------- real SB3 runs
@pytest.fixture(scope="module")
def sb3_ppo(tmp_path_factory) -> Path:
    """A real SB3 PPO run on CartPole-v1: progress.csv in the run folder, events in ``tb/``."""
    sb3 = pytest.importorskip("stable_baselines3")
    pytest.importorskip("tensorboard")
    from stable_baselines3.common.logger import Logger, make_output_format

    run = tmp_path_factory.mktemp("sb3_ppo")
    model = sb3.PPO(
        "MlpPolicy",
        "CartPole-v1",
        n_steps=PPO_ROLLOUT,
        batch_size=PPO_ROLLOUT,
        n_epochs=2,
        seed=0,
        device="cpu",
        tensorboard_log=str(run / "unused"),  # set_logger below takes its place
    )
    formats = [
        make_output_format("csv", str(run)),
        make_output_format("tensorboard", str(run / "tb")),
    ]
    model.set_logger(Logger(str(run), formats))
    model.learn(PPO_STEPS)
    model.logger.close()
    return run


@pytest.fixture(scope="module")
def sb3_dqn(tmp_path_factory) -> Path:
    sb3 = pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.logger import configure

    run = tmp_path_factory.mktemp("sb3_dqn")
    model = sb3.DQN(
        "MlpPolicy", "CartPole-v1", learning_starts=200, train_freq=4, seed=0, device="cpu"
    )
    model.set_logger(configure(str(run), ["csv"]))
    model.learn(2000, log_interval=4)
    model.logger.close()
    return run / "progress.csv"


def test_sb3_ppo_progress_csv_maps_onto_rlx_names(sb3_ppo):
    log = read_foreign(sb3_ppo / "progress.csv")
    assert (log.kind, log.algo, log.source) == ("sb3", "ppo", sb3_ppo / "progress.csv")
    for name in (M.EPISODE_RETURN, M.APPROX_KL, M.CLIP_FRACTION, M.ENTROPY, M.VALUE_LOSS):
        assert log.get(name) is not None, name
    for name in (M.EXPLAINED_VARIANCE, M.POLICY_LOSS, M.LR, M.LOSS, M.EPISODE_LENGTH):
        assert log.get(name) is not None, name
    kl = log.get(M.APPROX_KL)
    # one point per rollout after the first (SB3 trains after dumping the first one's stats)
    assert np.all(np.diff(kl.steps) > 0) and kl.steps[-1] == PPO_STEPS
    assert np.all(kl.steps % PPO_ROLLOUT == 0)
    # SB3 logs entropy_loss = -entropy; CartPole's two actions bound the entropy by ln 2
    entropy = log.get(M.ENTROPY).values
    assert np.all(entropy > 0) and np.all(entropy <= math.log(2) + 1e-6)
    assert np.all((log.get(M.CLIP_FRACTION).values >= 0) & (log.get(M.CLIP_FRACTION).values <= 1))
    # keys with no rlx name keep their own; the step column is the axis, not a series
    assert np.all(log.get("train/clip_range").values == 0.2)
    assert log.get("time/fps") is not None and "time/total_timesteps" not in log.metrics


def test_sb3_tensorboard_agrees_with_progress_csv(sb3_ppo):
    from_csv = read_foreign(sb3_ppo / "progress.csv")
    from_tb = read_foreign(sb3_ppo / "tb")
    assert (from_tb.kind, from_tb.algo, from_tb.source) == ("tensorboard", "ppo", sb3_ppo / "tb")
    for name in (M.APPROX_KL, M.ENTROPY, M.VALUE_LOSS, M.EPISODE_RETURN, M.EXPLAINED_VARIANCE):
        assert_same(from_tb.get(name), from_csv.get(name))
    # one event file read directly gives the same
    (event_file,) = (sb3_ppo / "tb").glob("events.out.tfevents.*")
    assert_same(read_foreign(event_file).get(M.APPROX_KL), from_csv.get(M.APPROX_KL))


def test_sb3_run_folder_prefers_progress_csv(sb3_ppo):
    log = read_run(sb3_ppo)  # the doctor's entry point: not an rlx run, so read as foreign
    assert (log.kind, log.algo, log.source) == ("sb3", "ppo", sb3_ppo)
    assert_same(log.get(M.APPROX_KL), read_foreign(sb3_ppo / "progress.csv").get(M.APPROX_KL))


def test_sb3_dqn_loss_and_epsilon(sb3_dqn):
    log = read_foreign(sb3_dqn)
    assert (log.kind, log.algo) == ("sb3", "dqn")
    epsilon, loss = log.get(M.EPSILON), log.get(M.LOSS)
    # epsilon anneals from 1 to SB3's final 0.05 over the first 10% of the run
    assert epsilon.values[0] < 1 and epsilon.values[-1] == pytest.approx(0.05)
    assert np.all(np.diff(epsilon.values) <= 0)
    # the TD loss is logged only once learning starts: its empty cells are not points
    assert 0 < len(loss) < len(epsilon) and loss.steps[0] > 200
    assert np.all(np.isfinite(loss.values) & (loss.values >= 0))
    assert log.get(M.EPISODE_RETURN) is not None


# ---------------------------------------------------------------------------- real TRL runs
@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory) -> Path:
    pytest.importorskip("trl")
    pytest.importorskip("tensorboard")
    from rlx.llm import make_tiny_lm

    folder = tmp_path_factory.mktemp("tiny") / "tiny"
    return make_tiny_lm(folder, texts=["0123456789+="], hidden_size=32, num_layers=2, num_heads=2)


def trl_config(config_class, out: Path, **kwargs):
    """A TRL config for a few CPU steps that logs every step to TensorBoard under ``out``."""
    fields = {f.name for f in dataclasses.fields(config_class)}
    # TRL turns checkpointing on by default; its name differs between versions
    off = {k: False for k in ("activation_checkpointing", "gradient_checkpointing") if k in fields}
    return config_class(
        output_dir=str(out),
        logging_steps=1,
        save_strategy="no",
        report_to=["tensorboard"],
        use_cpu=True,
        bf16=False,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
        **off,
        **kwargs,
    )


@pytest.fixture(scope="module")
def trl_dpo(tiny_lm, tmp_path_factory) -> Path:
    """A real TRL DPO run with an eval every 3 steps; trainer_state.json saved at the end."""
    import datasets
    import trl
    from transformers import AutoTokenizer

    from rlx.llm import arithmetic_preferences

    datasets.disable_progress_bars()
    tokenizer = AutoTokenizer.from_pretrained(tiny_lm)
    rows = [dataclasses.asdict(pair) for pair in arithmetic_preferences(16, seed=0)]
    for row in rows:  # the character tokenizer adds no bos; rlx's sequences start with one
        row["prompt"] = tokenizer.bos_token + row["prompt"]
    out = tmp_path_factory.mktemp("trl_dpo")
    config = trl_config(
        trl.DPOConfig,
        out,
        max_steps=DPO_STEPS,
        per_device_train_batch_size=4,
        per_device_eval_batch_size=4,
        learning_rate=1e-3,
        eval_strategy="steps",
        eval_steps=DPO_EVAL_EVERY,
    )
    trainer = trl.DPOTrainer(
        model=str(tiny_lm),
        args=config,
        train_dataset=datasets.Dataset.from_list(rows[:12]),
        eval_dataset=datasets.Dataset.from_list(rows[12:]),
        processing_class=tokenizer,
    )
    trainer.train()
    trainer.state.save_to_json(str(out / "trainer_state.json"))
    return out


@pytest.fixture(scope="module")
def trl_grpo(tiny_lm, tmp_path_factory) -> Path:
    """A real TRL GRPO run: 3 steps of 2 prompts x 2 completions, KL to the reference on."""
    import datasets
    import trl
    from transformers import AutoTokenizer

    from rlx.llm import arithmetic_preferences

    def digit_count(prompts, completions, **kwargs) -> list[float]:
        return [float(sum(c.isdigit() for c in completion)) for completion in completions]

    datasets.disable_progress_bars()
    tokenizer = AutoTokenizer.from_pretrained(tiny_lm)
    rows = [{"prompt": tokenizer.bos_token + p.prompt} for p in arithmetic_preferences(8)]
    out = tmp_path_factory.mktemp("trl_grpo")
    config = trl_config(
        trl.GRPOConfig,
        out,
        max_steps=3,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=4,
        learning_rate=1e-3,
        beta=0.04,
    )
    trainer = trl.GRPOTrainer(
        model=str(tiny_lm),
        reward_funcs=digit_count,
        args=config,
        train_dataset=datasets.Dataset.from_list(rows),
        processing_class=tokenizer,
    )
    trainer.train()
    trainer.state.save_to_json(str(out / "trainer_state.json"))
    return out


def test_trl_dpo_trainer_state_maps_onto_rlx_names(trl_dpo):
    log = read_foreign(trl_dpo / "trainer_state.json")
    assert (log.kind, log.algo) == ("trl", "dpo")
    logged_steps = np.arange(1, DPO_STEPS + 1)
    for name in (M.CHOSEN_REWARD, M.REJECTED_REWARD, M.PAIR_ACCURACY, M.REWARD_MARGIN):
        np.testing.assert_array_equal(log.get(name).steps, logged_steps, err_msg=name)
    for name in (M.LOSS, M.LR, M.GRAD_NORM, M.ENTROPY, "token_accuracy"):
        np.testing.assert_array_equal(log.get(name).steps, logged_steps, err_msg=name)
    margin = log.get(M.CHOSEN_REWARD).values - log.get(M.REJECTED_REWARD).values
    np.testing.assert_allclose(log.get(M.REWARD_MARGIN).values, margin, atol=1e-5)
    # eval entries keep their prefix; the closing totals go to the summary, not to series
    np.testing.assert_array_equal(log.get("eval_loss").steps, [3, 6])
    assert log.get("eval_pair_accuracy") is not None and log.get("eval_chosen_reward") is not None
    assert log.summary["global_step"] == DPO_STEPS and "train_loss" in log.summary
    assert "train_loss" not in log.metrics and log.get("logps/chosen") is not None


def test_trl_tensorboard_agrees_with_trainer_state(trl_dpo):
    state = read_foreign(trl_dpo / "trainer_state.json")
    folder = read_foreign(trl_dpo)  # trainer_state.json is preferred to the event files
    assert (folder.kind, folder.source) == ("trl", trl_dpo)
    tensorboard = read_foreign(trl_dpo / "runs")
    assert (tensorboard.kind, tensorboard.algo) == ("tensorboard", "dpo")
    for name in (M.LOSS, M.CHOSEN_REWARD, M.PAIR_ACCURACY, M.LR, "eval_loss"):
        assert_same(tensorboard.get(name), state.get(name))
        assert_same(folder.get(name), state.get(name), rtol=0)
    assert tensorboard.summary["train_loss"] == pytest.approx(state.summary["train_loss"])


def test_trl_grpo_keys(trl_grpo):
    for log in (read_foreign(trl_grpo), read_foreign(trl_grpo / "runs")):
        assert log.algo == "grpo"
        for name in (M.REWARD, M.KL_REF, M.FRAC_ZERO_STD_GROUPS, M.RESPONSE_LENGTH):
            np.testing.assert_array_equal(log.get(name).steps, [1, 2, 3], err_msg=name)
        assert np.all(log.get(M.FRAC_ZERO_STD_GROUPS).values >= 0)
        assert np.all(log.get(M.RESPONSE_LENGTH).values <= 4)
        assert log.get(M.CLIP_FRACTION) is not None and log.get("reward_std") is not None


# ---------------------------------------------------------------------------- hand-written files
def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_progress_csv_empty_cells_and_nan(tmp_path):
    path = write(
        tmp_path / "progress.csv",
        "time/total_timesteps,rollout/ep_rew_mean,train/approx_kl,train/entropy_loss,custom/x\n"
        "100,10.0,,,\n"
        "200,12.5,0.01,-0.5,3\n"
        "300,nan,0.02,-0.4,\n",
    )
    log = read_foreign(path)
    returns = log.get(M.EPISODE_RETURN)
    np.testing.assert_array_equal(returns.steps, [100, 200, 300])
    assert returns.values[:2].tolist() == [10.0, 12.5] and math.isnan(returns.values[2])
    np.testing.assert_array_equal(log.get(M.APPROX_KL).steps, [200, 300])
    np.testing.assert_allclose(log.get(M.ENTROPY).values, [0.5, 0.4])
    assert log.get("custom/x").values.tolist() == [3.0]
    assert log.algo == "ppo"


def test_progress_csv_without_step_column_counts_rows(tmp_path):
    log = read_foreign(write(tmp_path / "progress.csv", "rollout/ep_rew_mean\n1\n2\n"))
    np.testing.assert_array_equal(log.get(M.EPISODE_RETURN).steps, [0, 1])


def test_trainer_state_with_eval_entries_and_nan(tmp_path):
    history = [
        {"step": 1, "epoch": 0.5, "loss": 2.0, "mean_token_accuracy": 0.1, "learning_rate": 1e-3},
        {"step": 2, "epoch": 1.0, "loss": float("nan"), "mean_token_accuracy": 0.2},
        {"step": 2, "epoch": 1.0, "eval_loss": 1.5, "eval_mean_token_accuracy": 0.3},
        {"step": 2, "epoch": 1.0, "train_loss": 1.9, "train_runtime": 3.0},
    ]
    path = write(tmp_path / "trainer_state.json", json.dumps({"log_history": history}))
    log = read_foreign(path)
    assert (log.kind, log.algo) == ("trl", "sft")
    loss = log.get(M.LOSS)
    assert loss.values[0] == 2.0 and math.isnan(loss.values[1])
    assert log.get("eval_loss").values.tolist() == [1.5]
    assert log.get("eval_token_accuracy").values.tolist() == [0.3]
    np.testing.assert_array_equal(log.get("epoch").steps, [1, 2])  # repeated per entry, once here
    assert log.summary == {"train_loss": 1.9, "train_runtime": 3.0}


def test_latest_checkpoint_trainer_state_is_read(tmp_path):
    for step in (2, 4):
        history = [{"step": s, "loss": 1.0 / s} for s in range(1, step + 1)]
        state = {"global_step": step, "log_history": history}
        write(tmp_path / f"checkpoint-{step}" / "trainer_state.json", json.dumps(state))
    np.testing.assert_array_equal(read_foreign(tmp_path).get(M.LOSS).steps, [1, 2, 3, 4])


def test_rlx_tensorboard_tags_merged_across_files(tmp_path):
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    for name, points in (("1.first", {0: 0.5, 1: 0.4}), ("2.second", {1: 0.3, 2: float("nan")})):
        writer = SummaryWriter(str(tmp_path / name))
        for step, value in points.items():
            writer.add_scalar(M.APPROX_KL, value, step)
            writer.add_scalar(M.EPISODE_RETURN, 10.0 * step, step, new_style=True)  # as a tensor
        writer.close()
        (event_file,) = (tmp_path / name).glob("events.out.tfevents.*")
        event_file.rename(tmp_path / f"events.out.tfevents.{name}")  # two files of one run
    log = read_foreign(tmp_path)
    assert log.kind == "tensorboard" and log.algo is None
    kl = log.get(M.APPROX_KL)
    np.testing.assert_array_equal(kl.steps, [0, 1, 2])
    assert kl.values[:2].tolist() == pytest.approx([0.5, 0.3]) and math.isnan(kl.values[2])
    np.testing.assert_allclose(log.get(M.EPISODE_RETURN).values, [0.0, 10.0, 20.0])


def test_cleanrl_episodes_that_end_at_one_step_are_all_read(tmp_path):
    """CleanRL logs each finished episode at the global step: episodes of several envs ending
    together share it, and their mean is read there, not the last one alone."""
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path))
    for step in range(0, 2000, 100):
        for value in (10.0, 20.0, 30.0, 40.0):  # four envs' episodes end at this step
            writer.add_scalar("charts/episodic_return", value, step)
        writer.add_scalar("losses/clipfrac", 0.1, step)
    writer.close()
    returns = read_foreign(tmp_path).get(M.EPISODE_RETURN)
    assert len(returns) == 20 and set(returns.values.tolist()) == {25.0}


def test_trls_clipped_ratio_is_the_share_of_truncated_completions(tmp_path):
    history = [{"step": step, "loss": 0.0, "reward": 0.5, "frac_reward_zero_std": 0.1,
                "completions/clipped_ratio": 0.9} for step in range(1, 31)]  # fmt: skip
    write(tmp_path / "trainer_state.json", json.dumps({"log_history": history}))
    log = read_foreign(tmp_path)
    assert log.algo == "grpo" and log.get(M.TRUNCATED_FRACTION).values[0] == 0.9
    found = {f.rule.id: f for f in diagnose(log)}
    assert found["truncated-completions"].advice.startswith("a larger token budget")


CLEANRL_PPO = ("charts/episodic_return", "charts/episodic_length", "charts/learning_rate",
               "charts/SPS", "losses/value_loss", "losses/policy_loss", "losses/entropy",
               "losses/old_approx_kl", "losses/approx_kl", "losses/clipfrac",
               "losses/explained_variance")  # fmt: skip
"""The tags CleanRL's ppo.py writes."""
CLEANRL_DQN = ("charts/episodic_return", "charts/episodic_length", "charts/SPS",
               "losses/td_loss", "losses/q_values")  # fmt: skip
CLEANRL_SAC = ("charts/episodic_return", "losses/qf1_values", "losses/qf2_values",
               "losses/qf1_loss", "losses/qf_loss", "losses/actor_loss",
               "losses/alpha")  # fmt: skip


@pytest.mark.parametrize(("tags", "algo"), [(CLEANRL_PPO, "ppo"), (CLEANRL_DQN, "dqn"),
                                            (CLEANRL_SAC, "sac")])  # fmt: skip
def test_cleanrl_tensorboard_tags_are_read_in_rlx_names(tmp_path, tags, algo):
    """A CleanRL run's event file: its tags in rlx's names, its algorithm from the tags, the
    rules on them (a KL of 5 in a PPO update is a blow-up); tags without an rlx name keep
    theirs."""
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path))
    for step in range(0, 4000, 128):
        for tag in tags:
            value = 5.0 if tag == "losses/approx_kl" and step == 256 else 0.01
            writer.add_scalar(tag, 100.0 if tag == "charts/episodic_return" else value, step)
    writer.close()
    log = read_foreign(tmp_path)
    assert (log.kind, log.algo) == ("tensorboard", algo)
    assert log.get(M.EPISODE_RETURN).values[0] == 100.0
    assert "charts/SPS" not in tags or "charts/SPS" in log.metrics
    if algo == "ppo":
        assert {M.APPROX_KL, M.CLIP_FRACTION, M.ENTROPY, M.EXPLAINED_VARIANCE} <= set(log.metrics)
        assert "losses/old_approx_kl" in log.metrics  # no rlx name: its own
        assert "policy-blowup" in [f.rule.id for f in diagnose(log)]
    else:
        assert M.Q_MEAN in log.metrics
    if algo == "sac":
        assert {M.ALPHA, M.ACTOR_LOSS, M.CRITIC_LOSS} <= set(log.metrics)


@pytest.mark.parametrize(
    ("keys", "algo"),
    [
        ({"train/approx_kl", "train/clip_fraction", "train/entropy_loss"}, "ppo"),
        ({"rollout/exploration_rate", "train/loss", "train/n_updates"}, "dqn"),
        ({"train/ent_coef", "train/actor_loss", "train/critic_loss"}, "sac"),
        ({"train/actor_loss", "train/critic_loss"}, "td3"),
        ({"train/policy_loss", "train/value_loss", "train/entropy_loss"}, "a2c"),
        ({"rollout/ep_rew_mean"}, None),
    ],
)
def test_sb3_algo_guess(keys, algo):
    assert guess_algo(keys, SB3_ALGOS) == algo


@pytest.mark.parametrize(
    ("keys", "algo"),
    [
        ({"loss", "mean_token_accuracy", "rewards/chosen", "rewards/margins"}, "dpo"),
        ({"loss", "kl", "reward", "frac_reward_zero_std"}, "grpo"),
        ({"objective/kl", "objective/scores"}, "rlhf-ppo"),
        ({"loss", "accuracy", "margin", "mean_reward"}, "rm"),
        ({"loss", "mean_token_accuracy", "eval_loss"}, "sft"),
        ({"loss"}, None),
    ],
)
def test_trl_algo_guess(keys, algo):
    assert guess_algo(keys, TRL_ALGOS) == algo


# ---------------------------------------------------------------------------- errors
def test_malformed_json_names_the_file(tmp_path):
    path = write(tmp_path / "trainer_state.json", '{"log_history": [')
    with pytest.raises(RunError, match=re.escape(f"{path} is not valid JSON")):
        read_foreign(tmp_path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", "holds a JSON list"),
        ('{"global_step": 3}', "no 'log_history' list"),
        ('{"log_history": [{"loss": 1.0}]}', r"log_history\[0\] has no numeric 'step'"),
    ],
)
def test_trainer_state_of_the_wrong_shape(tmp_path, text, message):
    path = write(tmp_path / "trainer_state.json", text)
    with pytest.raises(RunError, match=message) as error:
        read_foreign(path)
    assert str(path) in str(error.value)


def test_empty_progress_csv(tmp_path):
    path = write(tmp_path / "progress.csv", "")
    with pytest.raises(RunError, match=re.escape(f"{path} is empty")):
        read_foreign(path)


def test_folder_with_nothing_readable_says_what_it_looked_for(tmp_path):
    write(tmp_path / "notes.txt", "hello")
    write(tmp_path / "/".join(["d"] * (MAX_DEPTH + 1)) / "progress.csv", "a\n1\n")  # too deep
    with pytest.raises(RunError) as error:
        read_foreign(tmp_path)
    for looked_for in ("trainer_state.json", "progress.csv", "events.out.tfevents."):
        assert looked_for in str(error.value)
    assert str(tmp_path) in str(error.value)


def test_unknown_file_and_missing_path(tmp_path):
    with pytest.raises(RunError, match="not one of the logs rlx reads"):
        read_foreign(write(tmp_path / "notes.txt", "hello"))
    with pytest.raises(RunError, match="does not exist"):
        read_foreign(tmp_path / "missing")


def test_garbage_event_file(tmp_path):
    pytest.importorskip("tensorboard")
    path = write(tmp_path / "events.out.tfevents.1.host", "not a TFRecord at all")
    with pytest.raises(RunError, match="no scalar values read"):
        read_foreign(path)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("progress.csv", "holds 2 SB3 runs"),
        ("events.out.tfevents.1.host", "holds 2 TensorBoard runs"),
    ],
)
def test_several_runs_in_one_folder_ask_for_one(tmp_path, name, message):
    for run in ("PPO_1", "PPO_2"):
        write(tmp_path / run / name, "rollout/ep_rew_mean\n1\n")
    with pytest.raises(RunError, match=message) as error:
        read_foreign(tmp_path)
    assert str(tmp_path / "PPO_2") in str(error.value)


def test_event_files_without_tensorboard_say_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboard.backend.event_processing", None)
    path = write(tmp_path / "events.out.tfevents.1.host", "")
    with pytest.raises(RunError, match="pip install tensorboard"):
        read_foreign(path)
