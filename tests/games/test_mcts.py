"""PUCT search against hand-worked numbers and the tic-tac-toe solver."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlx.games import GameState, TicTacToe, solver
from rlx.games.search import (
    SearchConfig,
    add_root_noise,
    choose,
    puct_select,
    search,
    visit_policy,
)


def counts_of(*args, **kwargs) -> np.ndarray:
    """The visit counts of a search."""
    return search(*args, **kwargs).counts


def python_search(*args, **kwargs):
    """The search in the Python tree, for every game: the reference of the kernels."""
    return search(*args, **kwargs, use_kernels=False)


def uniform(planes: np.ndarray, legal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Uniform priors over the legal moves and value 0: search alone must find the way."""
    priors = legal / legal.sum(axis=1, keepdims=True)
    return priors, np.zeros(len(planes))


def play(game, moves):
    state = game.initial_state()
    for move in moves:
        state = game.apply(state, move)
    return state


def test_puct_select_against_hand_worked_scores():
    prior = np.array([0.5, 0.3, 0.2, 0.0])
    n = np.array([3.0, 1.0, 0.0, 0.0])
    q = np.array([0.1, 0.5, 0.0, 0.0])
    legal = np.array([True, True, True, False])
    c = 1.5
    # U = c P sqrt(4) / (1 + N): 0.375, 0.45, 0.6; scores 0.475, 0.95, 0.6
    expected = [0.1 + c * 0.5 * 2 / 4, 0.5 + c * 0.3 * 2 / 2, 0.0 + c * 0.2 * 2 / 1]
    assert puct_select(prior, n, q, legal, c) == int(np.argmax(expected)) == 1
    # an illegal move is never picked however good it looks
    q_bad = np.array([0.0, 0.0, 0.0, 10.0])
    assert puct_select(prior, n, q_bad, legal, c) != 3


def test_visit_policy_temperature():
    counts = np.array([1.0, 3.0, 0.0, 4.0])
    np.testing.assert_allclose(visit_policy(counts, 1.0), counts / 8)
    np.testing.assert_allclose(visit_policy(counts, 0.5), counts**2 / (counts**2).sum())
    np.testing.assert_array_equal(visit_policy(counts, 0.0), [0, 0, 0, 1])
    np.testing.assert_array_equal(visit_policy(np.array([2.0, 2.0, 1.0]), 0), [0.5, 0.5, 0])
    assert choose(counts, 0.0, np.random.default_rng(0)) == 3


def test_root_noise_stays_on_legal_moves_and_sums_to_one():
    legal = np.array([True, False, True, True])
    prior = np.array([0.5, 0.0, 0.25, 0.25])
    noisy = add_root_noise(prior, legal, 0.3, 0.25, np.random.default_rng(0))
    assert noisy[1] == 0 and math.isclose(noisy.sum(), 1.0)
    assert not np.allclose(noisy, prior)
    np.testing.assert_array_equal(add_root_noise(prior, legal, 0.3, 0.0, None), prior)


def test_counts_sum_to_simulations_and_respect_legal_moves():
    g = TicTacToe()
    state = play(g, [4, 0])
    counts = counts_of(
        g, [state, g.initial_state()], uniform, SearchConfig(50), np.random.default_rng(0)
    )
    assert counts.shape == (2, 9)
    np.testing.assert_array_equal(counts.sum(axis=1), [50, 50])
    assert counts[0, 4] == 0 and counts[0, 0] == 0


@pytest.mark.parametrize(
    "moves, best",
    [
        ([0, 3, 1, 4], {2}),  # X wins at 2
        ([0, 4, 8, 1], {7}),  # X must block O's column 1-4-7
        ([4, 0, 8, 2], {1}),  # X must block O's 0-1-2 row
    ],
)
def test_search_finds_wins_and_blocks_with_a_know_nothing_network(moves, best):
    """Values backed up with alternating signs make the search see the win (or the loss it
    must block) through the tree alone."""
    g = TicTacToe()
    state = play(g, moves)
    counts = counts_of(g, [state], uniform, SearchConfig(400), np.random.default_rng(0))[0]
    assert int(np.argmax(counts)) in best
    assert set(solver.best_actions(state)) >= best


