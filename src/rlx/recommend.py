"""The method chooser: the "Choose a method" table as code (docs: Reference > Choose a method).

The table::

    Situation                                  Method
    Small tabular MDP, known model             value iteration or policy iteration
    Small tabular MDP, samples only            Q-learning
    On-policy, safety critical                 SARSA or Expected SARSA
    High dimensional state, discrete actions   DQN, with Double DQN in production
    Continuous control                         PPO with Gaussian policy, or SAC and TD3
    LLM alignment from preferences             DPO first, RLHF-PPO with KL penalty
    LLM math and code reasoning                GRPO with a verifier reward
    Two player board games                     AlphaZero or MuZero

Each row is a :class:`Row` in :data:`ROWS` (a docs page is generated from it).
:func:`recommend` finds the row that fits a target by reading it, not by name, then follows
rlx's own measurements where it has them: when rlx's benchmark measured another algorithm
reaching the env's goal :data:`MEASURED_MARGIN` times sooner than the row's method, that one is
recommended and the row's method becomes the first alternative, with both figures. Where rlx
measured nothing on the env, it follows rl-baselines3-zoo's published agents of the methods
whose preset there is the zoo's (:mod:`rlx.launch.zoo_agents`): of those within one published
standard deviation of the best return, the one trained on the fewest steps, with its figure.

- a Gymnasium id or env object: its observation and action spaces, and whether rlx can read
  its model (:func:`rlx.mdp.from_gymnasium`); ``GridWorld`` ids and ``TabularMDP`` objects are
  tabular MDPs with a known model;
- a JSONL data file: the keys of its first row (the row kinds of :mod:`rlx.llm.tasks`);
- a board game: ``tictactoe``, ``connect4`` and OpenSpiel names such as ``tic_tac_toe``.

```
>>> print(recommend("Pendulum-v1"))
Recommended: ppo  (Continuous control: PPO with Gaussian policy, or SAC and TD3)
Why: Pendulum-v1 has Box(3,) observations and Box(-2, 2, (1,)) actions (continuous control). ...
Run: rlx train ppo --env Pendulum-v1
Alternatives:
  - sac: off-policy, more sample-efficient; maximum-entropy exploration
  - td3: off-policy with a deterministic actor and twin critics
```

Why one module past rlx's 800 lines: the chooser is the table plus the reading of a target
that picks a row (spaces, sizes, games, data files) and the measurements that may overrule it;
the docs page is generated from it whole.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlx.callable_module import make_callable
from rlx.errors import ConfigError, EnvError

# ---------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Row:
    """One row of the "Choose a method" table.

    Attributes:
        situation: the Situation cell, verbatim.
        method: rlx's name of the first choice (a registered algorithm, an ``rlx solve``
            method, or an ``rlx align`` name of :data:`ALIGN_NAMES`).
        alternatives: ``(rlx name, when to prefer it)`` pairs, in the table's order.
        why: why the first choice fits the situation, in one or two sentences.
        table_method: the table's Method cell, verbatim.
    """

    situation: str
    method: str
    alternatives: tuple[tuple[str, str], ...]
    why: str
    table_method: str


TABULAR_MODEL = Row(
    situation="Small tabular MDP, known model",
    method="value-iteration",
    alternatives=(
        ("policy-iteration", "fewer, costlier sweeps; converges faster when gamma is near 1"),
    ),
    why="P and R are known, so dynamic programming computes V* and an optimal policy exactly, "
    "with no sampling and no exploration.",
    table_method="value iteration or policy iteration",
)
TABULAR_SAMPLES = Row(
    situation="Small tabular MDP, samples only",
    method="q-learning",
    alternatives=(
        ("double-q", "when max-based targets overestimate (noisy rewards)"),
        ("sarsa", "when the mistakes made while exploring are costly (on-policy)"),
    ),
    why="Without a model the Q table is learned from sampled transitions; Q-learning's "
    "off-policy target r + gamma max_a' Q(s', a') converges to Q* under epsilon-greedy "
    "exploration.",
    table_method="Q-learning",
)
SAFETY_CRITICAL = Row(
    situation="On-policy, safety critical",
    method="sarsa",
    alternatives=(
        ("expected-sarsa", "a lower-variance target: the mean over the epsilon-greedy policy"),
    ),
    why="SARSA learns the value of the epsilon-greedy policy it actually follows, so it keeps "
    "away from states where an exploratory step is costly (the cliff-walking lesson: SARSA "
    "takes the safe path, Q-learning the cliff edge).",
    table_method="SARSA or Expected SARSA",
)
DISCRETE_DEEP = Row(
    situation="High dimensional state, discrete actions",
    method="dqn",
    alternatives=(("ppo", "on-policy, no replay buffer; steadier with many parallel envs"),),
    why="A Q network generalises over a state space too large for a table, and an argmax over "
    "a few discrete actions is cheap; rlx's dqn uses the Double DQN target by default "
    "(double=True).",
    table_method="DQN, with Double DQN in production",
)
CONTINUOUS = Row(
    situation="Continuous control",
    method="ppo",
    alternatives=(
        ("sac", "off-policy, more sample-efficient; maximum-entropy exploration"),
        ("td3", "off-policy with a deterministic actor and twin critics"),
    ),
    why="There is no argmax over a continuous action, so a policy-gradient method samples "
    "actions from a Gaussian policy (rlx's ppo picks it for Box actions).",
    table_method="PPO with Gaussian policy, or SAC and TD3",
)
PREFERENCES = Row(
    situation="LLM alignment from preferences",
    method="dpo",
    alternatives=(
        (
            "rlhf",
            "RLHF-PPO: a reward model (rlx align rm) then PPO with a KL penalty to the SFT "
            "model; for online generation",
        ),
    ),
    why="DPO learns from the preference pairs directly, with no reward model and no "
    "generation during training: the simplest stable first step.",
    table_method="DPO first, RLHF-PPO with KL penalty",
)
VERIFIER = Row(
    situation="LLM math and code reasoning",
    method="grpo",
    alternatives=(
        ("rlhf", "when answers cannot be checked: PPO on a learned reward model"),
        ("sft", "to teach the answer format first, from demonstrations"),
    ),
    why="A verifier checks each completion against the answer, so GRPO scores a group of "
    "completions per prompt and needs no reward model and no value network.",
    table_method="GRPO with a verifier reward",
)
BOARD_GAMES = Row(
    situation="Two player board games",
    method="alphazero",
    alternatives=(("muzero", "when search should use a learned model instead of the rules"),),
    why="Monte Carlo tree search guided by a policy-value network, trained by self-play, "
    "plays both sides of a two-player zero-sum game.",
    table_method="AlphaZero or MuZero",
)

ROWS: tuple[Row, ...] = (
    TABULAR_MODEL,
    TABULAR_SAMPLES,
    SAFETY_CRITICAL,
    DISCRETE_DEEP,
    CONTINUOUS,
    PREFERENCES,
    VERIFIER,
    BOARD_GAMES,
)
"""The "Choose a method" rows, in the table's order."""

