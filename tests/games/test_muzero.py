"""MuZero: networks, latent search, unroll targets, loss, config, checkpoints and learning."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

import rlx
import rlx.games.muzero as mz
from rlx.errors import CheckpointError, ConfigError, EnvError
from rlx.games import ConnectFour, TicTacToe
from rlx.games.agent import SearchAgent
from rlx.games.base import symmetry_permutations
from rlx.games.evaluation import arena, arena_metrics
from rlx.games.search import MinMaxStats, Node, SearchConfig, backup, search
from rlx.games.selfplay import PlayedGame


def latent_search(net, game, states, config, rng):
    """The search in a learned model: the visit counts and root values."""
    counts, values, _ = search(game, states, mz.LatentModel(net), config, rng)
    return counts, values


def latent_config(simulations, **settings) -> SearchConfig:
    """MuZero's search settings (c_puct 1.25, Q scaled from the known bounds [-1, 1])."""
    return SearchConfig(simulations, **{"c_puct": 1.25, "value_bounds": (-1.0, 1.0), **settings})


# a few seconds per run: two iterations of a handful of games
TINY = {
    "iterations": 2,
    "games_per_iteration": 4,
    "simulations": 4,
    "eval_simulations": 4,
    "batch_size": 16,
    "train_steps_per_iteration": 3,
    "buffer_size": 200,
    "latent_size": 16,
    "hidden_sizes": (32,),
    "eval_every": 1,
    "eval_games": 4,
    "eval_opponents": ("random",),
}


def _net(game=None, latent=16) -> mz.MuZeroNet:
    torch.manual_seed(0)
    return mz.MuZeroNet(game or TicTacToe(), latent, (32, 32))


# ============================================================================ networks
@pytest.mark.parametrize("game", [TicTacToe(), ConnectFour()], ids=lambda g: g.name)
def test_network_shapes_and_latent_range(game):
    net = _net(game)
    planes = torch.from_numpy(game.encode_batch([game.initial_state()] * 5))
    s, logits, value = net.initial_inference(planes)
    assert s.shape == (5, 16) and logits.shape == (5, game.num_actions) and value.shape == (5,)
    s2, reward, logits2, value2 = net.recurrent_inference(s, torch.arange(5) % game.num_actions)
    assert s2.shape == (5, 16) and reward.shape == (5,)
    assert logits2.shape == (5, game.num_actions) and value2.shape == (5,)
    for latent in (s, s2):  # min-max scaled per sample
        assert torch.allclose(latent.min(-1).values, torch.zeros(5))
        assert torch.allclose(latent.max(-1).values, torch.ones(5), atol=1e-4)
    assert value.abs().max() <= 1 and reward.abs().max() <= 1


def test_scale_gradient_halves_the_gradient_only():
    x = torch.tensor([1.0, -2.0], requires_grad=True)
    y = mz.scale_gradient(x, 0.5)
    assert torch.equal(y, x.detach())
    (3 * y).sum().backward()
    assert torch.allclose(x.grad, torch.tensor([1.5, 1.5]))


# ============================================================================ search
def test_latent_search_counts_sum_to_simulations_and_respect_the_legal_mask():
    game = TicTacToe()
    state = game.initial_state()
    for move in (4, 0, 8):
        state = game.apply(state, move)
    states = [game.initial_state(), state]
    config = latent_config(40, noise_fraction=0.25, dirichlet_alpha=0.5)
    counts, values = latent_search(_net(), game, states, config, np.random.default_rng(0))
    assert counts.shape == (2, 9) and values.shape == (2,)
    assert counts.sum(axis=1).tolist() == [40, 40]
    assert counts[1, [0, 4, 8]].sum() == 0  # occupied cells are never searched at the root
    assert np.all(np.abs(values) <= 2)


