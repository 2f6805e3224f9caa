"""The OpenSpiel adapter: its rules agree with rlx's own games, rlx players play on it, and games
that do not fit the protocol are refused with a reason."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from rlx import games
from rlx.errors import EnvError
from rlx.games import ConnectFour, Game, IllegalMoveError, RandomPlayer, TicTacToe, play_match
from rlx.games.leaf_evaluators import RandomRollouts
from rlx.games.rollout_mcts import MCTSPlayer
from rlx.games.search import SearchConfig
from rlx.games.search import search as tree_search
from rlx.games.solver import SolverPlayer

pytest.importorskip("pyspiel")

from rlx.games.openspiel import OpenSpielGame, OpenSpielState


def search(game: Game, state, simulations: int, seed: int) -> np.ndarray:
    """The visit counts of pure MCTS (UCT, random rollouts) from ``state``."""
    config, rng = SearchConfig(simulations, c_uct=2.0), np.random.default_rng(seed)
    return tree_search(game, [state], RandomRollouts(), config, rng).counts[0]


@pytest.mark.parametrize(
    ("name", "ours", "n_games"),
    [("tic_tac_toe", TicTacToe(), 200), ("connect_four", ConnectFour(), 40)],
)
def test_rules_agree_with_rlx_on_random_games(name: str, ours: Game, n_games: int) -> None:
    """The same random moves in both: the same boards, player to move, legal moves, results."""
    theirs = OpenSpielGame(name)
    assert theirs.num_actions == ours.num_actions and theirs.board_shape == ours.board_shape
    rng = np.random.default_rng(0)
    results = set()
    for _ in range(n_games):
        mine, other = ours.initial_state(), theirs.initial_state()
        while True:
            assert np.array_equal(mine.board, other.board) and mine.board.dtype == np.int8
            assert (mine.to_play, mine.result, mine.moves) == (
                other.to_play,
                other.result,
                other.moves,
            )
            assert np.array_equal(ours.legal_mask(mine), theirs.legal_mask(other))
            if mine.is_terminal:
                break
            action = int(rng.choice(ours.legal_actions(mine)))
            mine, other = ours.apply(mine, action), theirs.apply(other, action)
        results.add(mine.result)
    # wins of both sides compared, and draws too in tic-tac-toe (random Connect Four rarely draws)
    assert results >= ({1, 0, -1} if name == "tic_tac_toe" else {1, -1})


def test_make_routes_to_the_adapter() -> None:
    game = games.make("openspiel:tic_tac_toe")
    assert isinstance(game, OpenSpielGame) and game.name == "openspiel:tic_tac_toe"
    state = game.apply(game.initial_state(), 4)
    assert isinstance(state, OpenSpielState) and state.native.history() == [4]
    assert game.render(state) == str(state.native)


def test_encode_and_symmetries() -> None:
    game = OpenSpielGame("connect_four")
    state = game.apply(game.initial_state(), 3)
    planes = game.encode(state)
    assert planes.shape == (game.num_planes, *game.board_shape) == (3, 6, 7)
    assert planes.dtype == np.float32
    expected = np.asarray(state.native.observation_tensor(1), dtype=np.float32)
    assert np.array_equal(planes.reshape(-1), expected)  # player 1 (O) moves next
    policy = np.arange(7.0)
    ((same_planes, same_policy),) = game.symmetries(planes, policy)
    assert same_planes is planes and np.array_equal(same_policy, policy)


def test_illegal_moves_and_the_end_of_the_game() -> None:
    game = OpenSpielGame("tic_tac_toe")
    state = game.apply(game.initial_state(), 4)
    with pytest.raises(IllegalMoveError, match="move 4 is not legal"):
        game.apply(state, 4)
    state = game.initial_state()
    for action in (0, 3, 1, 4, 2):  # X takes the top row
        state = game.apply(state, action)
    assert state.is_terminal and state.result == 1 and state.to_play == -1
    assert not game.legal_mask(state).any()
    with pytest.raises(IllegalMoveError, match="the game is over"):
        game.apply(state, 6)


def test_rlx_players_play_matches_on_it() -> None:
    game = games.make("openspiel:tic_tac_toe")
    solver = play_match(game, SolverPlayer(0), RandomPlayer(game, 1), games=10)
    assert solver.games == 10 and solver.losses == 0 and solver.wins >= 5
    # MCTS falls back to plain Python search on OpenSpiel states
    mcts = play_match(game, MCTSPlayer(game, 300, seed=0), RandomPlayer(game, 2), games=6)
    assert mcts.games == 6 and mcts.losses == 0 and mcts.wins >= 4


def test_python_search_on_openspiel_states() -> None:
    game = OpenSpielGame("tic_tac_toe")
    state = game.initial_state()
    for action in (0, 3, 1, 4):  # X to move wins at 2
        state = game.apply(state, action)
    counts = search(game, state, 400, 0)
    assert counts.sum() == 400 and (counts[~game.legal_mask(state)] == 0).all()
    assert np.array_equal(counts, search(game, state, 400, 0))
    assert counts.argmax() == 2
    assert MCTSPlayer(game, 400, seed=1)(state) == 2


@pytest.mark.parametrize("name", ["tic_tac_toe", "connect_four", "breakthrough"])
def test_the_lazy_board_is_the_board_read_from_the_observation(name: str) -> None:
    """The game's states read their board when it is first asked for: the board a state made
    with its board (the dataclass's constructor) has, the same at each read."""
    game = OpenSpielGame(name)
    rng = np.random.default_rng(0)
    state = game.initial_state()
    for _ in range(6):
        assert "board" not in vars(state)  # not read by the rules
        eager = OpenSpielState(
            game.board_of(state.native), state.to_play, state.result, state.moves, state.native
        )
        assert np.array_equal(state.board, eager.board) and state.board is state.board
        assert state.board.shape[-2:] == game.board_shape and state.key() == eager.key()
        state = game.apply(state, int(rng.choice(game.legal_actions(state))))


def test_pure_mcts_gives_the_pinned_visit_counts_for_a_seed() -> None:
    """UCT with random rollouts on OpenSpiel's games, two positions searched together: the
    counts and root values of one seed stay what they were (the rollouts' draws included)."""
    pinned = {
        "tic_tac_toe": ([4], [[32, 8, 24, 14, 27, 17, 13, 29, 36],
                              [35, 19, 29, 25, 0, 16, 27, 16, 33]], [0.32, -0.51]),
        "connect_four": ([3, 3], [[15, 33, 33, 39, 42, 26, 12], [28, 39, 48, 37, 5, 21, 22]],
                         [0.195, 0.265]),
    }  # fmt: skip
    for name, (moves, counts, values) in pinned.items():
        game = OpenSpielGame(name)
        state = game.initial_state()
        for move in moves:
            state = game.apply(state, move)
        result = tree_search(game, [game.initial_state(), state], RandomRollouts(),
                             SearchConfig(200), np.random.default_rng(7))  # fmt: skip
        assert result.counts.tolist() == counts and result.values.tolist() == values


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("kuhn_poker", "has chance events"),
        ("goofspiel", "does not have sequential moves"),
        ("phantom_ttt", "has imperfect information"),
    ],
)
def test_games_outside_the_protocol_are_refused(name: str, reason: str) -> None:
    with pytest.raises(EnvError, match=f"OpenSpiel's '{name}' {reason}; rlx plays two-player"):
        OpenSpielGame(name)


def test_an_unknown_game_gets_a_suggestion() -> None:
    with pytest.raises(EnvError, match=r"no game 'tic_tac_to'.*Did you mean tic_tac_toe"):
        games.make("openspiel:tic_tac_to")


def test_without_open_spiel_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pyspiel", None)  # makes `import pyspiel` fail
    with pytest.raises(EnvError, match="pip install open_spiel"):
        OpenSpielGame("tic_tac_toe")
