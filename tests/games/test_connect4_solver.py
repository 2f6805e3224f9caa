"""The Connect Four late-game solver against plain minimax over the game's own rules."""

from __future__ import annotations

import numpy as np
import pytest

from rlx.games import ConnectFour
from rlx.games import connect4_solver as solver

GAME = ConnectFour()


def minimax(state) -> int:
    """Every line of play to the end through ``ConnectFour.apply``: no bitboards, no pruning."""
    if state.is_terminal:
        return int(state.result * state.to_play)
    return max(-minimax(GAME.apply(state, int(a))) for a in GAME.legal_actions(state))


def late_positions(count: int, empties: int, seed: int) -> list:
    """Positions of random games that are still open with ``empties`` cells left."""
    rng = np.random.default_rng(seed)
    found = []
    while len(found) < count:
        state = GAME.initial_state()
        while not state.is_terminal and 42 - state.moves > empties:
            state = GAME.apply(state, int(rng.choice(GAME.legal_actions(state))))
        if not state.is_terminal:
            found.append(state)
    return found


def play(moves):
    state = GAME.initial_state()
    for move in moves:
        state = GAME.apply(state, move)
    return state


def test_values_match_plain_minimax_on_late_positions():
    positions = late_positions(12, 7, seed=0)
    values = [solver.value(s) for s in positions]
    assert values == [minimax(s) for s in positions]
    assert len(set(values)) >= 2  # the positions are not all alike


def test_hand_worked_positions():
    # X (first) has three in the bottom row, 0-2, and O stones on them: X to move wins at once
    x_to_move = play([0, 0, 1, 1, 2, 2])
    assert solver.value(x_to_move) == 1
    assert solver.value(GAME.apply(x_to_move, 3)) == -1  # O to move in a finished game
    # O to move faces X's open three on the bottom row (1-3, both 0 and 4 win): lost
    o_to_move = play([1, 1, 2, 2, 3])
    assert solver.value(o_to_move) == -1
    assert set(solver.action_values(o_to_move).values()) == {-1}
    # a finished game's value is its result for the player to move
    won = play([0, 1, 0, 1, 0, 1, 0])
    assert solver.value(won) == -1


def test_node_budget_gives_up_with_none():
    early = play([3, 3, 2])
    assert solver.value(early, max_nodes=1_000) is None
    assert None in solver.action_values(early, max_nodes=1_000).values()


@pytest.mark.parametrize("empties", [12, 16])
def test_deeper_positions_agree_with_the_values_of_their_moves(empties):
    """``value(s) = max_a -value(s after a)``, with the children solved on their own."""
    for state in late_positions(4, empties, seed=empties):
        children = solver.action_values(state)
        assert solver.value(state) == max(children.values())
