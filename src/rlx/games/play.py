"""``rlx play GAME``: a person against an agent in the terminal.

The board is drawn after every move; a move that is not a number or not legal is answered
with the legal moves, and the person is asked again. ``q`` (or the end of input) gives up on
purpose: :func:`play` returns None, and ``rlx play`` exits 0 as after a game played to its end.
Only Ctrl-C ends ``rlx play`` with 130. ``video=`` (``rlx play --video PATH``) draws the
boards of the game, played to its end or given up, into a GIF (:mod:`rlx.games.game_video`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from rlx.games import make
from rlx.games.arena import Player
from rlx.games.base import Game, GameState, check_same_game

DEFAULT_OPPONENT = "mcts-1000"


def load_opponent(game: Game, agent: Any = None, seed: int = 0, source: Any = None) -> Player:
    """The opponent: ``agent`` (a loaded run's agent, from ``source``, a run folder: the
    caller loads it, as ``rlx play`` does with ``rlx.load``) when it plays ``game``, or pure
    MCTS when none is given."""
    if agent is None:
        from rlx.games.evaluation import make_opponent

        return make_opponent(game, DEFAULT_OPPONENT, seed)
    where = source if source is not None else "the agent given"
    trained_on = getattr(getattr(agent, "game", None), "name", None)
    if trained_on is None:
        from rlx.errors import EnvError

        raise EnvError(f"the run in {where} is not a board-game agent; train one with "
                       f"`rlx train alphazero --env {game.name}`.")  # fmt: skip
    check_same_game(game.name, trained_on, f"the agent in {where}")
    return agent


def read_move(game: Game, state: GameState, ask: Callable[[str], str | None],
              say: Callable[[str], None]) -> int | None:  # fmt: skip
    """Ask until the answer is a legal move; None when the person quits."""
    legal = [int(a) for a in game.legal_actions(state)]
    while True:
        answer = ask(f"your move ({' '.join(map(str, legal))}, q to quit): ")
        if answer is None or answer.strip().lower() in ("q", "quit", "exit"):
            return None
        try:
            move = int(answer.strip())
        except ValueError:
            say(f"{answer.strip()!r} is not a move; type one of: {' '.join(map(str, legal))}.")
            continue
        if move not in legal:
            say(f"move {move} is not legal here; legal moves: {' '.join(map(str, legal))}.")
            continue
        return move


def play(
    game_name: str,
    agent: Any = None,
    *,
    source: str | Path | None = None,
    human_first: bool = True,
    seed: int = 0,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    video: str | Path | None = None,
) -> int | None:
    """Play one game in the terminal against ``agent`` (a loaded agent, from the run folder
    ``source``; None: pure MCTS); the result from the person's side (+1 won, 0 draw, -1
    lost), or None when they quit. ``video``: a ``.gif`` file the game's boards are drawn
    into once it ends."""
    from rlx.core.video import video_target

    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    target = video_target(video, None)  # a bad file name stops before the game, not after
    game = make(game_name)
    opponent = load_opponent(game, agent, seed, source)
    # the first board has no move into it
    states: list[GameState] = [game.initial_state()]
    moves: list[int | None] = [None]

    def say(text: str) -> None:
        print(text, file=stdout, flush=True)

    def ask(prompt: str) -> str | None:
        stdout.write(prompt)
        stdout.flush()
        line = stdin.readline()
        return line if line else None

    human = 1 if human_first else -1
    name = getattr(opponent, "name", None) or type(opponent).__name__
    say(f"{game.name}: you are {'X' if human == 1 else 'O'}, playing {name}.")
    state = game.initial_state()
    while not state.is_terminal:
        say(game.render(state))
        if state.to_play == human:
            move = read_move(game, state, ask, say)
            if move is None:
                say("you gave up.")
                _write_video(game, states, moves, target, human, say)
                return None
        else:
            move = int(opponent(state))
            say(f"the agent plays {game.action_to_string(move)}")
        state = game.apply(state, move)
        states.append(state)
        moves.append(move)
    say(game.render(state))
    assert state.result is not None  # the loop ends at a terminal state
    outcome = int(state.result) * human
    say({1: "you won.", 0: "a draw.", -1: "you lost."}[outcome])
    _write_video(game, states, moves, target, human, say)
    return outcome


def _write_video(
    game: Game, states: list[GameState], moves: list[int | None], target: Path | None,
    human: int, say: Callable[[str], None],
) -> None:  # fmt: skip
    if target is None:
        return
    from rlx.games.game_video import write_game_video

    names = ("you", "the agent") if human == 1 else ("the agent", "you")
    say(f"the game's boards: {write_game_video(game, states, moves, target, names).path}")
