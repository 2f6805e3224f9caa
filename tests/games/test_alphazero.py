"""AlphaZero: the loss against a direct evaluation, self-play targets, checkpoints, learning."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

import rlx
from rlx.errors import ConfigError, EnvError
from rlx.games import ConnectFour, TicTacToe, selfplay, solver
from rlx.games.agent import SearchAgent
from rlx.games.alphazero import (
    METHOD,
    AlphaZeroConfig,
    PolicyValueNet,
    alphazero_loss,
    evaluator,
    samples,
    search_copy,
)
from rlx.games.evaluation import arena
from rlx.games.search import visit_policy
from rlx.games.selfplay import ReplayRing, learning_rate_at
from tests.games.local_remote import LocalRemote

TINY = {"iterations": 2, "games_per_iteration": 8, "simulations": 8, "eval_simulations": 8,
        "train_steps_per_iteration": 5, "batch_size": 32, "eval_every": 1,
        "eval_games": 4}  # fmt: skip


@dataclasses.dataclass
class Played:
    """An iteration's self-play as AlphaZero stores it: its samples and its games."""

    planes: np.ndarray
    pi: np.ndarray
    z: np.ndarray
    lengths: list[int]
    results: list[int]
    positions: int


def self_play(game, net, config, rng, evaluate=evaluator) -> Played:
    """The shared self-play with the network as the search's evaluator, then the samples."""
    games = selfplay.self_play(game, evaluate(net), config, rng)
    planes, pi, z = samples(game, games, config)
    return Played(planes, pi, z, [g.length for g in games], [g.result for g in games],
                  sum(len(g.actions) for g in games))  # fmt: skip


def test_loss_matches_a_direct_evaluation():
    logits = torch.tensor([[1.0, 0.0, -1.0], [0.5, 0.5, 2.0]])
    values = torch.tensor([0.2, -0.6])
    pi = torch.tensor([[0.6, 0.4, 0.0], [0.0, 0.25, 0.75]])
    z = torch.tensor([1.0, -1.0])
    loss, parts = alphazero_loss(logits, values, pi, z)
    p = np.exp(logits.numpy()) / np.exp(logits.numpy()).sum(1, keepdims=True)
    ce = -np.mean([sum(pi[i, a].item() * np.log(p[i, a]) for a in range(3)) for i in range(2)])
    mse = ((0.2 - 1.0) ** 2 + (-0.6 + 1.0) ** 2) / 2
    assert parts["policy_loss"].item() == pytest.approx(ce, rel=1e-6)
    assert parts["value_loss"].item() == pytest.approx(mse, rel=1e-6)
    assert loss.item() == pytest.approx(ce + mse, rel=1e-6)


def _trained_looking_resnet() -> PolicyValueNet:
    """The connect4 network with batch-norm statistics and affine weights away from their
    initial 0 / 1, so that folding them into the convolutions changes the weights."""
    torch.manual_seed(0)
    net = PolicyValueNet(ConnectFour(), AlphaZeroConfig(net="resnet", channels=16, blocks=2))
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.normal_(0, 0.3)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.normal_(1.0, 0.2)
                m.bias.normal_(0.0, 0.2)
    return net.eval()