def solver_network(planes: np.ndarray, legal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A network that knows the true value: the position is read back from its planes (the
    mover is X when both have as many stones) and valued by the solver."""
    values = []
    for own, other, _ in planes:
        to_play = 1 if own.sum() == other.sum() else -1
        board = (to_play * (own - other)).astype(np.int8)
        values.append(solver.value(GameState(board, to_play, None, int(own.sum() + other.sum()))))
    return legal / legal.sum(axis=1, keepdims=True), np.array(values, dtype=float)


def test_search_with_a_perfect_value_network_never_picks_a_losing_move():
    g = TicTacToe()
    rng = np.random.default_rng(1)
    for game in range(10):
        state = g.initial_state()
        while not state.is_terminal:
            if state.to_play == (1 if game % 2 else -1):
                counts = counts_of(g, [state], solver_network, SearchConfig(30), rng)[0]
                move = int(np.argmax(counts))
                assert move in solver.best_actions(state)
            else:
                move = int(rng.choice(g.legal_actions(state)))
            state = g.apply(state, move)


def _random_positions(game, count: int, max_moves: int, seed: int) -> list[GameState]:
    rng = np.random.default_rng(seed)
    states = []
    while len(states) < count:
        state = game.initial_state()
        for _ in range(int(rng.integers(0, max_moves))):
            state = game.apply(state, int(rng.choice(game.legal_actions(state))))
            if state.is_terminal:
                break
        if not state.is_terminal:
            states.append(state)
    return states


def _network_evaluator(game, seed: int):
    """A random network's evaluator, so priors and values differ from move to move."""
    import torch

    from rlx.games.alphazero import AlphaZeroConfig, PolicyValueNet, evaluator

    torch.manual_seed(seed)
    config = AlphaZeroConfig(net="resnet", channels=8, blocks=1)
    return evaluator(PolicyValueNet(game, config).eval())


@pytest.mark.parametrize("game_name", ["tictactoe", "connect4", "connect4-threats"])
def test_kernel_search_gives_the_python_searchs_counts(game_name):
    """The numba kernels are the reference algorithm, number for number: same evaluator, same
    generator (root noise), same visit counts, over positions where some walks end in won,
    lost and drawn games (tic-tac-toe's late positions, 300 simulations). With threat planes
    the kernels encode the leaves themselves: the network sees what ``Game.encode`` gives."""
    from rlx.games import ConnectFour, make
    from rlx.games.bitboards import kind_of

    threats = game_name == "connect4-threats"
    game = ConnectFour(threat_planes=True) if threats else make(game_name)
    assert kind_of(game) is not None
    states = _random_positions(game, 12, 8 if game_name == "tictactoe" else 20, seed=3)
    evaluate = _network_evaluator(game, seed=0)
    if threats:  # some leaves hold threats, so a wrong threat plane changes the counts
        assert any(game.encode(s)[3:].any() for s in states)
    for config in (SearchConfig(300, 1.5, 1.0, 0.25), SearchConfig(50, 4.0, 0.3, 0.0, fpu=-1.0)):
        fast, fast_q, fast_trees = search(game, states, evaluate, config, np.random.default_rng(7))
        slow, slow_q, slow_trees = python_search(
            game, states, evaluate, config, np.random.default_rng(7)
        )
        assert (
            type(fast_trees).__name__ == "ArrayTrees" and type(slow_trees).__name__ == "NodeTrees"
        )
        np.testing.assert_array_equal(fast, slow)
        assert (fast.sum(axis=1) == config.simulations).all()
        np.testing.assert_allclose(fast_q, slow_q, rtol=1e-12, atol=1e-12)
        assert np.abs(fast_q).max() <= 1.0 and np.abs(fast_q).max() > 0


@pytest.mark.parametrize("game_name", ["tictactoe", "connect4"])
def test_root_value_is_the_mean_backed_up_value_worked_by_hand(game_name):
    """An evaluator that says v = 0.3 for the player to move everywhere: a one-ply walk backs
    up -0.3 to the root, a two-ply walk +0.3. With as many simulations as moves, every walk
    ends one ply down (unvisited moves first: their fpu of +1 beats any Q), so Q(root) = -0.3;
    a won move backs up +1 (the mover's win) instead."""
    from rlx.games import make

    game = make(game_name)

    def constant(planes, legal):
        return legal / legal.sum(axis=1, keepdims=True), np.full(len(planes), 0.3)

    start = game.initial_state()
    config = SearchConfig(game.num_actions, 1.0, 1.0, 0.0, fpu=1.0)
    for run in (search, python_search):
        counts, q, _ = run(game, [start], constant, config, np.random.default_rng(0))
        assert counts[0].tolist() == [1.0] * game.num_actions
        assert q[0] == pytest.approx(-0.3)
    # tic-tac-toe, X to move with a win at 2: one of the 9 - 4 = 5 walks wins (+1), the others
    # back up -0.3 each: Q = (1 - 4 * 0.3) / 5
    if game_name == "tictactoe":
        state = play(game, [0, 3, 1, 4])
        config = SearchConfig(5, 1.0, 1.0, 0.0, fpu=1.0)
        for run in (search, python_search):
            _, q, _ = run(game, [state], constant, config, np.random.default_rng(0))
            assert q[0] == pytest.approx((1 - 4 * 0.3) / 5)


@pytest.mark.parametrize("game_name", ["tictactoe", "connect4"])
def test_tree_reuse_keeps_the_played_subtree_and_kernel_and_python_agree(game_name):
    """Several moves of several games with the subtree of each played move kept: the kernels
    give the Python tree's counts and values move after move; a kept root starts with the
    played move's visits less the one that expanded it and searches up to ``simulations``
    visits (at least a quarter new); the kept games ask the network for fewer positions."""
    from rlx.games import make

    game = make(game_name)
    config = SearchConfig(40, 1.5, 1.0, 0.25)
    network = _network_evaluator(game, seed=0)
    asked = {"kept": 0, "fresh": 0}

    def counting(key):
        def evaluate(planes, legal):
            asked[key] += len(planes)
            return network(planes, legal)

        return evaluate

    for kept_trees in (False, True):
        states = _random_positions(game, 6, 3, seed=5)
        rng_kernel, rng_python, rng_moves = (np.random.default_rng(s) for s in (7, 7, 8))
        kernel_kept = python_kept = None
        expected_visits = np.full(len(states), config.simulations)
        key = "kept" if kept_trees else "fresh"
        for _ in range(4):
            counts, q, kernel_trees = search(
                game, states, counting(key), config, rng_kernel, kernel_kept
            )
            slow, slow_q, python_trees = python_search(
                game, states, network, config, rng_python, python_kept
            )
            np.testing.assert_array_equal(counts, slow)
            np.testing.assert_allclose(q, slow_q, rtol=1e-12, atol=1e-12)
            np.testing.assert_array_equal(counts.sum(axis=1), expected_visits)
            actions = [choose(n, 1.0, rng_moves) for n in counts]
            states = [game.apply(s, a) for s, a in zip(states, actions, strict=True)]
            rows = [b for b, s in enumerate(states) if not s.is_terminal]
            states = [states[b] for b in rows]
            if not kept_trees:
                continue
            kernel_kept = kernel_trees.after(rows, [actions[b] for b in rows], 40)
            python_kept = python_trees.after(rows, [actions[b] for b in rows], 40)
            before = np.array([counts[b, actions[b]] - 1 for b in rows])
            np.testing.assert_array_equal(kernel_kept.n[:, 0].sum(axis=1), before)
            expected_visits = before + np.maximum(config.simulations - before, 10)
    assert asked["kept"] < asked["fresh"]


@pytest.mark.parametrize("implementation", ["kernel", "python"])
def test_kept_trees_must_match_the_positions_searched(implementation):
    from rlx.games import EnvError

    run = search if implementation == "kernel" else python_search
    game = TicTacToe()
    config = SearchConfig(10)
    start = game.initial_state()
    _, _, trees = run(game, [start], uniform, config, np.random.default_rng(0))
    kept = trees.after([0], [4], 10)
    with pytest.raises(EnvError, match="not rooted at the position"):
        run(game, [game.apply(start, 0)], uniform, config, np.random.default_rng(0), kept)
    with pytest.raises(EnvError, match="1 kept trees for 2 positions"):
        run(game, [game.apply(start, 4)] * 2, uniform, config, np.random.default_rng(0), kept)


def test_kernel_search_rejects_a_finished_game():
    from rlx.games import IllegalMoveError

    game = TicTacToe()
    won = play(game, [0, 3, 1, 4, 2])
    for run in (search, python_search):
        with pytest.raises(IllegalMoveError, match="game is over"):
            run(game, [won], uniform, SearchConfig(10), np.random.default_rng(0))
