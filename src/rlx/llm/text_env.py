"""Text environments: what a language model acts in when an episode has several turns.

    obs_0                                          = env.reset(seed)
    obs_t+1, r_t, terminated, truncated, info      = env.step(reply_t)

Gymnasium's protocol (:class:`TextEnv`) with text on both sides: an observation is text, or
chat messages (``{"role", "content"}``, what a chat model's template renders); an action is
the model's reply as text. ``terminated`` says the task ended (found, answered, failed for
good), ``truncated`` that a budget cut it (the turn budget here, the token budget in
:mod:`rlx.llm.episodes`). An env never raises for what the model wrote: a reply it cannot
read comes back as an observation that says so, with ``info["invalid_action"]``, so a
garbling policy is a policy that scores badly, not a crashed run.

Four kinds here:

- :class:`GymTextEnv`: any Gymnasium env, given ``render`` (observation -> text) and
  ``parse`` (text -> action, None when it cannot read one);
- :class:`PythonToolEnv`: tool use, the model's fenced Python block run in rlx's sandbox
  (:func:`rlx.sandbox.run_sandboxed`, the program's room and limits of the ``python-tests``
  reward) and its output the next observation, ``info["tool_error"]`` when it raised or timed
  out; a reply with no code block is the final answer, scored against the task's answer;
- :class:`HiddenNumberEnv`: a task that *needs* the environment's answers: find a number in
  ``[lo, hi]`` drawn from the seed; each guess is answered "higher", "lower" or "correct".
  Binary search finds it within ``ceil(log2(hi - lo + 2))`` turns; a policy that cannot see
  the replies (:class:`BlindEnv`, the single-turn baseline) finds it with probability at most
  ``turns / (hi - lo + 1)``.

- :class:`ToolEnv`: tools in the chat template's own format (:mod:`rlx.llm.tool_calls`):
  Python functions shown to the model as its template shows tools, its calls read back and
  answered as ``tool`` messages; :func:`sandboxed_python` is a tool that runs the model's
  program in the sandbox.

A run names a built-in text env by a word (:data:`TEXT_ENVS`: ``"hidden-number"``,
``"hidden-number-blind"``, its single-turn baseline, and ``"tool-lookup"``), or its own by a
factory.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol, Union, runtime_checkable

from rlx.errors import ConfigError
from rlx.llm.chat import Message
from rlx.llm.tool_calls import (
    Tool,
    ToolError,
    call_tool,
    parse_tool_calls,
    tool_schema,
    tools_by_name,
)

Observation = Union[str, list[Message]]  # noqa: UP007 (a runtime alias, as rlx.llm.chat's)
"""What an env shows the model: text, or chat messages the tokenizer's template renders."""
StepResult = tuple[Observation, float, bool, bool, dict[str, Any]]
"""``(observation, reward, terminated, truncated, info)``, Gymnasium's order."""

INVALID_ACTION = "invalid_action"
"""``info`` key: the reply could not be read as an action (the env answered, nothing moved)."""
TOOL_CALL = "tool_call"
"""``info`` key: the reply ran a program in the sandbox."""
TOOL_ERROR = "tool_error"
"""``info`` key: that program raised, exited with an error or ran past its time."""
SUCCESS = "success"
"""``info`` key on an episode's last step: the task was solved (the held-out success rate)."""


@runtime_checkable
class TextEnv(Protocol):
    """An environment a language model acts in, one reply per turn.

    ``reset(seed)`` starts an episode whose task depends on ``seed`` alone (G episodes of one
    seed are GRPO's group); ``step(reply)`` answers a reply. An env holds one episode at a
    time: the episode runner makes one env per episode."""

    def reset(self, seed: int) -> Observation:
        """The first observation of the episode ``seed`` names."""
        ...

    def step(self, action: str) -> StepResult:
        """Answer the model's reply: ``(observation, reward, terminated, truncated, info)``."""
        ...


def check_turns(max_turns: int | None) -> None:
    """``max_turns`` is None (no budget) or at least 1."""
    if max_turns is not None and max_turns < 1:
        raise ConfigError(f"max_turns={max_turns} must be >= 1 (or None: no turn budget).")


def invalid_step(
    action: str, shown: Observation, turn: int, max_turns: int | None, reward: float
) -> StepResult:
    """The answer to a reply that names no action: what it said (cut), then the last
    observation ``shown`` again; ``reward``, the turn used, ``info["invalid_action"]``."""
    text = shown if isinstance(shown, str) else str(shown[-1].get("content", ""))
    reply = f"invalid action {action[:40]!r}; {text}"
    return reply, reward, False, out_of_turns(turn, max_turns, False), {INVALID_ACTION: True}