def test_search_copy_folds_batch_norm_and_computes_the_same_outputs():
    net = _trained_looking_resnet()
    frozen = search_copy(net)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in frozen.modules())
    planes = torch.randn(16, 3, 6, 7)
    with torch.no_grad():
        (logits, values), (frozen_logits, frozen_values) = net(planes), frozen(planes)
    torch.testing.assert_close(frozen_logits, logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(frozen_values, values, rtol=1e-5, atol=1e-5)
    assert not net.training and isinstance(next(net.modules()), PolicyValueNet)  # net untouched


def test_agent_searches_a_frozen_copy_until_refreshed():
    game, net = ConnectFour(), _trained_looking_resnet()
    config = AlphaZeroConfig(net="resnet", channels=16, blocks=2)
    agent = SearchAgent("alphazero", game, net, config, evaluator)
    state = game.initial_state()
    before, _ = agent.policy_value(state)
    with torch.no_grad():
        net.policy[-1].bias[3] += 5.0  # "training": column 3 becomes the favourite
    np.testing.assert_allclose(agent.policy_value(state)[0], before)  # still the frozen copy
    agent.refresh()
    after, _ = agent.policy_value(state)
    assert after[3] > before[3] + 0.3


def test_self_play_targets_are_outcomes_from_the_mover_point_of_view():
    game = TicTacToe()
    config = AlphaZeroConfig(games_per_iteration=6, simulations=4, augment=False)
    torch.manual_seed(0)
    played = self_play(game, PolicyValueNet(game, config).eval(), config, np.random.default_rng(0))
    assert len(played.z) == sum(played.lengths)
    np.testing.assert_allclose(played.pi.sum(1), 1.0, rtol=1e-6)
    start = 0
    for length, result in zip(played.lengths, played.results, strict=True):
        z = played.z[start : start + length]
        movers = np.array([1 if i % 2 == 0 else -1 for i in range(length)])  # X moves first
        np.testing.assert_array_equal(z, result * movers)
        # the first sample is the empty board, X to move: no stones, all of plane 2 ones
        assert played.planes[start][:2].sum() == 0
        start += length


@pytest.mark.parametrize("p", [1.0, 0.5], ids=["every-move", "playout-cap"])
def test_value_target_mixes_the_outcome_and_the_root_value(p):
    """``(1 - m) z + m Q``: the games do not depend on m, so m = 0.5 gives the mean of the
    m = 0 targets (outcomes) and the m = 1 targets (root values, each in [-1, 1]); with
    playout-cap randomisation (the connect4 preset's combination) likewise, ``Q`` of the
    recorded full searches."""
    game = TicTacToe()
    targets = {}
    for m in (0.0, 1.0, 0.5):
        config = AlphaZeroConfig(games_per_iteration=4, simulations=6, augment=False,
                                 value_target_q=m, full_search_fraction=p)  # fmt: skip
        torch.manual_seed(0)
        net = PolicyValueNet(game, config).eval()
        targets[m] = self_play(game, net, config, np.random.default_rng(0)).z
    assert set(np.unique(targets[0.0])) <= {-1.0, 0.0, 1.0}
    assert np.abs(targets[1.0]).max() <= 1.0 and not np.array_equal(targets[1.0], targets[0.0])
    np.testing.assert_allclose(targets[0.5], (targets[0.0] + targets[1.0]) / 2, rtol=1e-6)


@pytest.mark.parametrize("game", [TicTacToe(), ConnectFour()], ids=["tictactoe", "connect4"])
def test_tree_reuse_plays_whole_games_for_fewer_network_evaluations(game):
    """With ``reuse_tree`` self-play still gives one target per move, outcomes from the mover's
    point of view and visit distributions; its searches ask the network for fewer positions
    per move (the kept subtree's visits are not searched again)."""
    asked = []

    def counting_evaluator(net):
        evaluate = evaluator(net)

        def count(planes, legal):
            asked[-1] += len(planes)
            return evaluate(planes, legal)

        return count

    for reuse in (False, True):
        config = AlphaZeroConfig(games_per_iteration=6, simulations=24, augment=False,
                                 reuse_tree=reuse, net="resnet", channels=8, blocks=1)  # fmt: skip
        torch.manual_seed(0)
        asked.append(0)
        played = self_play(game, PolicyValueNet(game, config).eval(), config,
                           np.random.default_rng(0), counting_evaluator)  # fmt: skip
        assert len(played.z) == sum(played.lengths)
        np.testing.assert_allclose(played.pi.sum(1), 1.0, rtol=1e-6)
        assert set(np.unique(played.z)) <= {-1.0, 0.0, 1.0}
        asked[-1] /= sum(played.lengths)  # positions evaluated per move
    assert asked[1] < 0.9 * asked[0]


def test_playout_cap_records_the_full_searches_only(monkeypatch):
    """Playout-cap randomisation: every move is searched once, fully (``simulations``, root
    noise) with probability ``full_search_fraction`` or fast (``fast_simulations``, no noise);
    the samples are exactly the full searches' positions and visit distributions."""
    searched = []

    def recording_search(game, states, evaluate, config, rng, kept=None):
        result = search(game, states, evaluate, config, rng, kept)
        searched.append((config, [game.encode(s) for s in states], result.counts))
        return result

    search = selfplay.search
    monkeypatch.setattr(selfplay, "search", recording_search)
    game = TicTacToe()
    config = AlphaZeroConfig(games_per_iteration=40, simulations=12, fast_simulations=3,
                             full_search_fraction=0.25, augment=False)  # fmt: skip
    torch.manual_seed(0)
    played = self_play(game, PolicyValueNet(game, config).eval(), config, np.random.default_rng(0))
    full = [call for call in searched if call[0].simulations == 12]
    fast = [call for call in searched if call[0].simulations == 3]
    assert len(full) + len(fast) == len(searched)
    assert {c.noise_fraction for c, _, _ in full} == {0.25}
    assert {c.noise_fraction for c, _, _ in fast} == {0.0}
    assert sum(len(planes) for _, planes, _ in searched) == sum(played.lengths)
    assert played.positions == len(played.z) == sum(len(planes) for _, planes, _ in full)
    assert 0.15 < played.positions / sum(played.lengths) < 0.35  # p = 0.25 of ~300 moves
    expected = sorted(
        p.tobytes() + visit_policy(n, 1.0).astype(np.float32).tobytes()
        for _, planes, counts in full
        for p, n in zip(planes, counts, strict=True)
    )
    got = sorted(p.tobytes() + pi.tobytes() for p, pi in zip(played.planes, played.pi, strict=True))
    assert got == expected
    assert set(np.unique(played.z)) <= {-1.0, 0.0, 1.0}


def test_playout_cap_trains_and_logs_its_positions(tmp_path):
    agent = rlx.train("alphazero", "tictactoe", run_dir=tmp_path, seed=0, doctor=False,
                      full_search_fraction=0.5, fast_simulations=2, **TINY)  # fmt: skip
    rows = [json.loads(line) for line in (agent.run_dir / "metrics.jsonl").open()]
    for row in rows:  # about half of the 8 games' moves gave a sample
        assert 0 < row["positions"] < 8 * row["game_length"]
    state = TicTacToe().initial_state()
    assert agent.act(state) in TicTacToe().legal_actions(state)


def test_fast_searches_default_to_a_fifth_of_the_simulations_without_noise():
    fast = AlphaZeroConfig(simulations=100, full_search_fraction=0.25).fast_search()
    assert (fast.simulations, fast.noise_fraction) == (20, 0.0)
    assert AlphaZeroConfig(simulations=3, full_search_fraction=0.25).fast_search().simulations == 1


def test_an_iteration_without_samples_skips_training(tmp_path, monkeypatch):
    """An iteration whose moves were all fast searches (possible in a tiny run) has nothing to
    train on: it logs no losses and the run trains once samples arrive."""
    played_before = []
    play = selfplay.self_play

    def first_without_samples(game, evaluate, config, rng):
        games = play(game, evaluate, config, rng)
        if not played_before:  # as if every move of the first iteration had been fast
            none = slice(0, 0)
            games = [
                dataclasses.replace(
                    g, planes=g.planes[none], policies=g.policies[none], to_play=g.to_play[none],
                    root_values=g.root_values[none], actions=g.actions[none],
                )
                for g in games
            ]  # fmt: skip
        played_before.append(games)
        return games

    monkeypatch.setattr(selfplay, "self_play", first_without_samples)
    agent = rlx.train("alphazero", "tictactoe", run_dir=tmp_path, seed=0, doctor=False,
                      **{**TINY, "iterations": 3, "eval_games": 0,
                         "full_search_fraction": 0.5})  # fmt: skip
    rows = [json.loads(line) for line in (agent.run_dir / "metrics.jsonl").open()]
    assert rows[0]["positions"] == 0 and "loss" not in rows[0]
    assert all(row["positions"] > 0 and np.isfinite(row["loss"]) for row in rows[1:])


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"full_search_fraction": 0.0}, r"full_search_fraction must be in \(0, 1\]"),
        ({"full_search_fraction": 1.5}, r"full_search_fraction must be in \(0, 1\]"),
        ({"full_search_fraction": 0.5, "fast_simulations": 81},
         r"fast_simulations must be in \[1, simulations=80\]"),
        ({"full_search_fraction": 0.5, "fast_simulations": 0}, "fast_simulations must be in"),
        ({"full_search_fraction": 0.5, "reuse_tree": True}, "reuse_tree and full_search_frac"),
    ],
)  # fmt: skip
def test_bad_playout_cap_settings(settings, message):
    with pytest.raises(ConfigError, match=message):
        AlphaZeroConfig(**settings)