# Not a row of the table: demonstrations {"prompt", "completion"} are the SFT stage that
# precedes every alignment method, so a file of them gets this answer.
DEMONSTRATIONS = Row(
    situation="Demonstrations for a language model",
    method="sft",
    alternatives=(("dpo", "next, once preference pairs for the SFT model are collected"),),
    why="Supervised fine-tuning on demonstrations gives the reference model that DPO, "
    "RLHF-PPO and GRPO start from.",
    table_method="SFT (before any alignment method)",
)

# Not a row either: the "On-policy, safety critical" row names tabular learners; with too many
# states for a table, its on-policy counterpart among rlx's deep agents is PPO.
SAFETY_CRITICAL_DEEP = Row(
    situation=SAFETY_CRITICAL.situation,
    method="ppo",
    alternatives=(("dqn", "off-policy Double DQN, when exploratory mistakes are cheap"),),
    why="The on-policy safety row names tabular SARSA; among deep agents the on-policy one is "
    "ppo, which learns the value of the stochastic policy it actually follows.",
    table_method=SAFETY_CRITICAL.table_method,
)

# When to use the algorithms the table does not name, in the table's terms.
OTHER_USES: dict[str, str] = {
    "mc": "Small tabular MDP, samples only, episodic: learns from whole returns, no bootstrap",
    "mc-prediction": "to estimate a fixed policy's V from whole episodes",
    "td0": "to estimate a fixed policy's V from single steps (bootstrapping)",
    "reinforce": "the simplest policy gradient: short episodes, teaching, baselines",
    "a2c": "on-policy with many parallel envs, one update per rollout (PPO's simpler sibling)",
    "rm": "LLM alignment from preferences, before RLHF-PPO: learns the reward it optimises",
}