class _ThreatModel:
    """A hand-made model of a position where the opponent wins with move 5 unless the player
    to move takes 5 first: latent ``[depth, blocked]``, reward 1 only for that winning reply,
    every value 0 and uniform priors."""

    def initial_inference(self, planes):
        n = len(planes)
        return torch.zeros(n, 2), torch.zeros(n, 9), torch.zeros(n)

    def recurrent_inference(self, s, actions):
        depth, blocked = s[:, 0], s[:, 1]
        first = depth == 0
        wins = (depth == 1) & (blocked == 0) & (actions == 5)
        s_next = torch.stack([depth + 1, torch.where(first, (actions == 5).float(), blocked)], 1)
        n = len(s)
        return s_next, wins.float(), torch.zeros(n, 9), torch.zeros(n)


def test_latent_search_blocks_a_threat_it_sees_in_the_model():
    """q(5) = 0 + (-0) = 0; any other move lets the opponent win: 0 + (-(1 + 0)) = -1."""
    game = TicTacToe()
    counts, value = latent_search(
        _ThreatModel(), game, [game.initial_state()], latent_config(200),
        np.random.default_rng(0),
    )  # fmt: skip
    assert np.argmax(counts[0]) == 5 and counts[0, 5] > 0.5 * counts[0].sum()
    assert -0.5 < value[0] <= 0.0  # mostly the drawn line, a few visits to lost ones


def test_backup_uses_the_two_player_sign_convention():
    """Root (player A) -a=1-> n1 (B) -a=2-> leaf (A), rewards 0.5 then 1, leaf value 0.25:
    G(n1, 2) = 1 + (-0.25) = 0.75, G(root, 1) = 0.5 + (-0.75) = -0.25."""
    root = Node(np.zeros(2), np.full(3, 1 / 3), np.ones(3, bool))
    n1 = Node(np.zeros(2), np.full(3, 1 / 3), np.ones(3, bool))
    root.children[1], root.reward[1] = n1, 0.5
    n1.reward[2] = 1.0
    stats = MinMaxStats()
    backup([(root, 1), (n1, 2)], 0.25, stats, gamma=1.0)
    assert n1.n.tolist() == [0, 0, 1] and n1.w[2] == pytest.approx(0.75)
    assert root.n.tolist() == [0, 1, 0] and root.w[1] == pytest.approx(-0.25)
    assert (stats.low, stats.high) == (pytest.approx(-0.25), pytest.approx(0.75))
    # Q normalised by the tree's min-max [-0.25, 0.75]; unvisited actions get the fpu
    assert root.q(stats, fpu=0.0).tolist() == [0.25, 0.0, 0.25]
    assert n1.q(stats, fpu=-0.25).tolist() == [0.0, 0.0, 1.0]
    backup([(root, 1), (n1, 2)], 0.25, stats, gamma=0.5)  # G = 1 - 0.125; 0.5 - 0.4375
    assert n1.w[2] == pytest.approx(0.75 + 0.875)
    assert root.w[1] == pytest.approx(-0.25 + 0.0625)


def test_min_max_stats_start_from_the_known_bounds():
    stats = MinMaxStats((-1.0, 1.0))
    assert stats.normalize(np.array([-1.0, 0.0, 1.0])).tolist() == [0.0, 0.5, 1.0]
    stats.update(3.0)  # a value outside the bounds widens the range
    assert stats.normalize(np.array([-1.0, 3.0])).tolist() == [0.0, 1.0]
    empty = MinMaxStats()
    assert empty.normalize(np.array([0.3])).tolist() == [0.3]  # no range yet: unchanged
    node = Node(np.zeros(2), np.full(2, 0.5), np.ones(2, bool))
    node.n[0], node.w[0] = 2.0, 1.0  # Q = 0.5
    assert node.q(MinMaxStats((-1.0, 1.0)), fpu=0.0).tolist() == [0.75, 0.5]


def test_config_search_settings():
    config = mz.MuZeroConfig(simulations=7, eval_simulations=9, fpu=-0.5, noise_fraction=0.3)
    selfplay, play = config.search(selfplay=True), config.search(selfplay=False)
    assert (selfplay.simulations, selfplay.noise_fraction, selfplay.fpu) == (7, 0.3, -0.5)
    assert (play.simulations, play.noise_fraction, play.fpu) == (9, 0.0, -0.5)


def _agent(config: mz.MuZeroConfig) -> SearchAgent:
    return SearchAgent("muzero", TicTacToe(), _net(), config, mz.LatentModel)