def test_augmentation_multiplies_samples_by_the_symmetries():
    game = TicTacToe()
    config = AlphaZeroConfig(games_per_iteration=2, simulations=2)
    played = self_play(game, PolicyValueNet(game, config).eval(), config, np.random.default_rng(0))
    assert len(played.z) == 8 * sum(played.lengths)


def test_the_replay_buffer_is_a_ring_that_reads_the_same_whole_or_row_by_row():
    fields = {"planes": ((1, 1, 1), np.float32), "pi": ((2,), np.float32), "z": ((), np.float32)}
    buffer = ReplayRing(4, fields)
    for i in range(6):
        buffer.add(planes=np.full((1, 1, 1, 1), i, np.float32), pi=np.ones((1, 2), np.float32),
                   z=np.array([i], np.float32))  # fmt: skip
    assert buffer.size == 4 and sorted(buffer.data["z"].tolist()) == [2, 3, 4, 5]
    at_once = ReplayRing(4, fields)
    at_once.add(planes=np.zeros((1, 1, 1, 1), np.float32), pi=np.ones((1, 2), np.float32),
                z=np.zeros(1, np.float32))  # fmt: skip
    rows = np.arange(1, 6, dtype=np.float32)
    at_once.add(planes=rows.reshape(5, 1, 1, 1), pi=np.ones((5, 2), np.float32), z=rows)
    np.testing.assert_array_equal(at_once.data["z"], buffer.data["z"])
    assert (at_once.cursor, at_once.size) == (buffer.cursor, buffer.size)
    copy = ReplayRing(4, fields)
    copy.restore(buffer.state())
    np.testing.assert_array_equal(copy.data["z"], buffer.data["z"])
    assert copy.cursor == buffer.cursor


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("simulations", 0, "simulations=0 must be >= 1"),
        ("noise_fraction", 1.5, r"noise_fraction=1.5 must be in \[0.0, 1.0\]"),
        ("net", "transformer", "net='transformer' must be one of 'mlp', 'resnet'"),
        ("learning_rate", 0.0, "learning_rate=0.0 must be > 0"),
        ("value_target_q", 1.5, r"value_target_q=1.5 must be in \[0.0, 1.0\]"),
        ("learning_rate_end", 0.01, r"learning_rate_end must be in \(0, learning_rate=0.002\]"),
    ],
)
def test_bad_config_values(field, value, message):
    with pytest.raises(ConfigError, match=message):
        AlphaZeroConfig(**{field: value})