def use_when(name: str) -> str:
    """When to use the algorithm ``name``: the situation of the row that recommends it first,
    else its reason as an alternative, else :data:`OTHER_USES` ("" when it is in none)."""
    method = {v: k for k, v in ALIGN_NAMES.items()}.get(name, name)
    for row in (*ROWS, DEMONSTRATIONS):
        if row.method == method:
            return row.situation
    for row in ROWS:
        for alternative, when in row.alternatives:
            if alternative == method:
                return f"{row.situation}: {when}"
    return OTHER_USES.get(name, "")


# Methods that run through `rlx solve`, not the algorithm registry.
SOLVERS: tuple[str, ...] = ("value-iteration", "policy-iteration")
# `rlx align` names whose registered algorithm has another name.
ALIGN_NAMES: dict[str, str] = {"rlhf": "rlhf-ppo"}
_LLM_METHODS = ("sft", "rm", "dpo", "rlhf", "grpo")

# ---------------------------------------------------------------------------- the answer


@dataclass(frozen=True)
class Recommendation:
    """What to run, and why.

    Attributes:
        method: rlx's name of the recommended method.
        reason: one or two sentences naming what was read (spaces, row keys) and why it fits.
        alternatives: ``(method, when to prefer it)`` pairs.
        command: the line to run: ``rlx train``, ``rlx solve`` or ``rlx align`` (a Python call
            when the target is an object with no id).
        available: whether rlx can run ``method`` now (registered, or an ``rlx solve`` method).
        situation: the table row it comes from.
        note: anything the user must know before running ``command`` (e.g. not yet available).
        reading: how the target fits the row when the row's words fit it loosely (a state of
            two numbers under "High dimensional state"), shown before the row's name.
    """

    method: str
    reason: str
    alternatives: list[tuple[str, str]]
    command: str
    available: bool
    situation: str
    note: str = ""
    reading: str = ""

    @property
    def why(self) -> str:
        """The reason (DESIGN.md's name for it)."""
        return self.reason

    def __str__(self) -> str:
        row = _ROW_BY_SITUATION.get(self.situation)
        title = f"{self.situation}: {row.table_method}" if row else self.situation
        if self.reading:
            title = f"{self.reading}; the table's row: {title}"
        lines = [
            f"Recommended: {self.method}  ({title})",
            f"Why: {self.reason}",
            f"Run: {self.command}",
        ]
        if self.alternatives:
            lines.append("Alternatives:")
            lines += [f"  - {name}: {when}" for name, when in self.alternatives]
        if self.note:
            lines.append(f"Note: {self.note}")
        return "\n".join(lines)


_ROW_BY_SITUATION = {row.situation: row for row in (*ROWS, DEMONSTRATIONS)}


def recommend(
    target: Any, *, safety_critical: bool = False, has_model: bool | None = None
) -> Recommendation:
    """The table's method for ``target``, with the reason, alternatives and command.

    Args:
        target: a Gymnasium id (``"CartPole-v1"``) or env object, a ``GridWorld[-RxC]`` id or
            ``TabularMDP``, a JSONL data file, or a board game (``"tictactoe"``, ``"connect4"``).
        safety_critical: mistakes made while learning are costly; the "On-policy, safety
            critical" row then wins (SARSA or Expected SARSA for tabular problems).
        has_model: for tabular problems, whether the model P, R is available; ``None`` asks
            whether rlx can read it (:func:`rlx.mdp.from_gymnasium`).

    Raises:
        ConfigError: the target is none of the above, or a data file's rows are of no known kind.
        EnvError: a registered Gymnasium id cannot be made (e.g. a missing dependency).
    """
    from rlx.mdp import TabularMDP

    if isinstance(target, TabularMDP):
        return _tabular_mdp(target, None, safety_critical, has_model)
    if _is_game_object(target):
        return _board_game(type(target).__name__, None)
    if _is_env_object(target):
        return _from_env(target, _spec_id(target), safety_critical, has_model)
    if isinstance(target, Path):
        return _data_file(target)
    if isinstance(target, str):
        return _from_name(target.strip(), safety_critical, has_model)
    raise ConfigError(_unknown_message(repr(target)))


