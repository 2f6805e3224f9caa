"""Every common space and invalid-action masks, on the small envs of ``space_envs``.

Learning thresholds are far above what a broken implementation reaches: a random policy
scores about a third (Dict, MultiDiscrete) or a half (MultiBinary, masked) of the maximum,
and an agent that ignores the mask cannot beat 0 on :class:`~space_envs.Choice`.
"""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.errors import EnvError
from tests.agents import space_envs
from tests.agents.pg_helpers import train

ENVS = "tests.agents.space_envs:"
PPO = {"num_envs": 4, "num_steps": 32, "minibatch_size": 64}
A2C = {"num_envs": 4, "learning_rate": 3e-3}
DQN = {
    "num_envs": 4, "learning_starts": 200, "buffer_size": 5_000, "exploration_fraction": 0.3,
    "log_every": 500,
}  # fmt: skip
MAX = float(space_envs.EPISODE)


def mean_return(agent, env, episodes: int = 16) -> float:
    return rlx.evaluate(agent, env, episodes=episodes).mean_return


# ---------------------------------------------------------------------------- spaces
@pytest.mark.parametrize(
    "algo, options, steps",
    [("ppo", PPO, 4_000), ("dqn", DQN, 4_000), ("a2c", A2C, 6_000),
     ("reinforce", {"num_envs": 4}, 8_000)],
    ids=["ppo", "dqn", "a2c", "reinforce"],
)  # fmt: skip
def test_dict_observations_are_read_key_by_key(tmp_path, algo, options, steps, train_seed):
    # the goal is only in the Discrete key: an agent that drops it scores about a third
    agent = train(
        algo, ENVS + "DictTarget", tmp_path, total_steps=steps, **options, seed=train_seed
    )
    assert mean_return(agent, space_envs.DictTarget()) >= 0.9 * MAX
    loaded = rlx.load(tmp_path)
    obs, _ = space_envs.DictTarget().reset(seed=3)
    assert loaded.act(obs) == agent.act(obs) == obs["goal"]


@pytest.mark.parametrize("algo", ["ppo", "a2c", "reinforce"])
def test_multidiscrete_actions_learn_every_entry(tmp_path, algo, train_seed):
    options = {"ppo": PPO, "a2c": A2C, "reinforce": {"num_envs": 4}}[algo]
    # PPO: 4,000 steps left seed 2 at 6.7 of 8 (below the bar), 6,000 all seeds 0-4 at 7.7+
    steps = {"ppo": 6_000, "a2c": 6_000, "reinforce": 8_000}[algo]
    agent = train(
        algo, ENVS + "MultiDiscreteTarget", tmp_path, total_steps=steps, **options, seed=train_seed
    )
    # random: 8 * (1/3 + 1/4) / 2 = 2.3; copying one entry only: at most 6.7
    assert mean_return(agent, space_envs.MultiDiscreteTarget()) >= 0.85 * MAX
    action = agent.act(np.zeros(7, np.float32))
    assert action.shape == (2,) and space_envs.MultiDiscreteTarget().action_space.contains(action)


@pytest.mark.parametrize("algo", ["ppo", "a2c", "reinforce"])
def test_multibinary_actions_learn_every_bit(tmp_path, algo, train_seed):
    options = {"ppo": PPO, "a2c": A2C, "reinforce": {"num_envs": 4}}[algo]
    # PPO: 4,000 steps left seeds 1 and 2 at 6.6 of 8 (below the bar), 6,000 seeds 0-4 at 7.75+
    steps = {"ppo": 6_000, "a2c": 4_000, "reinforce": 8_000}[algo]
    agent = train(
        algo, ENVS + "MultiBinaryTarget", tmp_path, total_steps=steps, **options, seed=train_seed
    )
    assert mean_return(agent, space_envs.MultiBinaryTarget()) >= 0.85 * MAX  # random: 0.5
    action = agent.act(np.ones(4, np.float32))
    assert space_envs.MultiBinaryTarget().action_space.contains(action)