def test_learning_rate_decays_by_cosine_from_learning_rate_to_learning_rate_end(tmp_path):
    config = AlphaZeroConfig(iterations=5, learning_rate=1e-3, learning_rate_end=1e-4)
    # end + (start - end) (1 + cos(pi i / 4)) / 2, worked out for i = 0..4
    half_span = 0.45e-3
    expected = [1e-3, 1e-4 + half_span * (1 + 2**-0.5), 5.5e-4, 1e-4 + half_span * (1 - 2**-0.5),
                1e-4]  # fmt: skip
    assert [learning_rate_at(config, i) for i in range(5)] == pytest.approx(expected, rel=1e-12)
    # no learning_rate_end: constant
    assert learning_rate_at(AlphaZeroConfig(learning_rate=1e-3), 7) == 1e-3
    agent = rlx.train("alphazero", "tictactoe", run_dir=tmp_path / "r", progress=False,
                      **{**TINY, "iterations": 3, "eval_games": 0, "learning_rate": 1e-3,
                         "learning_rate_end": 1e-4})  # fmt: skip
    logged = [
        json.loads(x)["lr"] for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()
    ]
    assert logged == pytest.approx([1e-3, 5.5e-4, 1e-4], rel=1e-12)
    assert agent.config.learning_rate_end == 1e-4