def _from_name(name: str, safety_critical: bool, has_model: bool | None) -> Recommendation:
    from rlx.core.atari import is_atari_id
    from rlx.core.envs import gridworld_from_id, is_gridworld_id

    game = _game_id(name)
    if game is not None:
        return _board_game(name, game)
    if is_gridworld_id(name):
        return _tabular_mdp(gridworld_from_id(name), name, safety_critical, has_model)
    path = Path(name).expanduser()
    if path.is_file() or path.suffix.lower() in (".jsonl", ".json"):
        return _data_file(path)
    if is_atari_id(name) or _is_gymnasium_id(name):  # ale-py registers its games when asked
        env = _make(name)
        try:
            return _from_env(env, name, safety_critical, has_model)
        finally:
            env.close()
    raise ConfigError(_unknown_message(name))


# ---------------------------------------------------------------------------- environments


def _from_env(
    env: Any, env_id: str | None, safety_critical: bool, has_model: bool | None
) -> Recommendation:
    """Pick the row from the spaces: Discrete/Discrete is tabular, Box actions continuous."""
    from gymnasium.spaces import Box, Discrete

    obs, act = env.observation_space, env.action_space
    spaces = f"{describe_space(obs)} observations and {describe_space(act)} actions"
    where = env_id or type(env.unwrapped).__name__
    if isinstance(act, Box):
        return _continuous(where, env_id, spaces, safety_critical)
    if isinstance(act, Discrete) and isinstance(obs, Discrete):
        if has_model is None:
            has_model = _rlx_reads_model(env)
        return _tabular(where, env_id, spaces, safety_critical, has_model)
    if isinstance(act, Discrete) and isinstance(obs, Box):
        return _discrete_deep(where, env_id, spaces, safety_critical, int(np.prod(obs.shape)))
    raise ConfigError(
        f"{where} has {spaces}; the chooser reads Discrete or Box observations with Discrete or "
        "Box actions (flatten other spaces with a Gymnasium wrapper first)."
    )


def _tabular(
    where: str, env_id: str | None, spaces: str, safety_critical: bool, has_model: bool
) -> Recommendation:
    if safety_critical:
        # Planning with a known model explores nothing, so it stays a safe alternative.
        extra = [("value-iteration", "plan offline with the known model")] if has_model else []
        facts = f"{where} has {spaces} (a small tabular MDP) and mistakes while learning cost"
        return _answer(SAFETY_CRITICAL, facts, env_id, extra=extra)
    if has_model:
        facts = f"{where} has {spaces} (a small tabular MDP) and rlx can read its model"
        return _answer(TABULAR_MODEL, facts, env_id)
    facts = f"{where} has {spaces} (a small tabular MDP) and no model is available"
    return _answer(TABULAR_SAMPLES, facts, env_id)


SMALL_STATE_NUMBERS = 64
"""An observation of at most this many numbers is called a small continuous state, not a high
dimensional one (an image or a long feature vector)."""


def _discrete_deep(
    where: str, env_id: str | None, spaces: str, safety_critical: bool, size: int
) -> Recommendation:
    if size <= SMALL_STATE_NUMBERS:
        # The table's row is named for images and long vectors; what puts a state of a few
        # continuous numbers in it is that a table cannot hold a continuous state, not its size.
        numbers = "number" if size == 1 else "numbers"
        facts = (
            f"{where} has {spaces}: a state of {size} continuous {numbers} (not high "
            "dimensional, but continuous, so too many states for a table), few actions"
        )
        reading = f"a continuous state of {size} {numbers}, discrete actions"
    else:
        facts = f"{where} has {spaces}: a high dimensional state of {size} numbers, few actions"
        reading = ""
    if not safety_critical:
        return _answer(DISCRETE_DEEP, facts, env_id, reading=reading)
    # The safety row asks for an on-policy learner; its deep counterpart in rlx is PPO.
    return _answer(SAFETY_CRITICAL_DEEP, facts, env_id, reading=reading)