def test_agent_plays_a_legal_move():
    game = TicTacToe()
    agent = _agent(mz.MuZeroConfig(eval_simulations=10))
    state = game.apply(game.initial_state(), 4)
    move = agent(state)
    assert game.legal_mask(state)[move]
    assert agent.search_batch([state]).sum() == 10
    prior, value = agent.policy_value(state)  # the model's p^0 over the legal moves, v^0
    assert prior[4] == 0 and prior.sum() == pytest.approx(1.0) and -1 <= value <= 1


def test_agent_follows_the_agent_protocol():
    from rlx.core.agent import Agent, GameAgent

    game = TicTacToe()
    agent = _agent(mz.MuZeroConfig(eval_simulations=10))
    assert isinstance(agent, Agent) and isinstance(agent, GameAgent)
    states = [game.initial_state(), game.apply(game.initial_state(), 4)]
    moves = agent.act_batch(states)
    assert all(game.legal_mask(s)[a] for s, a in zip(states, moves, strict=True))
    sampled = agent.act_batch(states, deterministic=False, simulations=6)
    assert all(game.legal_mask(s)[a] for s, a in zip(states, sampled, strict=True))
    assert agent.act(states[1], simulations=5) in game.legal_actions(states[1])
    assert agent.search_batch(states, simulations=7).sum(axis=1).tolist() == [7, 7]


def test_the_search_settings_scale_q_from_a_board_games_bounds():
    config = mz.MuZeroConfig(c_puct=1.1, gamma=0.9).search(selfplay=True)
    assert (config.c_puct, config.gamma, config.value_bounds) == (1.1, 0.9, (-1.0, 1.0))


# ============================================================================ targets
def _game(planes, actions, policies, to_play, result: int) -> PlayedGame:
    """A played game of these moves, as self-play records it."""
    return PlayedGame(
        np.stack(planes).astype(np.float32), np.stack(policies).astype(np.float32),
        np.asarray(to_play), np.zeros(len(actions)), np.asarray(actions), len(actions), result,
    )  # fmt: skip


def _three_move_record() -> PlayedGame:
    """Moves 3, 5, 7 by players +1, -1, +1; the first player wins with the last one."""
    obs = [np.full((3, 3, 3), t, dtype=np.float32) for t in range(3)]
    pis = [np.eye(9, dtype=np.float32)[a] for a in (3, 5, 7)]
    return _game(obs, [3, 5, 7], pis, [1, -1, 1], result=1)


def test_rewards_and_values_are_from_the_movers_view():
    rewards, values = mz.rewards_and_values(_three_move_record())
    assert values.tolist() == [1, -1, 1]  # z_t = result * to_play_t
    assert rewards.tolist() == [0, 0, 1]  # only the winning move is rewarded
    two = ([np.zeros((3, 3, 3))] * 2, [0, 1], [np.ones(9) / 9] * 2, [1, -1])
    rewards, values = mz.rewards_and_values(_game(*two, result=1))
    assert values.tolist() == [1, -1] and rewards.tolist() == [0, -1]
    rewards, values = mz.rewards_and_values(_game(*two, result=0))
    assert values.tolist() == [0, 0] and rewards.tolist() == [0, 0]


def test_unroll_targets_past_the_end_are_absorbing():
    targets = mz.unroll_targets(_three_move_record(), 2, np.random.default_rng(0))
    assert targets.observations[:, 0, 0, 0].tolist() == [0, 1, 2]
    # t = 0: a_0, a_1; u_0, u_1; z_0..z_2; all three policies exist
    assert targets.actions[0].tolist() == [3, 5]
    assert targets.rewards[0].tolist() == [0, 0]
    assert targets.values[0].tolist() == [1, -1, 1]
    assert targets.policy_mask[0].tolist() == [1, 1, 1]
    # t = 1: the winning move is the second unrolled one; the state after it is absorbing
    assert targets.actions[1].tolist() == [5, 7]
    assert targets.rewards[1].tolist() == [0, 1]
    assert targets.values[1].tolist() == [-1, 1, 0]
    assert targets.policy_mask[1].tolist() == [1, 1, 0]
    # t = 2: one real move, then a random action with reward 0 and value 0
    assert targets.actions[2, 0] == 7 and 0 <= targets.actions[2, 1] < 9
    assert targets.rewards[2].tolist() == [1, 0]
    assert targets.values[2].tolist() == [1, 0, 0]
    assert targets.policy_mask[2].tolist() == [1, 0, 0]
    assert np.argmax(targets.policies[1, 1]) == 7 and targets.policies[2, 1:].sum() == 0