def test_bad_opponent_fails_before_training(tmp_path):
    with pytest.raises(ConfigError, match="unknown opponent 'gnugo'"):
        rlx.train("alphazero", "tictactoe", run_dir=tmp_path / "r", progress=False,
                  eval_opponents=("gnugo",), **{k: v for k, v in TINY.items()})  # fmt: skip
    with pytest.raises(ConfigError, match="'solver' exists for tictactoe only"):
        rlx.train("alphazero", "connect4", run_dir=tmp_path / "c", progress=False,
                  eval_opponents=("solver",), **TINY)  # fmt: skip


def test_unknown_game(tmp_path):
    with pytest.raises(EnvError, match="unknown game 'go9'"):
        rlx.train("alphazero", "go9", run_dir=tmp_path / "r", progress=False, **TINY)


def test_runs_repeat_and_resume_matches_the_uninterrupted_run(tmp_path):
    whole = rlx.train("alphazero", "tictactoe", run_dir=tmp_path / "a", progress=False, **TINY)
    again = rlx.train("alphazero", "tictactoe", run_dir=tmp_path / "b", progress=False, **TINY)
    lines = [(tmp_path / d / "metrics.jsonl").read_text().splitlines() for d in ("a", "b")]
    strip = [[{k: v for k, v in json.loads(x).items() if not k.endswith("_s")} for x in run]
             for run in lines]  # fmt: skip
    assert strip[0] == strip[1]
    half = rlx.train("alphazero", "tictactoe", run_dir=tmp_path / "c", progress=False,
                     **{**TINY, "iterations": 1})  # fmt: skip
    del half
    resumed = rlx.train("alphazero", "tictactoe", run_dir=tmp_path / "c", resume=True,
                        progress=False, iterations=2)  # fmt: skip
    for p, q in zip(whole.net.parameters(), resumed.net.parameters(), strict=True):
        torch.testing.assert_close(p, q)
    del again


def test_load_acts_and_rejects_another_game(tmp_path):
    rlx.train("alphazero", "tictactoe", run_dir=tmp_path / "t", progress=False, **TINY)
    agent = rlx.load(tmp_path / "t")
    state = TicTacToe().initial_state()
    assert agent.act(state) in range(9)
    summary = json.loads((tmp_path / "t" / "summary.json").read_text())
    assert summary["game"] == "tictactoe" and "vs_solver_loss" in summary
    from rlx.games.play import load_opponent

    with pytest.raises(EnvError, match="trained on 'tictactoe', not 'connect4'"):
        load_opponent(rlx.games.make("connect4"), agent, source=tmp_path / "t")


def test_connect_four_resnet_runs(tmp_path):
    config = {**TINY, "iterations": 1, "games_per_iteration": 2, "eval_games": 0, "blocks": 1,
              "channels": 8, "eval_opponents": ("random",)}  # fmt: skip
    agent = rlx.train("alphazero", "connect4", run_dir=tmp_path / "c4", progress=False, **config)
    assert agent.config.net == "resnet"  # from the connect4 preset
    assert agent.act(rlx.games.ConnectFour().initial_state()) in range(7)


def test_connect_four_threat_planes_train_play_in_workers_and_reload(tmp_path):
    """``threat_planes``: the network takes 5 planes, self-play (here in a worker process)
    stores them, and the saved agent loads with the same encoding and plays."""
    config = {**TINY, "iterations": 1, "games_per_iteration": 2, "eval_games": 0, "blocks": 1,
              "channels": 8, "workers": 2, "threat_planes": True}  # fmt: skip
    agent = rlx.train("alphazero", "connect4", run_dir=tmp_path / "c4", progress=False, **config)
    assert agent.game.num_planes == 5 and agent.net.trunk[0][0].in_channels == 5
    loaded = rlx.load(tmp_path / "c4")
    assert loaded.game.num_planes == 5
    state = ConnectFour().initial_state()
    for move in (3, 3, 2, 2, 1, 1):  # X to move holds 1-3 of the bottom row: 0 or 4 wins
        state = ConnectFour().apply(state, move)
    assert loaded.act(state, simulations=50) in (0, 4)
    with pytest.raises(ConfigError, match="threat_planes is for connect4, not tictactoe"):
        rlx.train("alphazero", "tictactoe", run_dir=tmp_path / "t", progress=False,
                  **{**TINY, "threat_planes": True})  # fmt: skip


