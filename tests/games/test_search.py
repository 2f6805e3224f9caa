"""The one search and its evaluators: the seams between the tree, the evaluators and the
kernels (the numbers of each search are pinned in test_mcts, test_rollout_mcts and
test_muzero)."""

from __future__ import annotations

import numpy as np
import pytest

from rlx.errors import ConfigError
from rlx.games import ConnectFour, Game, GameState, TicTacToe
from rlx.games.base import integer_draw
from rlx.games.leaf_evaluators import (
    Evaluator,
    Leaf,
    PolicyValueEvaluator,
    RandomRollouts,
    as_evaluator,
)
from rlx.games.search import MinMaxStats, Node, SearchConfig, backup, search


def play(game: Game, moves: list[int]) -> GameState:
    state = game.initial_state()
    for move in moves:
        state = game.apply(state, move)
    return state


def uniform(planes: np.ndarray, legal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return legal / legal.sum(axis=1, keepdims=True), np.zeros(len(planes))


@pytest.mark.parametrize(
    ("moves", "right"),
    [
        ([0, 3, 1, 4], {2}),  # X wins at 2
        ([0, 4, 8, 1], {7}),  # X must block O's column 1-4-7
    ],
)
def test_random_rollouts_in_the_python_tree_find_the_win_and_the_block(moves, right):
    """Pure MCTS outside the kernels (as on an OpenSpiel game) on tic-tac-toe: the same UCT
    finds what the kernel finds."""
    game = TicTacToe()
    state = play(game, moves)
    for seed in range(3):
        counts, values, trees = search(game, [state], RandomRollouts(), SearchConfig(1000),
                                       np.random.default_rng(seed), use_kernels=False)  # fmt: skip
        assert int(np.argmax(counts[0])) in right
        assert counts[0].sum() == 1000 and counts.dtype == np.int64
        assert -1.0 <= values[0] <= 1.0 and trees[0].visits == 1000


@pytest.mark.parametrize("use_kernels", [True, False])
def test_the_root_value_of_rollouts_is_the_result_when_one_move_is_left(use_kernels):
    """X's last move in tic-tac-toe: it wins, or draws; every simulation backs up that result
    for the player to move, in the kernel and in the Python tree alike."""
    game = TicTacToe()
    draw = play(game, [0, 1, 2, 4, 3, 5, 7, 6])  # X to move at 8: a draw
    win = play(game, [0, 1, 3, 2, 4, 5, 7, 6])  # X to move at 8: the diagonal 0-4-8
    counts, values, _ = search(game, [draw, win], RandomRollouts(), SearchConfig(20),
                               np.random.default_rng(0), use_kernels=use_kernels)  # fmt: skip
    assert counts[:, 8].tolist() == [20, 20] and counts.sum() == 40
    assert values.tolist() == [0.0, 1.0]


def test_backup_keeps_the_sign_when_the_same_player_moves_again():
    """In games where a player may move twice in a row, W is from the view of the player to move
    at each node: sigma = +1 across a move after which the same player moves again."""
    root = Node(None, np.full(2, 0.5), np.ones(2, bool), to_play=1)
    again = Node(None, np.full(2, 0.5), np.ones(2, bool), to_play=1)  # +1 moves again
    backup([(root, 0), (again, 1)], 0.5, to_play=-1)  # the leaf: -1 to move, worth 0.5 to it
    assert again.w[1] == -0.5 and root.w[0] == -0.5
    assert (root.visits, again.visits) == (1, 1)
    other = Node(None, np.full(2, 0.5), np.ones(2, bool), to_play=-1)
    backup([(root, 1), (other, 0)], 0.5, to_play=1)
    assert other.w[0] == -0.5 and root.w[1] == 0.5


def test_min_max_stats_scale_only_with_value_bounds():
    node = Node(None, np.full(2, 0.5), np.ones(2, bool))
    node.n[0], node.w[0] = 1.0, 0.5
    assert node.q(None, fpu=0.0).tolist() == [0.5, 0.0]
    assert node.q(MinMaxStats((-1.0, 1.0)), fpu=0.0).tolist() == [0.75, 0.5]


def test_a_bare_policy_value_function_is_a_policy_value_evaluator():
    game = ConnectFour()
    state = play(game, [3, 3, 2])
    wrapped = PolicyValueEvaluator(uniform)
    assert isinstance(as_evaluator(uniform), PolicyValueEvaluator)
    assert as_evaluator(wrapped) is wrapped and isinstance(RandomRollouts(), Evaluator)
    a = search(game, [state], uniform, SearchConfig(30), np.random.default_rng(0)).counts
    b = search(game, [state], wrapped, SearchConfig(30), np.random.default_rng(0)).counts
    np.testing.assert_array_equal(a, b)
    with pytest.raises(TypeError, match="an evaluator must have roots"):
        as_evaluator(3)


def test_a_custom_evaluator_is_searched_in_the_python_tree():
    """Any object with roots() and leaves() is an evaluator: here one that values every
    position 0 and knows a move that wins at once."""

    class OneWinningMove:
        def roots(self, game, states, rng):
            return [Leaf(s, 0.0, game.legal_mask(s), np.full(9, 1 / 9), s.to_play) for s in states]

        def leaves(self, game, positions, actions, rng):
            out = []
            for position, action in zip(positions, actions, strict=True):
                state = game.play(position, action)
                if state.is_terminal:
                    out.append(Leaf(state, float(state.result * state.to_play), None,
                                    to_play=state.to_play))  # fmt: skip
                else:
                    legal = game.legal_mask(state)
                    out.append(Leaf(state, 0.0, legal, legal / legal.sum(), state.to_play))
            return out

    game = TicTacToe()
    state = play(game, [0, 3, 1, 4])
    counts, values, _ = search(game, [state], OneWinningMove(), SearchConfig(60),
                               np.random.default_rng(0))  # fmt: skip
    assert int(np.argmax(counts[0])) == 2 and values[0] > 0


def test_random_playout_ends_the_game_with_its_result():
    game = ConnectFour()
    rng = np.random.default_rng(0)
    results = {game.random_playout(game.initial_state(), rng) for _ in range(30)}
    assert results <= {-1, 0, 1} and {-1, 1} <= results
    won = play(TicTacToe(), [0, 3, 1, 4, 2])
    assert TicTacToe().random_playout(won, rng) == 1


@pytest.mark.parametrize("bits", [np.random.PCG64, np.random.MT19937, np.random.Philox])
def test_integer_draw_draws_what_rng_integers_draws(bits):
    """Rollouts draw their moves as ``rng.integers(n)`` would: the same numbers, among other
    draws of the generator, and the generator left in the same state (n = 1 draws nothing;
    a large n makes Lemire's method draw again)."""
    ours, numpy = np.random.Generator(bits(3)), np.random.Generator(bits(3))
    sizes = np.random.default_rng(0).integers(1, 12, 2000).tolist() + [1, 1, 3_000_000_000] * 50
    draw = integer_draw(ours)
    for i, n in enumerate(sizes):
        if i % 97 == 0:  # other draws in between: a shuffle (as UCT's order), a float
            assert ours.permutation(5).tolist() == numpy.permutation(5).tolist()
            assert ours.random() == numpy.random()
        assert draw(n) == int(numpy.integers(n))
    assert ours.integers(2**40) == numpy.integers(2**40)


class BatchedRollouts(RandomRollouts):
    """Random rollouts through ``leaves``, as any evaluator: the search values only
    RandomRollouts itself one leaf at a time."""


def signature(node: Node) -> tuple:
    """A tree's visits and statistics, a leaf never walked through (opened or not) as its
    visits alone."""
    if node.n is None or not any(node.n):
        return (node.visits,)
    children = sorted((action, signature(child)) for action, child in node.children.items())
    return node.visits, list(node.n), list(node.w), children


@pytest.mark.parametrize("game", [TicTacToe(), ConnectFour()])
def test_rollouts_one_leaf_at_a_time_search_as_the_batched_evaluator(game):
    """The search's own loop for random rollouts and the evaluator's ``leaves``: the same
    counts, values and trees for a seed, fresh and continued from kept trees (whose unopened
    roots open at the next search)."""
    states = [play(game, []), play(game, [2])]
    config = SearchConfig(60, c_uct=1.4)
    found = []
    for evaluator in (RandomRollouts(), BatchedRollouts()):
        rng, searched, results = np.random.default_rng(5), list(states), []
        result = search(game, searched, evaluator, config, rng, use_kernels=False)
        for _ in range(3):
            results.append((result.counts.tolist(), result.values.tolist()))
            actions = [int(np.argmax(counts)) for counts in result.counts]
            kept = result.trees.after([0, 1], actions, 0)
            searched = [game.apply(s, a) for s, a in zip(searched, actions, strict=True)]
            result = search(game, searched, evaluator, config, rng, kept, use_kernels=False)
        results.append([signature(root) for root in result.trees])
        found.append(results)
    assert found[0] == found[1]


def test_a_leaf_of_a_rollout_search_opens_at_its_first_walk():
    """Random rollouts leave their leaves unopened (no legal moves or statistics yet); the walk
    that first leaves one opens it with the legal moves of its position."""
    game = TicTacToe()
    state = play(game, [0, 4])
    result = search(game, [state], RandomRollouts(), SearchConfig(30), np.random.default_rng(0),
                    use_kernels=False)  # fmt: skip
    nodes, unopened = [result.trees[0]], 0
    while nodes:
        node = nodes.pop()
        if node.legal is None:
            unopened += 1
            assert node.n is None and node.children is None and node.visits == 1
            continue
        assert np.array_equal(node.legal, game.legal_mask(node.position))
        # N(s): one visit per simulation through it, and one that made it (but the root's)
        made = 0 if node is result.trees[0] else 1
        assert len(node.n) == game.num_actions and node.visits == sum(node.n) + made
        nodes.extend(node.children.values())
    assert unopened > 0


def test_search_settings_are_checked():
    with pytest.raises(ConfigError, match="simulations must be an integer >= 1"):
        SearchConfig(0)
    with pytest.raises(ConfigError, match="keeps no trees"):
        search(TicTacToe(), [TicTacToe().initial_state()], RandomRollouts(), SearchConfig(5),
               np.random.default_rng(0), kept=[None])  # fmt: skip
