"""``rlx.evaluate`` for deep agents: batched on a vector env, episodes split without bias."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from tests import toy_envs  # noqa: F401  (registers rlx-test/... ids)


class Scripted:
    """Acts 1 (terminate at t >= 3 on Count) in every copy; counts its batched calls."""

    def __init__(self) -> None:
        self.calls = 0

    def act_batch(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        self.calls += 1
        return np.ones(len(obs), dtype=np.int64)

    def act(self, obs, deterministic: bool = True) -> int:
        raise AssertionError("a batched agent is evaluated with act_batch")


def test_batched_evaluation_counts_each_episode_once():
    agent = Scripted()
    stats = rlx.evaluate(agent, "rlx-test/Count-v0", episodes=40, seed=0)
    # every episode lasts 3 steps and pays 1 per step; the reset steps are not counted
    assert stats.episodes == 40 and len(stats.returns) == 40
    assert stats.mean_return == 3.0 and stats.mean_length == 3.0 and stats.std_return == 0.0
    # 16 copies: 40 episodes = 3 rounds of (3 steps + 1 reset step), one call per vector step
    assert agent.calls <= 3 * 4


def test_evaluation_on_cartpole_with_a_fixed_policy_is_reproducible():
    class Lean:
        def act_batch(self, obs, deterministic=True):
            return (obs[:, 2] + obs[:, 3] > 0).astype(np.int64)  # push toward the lean

    a = rlx.evaluate(Lean(), "CartPole-v1", episodes=10, seed=3)
    b = rlx.evaluate(Lean(), "CartPole-v1", episodes=10, seed=3)
    assert a.returns == b.returns and a.mean_return > 100


def test_agents_without_act_batch_keep_the_per_episode_loop():
    class Lean:
        def act(self, obs, deterministic=True):
            return int(obs[2] + obs[3] > 0)

    class Left:
        def act(self, obs, deterministic=True):
            return 0

    gym_stats = rlx.evaluate(Lean(), "CartPole-v1", episodes=3, seed=3)
    assert gym_stats.episodes == 3 and gym_stats.mean_return > 100
    mdp_stats = rlx.evaluate(Left(), "GridWorld", episodes=4, max_steps=7)
    assert mdp_stats.episodes == 4 and mdp_stats.mean_length <= 7


# ---------------------------------------------------------------------------- the trained env
def test_without_an_env_the_agents_recipe_is_rebuilt_before_its_env_id():
    from rlx.core.env_recipe import EnvRecipe

    class Recorder:
        env_id = "CartPole-v1"  # what the recipe must win over
        env_recipe = EnvRecipe("entry_point", "tests.agents.space_envs:MultiDiscreteTarget")

        def __init__(self) -> None:
            self.shapes = []

        def act_batch(self, obs, deterministic=True):
            self.shapes.append(obs.shape)
            return np.zeros((len(obs), 2), np.int64)

    agent = Recorder()
    stats = rlx.evaluate(agent, episodes=2)
    assert agent.shapes[0] == (2, 7)  # MultiDiscreteTarget's observations, not CartPole's
    assert stats.episodes == 2 and stats.mean_length == 8


def test_a_recipe_that_cannot_be_rebuilt_raises_its_own_error():
    from rlx.core.env_recipe import EnvRecipe
    from rlx.errors import EnvError

    agent = Scripted()
    agent.env_id = "CartPole-v1"
    agent.env_recipe = EnvRecipe("unrebuildable", reason="a lambda has no import path")
    with pytest.raises(EnvError, match="a lambda has no import path"):
        rlx.evaluate(agent, episodes=2)


def test_a_deep_runs_headline_is_held_out_episodes_with_their_count_and_interval(tmp_path):
    """summary.json's eval_return_mean comes from episodes seeded apart from training, and sits
    beside the number of episodes and the t interval of their mean return."""
    import json

    from rlx.core.evaluation import EVAL_SEED_OFFSET
    from rlx.core.intervals import mean_interval

    agent = rlx.train("ppo", "CartPole-v1", total_steps=2048, eval_episodes=7, seed=4,
                      run_dir=tmp_path / "r", progress=False)  # fmt: skip
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    again = rlx.evaluate(agent, "CartPole-v1", episodes=7, seed=4 + EVAL_SEED_OFFSET)
    assert summary["eval_episodes"] == 7
    assert summary["eval_return_mean"] == pytest.approx(again.mean_return)
    low, high = mean_interval(list(again.returns))
    assert (summary["eval_return_low"], summary["eval_return_high"]) == pytest.approx((low, high))
    assert low <= summary["eval_return_mean"] <= high


def test_a_tabular_runs_headline_is_a_greedy_evaluation_on_held_out_episodes(tmp_path):
    import json

    from rlx.core.evaluation import EVAL_SEED_OFFSET

    agent = rlx.train("q-learning", "FrozenLake-v1", episodes=2000, eval_episodes=50, seed=1,
                      run_dir=tmp_path / "q", progress=False)  # fmt: skip
    summary = json.loads((tmp_path / "q" / "summary.json").read_text())
    again = rlx.evaluate(agent, "FrozenLake-v1", episodes=50, seed=1 + EVAL_SEED_OFFSET)
    assert summary["eval_episodes"] == 50
    assert summary["eval_return_mean"] == pytest.approx(again.mean_return)
    assert summary["eval_return_low"] <= summary["eval_return_mean"] <= summary["eval_return_high"]
