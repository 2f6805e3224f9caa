"""Reward functions as TRL users write them, the built-in ones, and how a run combines several.

A reward function is ``fn(prompts, completions, **columns) -> list[float | None]``: one score
per completion, in order, and ``None`` where it has no opinion of a sample (a math checker
whose reference answer does not parse). It receives:

- ``prompts``: each completion's prompt (a prompt repeated for each of its samples), as the
  data holds it: text, or a list of messages;
- ``completions``: the decoded completions without eos: text for a text prompt, one assistant
  message ``[{"role": "assistant", "content": ...}]`` for a conversational one (TRL's form);
- every other column of the data under its own name (``answer=``, ``tests=``, ``solution=``),
  aligned with ``completions``, and ``completion_ids``, the sampled token ids.

A function that takes no ``**kwargs`` gets only the columns it names. Several functions
combine as a weighted sum (:class:`RewardSet`), ``r = sum_k w_k r_k`` over the functions with
an opinion of the sample, each logged under its own name (``reward/<name>``).

A run names its rewards in ``config.json`` (:func:`reward_reference`): a built-in by its name,
a function of your own by its reference ``package.module:function`` (``--reward
package.module:function`` on the command line), so its folder can be resumed; a lambda or a
local function has no reference, and is recorded as such. Importing a reference runs its
module's code: :func:`load_reward` does it, for a reference the user gives or consents to
(:mod:`rlx.core.env_recipe`'s rule for env code, which a run folder cannot give).

Built-ins (:data:`REWARDS`): ``exact-match``, ``numeric``, ``math`` (``math-verify``: LaTeX
and ``\\boxed{}`` answers judged equivalent, not string-equal), ``format`` (a regular
expression the whole completion must match), ``python-tests`` (the completion's program
against the row's ``tests``, in the sandbox), ``stdio-tests`` (the completion run as a script on
the row's inputs, its output compared with the expected), and ``arithmetic-gold``.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from rlx import metrics as M
from rlx.core.env_recipe import import_path, is_entry_point, load_entry_point
from rlx.errors import ConfigError, EnvError, RLXError
from rlx.llm.chat import completion_text
from rlx.llm.tasks import gold_reward

RewardFunction = Callable[..., list[Any]]
"""``fn(prompts, completions, **columns) -> list[float | None]``, one score per completion."""

REWARD_PREFIX = M.REWARD_PREFIX
"""Each reward function's mean score is logged as ``reward/<its name>``
(:func:`rlx.metrics.reward_component`)."""


class RewardFunctionError(RLXError):
    """A reward function raised, or returned something other than one finite number (or None)
    per completion."""


# --- built-in rewards ---------------------------------------------------------------------------


def exact_match_reward(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    answer: Sequence[str] | None = None,
    answers: Sequence[str] | None = None,
    **_: Any,
) -> list[float]:
    """1.0 when the completion, stripped, equals the row's ``answer``, stripped, else 0.0
    (``answers`` is the same column under its older name)."""
    expected = _answers(answer, answers, prompts, completions, "exact-match")
    return [
        float(completion_text(c).strip() == str(a).strip())
        for c, a in zip(completions, expected, strict=True)
    ]


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def numeric_reward(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    answer: Sequence[str] | None = None,
    answers: Sequence[str] | None = None,
    **_: Any,
) -> list[float]:
    """1.0 when the last number in the completion equals the answer as a number ("81",
    " 81.0", "= 81" all match 81; within 1e-6 relative), else 0.0."""
    expected = _answers(answer, answers, prompts, completions, "numeric")
    return [
        float(_numbers_equal(completion_text(c), str(a)))
        for c, a in zip(completions, expected, strict=True)
    ]


def math_reward(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    answer: Sequence[str] | None = None,
    solution: Sequence[str] | None = None,
    answers: Sequence[str] | None = None,
    **_: Any,
) -> list[float | None]:
    """1.0 when the completion's answer is mathematically equal to the row's (``answer``, or
    TRL's ``solution``), by ``math-verify``: ``\\frac{1}{2}``, ``0.5`` and ``\\boxed{2/4}``
    agree, ``(x+1)^2`` and ``x^2+2x+1`` too; 0.0 when not; None when the reference itself does
    not parse (no opinion)."""
    try:
        from math_verify import parse, verify
    except ImportError as err:
        raise ConfigError(
            "the math reward needs math-verify: pip install 'rlx[llm]' (or math-verify)."
        ) from err
    expected = _answers(answer if answer is not None else solution, answers, prompts,
                        completions, "math")  # fmt: skip
    scores: list[float | None] = []
    for completion, reference in zip(completions, expected, strict=True):
        gold = parse(str(reference))
        if not gold:
            scores.append(None)
            continue
        scores.append(float(verify(gold, parse(completion_text(completion)))))
    return scores


FORMAT_PATTERN = r"<think>.*?</think>\s*<answer>.*?</answer>"
"""The default of the ``format`` reward: reasoning in ``<think>`` tags, then the answer in
``<answer>`` tags (the layout of DeepSeek-R1's format reward)."""


def format_reward(pattern: str = FORMAT_PATTERN, name: str = "format") -> RewardFunction:
    """A reward of 1.0 for completions the regular expression ``pattern`` matches whole (dots
    match line breaks; surrounding whitespace is ignored), else 0.0."""
    try:
        compiled = re.compile(pattern, re.DOTALL)
    except re.error as err:
        raise ConfigError(f"format pattern {pattern!r} is not a regular expression: {err}") from err

    def reward(prompts: Sequence[Any], completions: Sequence[Any], **_: Any) -> list[float]:
        return [float(compiled.fullmatch(completion_text(c).strip()) is not None)
                for c in completions]  # fmt: skip

    reward.__name__ = name
    return reward


def python_tests_reward(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    tests: Sequence[str] | None = None,
    answer: Sequence[str] | None = None,
    **kw: Any,
) -> list[float]:
    """Runs each completion against its row's test code (the ``tests`` column, else
    ``answer``) in the sandbox (:mod:`rlx.sandbox`): 1.0 when all tests pass."""
    from rlx.sandbox import python_tests_reward as run

    texts = [completion_text(c) for c in completions]
    return run([completion_text(p) for p in prompts], texts, tests=tests, answer=answer, **kw)


python_tests_reward.runs_model_code = True  # type: ignore[attr-defined]


def _check_python_tests_data(prompts: Sequence[Any], **columns: Any) -> None:
    from rlx.sandbox.reward import check_python_tests_data

    check_python_tests_data([completion_text(p) for p in prompts], **columns)


python_tests_reward.check_data = _check_python_tests_data  # type: ignore[attr-defined]


def stdio_tests_reward(
    prompts: Sequence[Any], completions: Sequence[Any], **columns: Any
) -> list[float]:
    """Runs each completion as a script on its row's inputs (the ``input``/``output`` columns,
    or ``tests`` with input/output pairs) in the sandbox (:mod:`rlx.sandbox`): 1.0 when it
    prints every expected output."""
    from rlx.sandbox import stdio_tests_reward as run

    texts = [completion_text(c) for c in completions]
    return run([completion_text(p) for p in prompts], texts, **columns)


stdio_tests_reward.runs_model_code = True  # type: ignore[attr-defined]


def _check_stdio_tests_data(prompts: Sequence[Any], **columns: Any) -> None:
    from rlx.sandbox.reward import check_stdio_tests_data

    check_stdio_tests_data([completion_text(p) for p in prompts], **columns)


stdio_tests_reward.check_data = _check_stdio_tests_data  # type: ignore[attr-defined]


REWARDS: dict[str, RewardFunction] = {
    "exact-match": exact_match_reward,
    "numeric": numeric_reward,
    "math": math_reward,
    "format": format_reward(),
    "python-tests": python_tests_reward,
    "stdio-tests": stdio_tests_reward,
    "arithmetic-gold": gold_reward,
}
"""Reward functions by name, as the CLI (``--reward math,format``) and ``reward=`` take them."""


VALID_REWARDS = (
    f"a reward is a built-in ({', '.join(sorted(REWARDS))}) or package.module:function naming "
    "a function (prompts, completions, **columns) -> list[float | None]"
)
"""What a reward may be, as the errors about one say it."""

NOT_IMPORTABLE = "<python callable {}: not importable>"
"""How ``config.json`` records a reward function that has no ``package.module:function``
reference (a lambda, a local function, a ``functools.partial``, an object): its name in this
mark, which no resumed run can import, so resuming such a run asks for the function again."""


def get_reward(name_or_callable: str | RewardFunction) -> RewardFunction:
    """The reward function named in :data:`REWARDS`, or the callable itself (a reference
    ``package.module:function`` is :func:`load_reward`'s: importing it runs code)."""
    if callable(name_or_callable):
        return name_or_callable
    if isinstance(name_or_callable, str) and name_or_callable in REWARDS:
        return REWARDS[name_or_callable]
    raise ConfigError(f"reward={name_or_callable!r} is not a known reward; {VALID_REWARDS}.")


def is_reward_reference(text: Any) -> bool:
    """Whether ``text`` names a reward function by ``package.module:function``."""
    return isinstance(text, str) and is_entry_point(text)


def is_not_importable(text: Any) -> bool:
    """Whether ``text`` is the :data:`NOT_IMPORTABLE` mark of a reward function."""
    prefix, _, suffix = NOT_IMPORTABLE.partition("{}")
    return isinstance(text, str) and text.startswith(prefix) and text.endswith(suffix)


def reward_reference(reward: str | RewardFunction) -> str:
    """How ``config.json`` records a reward: a name or reference as given; a callable by its
    built-in name, else by ``package.module:function`` when importing that gives the very
    function back (a function at a module's top level), else by the :data:`NOT_IMPORTABLE`
    mark (a lambda, a local function, a ``functools.partial``, an object)."""
    if not callable(reward):
        return str(reward)
    builtin = next((name for name, known in REWARDS.items() if known is reward), None)
    if builtin is not None:
        return builtin
    path = import_path(reward)
    if path is not None:
        return path
    lambda_ = getattr(reward, "__name__", None) == "<lambda>"
    return NOT_IMPORTABLE.format("lambda" if lambda_ else reward_name(reward))


def load_reward(reference: str) -> RewardFunction:
    """The function a reference ``package.module:function`` names, imported with
    :func:`rlx.core.env_recipe.load_entry_point` (the importer of env entry points).

    Importing runs the module's code: call it for a reference the user gives, or one a run
    folder names once the user consents (``trust_env_code``, ``--trust-env-code``). A
    reference that does not import, names nothing, or names something that is not callable is
    one ConfigError sentence naming it."""
    module, _, attribute = reference.partition(":")
    if not is_reward_reference(reference):
        raise ConfigError(f"reward {reference!r} is not a known reward; {VALID_REWARDS}.")
    try:
        return load_entry_point(reference)
    except EnvError as exc:
        if isinstance(exc.__cause__, ImportError):
            why = f"its module {module!r} does not import ({exc.__cause__})"
        elif "not callable" in str(exc):
            why = "it names something that is not callable"
        else:
            why = f"the module {module!r} has no {attribute!r}"
    except Exception as exc:  # the module's own code raised as it was imported
        why = f"importing its module {module!r} raised {type(exc).__name__}: {exc}"
    raise ConfigError(f"reward {reference!r} cannot be used: {why}; {VALID_REWARDS}.")


def reward_name(reward: RewardFunction) -> str:
    """The name a reward is logged under: its ``__name__``, or its class's for an object."""
    for candidate in (reward, getattr(reward, "func", None)):  # functools.partial: the function
        name = getattr(candidate, "__name__", None)
        if isinstance(name, str) and name != "<lambda>":
            builtin = next((key for key, known in REWARDS.items() if known is reward), None)
            return builtin or name
    return type(reward).__name__


# --- several rewards, weighted ------------------------------------------------------------------


@dataclass
class RewardSet:
    """Reward functions and their weights: ``r_i = sum_k w_k r_k(i)`` over the functions with
    an opinion of sample ``i`` (0 when none has one, as TRL's nansum gives)."""

    functions: list[RewardFunction]
    weights: list[float]

    def __post_init__(self) -> None:
        if not self.functions:
            raise ConfigError("give at least one reward function.")
        if len(self.weights) != len(self.functions):
            raise ConfigError(
                f"reward_weights has {len(self.weights)} weights for {len(self.functions)} "
                "reward functions; give one weight per function."
            )
        names = [reward_name(f) for f in self.functions]
        self.names = [n if names.count(n) == 1 else f"{n}_{i}" for i, n in enumerate(names)]

    @property
    def runs_model_code(self) -> bool:
        """Whether one of the functions executes model-written code (the sandbox is needed)."""
        return any(getattr(f, "runs_model_code", False) for f in self.functions)

    def map(self, wrap: Callable[[RewardFunction], RewardFunction]) -> RewardSet:
        """The same set with every function replaced by ``wrap(function)``."""
        wrapped = RewardSet([wrap(f) for f in self.functions], list(self.weights))
        wrapped.names = list(self.names)
        return wrapped

    def score(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        columns: Mapping[str, Sequence[Any]] | None = None,
        completion_ids: Sequence[Sequence[int]] | None = None,
    ) -> tuple[Tensor, dict[str, float]]:
        """The combined reward ``[N]`` (float32) and each function's mean score (over the
        samples it had an opinion of, 0 when none) as ``reward/<name>``."""
        columns = dict(columns or {})
        if "answer" in columns:  # rlx's older name of the column, which its rewards took
            columns.setdefault("answers", columns["answer"])
        if completion_ids is not None:
            columns.setdefault("completion_ids", list(completion_ids))
        total = torch.zeros(len(completions), dtype=torch.float32)
        metrics: dict[str, float] = {}
        for function, weight, name in zip(self.functions, self.weights, self.names, strict=True):
            values = call_reward(function, prompts, completions, columns)
            seen = [v for v in values if v is not None]
            total += weight * torch.tensor([0.0 if v is None else v for v in values])
            # 0 when it had no opinion of any sample, its share of the total then
            metrics[M.reward_component(name)] = sum(seen) / len(seen) if seen else 0.0
        return total, metrics


def reward_set(
    rewards: Sequence[str | RewardFunction], weights: Sequence[float] | None = None
) -> RewardSet:
    """A :class:`RewardSet` of names or callables, weight 1 each unless ``weights`` are given."""
    functions = [get_reward(r) for r in rewards]
    return RewardSet(functions, [1.0] * len(functions) if weights is None else list(weights))


def call_reward(
    reward: RewardFunction,
    prompts: Sequence[Any],
    completions: Sequence[Any],
    columns: Mapping[str, Sequence[Any]],
) -> list[float | None]:
    """``reward``'s scores, checked: one finite number or None per completion, or a
    :class:`RewardFunctionError` that names the function.

    The call is TRL's, by keyword (``prompts=``, ``completions=``, every column); a function
    whose first two parameters have other names gets them by position, and a function without
    ``**kwargs`` only the columns it names."""
    name = reward_name(reward)
    args, kwargs = _arguments(reward, prompts, completions, columns)
    try:
        values = reward(*args, **kwargs)
    except RLXError:
        raise
    except Exception as exc:
        raise RewardFunctionError(
            f"the reward function {name} raised {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(values, Sequence) or len(values) != len(completions):
        got = len(values) if isinstance(values, Sequence) else type(values).__name__
        raise RewardFunctionError(
            f"the reward function {name} must return one number per completion "
            f"({len(completions)}), got {got}."
        )
    out: list[float | None] = []
    for value in values:
        if value is not None and not math.isfinite(float(value)):
            raise RewardFunctionError(f"the reward function {name} returned NaN or inf.")
        out.append(None if value is None else float(value))
    return out


def _arguments(
    reward: RewardFunction,
    prompts: Sequence[Any],
    completions: Sequence[Any],
    columns: Mapping[str, Sequence[Any]],
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    try:
        params: Mapping[str, inspect.Parameter] = inspect.signature(reward).parameters
    except (TypeError, ValueError):  # a builtin without a signature: TRL's call
        return (), {"prompts": prompts, "completions": completions, **columns}
    if isinstance(reward, functools.partial):
        params = {k: v for k, v in params.items() if k not in reward.keywords}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    keyword = {n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    extra = {k: v for k, v in columns.items() if takes_any or k in keyword}
    if {"prompts", "completions"} <= keyword:
        return (), {"prompts": prompts, "completions": completions, **extra}
    extra = {k: v for k, v in extra.items() if k not in ("prompts", "completions")}
    return (prompts, completions), extra


def _answers(
    answer: Sequence[str] | None,
    answers: Sequence[str] | None,
    prompts: Sequence[Any],
    completions: Sequence[Any],
    name: str,
) -> Sequence[str]:
    expected = answer if answer is not None else answers
    if expected is None:
        raise ConfigError(
            f"the {name} reward needs answers: an 'answer' column, rows {{'prompt', 'answer'}}."
        )
    for other, label in ((completions, "completions"), (expected, "answers")):
        if len(prompts) != len(other):
            raise ConfigError(f"got {len(prompts)} prompts but {len(other)} {label}.")
    return expected


def _numbers_equal(completion: str, answer: str) -> bool:
    found = _NUMBER.findall(completion)
    target = _NUMBER.findall(answer)
    if not found or not target:
        return False
    got, want = float(found[-1]), float(target[-1])
    return abs(got - want) <= 1e-6 * max(1.0, abs(want))


__all__ = [
    "FORMAT_PATTERN",
    "NOT_IMPORTABLE",
    "REWARDS",
    "REWARD_PREFIX",
    "RewardFunction",
    "RewardFunctionError",
    "RewardSet",
    "call_reward",
    "exact_match_reward",
    "format_reward",
    "get_reward",
    "is_not_importable",
    "is_reward_reference",
    "load_reward",
    "math_reward",
    "numeric_reward",
    "python_tests_reward",
    "reward_name",
    "reward_reference",
    "reward_set",
    "stdio_tests_reward",
]