def _continuous(
    where: str, env_id: str | None, spaces: str, safety_critical: bool
) -> Recommendation:
    facts = f"{where} has {spaces} (continuous control)"
    note = (
        "safety critical: ppo is also the on-policy choice, which the safety row asks for."
        if safety_critical
        else ""
    )
    return _answer(CONTINUOUS, facts, env_id, note=note)


def _tabular_mdp(
    mdp: Any, mdp_id: str | None, safety_critical: bool, has_model: bool | None
) -> Recommendation:
    """A TabularMDP (or GridWorld id): its model is known unless the caller says otherwise."""
    where = mdp_id or mdp.name
    spaces = f"Discrete({mdp.n_states}) states and Discrete({mdp.n_actions}) actions"
    known = True if has_model is None else has_model
    return _tabular(where, mdp_id, spaces, safety_critical, known)


def describe_space(space: Any) -> str:
    """A short space name: ``Discrete(2)``, ``Box(4,)``, or ``Box(-2, 2, (1,))`` when bounded
    alike in every dimension."""
    from gymnasium.spaces import Box, Discrete

    if isinstance(space, Discrete):
        start = f", start={int(space.start)}" if int(space.start) != 0 else ""
        return f"Discrete({int(space.n)}{start})"
    if isinstance(space, Box):
        low, high = space.low.ravel(), space.high.ravel()
        uniform = low.size and (low == low[0]).all() and (high == high[0]).all()
        if uniform and abs(float(low[0])) < float("inf") and abs(float(high[0])) < float("inf"):
            return f"Box({float(low[0]):g}, {float(high[0]):g}, {space.shape})"
        return f"Box{space.shape}"
    return type(space).__name__


def _rlx_reads_model(env: Any) -> bool:
    """Whether :func:`rlx.mdp.from_gymnasium` builds a TabularMDP from ``env``."""
    from rlx.mdp import from_gymnasium

    try:
        from_gymnasium(env)
    except EnvError:
        return False
    return True


def _is_env_object(target: Any) -> bool:
    return all(hasattr(target, name) for name in ("observation_space", "action_space", "step"))


def _spec_id(env: Any) -> str | None:
    spec = getattr(env, "spec", None)
    return str(spec.id) if spec is not None and getattr(spec, "id", None) else None


def _is_gymnasium_id(name: str) -> bool:
    import gymnasium as gym

    try:
        gym.spec(name)
    except gym.error.Error:
        return False
    return True


def _make(env_id: str) -> Any:
    """The env as rlx trains on it (an Atari game with its preprocessing)."""
    import gymnasium as gym

    from rlx.core.envs import make_env

    try:
        return make_env(env_id)
    except (gym.error.Error, ImportError) as exc:
        raise EnvError(f"cannot make Gymnasium env {env_id!r} to read its spaces: {exc}") from exc


# ---------------------------------------------------------------------------- data files

# The row kinds of rlx.llm.tasks (SFTExample, PreferencePair, VerifierExample), most specific
# first: a preference row also has a "prompt". Written out here so that choosing a method does
# not need the `llm` extra.
_DATA_KINDS: tuple[tuple[tuple[str, ...], str, Row], ...] = (
    (("prompt", "chosen", "rejected"), "preference", PREFERENCES),
    (("prompt", "answer"), "verifier", VERIFIER),
    (("prompt", "completion"), "demonstration", DEMONSTRATIONS),
)
_ACCEPTED_ROWS = (
    '{"prompt", "chosen", "rejected"} (preferences), {"prompt", "answer"} (verifier tasks) '
    'or {"prompt", "completion"} (demonstrations)'
)


def _data_file(path: Path) -> Recommendation:
    """The row kind of a JSONL file, read from the keys of its first non-blank line."""
    keys, number = _first_row_keys(path)
    for fields, kind, row in _DATA_KINDS:
        if set(fields) <= keys:
            listed = ", ".join(f'"{name}"' for name in fields)
            facts = f"{path.name} holds {kind} rows {{{listed}}} (line {number})"
            return _answer(row, facts, None, data=str(path))
    raise ConfigError(
        f"data file {str(path)!r} has rows with keys {sorted(keys)}; the chooser reads JSONL "
        f"rows {_ACCEPTED_ROWS}."
    )


