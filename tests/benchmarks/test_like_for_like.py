"""Every benchmark's peer is configured for the same work as rlx: each test builds both sides'
configuration objects the way the benchmark does (TRL's ``SFTConfig`` / ``DPOConfig`` /
``GRPOConfig`` / ``RewardConfig``, SB3's constructed models, OpenSpiel's bots, the wrapper
chains of both Atari pipelines) and asserts the settings that change the work are equal. Fast:
nothing trains."""

from __future__ import annotations

import pytest

from tests.benchmarks import conftest  # noqa: F401  (benchmarks/ on sys.path)


def unequal(rows: list[dict]) -> list[tuple]:
    return [(r["setting"], r["rlx"], r["peer"]) for r in rows if not r["equal"]]


def by_setting(rows: list[dict]) -> dict[str, tuple]:
    return {r["setting"]: (r["rlx"], r["peer"]) for r in rows}


# ---------------------------------------------------------------------------- language models
@pytest.mark.parametrize("precision", ["fp32", "bf16-mixed"])
@pytest.mark.parametrize("lora", [False, True])
@pytest.mark.parametrize("stage", ["sft", "dpo", "grpo"])
def test_lora_benchmark_configures_trl_like_rlx(stage, lora, precision):
    pytest.importorskip("trl")
    import bench_lora

    rows = bench_lora.like_for_like(stage, lora, precision, steps=20)
    assert unequal(rows) == []
    settings = by_setting(rows)
    assert settings["precision"] == (precision, precision)  # TRL's bf16 follows rlx's precision
    assert settings["activation checkpointing"] == (False, False)  # TRL's default is True
    assert settings["steps"] == (20, 20)
    assert settings["rows per step"] == (bench_lora.BATCH, bench_lora.BATCH)
    assert settings["LoRA"][0] == settings["LoRA"][1] != ("off" if lora else "on")
    if stage == "grpo":
        assert settings["group size"] == (bench_lora.G, bench_lora.G)
        assert settings["completion tokens (max)"] == (bench_lora.MAX_TOKENS,) * 2
    else:
        assert settings["longest sequence (tokens)"] == (bench_lora.MAX_LENGTH,) * 2


def test_long_completion_grpo_shape_reaches_both_configs():
    """--prompts, --group-size and --max-new-tokens (the real model's long-completion run)
    change both sides' work alike."""
    pytest.importorskip("trl")
    import bench_lora

    rows = bench_lora.like_for_like("grpo", True, "fp32", 16, 1e-4, 128, prompts=2, group=4)
    assert unequal(rows) == []
    settings = by_setting(rows)
    assert settings["rows per step"] == (2, 2)
    assert settings["group size"] == (4, 4)
    assert settings["completion tokens (max)"] == (128, 128)


def test_small_sums_are_one_digit_questions_with_their_sums():
    import re

    import bench_lora

    rows = bench_lora.grpo_rows(50, "small-sums")
    assert len(rows) == 50
    for row in rows:
        [message] = row["prompt"]
        a, b = re.fullmatch(r"What is (\d) \+ (\d)\?", message["content"]).groups()
        assert row["answer"] == str(int(a) + int(b)) and "0" not in (a, b)
    assert len({r["prompt"][0]["content"] for r in rows}) > 20  # not one question repeated
    sums = bench_lora.grpo_rows(5, "sums")
    assert all(re.fullmatch(r"\d\d\+\d\d=", r["prompt"][0]["content"]) for r in sums)
    # the last-number reward both sides use scores a rambling reply by its last number
    reply = [[{"role": "assistant", "content": "Well, 3 + 4... the answer is 7."}]]
    assert bench_lora.last_number(None, reply, ["7"]) == [1.0]
    assert bench_lora.last_number(None, reply, ["8"]) == [0.0]


def test_trl_left_at_its_default_precision_is_caught(tmp_path):
    """The old defect: TRL's bf16 left at its default (True since TRL 1.0) against rlx's
    float32. The settings table shows it and the benchmark refuses to run it."""
    pytest.importorskip("trl")
    import dataclasses

    import bench_lora
    from results import check_like_for_like, settings_table

    ours = bench_lora.rlx_settings(
        "sft", bench_lora.rlx_config("sft", bench_lora.rlx_kwargs("sft", False, "fp32", 20))
    )
    config, peft = bench_lora.trl_config("sft", False, "fp32", 20, str(tmp_path))
    default = dataclasses.replace(config, bf16=None, model_init_kwargs=None)  # bf16 unset
    assert default.bf16 is True  # TRL's default
    rows = settings_table(ours, bench_lora.trl_settings("sft", default, peft))
    assert [s for s, _, _ in unequal(rows)] == ["precision"]
    with pytest.raises(ValueError, match="precision: rlx 'fp32', peer 'bf16-mixed'"):
        check_like_for_like(rows, "bench_lora")