def test_symmetries_move_observation_actions_and_policies_alike():
    game = TicTacToe()
    cells, actions = symmetry_permutations(game)
    assert cells.shape == (8, 9) and actions.shape == (8, 9)
    state = game.apply(game.initial_state(), 1)  # X at cell 1, O to move
    obs = game.encode(state)[None]
    batch = mz.UnrollTargets(
        obs, np.array([[1, 2]]), np.zeros((1, 2)), np.zeros((1, 3)),
        np.eye(9)[[1, 2, 2]][None], np.ones((1, 3)),
    )  # fmt: skip
    for which in range(8):
        out = mz.augment(batch, cells, actions, np.array([which]))
        stone = int(np.flatnonzero(out.observations[0, 1].reshape(-1))[0])  # opponent's plane
        assert out.actions[0, 0] == stone  # the action at the stone's cell follows the stone
        assert np.argmax(out.policies[0, 0]) == stone
        assert np.argmax(out.policies[0, 1]) == out.actions[0, 1]
    assert symmetry_permutations(ConnectFour())[1].tolist() == [
        list(range(7)), list(range(6, -1, -1))
    ]  # fmt: skip


def test_replay_buffer_wraps_around():
    game = TicTacToe()
    config = mz.MuZeroConfig(buffer_size=4, batch_size=4, unroll_steps=2)
    buffer = mz.make_buffer(game, config)
    targets = mz.unroll_targets(_three_move_record(), 2, np.random.default_rng(0))
    buffer.add(**targets.rows())
    buffer.add(**targets.rows())
    assert buffer.size == 4 and buffer.cursor == 2
    assert buffer.data["observations"][:, 0, 0, 0].tolist() == [1, 2, 2, 0]
    restored = mz.make_buffer(game, config)
    restored.restore(buffer.state())
    assert np.array_equal(restored.data["values"], buffer.data["values"])
    assert (restored.size, restored.cursor) == (4, 2)


# ============================================================================ loss
def test_loss_on_a_hand_made_batch():
    """B = 2, K = 2, A = 2, uniform logits: cross-entropy log 2 wherever a policy exists
    (3 of 6 entries masked out), weights 1, 1/2, 1/2."""
    logits = torch.zeros(2, 3, 2)
    values = torch.tensor([[0.5, 0.0, 0.0], [0.0, -0.5, 1.0]])
    rewards = torch.tensor([[0.0, 1.0], [0.5, 0.0]])
    target_policies = torch.tensor([[[1.0, 0.0], [0.5, 0.5], [0.0, 0.0]]] * 2)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    target_values = torch.tensor([[1.0, -1.0, 0.0], [0.0, 0.5, 0.0]])
    target_rewards = torch.tensor([[0.0, 0.0], [1.0, 0.0]])
    loss, parts = mz.muzero_loss(
        logits, values, rewards, target_policies, mask, target_values, target_rewards, 0.5
    )
    log2 = math.log(2)
    policy = 1 * log2 + 0.5 * (log2 / 2)  # step 0: both rows; step 1: one row of two
    # squared errors per step, mean over the batch: (0.25, 0)/2, (1, 1)/2, (0, 1)/2
    value = 1 * 0.125 + 0.5 * 1.0 + 0.5 * 0.5
    # reward errors: step 1 (0, 0.25) -> 0.125; step 2 (1, 0) -> 0.5
    reward = 0.5 * 0.125 + 0.5 * 0.5
    assert parts["policy_loss"].item() == pytest.approx(policy)
    assert parts["value_loss"].item() == pytest.approx(value)
    assert parts["reward_loss"].item() == pytest.approx(reward)
    assert loss.item() == pytest.approx(policy + 0.5 * value + reward)