def test_a_connect_four_run_saved_before_threat_planes_loads_with_the_stones_alone(tmp_path):
    """Runs saved before the field existed have no ``threat_planes`` in their config: they load
    as the stones-only networks they are, though the preset now turns the planes on."""
    config = {**TINY, "iterations": 1, "games_per_iteration": 2, "eval_games": 0, "blocks": 1,
              "channels": 8, "threat_planes": False}  # fmt: skip
    rlx.train("alphazero", "connect4", run_dir=tmp_path / "old", progress=False, **config)
    path = tmp_path / "old" / "config.json"
    saved = json.loads(path.read_text())
    assert _drop_key(saved, "threat_planes")
    path.write_text(json.dumps(saved))
    loaded = rlx.load(tmp_path / "old")
    assert loaded.game.num_planes == 3 and loaded.net.trunk[0][0].in_channels == 3
    assert loaded.act(ConnectFour().initial_state()) in range(7)


def _drop_key(tree, key: str) -> bool:
    """Remove ``key`` wherever it sits in nested dicts; whether it was found."""
    if not isinstance(tree, dict):
        return False
    found = tree.pop(key, None) is not None
    return any([found, *(_drop_key(v, key) for v in tree.values())])


def test_learns_tictactoe_perfect_play_with_the_defaults(tmp_path, train_seed):
    """With no argument but the game, AlphaZero must not lose one of 100 games to the perfect
    solver (50 as X, 50 as O), and must never lose to random play. Budget: the default 30
    iterations."""
    agent = rlx.train(
        "alphazero", "tictactoe", run_dir=tmp_path / "az", progress=False, seed=train_seed
    )
    results = arena(agent.game, agent, ("solver", "random"), games=100, seed=123)
    assert results["solver"].losses == 0, str(results["solver"])
    # perfect play itself (the solver, random among its best moves) draws some games against
    # random play, so the bar is below every game won; a random agent loses about as often as
    # it wins
    assert results["random"].win_rate >= 0.8 and results["random"].losses == 0
    # and it knows the game: the network's own value of the empty board is near a draw
    _, value = agent.policy_value(TicTacToe().initial_state())
    assert abs(value) < 0.35
    assert solver.value(TicTacToe().initial_state()) == 0


def test_self_play_workers_give_the_same_kind_of_run_and_repeat(tmp_path):
    """Two worker processes play the games; the same seed and worker count repeat exactly."""
    config = {**TINY, "iterations": 1, "workers": 2, "eval_games": 0}
    runs = []
    for name in ("w1", "w2"):
        rlx.train("alphazero", "tictactoe", run_dir=tmp_path / name, progress=False, **config)
        metrics = json.loads((tmp_path / name / "metrics.jsonl").read_text().splitlines()[0])
        runs.append({k: v for k, v in metrics.items() if not k.endswith("_s")})
    assert runs[0] == runs[1]
    assert 5 <= runs[0]["game_length"] <= 9


def test_a_run_saved_with_lr_and_lr_final_loads_and_resumes(tmp_path):
    """Runs saved before the rename have ``lr`` and ``lr_final`` in their config: they load
    and resume with the values under ``learning_rate`` and ``learning_rate_end``."""
    rlx.train("alphazero", "tictactoe", run_dir=tmp_path / "old", progress=False,
              **{**TINY, "iterations": 1, "eval_games": 0, "learning_rate": 1e-3,
                 "learning_rate_end": 5e-4})  # fmt: skip
    path = tmp_path / "old" / "config.json"
    text = path.read_text()
    assert '"learning_rate"' in text and '"learning_rate_end"' in text
    path.write_text(text.replace('"learning_rate_end"', '"lr_final"').replace(
        '"learning_rate"', '"lr"'))  # fmt: skip
    loaded = rlx.load(tmp_path / "old")
    assert (loaded.config.learning_rate, loaded.config.learning_rate_end) == (1e-3, 5e-4)
    assert loaded.act(TicTacToe().initial_state()) in range(9)
    resumed = rlx.train("alphazero", "tictactoe", run_dir=tmp_path / "old", resume=True,
                        progress=False, iterations=2)  # fmt: skip
    assert resumed.config.learning_rate_end == 5e-4


