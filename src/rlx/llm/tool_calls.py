"""Tool calls in a chat model's own format: the tools shown to the model, its calls read back.

A tool is a Python function with type hints and a docstring; the model sees its JSON schema
(``transformers.utils.get_json_schema``, the schema ``apply_chat_template(tools=...)``
takes). How the tools are shown and how a call is written is the chat template's business:

- a template that renders tools (Qwen2.5 and Qwen3, SmolLM3, Hermes, Llama 3.1 and later,
  Mistral: its text reads the ``tools`` variable) gets them through
  ``apply_chat_template(tools=...)`` and shows them in its own words;
- a template that does not (plain ChatML, SmolLM2) gets one system message that lists the
  schemas and asks for the Hermes format below, the most widely trained one; rlx says so
  here rather than dropping the tools silently.

The model's reply is read in the formats those templates train (:func:`parse_tool_calls`):

- Hermes (Qwen, SmolLM3, Hermes and rlx's fallback):
  ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, one block per call;
- Llama 3.x: the whole reply one JSON object ``{"name": ..., "parameters": {...}}``;
- Mistral: ``[TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]``.

Written here because neither library offers it for this use: transformers reads calls only
through a tokenizer's optional ``response_template`` (most chat models ship none), and TRL's
parsers are private to its trainer. Tool markers must survive decoding (tokens not marked
special), as they do in the templates above.

A call the model gets wrong (unknown tool, arguments that are not JSON or do not fit the
function) and a tool that raises are answered with one line that says so, as the tool's
output, and counted as tool errors: a policy that calls badly scores badly, it does not stop
the run. A tool runs in this process with the model's JSON arguments: it is the user's code,
trusted as the reward functions are; rlx's sandboxed Python (:mod:`rlx.sandbox`) is the tool
for running what the model wrote.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rlx.errors import ConfigError

Tool = Callable[..., Any]
"""A tool: a function with type hints and a Google-style docstring (its JSON schema's source)."""

_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
_MISTRAL = "[TOOL_CALLS]"


class ToolError(Exception):
    """What a tool raises to fail with its own words: the message is the model's observation
    as it is (a program's output, say), where any other exception is shown with its type."""


@dataclass(frozen=True)
class ToolCall:
    """One call the model wrote: the tool's name and its arguments; ``error`` is set (and
    the rest may be empty) when the call could not be read."""

    name: str
    arguments: dict[str, Any]
    error: str | None = None


# ============================================================================ showing tools
def tool_schema(tool: Tool) -> dict[str, Any]:
    """The JSON schema ``apply_chat_template(tools=...)`` takes for ``tool``; ConfigError
    naming the function when its hints or docstring cannot give one."""
    from transformers.utils import get_json_schema

    name = getattr(tool, "__name__", repr(tool))
    if not callable(tool):
        raise ConfigError(f"tool {tool!r} is not callable; a tool is a Python function.")
    try:
        return get_json_schema(tool)
    except Exception as error:  # transformers raises several kinds, all about the docstring
        raise ConfigError(
            f"tool {name!r} cannot be shown to the model: {error} (a tool needs type hints on "
            "every argument and a docstring with an Args: section describing each)."
        ) from error


def template_takes_tools(tokenizer: Any) -> bool:
    """Whether the tokenizer's chat template renders a ``tools`` list itself."""
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):
        template = " ".join(str(t) for t in template.values())
    return bool(template) and re.search(r"\btools\b", str(template)) is not None


def tools_system_text(schemas: Sequence[dict[str, Any]]) -> str:
    """The system message that shows ``schemas`` to a model whose template does not, and
    asks for calls in the Hermes format."""
    listed = "\n".join(json.dumps(s["function"], sort_keys=True) for s in schemas)
    return (
        "You can call these tools:\n"
        f"{listed}\n"
        'To call one, write <tool_call>{"name": NAME, "arguments": {...}}</tool_call>; '
        "its answer comes back in the next message. When you know the answer, reply "
        "without a tool call."
    )


def with_tools(
    tokenizer: Any, messages: Sequence[Any], schemas: Sequence[dict[str, Any]] | None
) -> tuple[list[Any], list[dict[str, Any]] | None]:
    """``(messages, tools)`` to render: the template's own tools argument when it takes one,
    else :func:`tools_system_text` added to the first system message (or as one before the
    conversation) and no tools argument."""
    messages = list(messages)
    if not schemas:
        return messages, None
    if template_takes_tools(tokenizer):
        return messages, list(schemas)
    text = tools_system_text(schemas)
    if messages and messages[0].get("role") == "system":
        first = dict(messages[0])
        first["content"] = f"{first.get('content', '')}\n\n{text}".lstrip()
        return [first, *messages[1:]], None
    return [{"role": "system", "content": text}, *messages], None