def test_unroll_shapes_and_a_training_step_changes_every_parameter():
    game = TicTacToe()
    net = _net(game)
    record = _three_move_record()
    targets = mz.unroll_targets(record, 2, np.random.default_rng(0))
    t = mz.as_tensors(targets)
    logits, values, rewards = mz.unroll(net, t["observations"], t["actions"])
    assert logits.shape == (3, 3, 9) and values.shape == (3, 3) and rewards.shape == (3, 2)
    before = [p.detach().clone() for p in net.parameters()]
    loss, _ = mz.muzero_loss(
        logits, values, rewards, t["policies"], t["policy_mask"], t["values"], t["rewards"]
    )
    loss.backward()
    torch.optim.SGD(net.parameters(), lr=0.1).step()
    assert all(not torch.equal(b, p) for b, p in zip(before, net.parameters(), strict=True))


# ============================================================================ config
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("iterations", 0),
        ("simulations", 0),
        ("unroll_steps", 0),
        ("learning_rate", 0.0),
        ("noise_fraction", 1.5),
        ("gamma", 0.0),
        ("weight_decay", -1.0),
        ("hidden_sizes", ()),
        ("buffer_size", 10),
        ("dirichlet_alpha", -1.0),
        ("fpu", 2.0),
        ("batch_size", 0),
    ],
)
def test_config_rejects_bad_values(field, value):
    with pytest.raises(ConfigError, match=field):
        mz.MuZeroConfig(**{field: value})


def test_unknown_or_wrong_game_opponent_is_rejected_before_training(tmp_path):
    with pytest.raises(ConfigError, match="solver"):
        rlx.train("muzero", "connect4", run_dir=tmp_path / "r", progress=False,
                  **{**TINY, "eval_opponents": ("solver",)})  # fmt: skip
    assert not (tmp_path / "r").exists()


# ============================================================================ runs
def _train(run_dir: Path, **overrides):
    return rlx.train("muzero", "tictactoe", run_dir=run_dir, progress=False, doctor=False,
                     **{**TINY, **overrides})  # fmt: skip