def out_of_turns(turn: int, max_turns: int | None, terminated: bool) -> bool:
    """``truncated`` at turn ``turn`` (1-based): the budget is spent and the task did not end."""
    return not terminated and max_turns is not None and turn >= max_turns


# ============================================================================ Gymnasium
class GymTextEnv:
    """A Gymnasium env seen through text: ``render(obs) -> str`` shows each observation,
    ``parse(text) -> action`` reads a reply (None, or a ValueError, when it cannot; an action
    outside ``env.action_space`` is unreadable too).

    An unreadable reply gets ``"invalid action: ..."`` and the last observation again, reward
    ``invalid_reward``, ``info["invalid_action"]``, and counts against ``max_turns`` (so a
    garbling policy still ends). The env's own truncation (a ``TimeLimit``) passes through."""

    def __init__(
        self,
        env: Any,
        render: Callable[[Any], Observation],
        parse: Callable[[str], Any],
        *,
        max_turns: int | None = None,
        invalid_reward: float = 0.0,
    ) -> None:
        check_turns(max_turns)
        self.env, self.render, self.parse = env, render, parse
        self.max_turns, self.invalid_reward = max_turns, invalid_reward
        self.turn = 0
        self.last: Any = None

    @property
    def name(self) -> str:
        spec = getattr(self.env, "spec", None)
        return f"text:{getattr(spec, 'id', None) or type(self.env).__name__}"

    def reset(self, seed: int) -> Observation:
        self.turn = 0
        self.last, _ = self.env.reset(seed=seed)
        return self.render(self.last)

    def step(self, action: str) -> StepResult:
        self.turn += 1
        move = self._read(action)
        if move is None:
            return invalid_step(action, self.render(self.last), self.turn, self.max_turns,
                                self.invalid_reward)  # fmt: skip
        self.last, reward, terminated, truncated, info = self.env.step(move)
        truncated = bool(truncated) or out_of_turns(self.turn, self.max_turns, bool(terminated))
        info = {**info, INVALID_ACTION: False}
        return self.render(self.last), float(reward), bool(terminated), truncated, info

    def _read(self, text: str) -> Any:
        """The action ``text`` names, or None."""
        try:
            move = self.parse(text)
        except (ValueError, TypeError, KeyError, IndexError):
            return None
        space = getattr(self.env, "action_space", None)
        if move is None or (space is not None and not _contains(space, move)):
            return None
        return move


def _contains(space: Any, move: Any) -> bool:
    try:
        return bool(space.contains(move))
    except (ValueError, TypeError):
        return False


# ============================================================================ hidden number
class HiddenNumberEnv:
    """Guess the hidden number: ``n ~ U{lo..hi}`` drawn from the seed; each reply is read as
    an integer guess ``g`` and answered ``"higher"`` (``n > g``), ``"lower"`` or ``"correct"``.

    Reward 1 when found within ``max_turns`` (``info["success"]``), else 0: an episode-level
    reward. ``shaping`` > 0 adds per-turn reward for a guess that is still possible given the
    replies so far (inside the interval they leave, not a repeat): denser, but it is a hint of
    how to search, so off by default. A reply that is not an integer is answered with what
    is asked and ``info["invalid_action"]``; it costs a turn."""

    def __init__(self, lo: int = 1, hi: int = 7, max_turns: int = 3, shaping: float = 0.0) -> None:
        if hi <= lo:
            raise ConfigError(f"hi={hi} must be > lo={lo} (a range of at least two numbers).")
        check_turns(max_turns)
        if shaping < 0:
            raise ConfigError(f"shaping={shaping} must be >= 0.")
        self.lo, self.hi, self.max_turns, self.shaping = lo, hi, max_turns, shaping
        self.target, self.turn = lo, 0
        self.low, self.high = lo, hi

    @property
    def name(self) -> str:
        return f"hidden-number-{self.lo}-{self.hi}-t{self.max_turns}"

    def reset(self, seed: int) -> Observation:
        self.target = random.Random(seed).randint(self.lo, self.hi)
        self.turn, self.low, self.high = 0, self.lo, self.hi
        return f"find {self.lo}-{self.hi}: "

    def step(self, action: str) -> StepResult:
        self.turn += 1
        text = action.strip()
        if not re.fullmatch(r"-?\d{1,9}", text):
            truncated = out_of_turns(self.turn, self.max_turns, False)
            return f"a number {self.lo}-{self.hi}: ", 0.0, False, truncated, {INVALID_ACTION: True}
        guess = int(text)
        shaped = self.shaping if self.low <= guess <= self.high else 0.0
        found = guess == self.target
        if found:
            reply, reward = "correct", 1.0
        elif guess < self.target:
            reply, reward, self.low = "higher: ", shaped, max(self.low, guess + 1)
        else:
            reply, reward, self.high = "lower: ", shaped, min(self.high, guess - 1)
        truncated = out_of_turns(self.turn, self.max_turns, found)
        return reply, reward, found, truncated, {INVALID_ACTION: False, SUCCESS: found}


