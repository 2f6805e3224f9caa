"""Atari games (the ``atari`` extra: ``ale-py``, which ships the ROMs) as the Nature DQN
paper (Mnih et al., 2015) preprocessed them.

    ALE game as its id makes it, but frame skip 1 (the v5 ids keep their sticky actions)
    -> AtariPreprocessing   no-op reset (1-30 no-ops), frame skip 4 with the max of the last
                            two frames, 84x84 grayscale                        (Gymnasium)
    -> EpisodicLife         a lost life ends the episode; the game goes on      (here)
    -> FireReset            press FIRE after a reset, in games that wait for it (here)
    -> ClipReward           rewards clipped into [-1, 1]                       (Gymnasium)
    -> FrameStackObservation the last 4 frames, ``[4, 84, 84]`` uint8          (Gymnasium)

Gymnasium's wrappers do all but two steps, written here because Gymnasium has none for them.
Gymnasium's ``terminal_on_life_loss`` ends the episode on a lost life and its next
reset restarts the whole game, so the agent would never play past its first life;
:class:`EpisodicLife` ends the episode the same way but its reset only steps on, so the
learner sees each life as an episode and the game still reaches its later stages (the value
of a state does not count on lives yet to come). :class:`FireReset` presses FIRE after every
reset in the games whose action set has it (Breakout waits for it): without it an agent first
has to discover that FIRE starts the game.

The episodes rlx logs and evaluates on this pipeline are lives, with clipped rewards: a
training curve, not the game's score. To score whole games, evaluate on
``atari_env(env_id, episodic_life=False, clip_rewards=False)``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from rlx.errors import EnvError

FRAME_SKIP = 4
SCREEN_SIZE = 84
FRAME_STACK = 4
NOOP_MAX = 30
ALE_ENTRY_POINT = "ale_py.env:AtariEnv"
INSTALL_HINT = "install the atari extra: pip install 'rlx[atari]'"


def is_atari_id(env: Any) -> bool:
    """Whether ``env`` is the id of an Atari game with screen observations (``ALE/Pong-v5``,
    ``PongNoFrameskip-v4``, ...): registered by ``ale-py``, not a RAM variant. An ``ALE/``
    id without ``ale-py`` installed raises :class:`~rlx.errors.EnvError` naming the extra."""
    if not isinstance(env, str):
        return False
    spec = _registered(env)
    if spec is None:  # not registered yet: ale-py registers its games when asked
        if not register_atari_games():
            if env.startswith("ALE/"):
                raise EnvError(
                    f"{env} is an Atari game, but ale-py is not installed; {INSTALL_HINT}."
                )
            return False
        spec = _registered(env)
    return (
        spec is not None
        and spec.entry_point == ALE_ENTRY_POINT
        and spec.kwargs.get("obs_type", "rgb") != "ram"
    )


def _registered(env_id: str) -> Any:
    """Gymnasium's spec of ``env_id``, or None (without the warnings ``gym.spec`` prints)."""
    return gym.registry.get(env_id)


def register_atari_games() -> bool:
    """Register ale-py's ids with Gymnasium; False when ale-py is not installed."""
    try:
        import ale_py
    except ImportError:
        return False
    gym.register_envs(ale_py)
    return True


def atari_env(
    env_id: str,
    *,
    episodic_life: bool = True,
    clip_rewards: bool = True,
    frame_stack: int = FRAME_STACK,
    **kwargs: Any,
) -> Any:
    """The Atari game ``env_id`` through the Nature DQN preprocessing (module docstring):
    observations ``[frame_stack, 84, 84]`` uint8. ``kwargs`` go to ``gymnasium.make`` (e.g.
    ``repeat_action_probability``); the frame skip is the pipeline's, never the game's."""
    from gymnasium.wrappers import AtariPreprocessing, ClipReward, FrameStackObservation

    if not register_atari_games():
        raise EnvError(f"{env_id} is an Atari game, but ale-py is not installed; {INSTALL_HINT}.")
    try:
        # AtariPreprocessing reads the screen itself and throws the game's observation away:
        # grayscale is the cheapest one for the game to make
        env = gym.make(env_id, **{"obs_type": "grayscale", **kwargs, "frameskip": 1})
    except gym.error.Error as exc:
        raise EnvError(f"cannot make Atari game {env_id!r}: {exc}.") from exc
    env = AtariPreprocessing(
        env, noop_max=NOOP_MAX, frame_skip=FRAME_SKIP, screen_size=SCREEN_SIZE, grayscale_obs=True
    )
    if episodic_life:
        env = EpisodicLife(env)
    # ale_py's AtariEnv, which gym.Env's type does not describe
    if "FIRE" in env.unwrapped.get_action_meanings():  # type: ignore[attr-defined]
        env = FireReset(env)
    if clip_rewards:
        env = ClipReward(env, -1.0, 1.0)
    return FrameStackObservation(env, frame_stack)


class EpisodicLife(gym.Wrapper):
    """A lost life ends the episode (``terminated``); the following reset only takes one
    no-op step, so the game goes on from where the life was lost. A real game over resets the
    game. (Mnih et al., 2015; Stable-Baselines3's ``EpisodicLifeEnv``.)"""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.lives = 0
        self.game_over = True

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = terminated or truncated
        lives = self.env.unwrapped.ale.lives()  # type: ignore[attr-defined]  # ale_py's AtariEnv
        # lives at 0 before the game reports its end (Q*bert stays there for a few frames)
        # is not a lost life: only the game over ends that episode
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        if self.game_over:
            obs, info = self.env.reset(**kwargs)
        else:
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:  # the no-op ended the game: start a new one
                obs, info = self.env.reset(**kwargs)
        self.game_over = False
        self.lives = self.env.unwrapped.ale.lives()  # type: ignore[attr-defined]  # ale_py's env
        return obs, info


class FireReset(gym.Wrapper):
    """After every reset press FIRE, then action 2 (some games need both to start); either
    ending the episode resets again. (Stable-Baselines3's ``FireResetEnv``.)"""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        meanings = env.unwrapped.get_action_meanings()
        if len(meanings) < 3 or meanings[1] != "FIRE":
            raise EnvError(f"FireReset needs FIRE as action 1 of 3 or more, got {meanings}.")

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self.env.reset(**kwargs)
        for action in (1, 2):
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        return obs, info