def _metrics(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    for row in rows:
        row.pop("wall_s")
        row.pop("selfplay_s")
        row.pop("train_s")
    return rows


def test_smoke_same_seed_same_metrics(tmp_path):
    a = _train(tmp_path / "a")
    b = _train(tmp_path / "b")
    rows = _metrics(tmp_path / "a")
    assert [r["step"] for r in rows] == [1, 2]
    assert {"loss", "policy_loss", "value_loss", "reward_loss", "game_length"} <= set(rows[0])
    assert {"vs_random_win", "vs_random_draw", "vs_random_loss"} <= set(rows[1])
    assert rows == _metrics(tmp_path / "b")
    for pa, pb in zip(a.net.parameters(), b.net.parameters(), strict=True):
        assert torch.equal(pa, pb)
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["steps"] == 2 and "vs_random_win" in summary
    _train(tmp_path / "c", seed=1)
    assert _metrics(tmp_path / "c") != rows


def test_resume_continues_as_the_uninterrupted_run(tmp_path):
    whole = _train(tmp_path / "whole")
    _train(tmp_path / "split", iterations=1)
    resumed = rlx.train("muzero", "tictactoe", run_dir=tmp_path / "split", resume=True,
                        progress=False, doctor=False, iterations=2)  # fmt: skip
    for pa, pb in zip(whole.net.parameters(), resumed.net.parameters(), strict=True):
        assert torch.equal(pa, pb)
    assert _metrics(tmp_path / "split") == _metrics(tmp_path / "whole")


def test_load_gives_an_agent_and_rejects_another_games_checkpoint(tmp_path):
    _train(tmp_path / "r", iterations=1)
    agent = rlx.load(tmp_path / "r")
    assert isinstance(agent, SearchAgent) and agent.name == "muzero"
    assert agent.game.name == "tictactoe"
    state = TicTacToe().initial_state()
    assert TicTacToe().legal_mask(state)[agent.act(state)]
    from rlx.runs import load_checkpoint

    _, saved = load_checkpoint(tmp_path / "r")
    with pytest.raises(EnvError, match="tictactoe"):
        mz.load(agent.config, "connect4", saved)
    with pytest.raises(CheckpointError, match="MuZero"):
        mz.load(agent.config, "tictactoe", {"game": "tictactoe", "net": {}})


def test_a_run_saved_with_the_old_field_names_loads_and_resumes(tmp_path):
    """Runs saved before the renames have ``lr``, ``hidden``, ``discount`` and
    ``value_loss_weight`` in their config: they become learning_rate, hidden_sizes, gamma and
    vf_coef (the names the deep agents use)."""
    _train(tmp_path / "old", iterations=1, learning_rate=1e-3, gamma=0.9, vf_coef=0.5)
    path = tmp_path / "old" / "config.json"
    text = path.read_text()
    for new, old in (("learning_rate", "lr"), ("hidden_sizes", "hidden"), ("gamma", "discount"),
                     ("vf_coef", "value_loss_weight")):  # fmt: skip
        assert f'"{new}"' in text
        text = text.replace(f'"{new}"', f'"{old}"')
    path.write_text(text)
    loaded = rlx.load(tmp_path / "old")
    assert (loaded.config.learning_rate, loaded.config.hidden_sizes) == (1e-3, (32,))
    assert (loaded.config.gamma, loaded.config.vf_coef) == (0.9, 0.5)
    assert TicTacToe().legal_mask(TicTacToe().initial_state())[
        loaded.act(TicTacToe().initial_state())
    ]
    resumed = rlx.train("muzero", "tictactoe", run_dir=tmp_path / "old", resume=True,
                        progress=False, doctor=False, iterations=2)  # fmt: skip
    assert resumed.config.learning_rate == 1e-3 and resumed.config.gamma == 0.9


# ============================================================================ learning
# race to 7 (tests/games/race_game.py): a few seconds of self-play learn it
RACE = {
    "iterations": 5,
    "games_per_iteration": 32,
    "simulations": 8,
    "eval_simulations": 16,
    "unroll_steps": 3,
    "batch_size": 128,
    "train_steps_per_iteration": 100,
    "latent_size": 32,
    "hidden_sizes": (64, 64),
    "eval_games": 0,
    "eval_opponents": ("random",),
}


def test_learns_perfect_play_of_a_tiny_game(tmp_path, train_seed):
    """Race to 7 (add 1 or 2, reach 7 to win), where perfect play is known in closed form:
    MuZero, searching only in the model it learns, must take the winning move in each of the
    five positions that have one (an agent that has learned nothing gets all five with
    probability 1/32, and a dynamics or value model off by a step gets them wrong), and win
    nearly every game against a random player, which a random agent wins half the time."""
    from tests.games.race_game import RaceTo

    game = RaceTo(7)
    agent = rlx.train("muzero", game, run_dir=tmp_path / "r", progress=False, doctor=False,
                      seed=train_seed, **RACE)  # fmt: skip
    state, positions = game.initial_state(), []
    while not state.is_terminal:  # counts 0-6, reached by adding 1 at a time
        if game.winning_action(state) is not None:
            positions.append(state)
        state = game.apply(state, 0)
    assert len(positions) == 5
    assert [agent.act(s) for s in positions] == [game.winning_action(s) for s in positions]
    results = arena_metrics(arena(game, agent, ("random",), 40, seed=123))
    assert results["vs_random_win"] >= 0.9, results


@pytest.mark.slow
def test_learns_tictactoe_with_the_defaults(tmp_path):
    """The defaults, given nothing but the game, must reach: at most 5 of 100 games lost to
    perfect play, and at least 90 of 100 won against a random player (seats alternating).
    Budget: the defaults' 100 iterations (marked slow)."""
    agent = rlx.train("muzero", "tictactoe", run_dir=tmp_path / "r", progress=False)
    results = arena_metrics(arena(agent.game, agent, ("solver", "random"), 100, seed=123))
    assert results["vs_solver_loss"] <= 0.05, results
    assert results["vs_random_win"] >= 0.90, results