@pytest.mark.parametrize("precision", ["fp32", "bf16-mixed"])
def test_grpo_benchmark_configures_trl_like_rlx(precision):
    pytest.importorskip("trl")
    import bench_grpo

    rows = bench_grpo.like_for_like(steps=60, lr=1e-5, precision=precision)
    assert unequal(rows) == []
    settings = by_setting(rows)
    assert settings["precision"] == (precision, precision)
    assert settings["activation checkpointing"] == (False, False)
    assert settings["rows per step"] == (bench_grpo.PROMPTS, bench_grpo.PROMPTS)
    assert settings["group size"] == (bench_grpo.G, bench_grpo.G)
    assert settings["completion tokens (max)"] == (bench_grpo.MAX_TOKENS,) * 2
    assert settings["loss aggregation"] == ("grpo", "grpo")


def test_agents_benchmark_configures_trls_environment_mode_like_rlx():
    import bench_agents

    rows = bench_agents.like_for_like(steps=40, prompt=200)
    assert unequal(rows) == []
    settings = by_setting(rows)
    budget = settings["tokens after the prompt (max, the tool's answer included)"]
    assert budget == (bench_agents.COMPLETION_TOKENS,) * 2
    assert settings["precision"] == ("fp32", "fp32")  # TRL's CPU default would be bf16
    assert settings["tasks per step"] == (bench_agents.TASKS,) * 2
    assert settings["episodes per task (group)"] == (bench_agents.G,) * 2
    assert settings["replies per episode (max)"] == (2, 2)
    assert settings["first training task (env seed)"] == (1_000_000, 1_000_000)


def test_agents_benchmark_scores_trls_episodes_as_rlxs_env_does():
    """TRL's reward reads the last message: the assistant's final reply, not a call, scored by
    rlx's own exact_answer; TRL's environment shows the model rlx's tool, schema and all, and
    holds the same card for the same row."""
    import inspect

    import bench_agents
    from rlx.llm.tool_calls import tool_schema

    call = {"role": "assistant", "content": "", "tool_calls": [{"type": "function"}]}
    answered = [{"role": "tool", "content": "blue"}, {"role": "assistant", "content": " blue\n"}]
    completions = [[call, *answered], [call], [call, answered[0]], [answered[1]], []]
    rewards = bench_agents.final_answer(completions, ["blue", "blue", "blue", "red", "blue"])
    assert rewards == [1.0, 0.0, 0.0, 0.0, 0.0]
    ours, theirs = bench_agents.CardEnv(), bench_agents.CardEnvironment()
    tools = [m for n, m in inspect.getmembers(type(theirs), inspect.isfunction)
             if n not in ("reset", "get_reward") and not n.startswith("_")]  # fmt: skip
    assert [tool_schema(t.__get__(theirs)) for t in tools] == list(ours.tool_schemas)
    rows = bench_agents.trl_rows(steps=3)
    seeds = range(bench_agents.TRAIN_SEED_START, bench_agents.TRAIN_SEED_START + len(rows))
    for seed, row in zip(seeds, rows, strict=True):
        assert ours.reset(seed) == row["prompt"]
        assert theirs.reset(**row) is None and theirs.read_card() == ours.read_card()
    assert len({row["answer"] for row in rows}) > 1  # the card changes from task to task


@pytest.mark.parametrize("precision", ["fp32", "bf16-mixed"])
@pytest.mark.parametrize("stage", ["sft", "rm", "dpo"])
def test_llm_benchmark_configures_trl_like_rlx(stage, precision):
    pytest.importorskip("trl")
    import bench_llm

    rows = bench_llm.like_for_like(stage, precision)
    assert unequal(rows) == []
    settings = by_setting(rows)
    assert settings["precision"] == (precision, precision)
    assert settings["activation checkpointing"] == (False, False)
    expected = bench_llm.STAGES[stage]
    assert settings["steps"] == (expected.steps, expected.steps)
    assert settings["rows per step"] == (expected.batch_size, expected.batch_size)
    assert settings["longest sequence (tokens)"] == (bench_llm.MAX_LENGTH,) * 2


# ---------------------------------------------------------------------------- deep RL
@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_policy_gradient_benchmark_runs_rlx_on_sb3s_hyperparameters(algo):
    pytest.importorskip("stable_baselines3")
    import bench_policy_gradient as bench

    rows = bench.like_for_like(algo)
    assert unequal(rows) == []
    settings = by_setting(rows)
    recipe = bench.RECIPES[algo]
    assert settings["env copies"] == (recipe["n_envs"],) * 2
    assert settings["total env steps"] == (recipe["n_timesteps"],) * 2
    assert settings["policy / value hidden sizes"][0] == "[64, 64] / [64, 64]"
    if algo == "ppo":
        assert settings["epochs per update"] == (20, 20)  # the zoo's, not the preset's 12
        assert settings["minibatch size"] == (256, 256)
        assert settings["learning rate"] == ("0.001 linear to 0",) * 2