@pytest.mark.parametrize("algo", ["dqn", "sac"])
def test_factored_actions_elsewhere_are_one_clear_sentence(tmp_path, algo):
    with pytest.raises(EnvError, match="MultiDiscrete") as info:
        train(algo, ENVS + "MultiDiscreteTarget", tmp_path, total_steps=100)
    if algo == "dqn":
        assert "DQN needs Discrete actions" in str(info.value)
        assert "try ppo, a2c or reinforce" in str(info.value)


def test_dict_observations_elsewhere_are_one_clear_sentence(tmp_path):
    with pytest.raises(EnvError, match=r"SAC takes Box observations; .* has Dict"):
        train("sac", ENVS + "DictTarget", tmp_path, total_steps=100)


# ---------------------------------------------------------------------------- images
@pytest.mark.parametrize("algo", ["ppo", "dqn"])
@pytest.mark.parametrize("env", ["FakeImage", "channels_last_image"])
def test_uint8_images_channel_first_or_last_train_through_the_cnn(tmp_path, algo, env):
    options = {
        "ppo": {**PPO, "num_steps": 8, "minibatch_size": 32},
        "dqn": {**DQN, "learning_starts": 32, "batch_size": 16, "buffer_size": 1_000},
    }[algo]
    agent = train(algo, ENVS + env, tmp_path, total_steps=128, **options)
    image = np.full((4, 84, 84) if env == "FakeImage" else (84, 84, 3), 200, np.uint8)
    assert agent.act(image) in (0, 1)
    assert rlx.load(tmp_path).act(image) == agent.act(image)


# ---------------------------------------------------------------------------- masks
@pytest.mark.parametrize(
    "algo, options, steps",
    [("ppo", PPO, 3_000), ("a2c", A2C, 3_000), ("dqn", DQN, 3_000)],
    ids=["ppo", "a2c", "dqn"],
)
def test_a_masked_agent_learns_what_an_unmasked_one_cannot(
    tmp_path, algo, options, steps, train_seed
):
    masked = train(
        algo,
        ENVS + "MaskedChoice",
        tmp_path / "masked",
        total_steps=steps,
        **options,
        seed=train_seed,
    )
    blind = train(
        algo, ENVS + "Choice", tmp_path / "blind", total_steps=steps, **options, seed=train_seed
    )
    # rlx.evaluate passes the env's mask to act_batch; a loaded agent rebuilds its env
    assert mean_return(masked, space_envs.MaskedChoice()) == MAX
    masked_run = rlx.load(tmp_path / "masked", trust_env_code=True)  # the env is our own code
    assert rlx.evaluate(masked_run, episodes=16).mean_return == MAX
    assert mean_return(blind, space_envs.Choice()) <= 0.25 * MAX


def test_masks_come_from_an_action_masks_method_too(tmp_path, train_seed):
    agent = train(
        "ppo", ENVS + "MethodMaskedChoice", tmp_path, total_steps=3_000, **PPO, seed=train_seed
    )
    assert mean_return(agent, space_envs.MethodMaskedChoice()) == MAX


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_act_takes_the_mask(tmp_path, algo):
    options = {"ppo": PPO, "dqn": DQN}[algo]
    agent = train(algo, ENVS + "MaskedChoice", tmp_path, total_steps=256, **options)
    obs = np.ones(2, np.float32)
    for valid in range(4):
        mask = np.arange(4) == valid
        assert agent.act(obs, action_mask=mask) == valid
        assert agent.act(obs, deterministic=False, action_mask=mask) == valid
    masks = np.eye(4, dtype=bool)
    np.testing.assert_array_equal(
        agent.act_batch(np.ones((4, 2), np.float32), True, masks), [0, 1, 2, 3]
    )


def test_an_agent_that_takes_no_masks_is_evaluated_without_them():
    """A user's own agent on a masked env: its act / act_batch get no ``action_mask``."""

    class Lowest:
        def act(self, observation, deterministic=True):
            return 0

    class LowestBatch(Lowest):
        def act_batch(self, observations, deterministic=True):
            return np.zeros(len(observations), dtype=np.int64)

    for agent in (Lowest(), LowestBatch()):
        stats = rlx.evaluate(agent, space_envs.MaskedChoice(), episodes=4)
        assert stats.episodes == 4 and -MAX <= stats.mean_return <= MAX