def _first_row_keys(path: Path) -> tuple[set[str], int]:
    if not path.is_file():
        raise ConfigError(f"data file {str(path)!r} does not exist.")
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise ConfigError(
                    f"data file {str(path)!r}, line {number}: not valid JSON ({err.msg}); "
                    f"expected JSONL rows {_ACCEPTED_ROWS}."
                ) from err
            if not isinstance(obj, dict):
                raise ConfigError(
                    f"data file {str(path)!r}, line {number}: a JSON {type(obj).__name__}, not "
                    f"an object; expected JSONL rows {_ACCEPTED_ROWS}."
                )
            return set(obj), number
    raise ConfigError(f"data file {str(path)!r} is empty; expected JSONL rows {_ACCEPTED_ROWS}.")


# ---------------------------------------------------------------------------- board games

# name (lowercased, '-', '_' and spaces removed) -> the --env name rlx's games will use
_RLX_GAMES = {"tictactoe": "tictactoe", "connect4": "connect4", "connectfour": "connect4"}
# Other two-player zero-sum board games under their OpenSpiel names: the table still says
# AlphaZero or MuZero, but rlx's game protocol has no implementation of them.
_OPENSPIEL_GAMES = ("breakthrough", "checkers", "chess", "clobber", "go", "hex", "othello")


def _game_id(name: str) -> str | None:
    """rlx's id for a board game name (``tic-tac-toe`` -> ``tictactoe``), else ``None``."""
    key = re.sub(r"[-_\s]", "", name.lower())
    if key in _RLX_GAMES:
        return _RLX_GAMES[key]
    return name.lower() if name.lower() in _OPENSPIEL_GAMES else None


def _is_game_object(target: Any) -> bool:
    """Duck-typed rlx game (DESIGN.md: initial_state, apply, legal_actions, winner)."""
    methods = ("initial_state", "apply", "legal_actions", "is_terminal", "winner")
    return all(callable(getattr(target, name, None)) for name in methods)


OPENSPIEL_OPPONENTS = ("random", "mcts-200")
"""The arena opponents the command names for an OpenSpiel game: the default's perfect-play
``solver`` exists for tictactoe only."""


def _board_game(name: str, game: str | None) -> Recommendation:
    facts = f"{name} is a two-player zero-sum board game (turns alternate, perfect information)"
    if game is None or game in _RLX_GAMES.values():
        return _answer(BOARD_GAMES, facts, game, game=True)
    # rlx plays OpenSpiel's games through its adapter (rlx.games.make("openspiel:<name>")).
    note = (
        ""
        if importlib.util.find_spec("pyspiel") is not None
        else "OpenSpiel games need the games extra: pip install 'rlx[games]'."
    )
    return _answer(BOARD_GAMES, facts, f"openspiel:{game}", note=note, game=True)


# ---------------------------------------------------------------------------- assembling


def _answer(
    row: Row,
    facts: str,
    target_id: str | None,
    *,
    extra: list[tuple[str, str]] | None = None,
    note: str = "",
    data: str | None = None,
    game: bool = False,
    reading: str = "",
) -> Recommendation:
    """The Recommendation for ``row``: facts read from the target, then the row's reason; where
    rlx measured another method reaching the target's goal much sooner, that method."""
    method = row.method
    alternatives = [*row.alternatives, *(extra or [])]
    reason = f"{facts}. {row.why}"
    notes = [note] if note else []
    faster = measured_faster(target_id, row.method)
    if faster is not None:
        method, sentence = faster
        alternatives = [
            (row.method, f"the table's first choice; slower to the goal here (see Why). {row.why}"),
            *[(name, when) for name, when in alternatives if name != method],
        ]
        reason = f"{facts}. The table names {row.method}; rlx follows its own {sentence}"
    else:
        method, alternatives, reason = _zoo_grounded(row, alternatives, facts, target_id)
    available = is_available(method)
    if not available:
        notes.append(_unavailable_note(row))
    return Recommendation(
        method=method,
        reason=reason,
        alternatives=alternatives,
        command=_command(method, target_id, data=data, game=game),
        available=available,
        situation=row.situation,
        note=" ".join(notes),
        reading=reading,
    )


