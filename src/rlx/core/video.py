"""Clips of what an agent does: evaluation episodes drawn by the env and written as a GIF.

``rlx eval RUN_DIR --video`` and ``rlx.evaluate(agent, video=True)`` play ``episodes``
deterministic episodes on the env made with ``render_mode="rgb_array"``, keep every
``frame_skip``-th frame scaled by ``scale`` (at most ``max_frames``), and write them as one
animated GIF (:func:`write_gif`); :mod:`rlx.games.game_video` draws a board game's moves into
the same kind of file.

Why an animated GIF written by Pillow: Pillow comes with matplotlib, which rlx depends on
already, while Gymnasium's ``RecordVideo`` writes MP4 through moviepy (and ffmpeg), a
dependency rlx would carry for this alone. A GIF plays in every browser, in an ``<img>`` of
the self-contained report (inlined, nothing fetched) and in a file viewer, with no codec. Its
price is size (256 colours a frame, no motion compensation), hence the defaults: every second
frame, at half the env's frame size, a few hundred frames at most.

The env draws its own frames, so a video needs what its renderer needs: Gymnasium's
classic-control and toy-text envs draw with pygame (``pip install "gymnasium[classic-control]"``,
the extra ``video`` of rlx). An env that cannot draw (no ``rgb_array`` mode, a GridWorld, a
missing renderer) is a :class:`~rlx.errors.RenderError` raised before anything is written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlx.errors import ConfigError, EnvError, RenderError

DEFAULT_FPS = 30.0
"""Playback rate of an env that does not say its own (``metadata["render_fps"]``)."""
MIN_FRAME_MS = 20
"""Browsers show a GIF frame shorter than 20 ms for 100 ms: no frame is shorter."""
SDL_DRIVER = "SDL_VIDEODRIVER"
LAST_FRAME_MS = 1000
"""The last frame stays a second, so the end of the clip can be seen before it loops."""


@dataclass(frozen=True)
class VideoOptions:
    """How a clip is recorded: how much of the agent it shows, and how big the file is."""

    episodes: int = 1
    """episodes (or games, for a board game) in the clip, one after another"""
    frame_skip: int = 2
    """keep every Nth frame of an env (the last frame of an episode always): halves the file
    at the default, and playback stays at the env's own speed"""
    scale: float = 0.5
    """factor of the env's frame size (board games are drawn at their own size)"""
    max_frames: int = 300
    """the most frames in a clip; recording stops there, mid-episode if need be"""
    opponent: str = "self"
    """whom a board-game agent plays in its replay: self, random, mcts-K or solver"""

    def __post_init__(self) -> None:
        for name, low in (("episodes", 1), ("frame_skip", 1), ("max_frames", 2)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ConfigError(
                    f"a video's {name.replace('_', ' ')} must be a whole number >= {low}, "
                    f"not {value!r}."
                )
        scale = self.scale
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale <= 4:
            raise ConfigError(
                f"a video's scale must be a number > 0 and <= 4 (a factor of the env's frame "
                f"size), not {scale!r}."
            )


@dataclass(frozen=True)
class Clip:
    """A written clip: its file, how many frames it holds and their size (width, height)."""

    path: Path
    frames: int
    size: tuple[int, int]
    episodes: int


def video_target(video: Any, default: Path | None) -> Path | None:
    """The file ``video`` asks for: None for no video (None or False), ``default`` for True
    (ConfigError when there is none: an agent without a run folder), else the ``.gif`` path
    given."""
    if video is None or video is False:
        return None
    if video is True:
        if default is None:
            raise ConfigError(
                "video=True writes into the agent's run folder, and this agent has none; give "
                "a file instead (e.g. video='agent.gif')."
            )
        return default
    if not isinstance(video, (str, os.PathLike)) or not str(video).strip():
        raise ConfigError(f"the video must be True or a .gif file to write, not {video!r}.")
    path = Path(video)
    if path.suffix.lower() != ".gif":
        raise ConfigError(
            f"the video file {str(video)!r} must end in .gif: rlx writes clips as animated GIFs."
        )
    return path


# ---------------------------------------------------------------------------- env episodes
def record_episodes(
    agent: Any,
    env: Any,
    path: str | Path,
    options: VideoOptions | None = None,
    *,
    seed: int = 0,
    deterministic: bool = True,
    root: str | Path | None = None,
) -> Clip:
    """Play ``options.episodes`` episodes of ``agent`` on ``env`` (an id, a recipe, a factory
    or an env made with ``render_mode="rgb_array"``) from ``seed`` and write them to ``path``
    as a GIF (``root``: the run folder it lies in, :func:`write_gif`). RenderError, before
    anything is written, when the env cannot draw frames."""

    options = options or VideoOptions()
    with headless():
        frames, episodes, fps = _frames(agent, env, options, seed, deterministic)
    frame_ms = 1000.0 * options.frame_skip / fps
    return write_gif(frames, path, frame_ms, episodes=episodes, root=root)


def _frames(
    agent: Any, env: Any, options: VideoOptions, seed: int, deterministic: bool
) -> tuple[list[np.ndarray], int, float]:
    """The kept frames of the episodes, how many episodes they show, and the env's rate."""
    from rlx.core.masks import single_env_mask, takes_masks

    made, owned = render_env(env)
    frames: list[np.ndarray] = []
    episodes = 0
    try:
        fps = float((made.metadata or {}).get("render_fps") or DEFAULT_FPS)
        masked = takes_masks(agent.act)
        for i in range(options.episodes):
            obs, info = made.reset(seed=seed + i)
            frames.append(_scaled(first_frame(made, env), options.scale))
            episodes += 1
            t, done = 0, False
            while not done and len(frames) < options.max_frames:
                mask = single_env_mask(made, info) if masked else None
                given = {} if mask is None else {"action_mask": mask}
                action = agent.act(obs, deterministic=deterministic, **given)
                obs, _, terminated, truncated, info = made.step(action)
                t, done = t + 1, bool(terminated or truncated)
                if done or t % options.frame_skip == 0:
                    frames.append(_scaled(made.render(), options.scale))
            if len(frames) >= options.max_frames:
                break
    finally:
        if owned:
            made.close()
    return frames, episodes, fps


@contextlib.contextmanager
def headless() -> Iterator[None]:
    """SDL (pygame, which draws Gymnasium's classic-control frames) without a display: an
    ``rgb_array`` frame needs none, and SDL would look for one and complain on stderr. A
    driver the user chose is kept; the setting is undone afterwards."""
    before = os.environ.get(SDL_DRIVER)
    os.environ.setdefault(SDL_DRIVER, "dummy")
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(SDL_DRIVER, None)


def render_env(env: Any) -> tuple[Any, bool]:
    """``(env, made here)``: ``env`` built with ``render_mode="rgb_array"``, or an env object
    as it is when it was made so. RenderError naming the env when it cannot draw frames."""
    import gymnasium as gym

    from rlx.core.env_recipe import EnvRecipe
    from rlx.core.envs import is_gridworld_id, make_env
    from rlx.mdp import TabularMDP

    label = env_label(env)
    if isinstance(env, TabularMDP) or (isinstance(env, str) and is_gridworld_id(env)):
        raise RenderError(
            f"{label} is a tabular MDP, which draws no frames, so it has no video; evaluate it "
            "without one, or train on a Gymnasium env that renders rgb_array frames."
        )
    if hasattr(env, "step"):
        if getattr(env, "render_mode", None) != "rgb_array":
            raise RenderError(
                f"the env object {label} was made with render_mode="
                f"{getattr(env, 'render_mode', None)!r}, so it draws no frames to record; make "
                "it with render_mode='rgb_array', or pass its id."
            )
        return env, False
    if isinstance(env, EnvRecipe) and env.kind == "entry_point":
        env = dataclasses.replace(env, kwargs={**env.kwargs, "render_mode": "rgb_array"})
        build = env.make
    else:
        build = lambda: make_env(env, render_mode="rgb_array")  # noqa: E731
    try:
        made = build()
    except (EnvError, TypeError, gym.error.Error) as exc:
        if "render_mode" not in str(exc):
            raise
        raise RenderError(
            f"{label} takes no render_mode, so it draws no frames to record; evaluate it "
            "without a video, or give it render_mode='rgb_array' (metadata['render_modes'])."
        ) from exc
    modes = (made.metadata or {}).get("render_modes") or ()
    if made.render_mode != "rgb_array" or "rgb_array" not in modes:
        made.close()
        shown = ", ".join(modes) or "none"
        raise RenderError(
            f"{label} draws no rgb_array frames (its render modes: {shown}), so it has no "
            "video; evaluate it without one."
        )
    return made, True


def first_frame(made: Any, env: Any) -> np.ndarray:
    """The frame of a freshly reset env, checked: RenderError when its renderer is missing
    or it gives no ``[height, width, 3]`` image."""
    import gymnasium as gym

    try:
        frame = made.render()
    except gym.error.DependencyNotInstalled as exc:
        raise RenderError(
            f"{env_label(env)} cannot draw its frames here: {str(exc).rstrip('.')}."
        ) from exc
    if not isinstance(frame, np.ndarray) or frame.ndim != 3 or frame.shape[-1] not in (3, 4):
        shape = getattr(frame, "shape", type(frame).__name__)
        raise RenderError(
            f"{env_label(env)}'s render() gave {shape}, not an RGB image [height, width, 3], "
            "so it has no video; evaluate it without one."
        )
    return frame


def env_label(env: Any) -> str:
    """A printable name of an env given as an id, a recipe, an env or a factory."""
    if isinstance(env, str):
        return env
    label = getattr(env, "label", None) or getattr(env, "name", None)
    if isinstance(label, str):
        return label
    spec = getattr(env, "spec", None)
    return getattr(spec, "id", None) or getattr(env, "__name__", None) or type(env).__name__


def _scaled(frame: np.ndarray, scale: float) -> np.ndarray:
    """``frame`` as uint8 RGB, resized by ``scale`` (bilinear: text and thin lines stay
    legible at half size)."""
    from PIL import Image

    frame = np.asarray(frame)[..., :3]
    if frame.dtype != np.uint8:
        frame = np.clip(frame, 0, 255).astype(np.uint8)
    if scale == 1:
        return np.ascontiguousarray(frame)
    height, width = frame.shape[:2]
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return np.asarray(Image.fromarray(frame).resize(size, Image.Resampling.BILINEAR))


# ---------------------------------------------------------------------------- the file
def write_gif(
    frames: Sequence[np.ndarray],
    path: str | Path,
    frame_ms: float | Sequence[float],
    *,
    episodes: int = 1,
    root: str | Path | None = None,
) -> Clip:
    """Write RGB ``frames`` (all of one size) to ``path`` as a looping GIF, each shown
    ``frame_ms`` milliseconds (one figure, or one per frame), the last one longer. The file
    appears whole or not at all: written beside it under a new name, then renamed over it,
    never through a link (:func:`rlx.runs.files.atomic_file`; ``root``: the run folder, from
    which no link is followed)."""
    from PIL import Image

    from rlx.runs.files import atomic_file

    if not frames:
        raise ConfigError("a clip needs at least one frame; the episode gave none.")
    path = Path(path)
    images = [Image.fromarray(np.asarray(f, dtype=np.uint8)) for f in frames]
    if isinstance(frame_ms, (int, float)):
        durations = [float(frame_ms)] * len(images)
    else:
        durations = [float(ms) for ms in frame_ms]
    durations[-1] = max(durations[-1], LAST_FRAME_MS)
    # GIF stores hundredths of a second
    durations = [max(MIN_FRAME_MS, round(ms / 10.0) * 10) for ms in durations]
    with atomic_file(path, root=root) as handle:
        images[0].save(
            handle,
            format="GIF",
            save_all=True,
            append_images=images[1:],
            duration=durations,
            loop=0,
        )
    return Clip(path, len(images), images[0].size, episodes)


__all__ = [
    "Clip",
    "VideoOptions",
    "env_label",
    "first_frame",
    "record_episodes",
    "render_env",
    "video_target",
    "write_gif",
]