class BlindEnv:
    """``env`` with its replies hidden: every observation after the first is ``shown``, so
    the model acts as if each reply were its only one (the single-turn baseline: it cannot
    condition on what the env said). Rewards, endings and ``info`` are ``env``'s."""

    def __init__(self, env: TextEnv, shown: str = "next: ") -> None:
        self.env, self.shown = env, shown

    @property
    def name(self) -> str:
        return f"blind:{getattr(self.env, 'name', type(self.env).__name__)}"

    def reset(self, seed: int) -> Observation:
        return self.env.reset(seed)

    def step(self, action: str) -> StepResult:
        _, reward, terminated, truncated, info = self.env.step(action)
        return self.shown, reward, terminated, truncated, info


# ============================================================================ built-ins
def blind_hidden_number(**kwargs: Any) -> BlindEnv:
    """:class:`HiddenNumberEnv` with its replies hidden (:class:`BlindEnv`): the single-turn
    baseline of the hidden-number task."""
    return BlindEnv(HiddenNumberEnv(**kwargs))


# ============================================================================ Python tool
FENCE_LINE = re.compile(r"^[ \t]*```[ \t]*([\w+-]*)[ \t]*\r?$")
"""A line that opens or closes a fenced block: three backticks at its start, then its language."""
PYTHON_TAGS = frozenset({"", "python", "py", "python3"})
"""The languages of a fenced block that runs as Python (none given: Python)."""


