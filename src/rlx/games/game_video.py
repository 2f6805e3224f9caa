"""A board game's video: one game of an agent against itself or a baseline, as the sequence
of its boards drawn into an animated GIF (``rlx eval GAME_RUN --video``, ``rlx play --video``).

A board game has no ``render_mode``: its :class:`~rlx.games.base.GameState` is a small array
of +1, -1 and 0, so the boards are drawn here with Pillow (the GIF writer of
:mod:`rlx.core.video`), one frame per position from the empty board to the end, the last move
outlined and a caption saying who played what. Tic-tac-toe is drawn as X and O; every other
game as discs (connect4's red and yellow). :class:`GameVideo` keeps the states, so what the clip
shows can be checked move by move.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlx.core.video import Clip, VideoOptions, video_target, write_gif
from rlx.errors import ConfigError
from rlx.games.arena import Player
from rlx.games.base import Game, GameState

CELL_PX = 64
"""Side of one cell of a drawn board, in pixels."""
CAPTION_PX = 28
"""Height of the caption strip under the board."""
MOVE_MS = 700
"""How long each position is shown."""
COLORS = {
    "board": (235, 235, 225),
    "grid": (90, 90, 90),
    "first": (214, 39, 40),
    "second": (31, 119, 180),
    "disc_board": (30, 80, 170),
    "disc_first": (220, 40, 40),
    "disc_second": (245, 205, 40),
    "empty": (245, 245, 245),
    "last": (40, 40, 40),
    "text": (30, 30, 30),
}


@dataclass(frozen=True)
class GameVideo:
    """A played game (or games), drawn: every position from the first to the last, the moves
    between them, and the clip they were drawn into."""

    states: tuple[GameState, ...]
    moves: tuple[int | None, ...]
    """``moves[i]`` led to ``states[i]``; None for a game's empty first board"""
    clip: Clip

    @property
    def path(self) -> Path:
        return self.clip.path


def record_game_video(
    agent: Any, video: Any, options: VideoOptions | None = None, *, seed: int = 0
) -> GameVideo:
    """Play ``options.episodes`` games of a board-game ``agent`` (it moves first) against
    ``options.opponent`` (``self``: the agent plays both sides) and draw them into the GIF
    ``video`` names (True: ``RUN_DIR/videos/eval-step<N>.gif`` of the agent's run folder)."""
    from rlx.runs.folder import video_file

    options = options or VideoOptions()
    run_dir = getattr(agent, "run_dir", None)
    step = getattr(agent, "checkpoint_step", None)
    default = None if run_dir is None else video_file(run_dir, step)
    path = video_target(video, default)
    if path is None:
        raise ConfigError("record_game_video needs video=True or a .gif file to write.")
    game: Game = agent.game
    opponent = _opponent(game, agent, options.opponent, seed)
    states: list[GameState] = []
    moves: list[int | None] = []
    for _ in range(options.episodes):
        game_states, game_moves = play_recorded(game, agent, opponent)
        states += game_states
        moves += game_moves
    states, moves = states[: options.max_frames], moves[: options.max_frames]
    names = (_name(agent), "itself" if opponent is agent else _name(opponent))
    frames = [
        draw_board(game, s, m, caption(game, s, m, names))
        for s, m in zip(states, moves, strict=True)
    ]
    clip = write_gif(frames, path, MOVE_MS, episodes=options.episodes)
    return GameVideo(tuple(states), tuple(moves), clip)


def write_game_video(
    game: Game, states: Sequence[GameState], moves: Sequence[int | None], path: str | Path,
    names: tuple[str, str] = ("X", "O"),
) -> Clip:  # fmt: skip
    """Draw positions already played (``rlx play``'s game) into the GIF ``path``."""
    frames = [
        draw_board(game, s, m, caption(game, s, m, names))
        for s, m in zip(states, moves, strict=True)
    ]
    return write_gif(frames, path, MOVE_MS)


def play_recorded(
    game: Game, first: Player, second: Player
) -> tuple[list[GameState], list[int | None]]:
    """One game from the empty board: every position and the move that led to it."""
    state = game.initial_state()
    states: list[GameState] = [state]
    moves: list[int | None] = [None]
    players = {1: first, -1: second}
    while not state.is_terminal:
        move = int(players[state.to_play](state))
        state = game.apply(state, move)  # checked: a video shows legal moves only
        states.append(state)
        moves.append(move)
    return states, moves


