"""Game rules: wins on rows, columns and diagonals, draws, illegal moves, symmetries."""

from __future__ import annotations

import numpy as np
import pytest

from rlx import games
from rlx.errors import EnvError
from rlx.games import ConnectFour, IllegalMoveError, TicTacToe


def play(game, moves):
    state = game.initial_state()
    for move in moves:
        state = game.apply(state, move)
    return state


@pytest.mark.parametrize(
    "moves, winner",
    [
        ([0, 3, 1, 4, 2], 1),  # X: top row
        ([0, 1, 3, 2, 6], 1),  # X: left column
        ([0, 1, 4, 2, 8], 1),  # X: main diagonal
        ([1, 2, 0, 4, 3, 6], -1),  # O: anti-diagonal
        ([0, 3, 1, 4, 8, 5], -1),  # O: middle row
    ],
)
def test_tictactoe_wins(moves, winner):
    g = TicTacToe()
    state = play(g, moves)
    assert g.is_terminal(state) and g.winner(state) == winner
    assert not g.legal_mask(state).any()
    before = play(g, moves[:-1])
    assert not g.is_terminal(before) and g.winner(before) is None


def test_tictactoe_draw_and_board_convention():
    g = TicTacToe()
    state = play(g, [0, 1, 2, 4, 3, 5, 7, 6, 8])
    assert g.is_terminal(state) and g.winner(state) == 0
    assert state.board[0, 0] == 1 and state.board[0, 1] == -1  # +1 first player, -1 second
    assert play(g, [4]).to_play == -1


def test_play_is_apply_without_the_check_and_an_older_private_play_still_plays():
    """``Game.play`` plays a legal move as ``apply`` does; a game written to the protocol when
    the unchecked move was ``_play`` still works, its ``_play`` serving as ``play``."""
    g = TicTacToe()
    state = g.apply(g.initial_state(), 4)
    assert np.array_equal(g.play(g.initial_state(), 4).board, state.board)

    class Older(games.Game):
        name, board_shape, num_actions = "older", (3, 3), 9
        legal_mask = TicTacToe.legal_mask
        symmetries = TicTacToe.symmetries
        render = TicTacToe.render

        def _play(self, state, action):
            return TicTacToe.play(self, state, action)

    older = Older()
    assert np.array_equal(older.apply(older.initial_state(), 4).board, state.board)
    assert older.random_playout(older.initial_state(), np.random.default_rng(0)) in (-1, 0, 1)


def test_illegal_moves_name_the_legal_ones():
    g = TicTacToe()
    state = play(g, [4])
    with pytest.raises(IllegalMoveError, match=r"move 4 is not legal.*legal moves: 0, 1, 2, 3, 5"):
        g.apply(state, 4)
    with pytest.raises(IllegalMoveError, match="move 9"):
        g.apply(state, 9)
    with pytest.raises(IllegalMoveError, match="game is over"):
        g.apply(play(g, [0, 3, 1, 4, 2]), 8)


def test_connect_four_wins_in_every_direction():
    g = ConnectFour()
    horizontal = play(g, [0, 0, 1, 1, 2, 2, 3])
    vertical = play(g, [0, 1, 0, 1, 0, 1, 0])
    # diagonal up-right for X: (5,0) (4,1) (3,2) (2,3)
    diagonal = play(g, [0, 1, 1, 2, 2, 3, 2, 3, 3, 6, 3])
    anti = play(g, [6, 5, 5, 4, 4, 3, 4, 3, 3, 0, 3])
    for state in (horizontal, vertical, diagonal, anti):
        assert g.winner(state) == 1
    assert g.winner(play(g, [0, 0, 1, 1, 2, 2])) is None


def test_connect_four_full_column_is_illegal_and_stones_fall():
    g = ConnectFour()
    state = play(g, [3, 3, 3, 3, 3, 3])
    assert list(g.legal_actions(state)) == [0, 1, 2, 4, 5, 6]
    with pytest.raises(IllegalMoveError, match="legal moves: 0, 1, 2, 4, 5, 6"):
        g.apply(state, 3)
    first = play(g, [2])
    assert first.board[5, 2] == 1 and first.board[:5].sum() == 0  # row 0 is the top


def test_connect_four_draw_on_a_full_board():
    g = ConnectFour()
    state = play(g, _drawn_connect_four())
    assert g.is_terminal(state) and g.winner(state) == 0 and state.moves == 42


def _drawn_connect_four() -> list[int]:
    """A move order that fills the board with no four in a line: seeded random playouts that
    avoid winning moves until one fills the board."""
    g = ConnectFour()
    rng = np.random.default_rng(3)
    while True:
        state, moves = g.initial_state(), []
        while not state.is_terminal:
            options = [a for a in g.legal_actions(state) if g.play(state, a).result in (None, 0)]
            if not options:
                break
            move = int(rng.choice(options))
            moves.append(move)
            state = g.play(state, move)
        if state.is_terminal and state.result == 0:
            return moves


def test_encoding_is_from_the_mover_point_of_view():
    g = TicTacToe()
    state = play(g, [0, 4])  # X at 0, O at 4, X to move
    planes = g.encode(state)
    assert planes.shape == (3, 3, 3) and planes.dtype == np.float32
    assert planes[0, 0, 0] == 1 and planes[1, 1, 1] == 1 and planes[2].all()
    swapped = play(g, [4, 0, 8])  # O to move, O at 0 and X at 4 and 8 ...
    assert g.encode(swapped)[0, 0, 0] == 1  # ... the mover's own stone is plane 0


