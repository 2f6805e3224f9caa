"""Rollout MCTS: the kernel's rules, immediate wins and blocks, perfect tic-tac-toe at 3000
simulations, visit counts, determinism and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from rlx.errors import ConfigError, EnvError
from rlx.games import ConnectFour, Game, GameState, IllegalMoveError, TicTacToe, play_match
from rlx.games import bitboards as bb
from rlx.games import search as one_search
from rlx.games.leaf_evaluators import RandomRollouts
from rlx.games.rollout_mcts import MCTSPlayer
from rlx.games.solver import SolverPlayer


def search(game: Game, state: GameState, simulations: int, seed: int = 0) -> np.ndarray:
    """The visit counts of pure MCTS (UCT, random rollouts) from ``state``."""
    config = one_search.SearchConfig(simulations, c_uct=2.0)
    rng = np.random.default_rng(seed)
    return one_search.search(game, [state], RandomRollouts(), config, rng).counts[0]


def play(game: Game, moves: list[int]) -> GameState:
    state = game.initial_state()
    for move in moves:
        state = game.apply(state, move)
    return state


def winning_moves(game: Game, state: GameState) -> set[int]:
    return {
        int(a) for a in game.legal_actions(state) if game.apply(state, a).result == state.to_play
    }


def safe_moves(game: Game, state: GameState) -> set[int]:
    """The moves after which the opponent has no immediate win."""
    return {
        int(a) for a in game.legal_actions(state) if not winning_moves(game, game.apply(state, a))
    }


# ---------------------------------------------------------------- the kernel's rules
@pytest.mark.parametrize(("game", "games"), [(TicTacToe(), 300), (ConnectFour(), 150)])
def test_bitboard_rules_agree_with_the_game_classes(game: Game, games: int) -> None:
    """Random games through the Python classes and, alongside, through the kernel's bitboard
    functions (their pure-Python versions, so no compile): same positions, same wins."""
    rng = np.random.default_rng(0)
    for _ in range(games):
        state = game.initial_state()
        kind = bb.kind_of(game)
        position, mask = bb.from_state(kind, state)
        while not state.is_terminal:
            legal = game.legal_actions(state)
            kernel_legal = [
                a for a in range(game.num_actions) if bb.is_legal.py_func(kind, mask, a)
            ]
            assert kernel_legal == list(legal)
            action = int(rng.choice(legal))
            mover = state.to_play
            state = game.apply(state, action)
            position, mask = bb.play.py_func(kind, position, mask, action)
            assert bb.from_state(kind, state) == (position, mask)
            stones = mask ^ position
            won = bb.TICTACTOE_WON[stones] if kind == bb.TICTACTOE else bb.c4_won.py_func(stones)
            assert bool(won) == (state.result == mover)


def test_a_floating_connect_four_stone_is_refused() -> None:
    board = np.zeros((6, 7), dtype=np.int8)
    board[2, 3] = 1  # nothing below it
    with pytest.raises(EnvError, match="above an empty cell"):
        search(ConnectFour(), GameState(board, to_play=-1, moves=1), 10)


# ---------------------------------------------------------------- tactics
TTT_WINS = [
    [0, 3, 1, 4],  # X wins at 2 (and O threatens 5: winning comes first)
    [0, 3, 1, 4, 8],  # O wins at 5, though X threatens 2
    [0, 1, 4, 2],  # X wins on the diagonal at 8
]
TTT_BLOCKS = [
    [0, 4, 1],  # O must take 2
    [4, 0, 8, 2],  # X must take 1 (O's 0-1-2)
    [0, 4, 8, 2],  # X must take 6 (O's 2-4-6)
]
C4_WINS = [
    [3, 4, 3, 4, 3, 4],  # vertical in column 3 (O threatens column 4)
    [0, 0, 1, 1, 2, 2],  # horizontal on the bottom row at column 3
    [0, 1, 1, 2, 3, 2, 2, 3, 6, 3],  # the diagonal (0,0) (1,1) (2,2) (3,3)
    [6, 1, 6, 2, 5, 3, 5],  # O to move wins on the bottom row at 0 or 4
]
C4_BLOCKS = [
    [0, 6, 1, 6, 2],  # O must take 3 on the bottom row
    [3, 0, 3, 0, 3],  # O must cap column 3
    [0, 1, 1, 2, 3, 2, 2, 3, 3],  # O must stop X's diagonal (0,0)-(3,3) at column 3
]


def _positions(game: Game, lines: list[list[int]], kind: str) -> list[GameState]:
    states = [play(game, line) for line in lines]
    for line, state in zip(lines, states, strict=True):
        if kind == "win":
            keep = winning_moves(game, state)
        else:
            keep = safe_moves(game, state)
            assert not winning_moves(game, state), line
        # the fixture means something: some moves are right and some are not
        assert keep and keep != set(game.legal_actions(state).tolist()), line
    return states


@pytest.mark.parametrize(
    ("game", "lines", "kind", "simulations"),
    [
        (TicTacToe(), TTT_WINS, "win", 1000),
        (TicTacToe(), TTT_BLOCKS, "block", 1000),
        (ConnectFour(), C4_WINS[:3], "win", 2000),
        (ConnectFour(), C4_BLOCKS, "block", 2000),
    ],
)
def test_plays_the_immediate_win_or_the_block(
    game: Game, lines: list[list[int]], kind: str, simulations: int
) -> None:
    for state in _positions(game, lines, kind):
        right = winning_moves(game, state) if kind == "win" else safe_moves(game, state)
        for seed in range(5):
            move = MCTSPlayer(game, simulations=simulations, seed=seed)(state)
            assert move in right, (game.render(state), move, right)


def test_connect_four_win_for_the_second_player() -> None:
    game = ConnectFour()
    (state,) = _positions(game, C4_WINS[3:], "win")
    assert state.to_play == -1
    for seed in range(5):
        assert MCTSPlayer(game, 2000, seed=seed)(state) in winning_moves(game, state)


def test_never_loses_to_perfect_play_at_3000_simulations() -> None:
    game = TicTacToe()
    as_first = play_match(game, MCTSPlayer(game, 3000, seed=1), SolverPlayer(2), 20, "first")
    as_second = play_match(game, MCTSPlayer(game, 3000, seed=3), SolverPlayer(4), 20, "second")
    assert as_first.losses == 0 and as_second.losses == 0, (as_first, as_second)


# ---------------------------------------------------------------- counts, seeds, input
@pytest.mark.parametrize("game", [TicTacToe(), ConnectFour()])
@pytest.mark.parametrize("simulations", [1, 7, 500])
def test_visit_counts_sum_to_the_simulations_and_skip_illegal_moves(
    game: Game, simulations: int
) -> None:
    # a position with an illegal move: cell 0 taken, or column 0 full
    line = [0, 1] if isinstance(game, TicTacToe) else [0, 1, 0, 1, 0, 1, 2, 0, 2, 0, 2, 0]
    state = play(game, line)
    assert not game.legal_mask(state)[0]
    counts = search(game, state, simulations, 3)
    assert counts.shape == (game.num_actions,) and counts.dtype == np.int64
    assert counts.sum() == simulations
    assert (counts[~game.legal_mask(state)] == 0).all()
    assert np.array_equal(counts, search(game, state, simulations, 3))


def test_the_most_visited_move_is_played() -> None:
    game = ConnectFour()
    counts = search(game, game.initial_state(), 5000, 0)
    assert counts.argmax() == 3  # the centre column is the best opening
    assert MCTSPlayer(game, 5000, seed=0)(game.initial_state()) == 3


def test_the_same_seed_plays_the_same_game() -> None:
    game = ConnectFour()

    def moves(seed_first: int, seed_second: int) -> list[int]:
        first, second = MCTSPlayer(game, 300, seed_first), MCTSPlayer(game, 300, seed_second)
        state, out = game.initial_state(), []
        while not state.is_terminal:
            out.append((first if state.to_play == 1 else second)(state))
            state = game.apply(state, out[-1])
        return out

    assert moves(1, 2) == moves(1, 2)
    assert moves(1, 2) != moves(3, 4)
    state = game.initial_state()
    assert not np.array_equal(search(game, state, 300, 0), search(game, state, 300, 1))


def test_name_says_the_simulations() -> None:
    assert MCTSPlayer(TicTacToe(), simulations=250).name == "mcts-250"


@pytest.mark.parametrize("simulations", [0, -5, 2.5])
def test_bad_simulations_are_refused(simulations: float) -> None:
    with pytest.raises(ConfigError, match="simulations must be an integer >= 1"):
        MCTSPlayer(TicTacToe(), simulations=simulations)
    with pytest.raises(ConfigError, match="simulations"):
        search(TicTacToe(), TicTacToe().initial_state(), simulations)


def test_negative_exploration_constant_is_refused() -> None:
    with pytest.raises(ConfigError, match="c, the exploration constant"):
        MCTSPlayer(TicTacToe(), c=-1.0)


def test_a_game_without_a_kernel_is_refused() -> None:
    class Nim(Game):
        name, board_shape, num_actions = "nim", (1, 3), 3

        def legal_mask(self, state: GameState) -> np.ndarray:
            return np.ones(3, dtype=bool)

        def play(self, state: GameState, action: int) -> GameState:
            return state

        def symmetries(self, planes, policy):
            return [(planes, policy)]

        def render(self, state: GameState) -> str:
            return ""

    with pytest.raises(EnvError, match="no kernel for Nim; it plays TicTacToe, ConnectFour"):
        MCTSPlayer(Nim())


def test_searching_a_finished_game_is_an_error() -> None:
    game = TicTacToe()
    state = play(game, [0, 3, 1, 4, 2])
    with pytest.raises(IllegalMoveError, match="the game is over"):
        search(game, state, 10)