def test_a_run_saved_with_train_steps_and_hidden_loads_and_resumes(tmp_path):
    """Runs saved before the renames have ``train_steps`` and ``hidden`` in their config: they
    load and resume with the values under ``train_steps_per_iteration`` and ``hidden_sizes``
    (the names MuZero and the deep agents use)."""
    rlx.train("alphazero", "tictactoe", run_dir=tmp_path / "old", progress=False,
              **{**TINY, "iterations": 1, "eval_games": 0, "hidden_sizes": (32,)})  # fmt: skip
    path = tmp_path / "old" / "config.json"
    text = path.read_text()
    assert '"train_steps_per_iteration"' in text and '"hidden_sizes"' in text
    path.write_text(text.replace('"train_steps_per_iteration"', '"train_steps"').replace(
        '"hidden_sizes"', '"hidden"'))  # fmt: skip
    loaded = rlx.load(tmp_path / "old")
    assert (loaded.config.train_steps_per_iteration, loaded.config.hidden_sizes) == (5, (32,))
    resumed = rlx.train("alphazero", "tictactoe", run_dir=tmp_path / "old", resume=True,
                        progress=False, iterations=2)  # fmt: skip
    assert resumed.config.hidden_sizes == (32,)


def test_agent_follows_the_agent_protocol():
    from rlx.core.agent import Agent, GameAgent

    game = TicTacToe()
    config = AlphaZeroConfig(eval_simulations=16)
    torch.manual_seed(0)
    agent = SearchAgent("alphazero", game, PolicyValueNet(game, config).eval(), config, evaluator)
    assert isinstance(agent, Agent) and isinstance(agent, GameAgent)
    states = [game.initial_state(), game.apply(game.initial_state(), 4)]
    batch = agent.act_batch(states)
    agent.rng = np.random.default_rng(0)
    one_by_one = [agent.act(s) for s in states]
    agent.rng = np.random.default_rng(0)
    assert agent.act_batch(states) == batch
    assert all(game.legal_mask(s)[a] for s, a in zip(states, one_by_one, strict=True))
    sampled = agent.act_batch(states, deterministic=False, simulations=8)
    assert all(game.legal_mask(s)[a] for s, a in zip(states, sampled, strict=True))
    assert agent(states[1]) in game.legal_actions(states[1])


def test_runners_play_through_the_remote_that_train_is_given(tmp_path, monkeypatch):
    """``runners=K``: rlx.train hands train() the remote workers from above
    (``rlx.distributed.scaled_out``); they play the shares and seeds ``workers=K`` processes
    would, so both runs log the same games, and they are closed at the end."""
    import functools

    import rlx.distributed

    monkeypatch.setattr(rlx.distributed, "scaled_out",
                        lambda spec: functools.partial(spec.train, remote=LocalRemote))  # fmt: skip
    LocalRemote.started.clear()
    config = {**TINY, "iterations": 2, "eval_games": 0}
    rlx.train("alphazero", "tictactoe", run_dir=tmp_path / "ray", progress=False, runners=2,
              **config)  # fmt: skip
    (remote,) = LocalRemote.started
    assert remote.calls == [[4, 4], [4, 4]] and remote.closed
    rlx.train("alphazero", "tictactoe", run_dir=tmp_path / "procs", progress=False, workers=2,
              **config)  # fmt: skip
    logged = {}
    for name in ("ray", "procs"):
        lines = (tmp_path / name / "metrics.jsonl").read_text().splitlines()
        logged[name] = [json.loads(x) for x in lines]
    assert [row.pop("runner_restarts") for row in logged["ray"]] == [0.0, 0.0]
    rows = {name: [{k: v for k, v in row.items() if not k.endswith("_s")} for row in run]
            for name, run in logged.items()}  # fmt: skip
    assert rows["ray"] == rows["procs"]


def test_runners_without_a_remote_is_a_clear_error():
    with pytest.raises(ConfigError, match="runners=2 needs Ray's self-play workers"):
        selfplay.SelfPlayPool(METHOD, TicTacToe(), AlphaZeroConfig(runners=2))