# ============================================================================ reading calls
def parse_tool_calls(text: str) -> list[ToolCall]:
    """The tool calls in a reply, in order (none: the reply is an answer). Hermes blocks,
    a Mistral ``[TOOL_CALLS]`` list, or a Llama-3 reply that is one JSON call; a block or list
    that is there but cannot be read is one call with ``error`` set."""
    blocks, closed = hermes_blocks(text)
    if blocks:
        return [_call_from_json(block) for block in blocks]
    if not closed:
        return [ToolCall("", {}, "a <tool_call> block is not closed by </tool_call>")]
    if _MISTRAL in text:
        body = text.split(_MISTRAL, 1)[1].strip()
        try:
            listed = _loads(body)
        except ValueError:
            return [ToolCall("", {}, "the [TOOL_CALLS] list is not JSON")]
        if not isinstance(listed, list):
            listed = [listed]
        return [_call_from_value(value) for value in listed]
    stripped = text.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        try:
            value = _loads(stripped)
        except ValueError:
            return []  # braces in an answer are an answer
        if (
            isinstance(value, dict)
            and "name" in value
            and ("parameters" in value or "arguments" in value)
        ):
            return [_call_from_value(value)]
    return []


def hermes_blocks(text: str) -> tuple[list[str], bool]:
    """The bodies of the ``<tool_call>...</tool_call>`` blocks of ``text``, stripped, and
    whether every opened block was closed. One pass of ``str.find`` (linear in the reply: a
    regular expression with lazy groups and whitespace backtracks for minutes on a long
    reply that opens a block and never closes it)."""
    blocks: list[str] = []
    at = 0
    while (start := text.find(_OPEN, at)) != -1:
        end = text.find(_CLOSE, start + len(_OPEN))
        if end == -1:
            return blocks, False
        blocks.append(text[start + len(_OPEN) : end].strip())
        at = end + len(_CLOSE)
    return blocks, True


def _loads(text: str) -> Any:
    """``json.loads``, a nesting too deep for the parser read as not JSON (ValueError): the
    model wrote it, and a RecursionError must not stop the run."""
    try:
        return json.loads(text)
    except RecursionError as error:
        raise ValueError("nested too deep") from error


def _call_from_json(block: str) -> ToolCall:
    try:
        value = _loads(block)
    except ValueError:
        return ToolCall("", {}, "the tool call is not JSON")
    return _call_from_value(value)


def _call_from_value(value: Any) -> ToolCall:
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return ToolCall("", {}, 'a tool call is a JSON object with a "name" string')
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):  # some templates write the arguments as a JSON string
        try:
            arguments = _loads(arguments)
        except ValueError:
            return ToolCall(value["name"], {}, "the arguments are not JSON")
    if not isinstance(arguments, dict):
        return ToolCall(value["name"], {}, "the arguments are not a JSON object")
    return ToolCall(value["name"], arguments)


# ============================================================================ answering calls
def call_tool(call: ToolCall, tools: dict[str, Tool], max_chars: int) -> tuple[str, bool]:
    """``(output, failed)``: the tool's result as text (cut to its last ``max_chars``), or
    one line saying why the call failed (unreadable, unknown tool, arguments that do not fit
    its signature, the tool raised)."""
    if call.error is not None:
        return f"error: {call.error}.", True
    tool = tools.get(call.name)
    if tool is None:
        known = ", ".join(sorted(tools)) or "none"
        return f"error: there is no tool {call.name[:60]!r}; the tools are {known}.", True
    try:
        inspect.signature(tool).bind(**call.arguments)
    except TypeError as error:
        return f"error: {call.name} does not take these arguments ({error}).", True
    try:
        result = tool(**call.arguments)
        output = result if isinstance(result, str) else json.dumps(result, default=str)
    except ToolError as error:
        return _cut(_said(error), max_chars), True
    except (Exception, SystemExit, GeneratorExit) as error:  # the model's observation
        # (a SystemExit too: argparse in a tool must not end the training with status 0)
        text = f"error: {call.name} raised {type(error).__name__}: {_said(error)}"
        return text[:max_chars], True
    return _cut(output, max_chars), False


def _said(error: BaseException) -> str:
    """``str(error)``, or its type's name when even that raises."""
    try:
        return str(error)
    except Exception:
        return f"<{type(error).__name__} that cannot be shown>"


def _cut(text: str, max_chars: int) -> str:
    return "..." + text[-max_chars:] if len(text) > max_chars else text


def tools_by_name(tools: Sequence[Tool]) -> dict[str, Tool]:
    """``{name: tool}``; ConfigError when two tools share a name (the model could not tell
    which it called)."""
    named: dict[str, Tool] = {}
    for tool in tools:
        name = tool_schema(tool)["function"]["name"]
        if name in named:
            raise ConfigError(f"two tools are named {name!r}; give each tool its own name.")
        named[name] = tool
    return named


__all__ = [
    "Tool",
    "ToolCall",
    "ToolError",
    "call_tool",
    "parse_tool_calls",
    "template_takes_tools",
    "tool_schema",
    "tools_by_name",
    "tools_system_text",
    "with_tools",
]
