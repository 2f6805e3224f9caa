"""Clips of the agent: ``rlx eval RUN_DIR --video``, ``rlx.evaluate(..., video=...)``, the
report's clip, and a board game's replay.

A PPO run trained for a few hundred CartPole steps is recorded through the command line and
through Python, and each GIF is opened with Pillow: more than one frame, of CartPole's frame
size scaled as asked. A GridWorld run (no frames to draw) is one sentence and exit 2 with
nothing written. A tiny AlphaZero run's replay holds legal successive boards: each one stone
more than the one before, of the player whose turn it was.
"""

from __future__ import annotations

import base64
import io
import itertools
import json
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import rlx
from rlx.cli import main
from rlx.core.video import VideoOptions, write_gif
from rlx.errors import ConfigError, RenderError
from rlx.games import make
from rlx.games.game_video import record_game_video

pytest.importorskip("pygame", reason="CartPole draws its frames with pygame (extra video)")

CARTPOLE_FRAME = (600, 400)  # width, height of CartPole's rgb_array frames
TINY_ALPHAZERO = {"iterations": 1, "games_per_iteration": 4, "simulations": 8,
                  "eval_simulations": 8, "train_steps_per_iteration": 2, "batch_size": 16,
                  "eval_games": 0}  # fmt: skip


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("video") / "ppo"
    rlx.train("ppo", "CartPole-v1", total_steps=256, seed=0, run_dir=run_dir, progress=False,
              doctor=False)  # fmt: skip
    return run_dir


@pytest.fixture(scope="module")
def game_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("video") / "alphazero"
    rlx.train("alphazero", "tictactoe", run_dir=run_dir, seed=0, progress=False, doctor=False,
              **TINY_ALPHAZERO)  # fmt: skip
    return run_dir


def frames_of(path: Path) -> list[np.ndarray]:
    with Image.open(path) as image:
        assert image.format == "GIF"
        frames = []
        for i in range(image.n_frames):
            image.seek(i)
            frames.append(np.asarray(image.convert("RGB")))
        return frames