def _opponent(game: Game, agent: Any, name: str, seed: int) -> Player:
    if name == "self":
        return agent
    from rlx.games.evaluation import make_opponent

    return make_opponent(game, name, seed)


def _name(player: Any) -> str:
    return str(getattr(player, "name", None) or type(player).__name__)


# ---------------------------------------------------------------------------- drawing
def caption(game: Game, state: GameState, move: int | None, names: tuple[str, str]) -> str:
    """What the frame shows, in words: the start, the move just played, or the result."""
    marks = _marks(game)
    if move is None:
        return f"{names[0]} ({marks[0]}) vs {names[1]} ({marks[1]})"
    mover = marks[0] if state.to_play == -1 else marks[1]  # the player who just moved
    text = f"move {state.moves}: {mover} plays {game.action_to_string(move)}"
    if state.is_terminal:
        assert state.result is not None  # a terminal state has a result
        text += {1: f", {marks[0]} wins", -1: f", {marks[1]} wins", 0: ", a draw"}[
            int(state.result)
        ]
    return text


def _marks(game: Game) -> tuple[str, str]:
    return ("X", "O") if game.name == "tictactoe" else ("red", "yellow")


def draw_board(game: Game, state: GameState, move: int | None = None, text: str = "") -> np.ndarray:
    """The board of ``state`` as an RGB image ``[height, width, 3]``: X and O for
    tic-tac-toe, discs otherwise; the cell of ``move`` (an action on a board of one cell per
    action, or the top stone of a column in connect4) outlined; ``text`` beneath."""
    from PIL import Image, ImageDraw

    board = np.asarray(state.board)
    if board.ndim != 2:
        raise ConfigError(f"{game.name} has no 2-D board to draw (shape {board.shape}).")
    rows, cols = board.shape
    width, height = cols * CELL_PX, rows * CELL_PX
    discs = game.name != "tictactoe"
    image = Image.new("RGB", (width, height + CAPTION_PX), COLORS["board"])
    draw = ImageDraw.Draw(image)
    if discs:
        draw.rectangle((0, 0, width - 1, height - 1), fill=COLORS["disc_board"])
    pad = CELL_PX // 8
    for r in range(rows):
        for c in range(cols):
            box = (c * CELL_PX + pad, r * CELL_PX + pad,
                   (c + 1) * CELL_PX - pad, (r + 1) * CELL_PX - pad)  # fmt: skip
            value = int(board[r, c])
            if discs:
                fill = {1: "disc_first", -1: "disc_second", 0: "empty"}[value]
                draw.ellipse(box, fill=COLORS[fill])
            elif value == 1:
                draw.line(box, fill=COLORS["first"], width=6)
                draw.line((box[0], box[3], box[2], box[1]), fill=COLORS["first"], width=6)
            elif value == -1:
                draw.ellipse(box, outline=COLORS["second"], width=6)
    if not discs:
        for i in range(1, cols):
            draw.line((i * CELL_PX, 0, i * CELL_PX, height), fill=COLORS["grid"], width=2)
        for i in range(1, rows):
            draw.line((0, i * CELL_PX, width, i * CELL_PX), fill=COLORS["grid"], width=2)
    cell = _cell_of(board, move, game)
    if cell is not None:
        r, c = cell
        draw.rectangle((c * CELL_PX + 2, r * CELL_PX + 2, (c + 1) * CELL_PX - 3,
                        (r + 1) * CELL_PX - 3), outline=COLORS["last"], width=3)  # fmt: skip
    draw.text((6, height + 7), text, fill=COLORS["text"])
    return np.asarray(image)


def _cell_of(board: np.ndarray, move: int | None, game: Game) -> tuple[int, int] | None:
    """The cell the last ``move`` filled: the action's cell where there is one per action,
    else the highest stone in the action's column (a connect4 drop)."""
    if move is None:
        return None
    rows, cols = board.shape
    if game.num_actions == rows * cols:
        return divmod(int(move), cols)
    if game.num_actions == cols:
        filled = np.flatnonzero(board[:, int(move)])
        return (int(filled.min()), int(move)) if filled.size else None
    return None


__all__ = [
    "GameVideo",
    "caption",
    "draw_board",
    "play_recorded",
    "record_game_video",
    "write_game_video",
]