def test_policy_gradient_preset_differences_are_listed():
    """What the preset row measures besides the code: where the preset leaves the recipe."""
    pytest.importorskip("stable_baselines3")
    import bench_policy_gradient as bench

    differences = {d["setting"]: (d["preset"], d["recipe"]) for d in bench.preset_vs_recipe("ppo")}
    assert differences["epochs per update"] == (12, 20)
    a2c = {d["setting"]: (d["preset"], d["recipe"]) for d in bench.preset_vs_recipe("a2c")}
    assert a2c["gamma"] == (0.98, 0.99)  # retuned: the zoo's settings collapsed on some seeds
    assert a2c["learning rate"][0] != a2c["learning rate"][1]  # decaying vs constant
    assert len(a2c) == 2


def test_dqn_benchmark_runs_rlx_on_sb3s_hyperparameters():
    pytest.importorskip("stable_baselines3")
    import bench_dqn

    rows = bench_dqn.like_for_like()
    assert unequal(rows) == []
    settings = by_setting(rows)
    assert settings["hidden sizes"] == ([256, 256], [256, 256])
    assert settings["learning starts"] == (1_000, 1_000)
    assert settings["target"] == ("vanilla", "vanilla")  # SB3's DQN has no Double DQN
    assert settings["loss"] == ("huber", "huber")
    differences = {d["setting"] for d in bench_dqn.preset_vs_recipe()}
    assert {"hidden sizes", "total env steps", "target"} <= differences


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_continuous_benchmark_runs_rlx_on_sb3s_hyperparameters(algo):
    pytest.importorskip("stable_baselines3")
    import bench_continuous as bench

    rows = bench.like_for_like(algo)
    assert unequal(rows) == []
    settings = by_setting(rows)
    wide = "[256, 256] / [256, 256]" if algo == "sac" else "[400, 300] / [400, 300]"
    assert settings["actor / critic hidden sizes"] == (wide, wide)
    if algo == "sac":
        assert settings["initial temperature"] == (1.0, 1.0)  # SB3's "auto" starts at 1
    else:
        assert settings["learning starts"] == (10_000, 10_000)
        assert settings["gradient steps per training"] == (200, 200)


def test_atari_pipelines_preprocess_alike():
    pytest.importorskip("ale_py")
    pytest.importorskip("stable_baselines3")
    import bench_atari
    from rlx.core.atari import register_atari_games

    assert register_atari_games()
    rows = bench_atari.like_for_like("ALE/Breakout-v5", envs=2)
    assert unequal(rows) == []
    assert by_setting(rows)["frame skip (max of last 2)"] == (4, 4)


# ---------------------------------------------------------------------------- the rest
def test_mcts_benchmark_searches_alike():
    pytest.importorskip("pyspiel")
    import bench_mcts

    rows = bench_mcts.like_for_like(simulations=1000, seed=0)
    assert unequal(rows) == []
    assert by_setting(rows)["UCT exploration constant"] == (2.0, 2.0)


def test_q_learning_benchmark_learns_alike():
    import gymnasium as gym

    import bench_q_learning as bench
    from rlx.mdp import from_gymnasium

    mdp = from_gymnasium("FrozenLake-v1", gamma=bench.GAMMA, map_name="8x8")
    env = gym.make("FrozenLake-v1", map_name="8x8")
    assert unequal(bench.like_for_like(mdp, env, episodes=1000, seed=0)) == []


def test_value_iteration_benchmark_gives_both_the_same_input():
    pytest.importorskip("mdptoolbox")
    import bench_value_iteration as bench

    assert unequal(bench.like_for_like([1_000, 10_000])) == []


def test_generation_benchmark_samples_alike(tmp_path):
    """rlx's sampler and generate (both caches) get the same prompts, G, new tokens, sampling
    settings, eos and pad ids, dtype and threads, read on a tiny model built in code."""
    import bench_generation as bench

    model, tokenizer = bench.tiny_model(tmp_path / "tiny")
    rows = bench.like_for_like(model, tokenizer, 12, bench.PROMPTS, bench.G)
    assert unequal(rows) == []
    settings = by_setting(rows)
    for cache in ("dynamic", "static"):
        assert settings[f"{cache}: sequences"] == (len(bench.PROMPTS) * bench.G,) * 2
        assert settings[f"{cache}: new tokens (max)"] == (12, 12)
        assert settings[f"{cache}: top-k"] == ("off", "off")  # generate's default is 50
        assert settings[f"{cache}: logits processors"] == ([], [])
        eos = tokenizer.eos_token_id
        assert settings[f"{cache}: eos logit masked (every row N tokens)"] == (eos, eos)
