"""Every doctor rule that can fire on an algorithm's run names a field of that algorithm's own
config, in words that fit that algorithm and its settings: each algorithm trains a few steps
here, and every rule that applies to the metrics it logged must resolve its fix to a field the
run's config has, with a value to try, and its words may name only what the run has (no
"Double DQN" for SAC or for a DQN that has it on, no epochs for A2C, no entropy bonus for SAC).
"""

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
    "grpo-episodes": ("hidden-number", {"steps": 2, "batch_size": 2, "group_size": 2,
                                        "max_new_tokens": 3, "eval_episodes": 2}),
    "ppo-episodes": ("hidden-number", {"steps": 2, "batch_size": 2, "minibatch_size": 2,
                                       "max_new_tokens": 3, "eval_episodes": 2}),
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


def names_outside_rlx_metrics(metrics: set[str]) -> list[str]:
    """Logged names that are no constant of :mod:`rlx.metrics` (an evaluation's name is
    ``EVALUATION_PREFIX`` + one, an arena's :func:`rlx.metrics.arena_metric`'s, a reward
    function's :func:`rlx.metrics.reward_component`'s): one name for one idea, defined in one
    place."""
    from rlx import metrics as M

    return sorted(
        name
        for name in metrics
        if name not in M.ALL_METRICS
        and name.removeprefix(M.EVALUATION_PREFIX) not in M.ALL_METRICS
        and not M.is_arena_metric(name)
        and not name.startswith(M.REWARD_PREFIX)
    )


def logged_metrics(run_dir) -> set[str]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {key for row in rows for key in row} - {"step", "wall_s"}


TWIN = {"sac", "td3"}
TABULAR = {"q-learning", "sarsa", "expected-sarsa", "double-q", "mc", "mc-prediction", "td0"}
# the words a fix may use -> what the run must have for them to fit (algo, config)
VOCABULARY: dict[str, object] = {
    "Double DQN is already on": lambda a, c: a == "dqn" and c.get("double") is True,
    "Double DQN": lambda a, c: a == "dqn",
    "twin critics": lambda a, c: a in TWIN,
    "epochs": lambda a, c: "num_epochs" in c,
    "entropy bonus": lambda a, c: "ent_coef" in c,
    "entropy temperature alpha": lambda a, c: a == "sac" and c.get("autotune") is False,
    "target entropy": lambda a, c: a == "sac" and bool(c.get("autotune")),
    "sampling temperature": lambda a, c: "temperature" in c and a not in TWIN | TABULAR,
    "target net": lambda a, c: "sync_every" in c or "tau" in c,
    "Polyak tau": lambda a, c: a in TWIN,
    "replay buffer": lambda a, c: "buffer_size" in c and a in {"dqn", *TWIN},
    "clip range": lambda a, c: "clip_eps" in c,
    "value-loss weight": lambda a, c: "vf_coef" in c,
    "beta": lambda a, c: "beta" in c,
    "samples per group": lambda a, c: "group_size" in c,
    "token budget": lambda a, c: "max_new_tokens" in c,
    "critic's learning rate": lambda a, c: "critic_learning_rate" in c,
    "actor's learning rate": lambda a, c: "actor_learning_rate" in c,
    "the learning rate": lambda a, c: "learning_rate" in c,
    "step size alpha": lambda a, c: a in TABULAR,
    "length-normalised": lambda a, c: "length_normalize" in c,
    "normalise the rewards": lambda a, c: "normalize_rewards" in c,
    "train longer": lambda a, c: bool({"total_steps", "episodes", "iterations", "steps"} & set(c)),
}


def applicable_rules(algo: str, metrics: set[str]) -> list:
    return [
        rule
        for rule in RULES
        if (rule.algos is None or algo in rule.algos)
        and (rule.metric == "*" or set(rule.metrics) & metrics)
    ]