# ---------------------------------------------------------------------------- env episodes
def test_eval_video_writes_a_gif_of_the_env_frames_into_the_run_folder(ppo_run, capsys):
    code = main(["eval", str(ppo_run), "--episodes", "2", "--video", "--video-scale", "0.25"])
    assert code == 0
    out = capsys.readouterr().out
    clips = list((ppo_run / "videos").glob("eval-step*.gif"))
    assert len(clips) == 1 and str(clips[0]) in out
    step = json.loads((ppo_run / "summary.json").read_text())["steps"]
    assert clips[0].name == f"eval-step{step}.gif"  # the checkpoint's step names it
    frames = frames_of(clips[0])
    assert len(frames) > 1
    assert frames[0].shape == (CARTPOLE_FRAME[1] // 4, CARTPOLE_FRAME[0] // 4, 3)
    assert not all(np.array_equal(frames[0], f) for f in frames[1:])  # the pole moves


def test_evaluate_video_in_python_writes_the_file_given(ppo_run, tmp_path):
    options = VideoOptions(scale=1.0, frame_skip=1, max_frames=6)
    stats = rlx.evaluate(rlx.load(ppo_run), episodes=1, video=tmp_path / "clip.gif",
                         video_options=options)  # fmt: skip
    assert stats.video == tmp_path / "clip.gif" and "video" in str(stats)
    frames = frames_of(stats.video)
    assert 1 < len(frames) <= 6 and frames[0].shape == (CARTPOLE_FRAME[1], CARTPOLE_FRAME[0], 3)
    assert list(tmp_path.iterdir()) == [tmp_path / "clip.gif"]  # no part file left beside it


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (["--video", "clip.mp4"], "must end in .gif"),
        (["--video", "--video-scale", "0"], "scale must be a number > 0 and <= 4"),
        (["--video", "--video-frame-skip", "0"], "frame skip must be a whole number >= 1"),
    ],
)
def test_bad_video_settings_are_one_sentence(ppo_run, bad, message, capsys):
    assert main(["eval", str(ppo_run), *bad]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rlx: error: ") and message in err and len(err.splitlines()) == 1


def test_an_env_without_frames_is_one_sentence_exit_2_and_nothing_written(tmp_path, capsys):
    run_dir = tmp_path / "ql"
    rlx.train("q-learning", "GridWorld", episodes=20, seed=0, run_dir=run_dir, progress=False)
    before = sorted(p.relative_to(run_dir) for p in run_dir.rglob("*"))
    assert main(["eval", str(run_dir), "--video"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "draws no frames" in err and "GridWorld" in err
    assert sorted(p.relative_to(run_dir) for p in run_dir.rglob("*")) == before
    with pytest.raises(RenderError, match="draws no frames"):
        rlx.evaluate(rlx.load(run_dir), video=tmp_path / "x.gif")
    assert not (tmp_path / "x.gif").exists()


def test_an_env_object_made_without_rgb_array_is_a_render_error(ppo_run, tmp_path):
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    with pytest.raises(RenderError, match="render_mode='rgb_array'"):
        rlx.evaluate(rlx.load(ppo_run), env, episodes=1, video=tmp_path / "x.gif")
    with pytest.raises(ConfigError, match="has none"):  # no run folder to write into
        agent = rlx.load(ppo_run)
        agent.run_dir = None
        rlx.evaluate(agent, episodes=1, video=True)


def test_a_gif_is_written_whole_and_keeps_the_last_frame_longer(tmp_path):
    frames = [np.full((4, 6, 3), 40 * i, dtype=np.uint8) for i in range(3)]
    clip = write_gif(frames, tmp_path / "sub" / "c.gif", 40)
    assert clip.frames == 3 and clip.size == (6, 4)
    with Image.open(clip.path) as image:
        image.seek(2)
        assert image.info["duration"] >= 1000


# ---------------------------------------------------------------------------- the report
def test_the_report_inlines_the_newest_clip(ppo_run):
    assert main(["eval", str(ppo_run), "--episodes", "1", "--video"]) == 0
    clip = max((ppo_run / "videos").glob("*.gif"), key=lambda p: p.stat().st_mtime_ns)
    page = rlx.report(ppo_run).read_text()
    figure = re.search(r'<figure class="video" data-run="[^"]+">\s*<img src="([^"]+)"', page)
    assert figure is not None and '<section id="videos">' in page
    prefix = "data:image/gif;base64,"
    assert figure.group(1).startswith(prefix)
    assert base64.b64decode(figure.group(1)[len(prefix) :]) == clip.read_bytes()


def test_a_report_of_a_run_without_a_clip_has_no_video_section(tmp_path):
    run_dir = tmp_path / "ql"
    rlx.train("q-learning", "GridWorld", episodes=20, seed=0, run_dir=run_dir, progress=False)
    assert 'id="videos"' not in rlx.report(run_dir).read_text()


# ---------------------------------------------------------------------------- board games
def assert_legal_boards(states) -> None:
    """Each board is the one before with one more stone, of the player who was to move."""
    for before, after in itertools.pairwise(states):
        if before.is_terminal:  # the next game starts from the empty board
            assert not after.board.any()
            continue
        changed = np.flatnonzero(before.board != after.board)
        assert len(changed) == 1
        assert before.board.flat[changed[0]] == 0
        assert after.board.flat[changed[0]] == before.to_play


def test_eval_video_of_a_game_run_replays_legal_boards(game_run, capsys):
    assert main(["eval", str(game_run), "--episodes", "2", "--video"]) == 0
    assert "replay:" in capsys.readouterr().out
    clips = list((game_run / "videos").glob("eval-step*.gif"))
    assert len(clips) == 1
    agent = rlx.load(game_run)
    replay = record_game_video(agent, clips[0].with_name("again.gif"), VideoOptions(episodes=2,
                               opponent="random"))  # fmt: skip
    assert replay.states[0].moves == 0 and replay.states[-1].is_terminal
    assert_legal_boards(replay.states)
    frames = frames_of(replay.path)
    assert len(frames) == len(replay.states)
    assert all(not np.array_equal(a, b) for a, b in itertools.pairwise(frames))
    for state, move in zip(replay.states[1:], replay.moves[1:], strict=True):
        if move is not None:
            assert state.board.flat[move] != 0  # the move filled its cell


def test_play_video_writes_the_game_played(monkeypatch, tmp_path, capsys):
    moves = iter(["4", "0", "8", "2", "6", "1", "3", "5", "7"])

    class Typed(io.StringIO):
        def readline(self, *_):
            return next(moves, "q") + "\n"

    monkeypatch.setattr("sys.stdin", Typed())
    path = tmp_path / "game.gif"
    assert main(["play", "tictactoe", "--video", str(path)]) == 0
    assert str(path) in capsys.readouterr().out
    frames = frames_of(path)
    assert len(frames) > 2 and frames[0].shape[:2] != (0, 0)


def test_a_replay_of_connect4_draws_every_move(tmp_path):
    from rlx.games.arena import RandomPlayer

    class Random(RandomPlayer):
        run_dir = None

    replay = record_game_video(Random(make("connect4"), 0), tmp_path / "c4.gif")
    assert_legal_boards(replay.states)
    assert len(frames_of(replay.path)) == len(replay.states)