def fenced_code(text: str) -> str | None:
    """The first fenced Python block of ``text`` (```` ```python ... ``` ````, or a bare fence),
    or None. Fences pair up line by line, so the closing fence of another language's block
    never opens one; a block left open at the end of the reply runs to the end."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        opening = FENCE_LINE.match(lines[i])
        if opening is None:
            i += 1
            continue
        end = next((k for k in range(i + 1, len(lines)) if FENCE_LINE.match(lines[k])), None)
        if opening.group(1).lower() in PYTHON_TAGS:
            body = [line.rstrip("\r") for line in lines[i + 1 : end or len(lines)]]
            return "\n".join(body) + ("\n" if end is not None and body else "")
        if end is None:
            return None
        i = end + 1
    return None


def exact_answer(reply: str, answer: str) -> float:
    """1.0 when the reply, stripped, is the answer, stripped."""
    return float(reply.strip() == answer.strip())


class PythonToolEnv:
    """Python as a tool: ``task(seed) -> (prompt, answer)``; each reply with a fenced code
    block runs that code in rlx's sandbox (:func:`rlx.sandbox.run_sandboxed`: its own room,
    ``timeout_s`` of wall time, ``memory_mb`` of address space) and its output, cut to its last
    ``max_output_chars``, is the next observation, reward 0; ``info["tool_error"]`` when it
    raised, exited with an error or ran out of time. A reply without a code block is the
    final answer: reward ``score(reply, answer)`` (default :func:`exact_answer`), terminated.

    The sandbox's isolation is checked when the env is made (:func:`rlx.sandbox.check_isolation`):
    where this machine cannot isolate a program, SandboxError, unless ``allow_unisolated``,
    which warns once instead."""

    def __init__(
        self,
        task: Callable[[int], tuple[str, str]],
        *,
        max_turns: int = 4,
        timeout_s: float = 2.0,
        memory_mb: int = 256,
        max_output_chars: int = 400,
        score: Callable[[str, str], float] = exact_answer,
        allow_unisolated: bool = False,
    ) -> None:
        from rlx.sandbox import check_isolation, warn_unisolated

        check_turns(max_turns)
        if max_output_chars < 1:
            raise ConfigError(f"max_output_chars={max_output_chars} must be >= 1.")
        missing = check_isolation(allow_unisolated)
        if missing:
            warn_unisolated(missing)
        self.task, self.score, self.max_turns = task, score, max_turns
        self.timeout_s, self.memory_mb = timeout_s, memory_mb
        self.max_output_chars = max_output_chars
        self.answer, self.turn = "", 0

    @property
    def name(self) -> str:
        return "python-tool"

    def reset(self, seed: int) -> Observation:
        prompt, self.answer = self.task(seed)
        self.turn = 0
        return prompt

    def step(self, action: str) -> StepResult:
        self.turn += 1
        code = fenced_code(action)
        if code is None:
            reward = float(self.score(action, self.answer))
            return "", reward, True, False, {TOOL_CALL: False, SUCCESS: reward > 0}
        output, failed = self.run(code)
        truncated = out_of_turns(self.turn, self.max_turns, False)
        return output, 0.0, False, truncated, {TOOL_CALL: True, TOOL_ERROR: failed}

    def run(self, code: str) -> tuple[str, bool]:
        """``(observation, failed)`` of ``code`` run in the sandbox."""
        text, failed = run_python(code, self.timeout_s, self.memory_mb, self.max_output_chars)
        return f"```output\n{text}\n```\n", failed


def run_python(code: str, timeout_s: float, memory_mb: int, max_chars: int) -> tuple[str, bool]:
    """``(output, failed)`` of ``code`` run in rlx's sandbox, the output cut to its last
    ``max_chars`` (a time-out said at its end)."""
    from rlx.sandbox import run_sandboxed

    result = run_sandboxed(code + "\n", timeout_s=timeout_s, memory_mb=memory_mb)
    # a program that ended with an error after its room reported ready still failed: the
    # exit status is the trainer's own reading, which the program cannot write
    failed = result.status != "passed" or result.returncode not in (None, 0)
    text = result.output
    if result.status == "timeout":
        text = f"{text.rstrip()}\ntimed out after {timeout_s:g} s".lstrip()
    if len(text) > max_chars:
        text = "..." + text[-max_chars:]
    return text.rstrip(), failed


# ============================================================================ tools
class ToolEnv:
    """Tools in the chat template's own format (:mod:`rlx.llm.tool_calls`): ``task(seed) ->
    (prompt, answer)``; the episode starts as one user message (after ``system``, when
    given) and the model is shown ``tools`` (Python functions) as its template shows tools.
    Each reply with tool calls is answered with one ``{"role": "tool"}`` message per call
    (at most ``max_calls_per_turn``; their outputs cut to ``max_output_chars``), reward 0,
    ``info["tool_error"]`` when any call failed. A reply without a call is the final answer:
    reward ``score(reply, answer)``, terminated. ``max_turns`` replies at most."""

    def __init__(
        self,
        task: Callable[[int], tuple[str, str]],
        tools: Sequence[Tool],
        *,
        system: str | None = None,
        max_turns: int = 4,
        max_calls_per_turn: int = 4,
        max_output_chars: int = 400,
        score: Callable[[str, str], float] = exact_answer,
    ) -> None:
        check_turns(max_turns)
        if not tools:
            raise ConfigError("a tool env needs at least one tool (a Python function).")
        if max_calls_per_turn < 1 or max_output_chars < 1:
            raise ConfigError(
                f"max_calls_per_turn={max_calls_per_turn} and max_output_chars="
                f"{max_output_chars} must be >= 1."
            )
        self.tools = tools_by_name(tools)
        self.tool_schemas = [tool_schema(t) for t in self.tools.values()]
        self.task, self.system, self.score = task, system, score
        self.max_turns, self.max_calls = max_turns, max_calls_per_turn
        self.max_output_chars = max_output_chars
        self.answer, self.turn = "", 0

    @property
    def name(self) -> str:
        return "tools:" + ",".join(self.tools)

    def reset(self, seed: int) -> Observation:
        prompt, self.answer = self.task(seed)
        self.turn = 0
        start = [{"role": "system", "content": self.system}] if self.system else []
        return [*start, {"role": "user", "content": prompt}]

    def step(self, action: str) -> StepResult:
        self.turn += 1
        calls = parse_tool_calls(action)
        if not calls:
            reward = float(self.score(action, self.answer))
            return [], reward, True, False, {TOOL_CALL: False, SUCCESS: reward > 0}
        answers, failed = [], len(calls) > self.max_calls
        for call in calls[: self.max_calls]:
            output, error = call_tool(call, self.tools, self.max_output_chars)
            failed |= error
            # the name the model wrote is shown back only when it names one of the tools
            name = call.name if call.name in self.tools else ""
            answers.append({"role": "tool", "name": name, "content": output})
        if len(calls) > self.max_calls:
            answers.append({"role": "tool", "name": "", "content": (
                f"error: {len(calls)} calls in one reply; at most {self.max_calls} are "
                "answered.")})  # fmt: skip
        truncated = out_of_turns(self.turn, self.max_turns, False)
        return answers, 0.0, False, truncated, {TOOL_CALL: True, TOOL_ERROR: failed}


def sandboxed_python(
    timeout_s: float = 2.0,
    memory_mb: int = 256,
    max_output_chars: int = 400,
    *,
    allow_unisolated: bool = False,
) -> Tool:
    """A ``python(code)`` tool for :class:`ToolEnv` that runs the model's program in rlx's
    sandbox (:func:`run_python`); a program that fails is a tool error with its output.

    As for :class:`PythonToolEnv`: where this machine cannot isolate a program, SandboxError
    when the tool is made, unless ``allow_unisolated``, which warns once instead."""
    from rlx.sandbox import check_isolation, warn_unisolated

    missing = check_isolation(allow_unisolated)
    if missing:
        warn_unisolated(missing)

    def python(code: str) -> str:
        """Run a Python program and return what it prints.

        Args:
            code: the program's source
        """
        text, failed = run_python(code, timeout_s, memory_mb, max_output_chars)
        if failed:
            raise ToolError(text)
        return text

    return python


def lookup_task(seed: int) -> tuple[str, str]:
    """A name drawn from ``seed`` and its code (:func:`code_of`), which only a tool knows:
    ``("What is the code of kqz?", "417")``."""
    rng = random.Random(seed)
    name = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(3))
    return f"What is the code of {name}?", code_of(name)


def code_of(name: str) -> str:
    """Look up the code of a name.

    Args:
        name: the name, three letters
    """
    value = 0
    for char in name:  # a fixed hash: the same on every machine and Python
        value = (value * 131 + ord(char)) % 997
    return str(value)


def tool_lookup(max_turns: int = 3) -> ToolEnv:
    """The ``tool-lookup`` built-in: answer a name's code, which only the ``code_of`` tool
    knows; a call then the answer solves it in two turns."""
    return ToolEnv(lookup_task, [code_of], max_turns=max_turns)


# ============================================================================ built-ins
TEXT_ENVS: dict[str, tuple[Callable[..., TextEnv], dict[str, Any]]] = {
    "hidden-number": (HiddenNumberEnv, {"lo": 1, "hi": 7, "max_turns": 3}),
    "hidden-number-blind": (blind_hidden_number, {"lo": 1, "hi": 7, "max_turns": 3}),
    "tool-lookup": (tool_lookup, {"max_turns": 3}),
}
"""The text envs a run names by a word (``rlx align grpo --env hidden-number``): the name ->
its factory and default keyword arguments, which ``env_kwargs`` (``--env-kwargs``) override.
The defaults are written out so ``config.json``'s env recipe says which task trained."""


def builtin_text_env(name: str) -> tuple[Callable[..., TextEnv], dict[str, Any]]:
    """The factory and default keyword arguments of the built-in text env ``name``;
    ConfigError naming it and the valid ones when there is none."""
    if name not in TEXT_ENVS:
        raise ConfigError(
            f"unknown text env {name!r}; the built-in text envs are {', '.join(TEXT_ENVS)}, "
            "and your own is named package.module:factory (a function or class that returns a "
            "text env)."
        )
    factory, defaults = TEXT_ENVS[name]
    return factory, dict(defaults)


__all__ = [
    "INVALID_ACTION",
    "SUCCESS",
    "TEXT_ENVS",
    "TOOL_CALL",
    "TOOL_ERROR",
    "BlindEnv",
    "GymTextEnv",
    "HiddenNumberEnv",
    "Observation",
    "PythonToolEnv",
    "StepResult",
    "TextEnv",
    "ToolEnv",
    "blind_hidden_number",
    "builtin_text_env",
    "code_of",
    "exact_answer",
    "fenced_code",
    "invalid_step",
    "lookup_task",
    "out_of_turns",
    "run_python",
    "sandboxed_python",
    "tool_lookup",
]