def rules_without_a_field(algo: str, metrics: set[str], config: dict) -> list[str]:
    missing = []
    for rule in applicable_rules(algo, metrics):
        field, _, suggested = rule.change_for(config, algo)
        if field is None or suggested is None:
            missing.append(f"{rule.id} (fields {rule.fields})")
    return missing


def fixes_that_do_not_fit(algo: str, metrics: set[str], config: dict) -> list[str]:
    """Each applicable rule's advice for this run: words that name something the run does not
    have, words the vocabulary does not know, or a field that is not the run's."""
    wrong = []
    for rule in applicable_rules(algo, metrics):
        advice = rule.advice(config, algo)
        known = [term for term in VOCABULARY if term in advice.text]
        if not known:
            wrong.append(f"{rule.id}: {advice.text!r} uses no known words")
        for term in known:
            if not VOCABULARY[term](algo, config):
                wrong.append(f"{rule.id}: {advice.text!r} says {term!r} to a {algo} run")
        if advice.field is not None and advice.field not in config:
            wrong.append(f"{rule.id}: names {advice.field}, not a field of the run")
    return wrong


def variants(algo: str, config: dict) -> list[dict]:
    """The run's config and the settings that change which fix fits: Double DQN on and off,
    SAC's temperature tuned and fixed."""
    if algo == "dqn":
        return [dict(config, double=True), dict(config, double=False)]
    if algo == "sac":
        return [dict(config, autotune=True), dict(config, autotune=False)]
    return [config]


def test_every_algorithm_is_covered():
    assert set(RUNS) | set(LLM_RUNS) == set(registry.BUILTINS)


@pytest.mark.parametrize("algo", sorted(RUNS))
def test_every_rule_on_an_agent_names_a_field_of_its_config(algo, tmp_path):
    env, settings = RUNS[algo]
    agent = rlx.train(algo, env, run_dir=tmp_path / algo, seed=0, doctor=False, **settings)
    metrics = logged_metrics(tmp_path / algo)
    assert metrics, f"{algo} logged nothing"
    assert names_outside_rlx_metrics(metrics) == []
    for config in variants(algo, dataclasses.asdict(agent.config)):
        assert rules_without_a_field(algo, metrics, config) == []
        assert fixes_that_do_not_fit(algo, metrics, config) == []


@pytest.mark.parametrize("algo", sorted(LLM_RUNS))
def test_every_rule_on_a_language_model_stage_names_a_field_of_its_config(
    algo, llm_files, tmp_path
):
    root, model = llm_files
    data, settings = LLM_RUNS[algo]
    episodes = algo in ("grpo-episodes", "ppo-episodes")
    env = data if episodes else root / data  # a built-in text env, not a file
    rlx.train(algo, env, model=str(model), run_dir=tmp_path / algo, doctor=False,
              progress=False, **settings)  # fmt: skip
    metrics = logged_metrics(tmp_path / algo)
    assert names_outside_rlx_metrics(metrics) == []
    config = json.loads((tmp_path / algo / "config.json").read_text())["config"]
    assert rules_without_a_field(algo, metrics, config) == []
    assert fixes_that_do_not_fit(algo, metrics, config) == []


@pytest.mark.parametrize("algo", sorted(RUNS))
def test_every_rule_of_the_table_has_words_for_every_algorithm(algo):
    """Every rule (not only those the short run's metrics reach), for every algorithm's own
    default config: the advice it would give fits the algorithm, or, where no field of the run
    carries the fix, is the table's own words."""
    from rlx import registry
    from rlx.diagnostics.rules import Advice

    defaults = dataclasses.asdict(registry.get(algo).config())
    for config in variants(algo, defaults):
        for rule in RULES:
            if rule.algos is not None and algo not in rule.algos:
                continue
            advice = rule.advice(config, algo)
            if advice == Advice(rule.fix):
                continue  # no field of this run carries it: the table's words, no value
            for term in (t for t in VOCABULARY if t in advice.text):
                assert VOCABULARY[term](algo, config), (rule.id, algo, advice.text)