def _zoo_grounded(
    row: Row, alternatives: list[tuple[str, str]], facts: str, env_id: str | None
) -> tuple[str, list[tuple[str, str]], str]:
    """Where rlx measured nothing for ``env_id``: the row's method and its alternatives whose
    preset there is rl-baselines3-zoo's and that the zoo published an agent of
    (:mod:`rlx.launch.zoo_agents`). Of those whose published return is within one published
    standard deviation of the highest, the one trained on the fewest env steps (the row's own
    on a tie), cited with its figure. Unchanged when there is none, or rlx measured the env."""
    from rlx import registry
    from rlx.launch.zoo_agents import published_for

    reason = f"{facts}. {row.why}"
    if not env_id or env_id in packaged_measured_speed():
        return row.method, alternatives, reason
    agents = published_for(env_id)
    names = set(registry.names())
    candidates = [
        name
        for name in (row.method, *(n for n, _ in alternatives))
        if name in agents
        and name in names
        and registry.preset_for(registry.get(name), env_id)[0] is None
    ]
    if not candidates:
        return row.method, alternatives, reason
    top = max(candidates, key=lambda name: agents[name].mean_reward)
    near = [
        name
        for name in candidates
        if agents[name].mean_reward >= agents[top].mean_reward - agents[top].std_reward
    ]
    best = min(near, key=lambda name: (agents[name].n_timesteps, name != row.method))
    agent = agents[best]
    cited = (
        f"rl-baselines3-zoo's published {best} agent reached a mean return of "
        f"{agent.mean_reward:g} (std {agent.std_reward:g}) on {env_id} after "
        f"{agent.n_timesteps:,} env steps, with the settings rlx applies as its preset "
        f"there (one agent each, not a spread over seeds; docs: Presets)."
    )
    if best == row.method:
        return row.method, alternatives, f"{reason} {cited}"
    others = ", ".join(
        f"{name} {agents[name].mean_reward:g}" for name in candidates if name != best
    )
    moved = [
        (row.method, f"the table's first choice. {row.why}"),
        *[(name, when) for name, when in alternatives if name != best],
    ]
    return (
        best,
        moved,
        (
            f"{facts}. The table names {row.method}; rlx has no measurement of its own here and "
            f"follows the zoo's: {cited} Other published agents there: {others}."
        ),
    )


# ---------------------------------------------------------------------------- measured speed

MEASURED_FILE = "measured_speed.json"
"""The package's copy of what rlx's benchmarks measured (:func:`measured_speed` of the result
files in ``benchmarks/results``, rewritten by ``python docs/gen_pages.py benchmarks`` after
``make bench``): an installed rlx has no benchmarks folder, and a test fails when this copy
differs from the result files."""
MEASURED_MARGIN = 1.5
"""An alternative is named when it reached the env's goal this many times sooner."""


def measured_speed(results: Path) -> dict[str, dict[str, list[Any]]]:
    """``env -> algorithm -> [seconds, goal, result file]`` from the result files in
    ``results``: a file counts when its ``figures`` hold ``env``, ``goal`` and
    ``rlx_median_seconds_to_goal`` (algorithm -> seconds; the benchmarks of ``benchmarks/``
    write them). A later file (by name) wins for one env and algorithm."""
    table: dict[str, dict[str, list[Any]]] = {}
    for path in sorted(results.glob("*.json")):
        try:
            figures = json.loads(path.read_text()).get("figures", {})
            env = str(figures["env"])
            for algo, value in figures["rlx_median_seconds_to_goal"].items():
                entry = [float(value), str(figures["goal"]), path.name]
                table.setdefault(env, {})[str(algo)] = entry
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return table


def packaged_measured_speed() -> dict[str, dict[str, list[Any]]]:
    """The table of :data:`MEASURED_FILE` shipped inside the package (empty when missing)."""
    from importlib import resources

    try:
        text = resources.files("rlx").joinpath(MEASURED_FILE).read_text()
        return json.loads(text)
    except (OSError, ValueError):
        return {}


def measured_alternative(env_id: str | None, method: str, results: Path | None = None) -> str:
    """The sentence of :func:`measured_faster` ("" when nothing measured is faster)."""
    faster = measured_faster(env_id, method, results)
    return "" if faster is None else faster[1]


