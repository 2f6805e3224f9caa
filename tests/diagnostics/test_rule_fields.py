"""Every doctor rule that can fire on an algorithm's run names a field of that algorithm's own
config: each algorithm trains a few steps here, and every rule that applies to the metrics it
logged must resolve its fix to a field the run's config has, with a value to try."""

from __future__ import annotations

import dataclasses
import json

import pytest

import rlx
from rlx import registry
from rlx.diagnostics.rules import RULES

DEEP = {"eval_episodes": 0, "progress": False}
TINY_GAMES = {"iterations": 1, "games_per_iteration": 2, "simulations": 4,
              "eval_simulations": 4, "batch_size": 8, "eval_games": 2, "eval_every": 1}  # fmt: skip
RUNS: dict[str, tuple[str, dict]] = {
    "q-learning": ("FrozenLake-v1", {"episodes": 50}),
    "sarsa": ("FrozenLake-v1", {"episodes": 50}),
    "expected-sarsa": ("FrozenLake-v1", {"episodes": 50}),
    "double-q": ("FrozenLake-v1", {"episodes": 50}),
    "mc": ("FrozenLake-v1", {"episodes": 50}),
    "mc-prediction": ("FrozenLake-v1", {"episodes": 50}),
    "td0": ("FrozenLake-v1", {"episodes": 50}),
    "dqn": ("CartPole-v1", {"total_steps": 600, "learning_starts": 100, "log_every": 100, **DEEP}),
    "reinforce": ("CartPole-v1", {"total_steps": 2048, **DEEP}),
    "a2c": ("CartPole-v1", {"total_steps": 2048, **DEEP}),
    "ppo": ("CartPole-v1", {"total_steps": 2048, **DEEP}),
    "sac": ("Pendulum-v1", {"total_steps": 300, "learning_starts": 100, "log_every": 100,
                            "batch_size": 32, **DEEP}),
    "td3": ("Pendulum-v1", {"total_steps": 300, "learning_starts": 100, "log_every": 100,
                            "batch_size": 32, **DEEP}),
    "alphazero": ("tictactoe", {**TINY_GAMES, "train_steps_per_iteration": 2}),
    "muzero": ("tictactoe", {**TINY_GAMES, "train_steps_per_iteration": 2, "buffer_size": 50}),
}  # fmt: skip
LLM_RUNS = {
    "sft": ("sft.jsonl", {"steps": 2, "batch_size": 4}),
    "rm": ("prefs.jsonl", {"steps": 2, "batch_size": 4}),
    "dpo": ("prefs.jsonl", {"steps": 2, "batch_size": 4}),
    "grpo": ("prompts.jsonl", {"steps": 2, "batch_size": 2, "group_size": 2,
                               "max_new_tokens": 3}),
    "rlhf-ppo": ("prompts.jsonl", {"steps": 2, "batch_size": 4, "max_new_tokens": 3,
                                   "reward_model": "exact-match"}),
}  # fmt: skip


@pytest.fixture(scope="module")
def llm_files(tmp_path_factory):
    pytest.importorskip("transformers")
    from rlx import llm

    root = tmp_path_factory.mktemp("llm")
    llm.write_jsonl(root / "sft.jsonl", llm.arithmetic_sft(16, seed=0))
    llm.write_jsonl(root / "prefs.jsonl", llm.arithmetic_preferences(16, seed=1))
    llm.write_jsonl(root / "prompts.jsonl", llm.arithmetic(16, seed=2))
    model = llm.make_tiny_lm(root / "tiny", texts=["0123456789+="], hidden_size=16,
                             num_layers=1, num_heads=2)  # fmt: skip
    return root, model


def logged_metrics(run_dir) -> set[str]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {key for row in rows for key in row} - {"step", "wall_s"}


def rules_without_a_field(algo: str, metrics: set[str], config: dict) -> list[str]:
    missing = []
    for rule in RULES:
        if rule.algos is not None and algo not in rule.algos:
            continue
        if rule.metric != "*" and not set(rule.metrics) & metrics:
            continue
        field, _, suggested = rule.change_for(config)
        if field is None or suggested is None:
            missing.append(f"{rule.id} (fields {rule.fields})")
    return missing


def test_every_algorithm_is_covered():
    assert set(RUNS) | set(LLM_RUNS) == set(registry.BUILTINS)


@pytest.mark.parametrize("algo", sorted(RUNS))
def test_every_rule_on_an_agent_names_a_field_of_its_config(algo, tmp_path):
    env, settings = RUNS[algo]
    agent = rlx.train(algo, env, run_dir=tmp_path / algo, seed=0, doctor=False, **settings)
    metrics = logged_metrics(tmp_path / algo)
    assert metrics, f"{algo} logged nothing"
    assert rules_without_a_field(algo, metrics, dataclasses.asdict(agent.config)) == []


@pytest.mark.parametrize("algo", sorted(LLM_RUNS))
def test_every_rule_on_a_language_model_stage_names_a_field_of_its_config(
    algo, llm_files, tmp_path
):
    root, model = llm_files
    data, settings = LLM_RUNS[algo]
    rlx.train(algo, root / data, model=str(model), run_dir=tmp_path / algo, doctor=False,
              progress=False, **settings)  # fmt: skip
    metrics = logged_metrics(tmp_path / algo)
    config = json.loads((tmp_path / algo / "config.json").read_text())["config"]
    assert rules_without_a_field(algo, metrics, config) == []