@pytest.mark.parametrize("game, count", [(TicTacToe(), 8), (ConnectFour(), 2)])
def test_symmetries_move_board_and_policy_together(game, count):
    rng = np.random.default_rng(0)
    state = game.initial_state()
    for _ in range(5):
        state = game.apply(state, rng.choice(game.legal_actions(state)))
    planes = game.encode(state)
    policy = game.legal_mask(state).astype(np.float64)
    policy /= policy.sum()
    copies = game.symmetries(planes, policy)
    assert len(copies) == count
    np.testing.assert_array_equal(copies[0][0], planes)
    for p, pi in copies:
        empty = (p[0] + p[1] == 0).reshape(-1) if game.name == "tictactoe" else (
            p[0, 0] + p[1, 0] == 0)  # fmt: skip
        # the policy's mass sits on the empty cells (columns) of the transformed board
        np.testing.assert_allclose(pi, policy.sum() * empty / empty.sum())


def _square_symmetries(grid: np.ndarray) -> list[np.ndarray]:
    """The 8 symmetries of a square grid (last two axes), computed here, not by rlx."""
    turns = [np.rot90(grid, k, axes=(-2, -1)) for k in range(4)]
    return turns + [np.flip(t, axis=-1) for t in turns]


def test_tictactoe_symmetries_are_the_eight_distinct_transforms_applied_alike():
    g = TicTacToe()
    planes = g.encode(play(g, [0, 1, 5]))  # a position no symmetry maps onto itself
    policy = np.arange(9, dtype=np.float64)  # distinct values pin down the transform
    expected = list(zip(_square_symmetries(planes), _square_symmetries(policy.reshape(3, 3)),
                        strict=True))  # fmt: skip
    matched = []
    for p, pi in g.symmetries(planes, policy):
        # the board and the policy moved by the same transform, exactly one of the eight
        hits = [i for i, (ep, epi) in enumerate(expected)
                if np.array_equal(p, ep) and np.array_equal(pi.reshape(3, 3), epi)]  # fmt: skip
        assert len(hits) == 1
        matched.append(hits[0])
    assert sorted(matched) == list(range(8))


def test_connect_four_symmetry_is_the_left_right_mirror():
    g = ConnectFour()
    planes = g.encode(play(g, [0, 1, 1, 3]))
    policy = np.arange(7, dtype=np.float64)
    (p0, pi0), (p1, pi1) = g.symmetries(planes, policy)
    np.testing.assert_array_equal(p0, planes)
    np.testing.assert_array_equal(pi0, policy)
    np.testing.assert_array_equal(p1, planes[..., ::-1])
    np.testing.assert_array_equal(pi1, policy[::-1])
    assert not np.array_equal(p1, planes)


def test_make_by_name_and_unknown_game():
    assert isinstance(games.make("tictactoe"), TicTacToe)
    assert isinstance(games.make("connect-four"), ConnectFour)
    with pytest.raises(EnvError, match="unknown game 'chess'; valid games: tictactoe, connect4"):
        games.make("chess")


def test_render_shows_free_cells_and_stones():
    g = TicTacToe()
    text = g.render(play(g, [4, 0]))
    assert "X" in text and "O" in text and "8" in text
    assert ConnectFour().render(ConnectFour().initial_state()).endswith("0 1 2 3 4 5 6")


def test_connect_four_threat_planes_by_hand():
    """X (first player) holds the bottom row's columns 0-2: its threats are (5, 3), playable now,
    and nothing else; O's three stones stacked in column 6 threaten the cell above them."""
    g = ConnectFour(threat_planes=True)
    state = play(g, [0, 6, 1, 6, 2, 6])  # X to move
    planes = g.encode(state)
    assert planes.shape == (5, 6, 7) and g.num_planes == 5
    np.testing.assert_array_equal(planes[:3], ConnectFour().encode(state))
    mine, theirs = np.argwhere(planes[3]), np.argwhere(planes[4])
    assert mine.tolist() == [[5, 3]] and theirs.tolist() == [[2, 6]]
    # O to move after X plays elsewhere: the planes swap, as the stones' planes do
    after = g.apply(state, 4)  # X at (5, 4): (5, 3) still completes X's bottom row
    swapped = g.encode(after)
    assert np.argwhere(swapped[3]).tolist() == [[2, 6]]
    assert np.argwhere(swapped[4]).tolist() == [[5, 3]]


def test_connect_four_threat_planes_match_trying_every_empty_cell():
    """The bitboard threat cells equal the cells where a stone, placed by hand on a copy of the
    board, makes a line of four (the rules' own line count), on 60 random games' positions,
    including threats in the air above empty cells."""
    from rlx.games.connect4 import DIRECTIONS, line_length

    g = ConnectFour(threat_planes=True)
    rng = np.random.default_rng(0)
    found = in_the_air = 0
    for _ in range(60):
        state = g.initial_state()
        while not state.is_terminal:
            planes = g.encode(state)
            for k, player in enumerate((state.to_play, -state.to_play)):
                expected = np.zeros((6, 7), dtype=np.float32)
                for r, c in np.argwhere(state.board == 0):
                    board = state.board.copy()
                    board[r, c] = player
                    if any(line_length(board, r, c, dr, dc) >= 4 for dr, dc in DIRECTIONS):
                        expected[r, c] = 1.0
                np.testing.assert_array_equal(planes[3 + k], expected)
                found += int(expected.sum())
                # threats above an empty cell: not playable yet
                in_the_air += int((expected[:-1] * (state.board[1:] == 0)).sum())
            state = g.apply(state, int(rng.choice(g.legal_actions(state))))
    assert found > 100 and in_the_air > 20  # the positions held both kinds to find