def measured_faster(
    env_id: str | None, method: str, results: Path | None = None
) -> tuple[str, str] | None:
    """The algorithm that rlx's own benchmark measured reaching ``env_id``'s goal soonest, when
    that is at least :data:`MEASURED_MARGIN` times sooner than ``method``, with a sentence
    giving both figures and the result files; None when nothing measured says so.

    The figures come from the package's copy (:data:`MEASURED_FILE`), or from the result files
    in ``results`` when given (:func:`measured_speed`).
    """
    if not env_id:
        return None
    table = measured_speed(results) if results is not None else packaged_measured_speed()
    seconds = {
        algo: (float(entry[0]), str(entry[1]), str(entry[2]))
        for algo, entry in table.get(env_id, {}).items()
    }
    if method not in seconds:
        return None
    own, goal, own_file = seconds[method]
    faster = [(t, name, f) for name, (t, _, f) in seconds.items() if t * MEASURED_MARGIN <= own]
    if not faster:
        return None
    best, name, path = min(faster)
    return name, (
        f"measurement where it has one: in rlx's benchmark {name} reached {goal} on {env_id} "
        f"in {best:.3g} s (median over seeds) against {own:.3g} s for {method}, "
        f"{own / best:.1f}x sooner (benchmarks/results/{path}, {own_file}; docs: Benchmarks)."
    )


def _command(method: str, target_id: str | None, *, data: str | None, game: bool) -> str:
    """The CLI line for ``method``; a Python call when the target has no id to type."""
    if data is not None:
        line = f"rlx align {method} --model MODEL --data {shlex.quote(data)}"
        return line + " --reward exact-match" if method == "grpo" else line
    if method in SOLVERS:
        if target_id is None:
            return f"rlx.planning.{method.replace('-', '_')}(mdp)"
        option = "" if method == "value-iteration" else f" --method {method}"
        return f"rlx solve {shlex.quote(target_id)}{option}"
    if target_id is None:
        return f'rlx.train("{method}", env)'
    line = f"rlx train {method} --env {shlex.quote(target_id)}"
    if game and target_id.startswith("openspiel:"):
        line += " --eval-opponents " + " ".join(OPENSPIEL_OPPONENTS)
    return line


def is_available(method: str) -> bool:
    """Whether rlx runs ``method`` now: an ``rlx solve`` method or a registered algorithm
    (an ``rlx align`` name counts as its algorithm: ``rlhf`` is ``rlhf-ppo``)."""
    from rlx import registry

    return method in SOLVERS or ALIGN_NAMES.get(method, method) in registry.names()


def _unavailable_note(row: Row) -> str:
    if row.method in _LLM_METHODS and importlib.util.find_spec("transformers") is None:
        return f"{row.method} needs the llm extra: pip install 'rlx[llm]'."
    ready = [name for name, _ in row.alternatives if is_available(name)]
    meanwhile = f"; available now: {', '.join(ready)}" if ready else ""
    return (
        f"{row.method} is not registered in this rlx (a plug-in that registers it is not "
        f"installed), so the command does not run{meanwhile}."
    )


def _unknown_message(name: str) -> str:
    import gymnasium as gym

    candidates = [str(k) for k in gym.registry] + ["tictactoe", "connect4"]
    close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return (
        f"cannot recommend a method for {name!r}: give a Gymnasium id or env (e.g. "
        f"CartPole-v1), a GridWorld[-RxC] id, a JSONL data file with rows {_ACCEPTED_ROWS}, "
        f"or a board game (tictactoe, connect4).{hint}"
    )


make_callable(__name__, "recommend")  # rlx.recommend(...) calls recommend

__all__ = [
    "ALIGN_NAMES",
    "BOARD_GAMES",
    "CONTINUOUS",
    "DEMONSTRATIONS",
    "DISCRETE_DEEP",
    "PREFERENCES",
    "ROWS",
    "SAFETY_CRITICAL",
    "SAFETY_CRITICAL_DEEP",
    "SOLVERS",
    "TABULAR_MODEL",
    "TABULAR_SAMPLES",
    "VERIFIER",
    "Recommendation",
    "Row",
    "describe_space",
    "is_available",
    "measured_alternative",
    "measured_faster",
    "recommend",
    "use_when",
]
