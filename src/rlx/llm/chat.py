"""Conversations through the tokenizer's chat template: a prompt, a completion, the turns a
model learns to say.

A conversation is a list of ``{"role", "content"}`` messages. The template renders it as text
(special tokens included as text), which the tokenizer then encodes; rlx never guesses a
model's format. Three renderings serve every stage:

- :func:`render_prompt`: the conversation so far plus the *generation prompt* (the opening of
  an assistant turn), what the model continues;
- :func:`render_completion`: the text the template adds for the completion's turns after that
  prompt;
- :func:`segments`: a whole conversation cut into the text before each assistant turn and the
  turn itself, so the loss covers the assistant's tokens only.

They rely on one property of a template, true of the usual ones (ChatML, Llama's, Mistral's):
rendering a conversation starts with the rendering of its beginning. A template that rewrites
earlier turns (e.g. drops past reasoning) is a clear error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard, Union

from rlx.errors import ConfigError
from rlx.llm.tool_calls import with_tools

Message = dict[str, Any]
"""One turn of a conversation: ``{"role": "user" | "assistant" | "system", "content": str}``."""
Prompt = Union[str, list[Message]]  # noqa: UP007 (a runtime alias: py310 lacks `type X = ...`)
"""A prompt: plain text, or a conversation the chat template renders."""


def is_conversation(value: Any) -> TypeGuard[list[Message]]:
    """Whether ``value`` is a list of messages (dicts with a ``role``)."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(m, Mapping) and "role" in m for m in value)
    )


def render(
    tokenizer: Any,
    messages: Sequence[Any],
    generation_prompt: bool = False,
    tools: Sequence[dict[str, Any]] | None = None,
) -> str:
    """The chat template's text of ``messages``, with the generation prompt when asked, and
    ``tools`` (JSON schemas) shown as :func:`rlx.llm.tool_calls.with_tools` says."""
    if getattr(tokenizer, "chat_template", None) is None:
        raise ConfigError(
            "conversational data needs a tokenizer with a chat template, and this model's has "
            "none (tokenizer_config.json holds no chat_template); give text rows or a chat model."
        )
    shown, template_tools = with_tools(tokenizer, messages, tools)
    extra = {} if template_tools is None else {"tools": template_tools}
    return tokenizer.apply_chat_template(
        shown, tokenize=False, add_generation_prompt=generation_prompt, **extra
    )


def render_prompt(
    tokenizer: Any, messages: Sequence[Any], tools: Sequence[dict[str, Any]] | None = None
) -> str:
    """The prompt text a model continues: ``messages`` and the generation prompt."""
    return render(tokenizer, messages, generation_prompt=True, tools=tools)


def render_completion(tokenizer: Any, prompt: Sequence[Any], completion: Any) -> str:
    """The text the template adds after :func:`render_prompt` for the completion's messages
    (a list of assistant messages, or a string taken as one assistant message)."""
    if isinstance(completion, str):
        completion = [{"role": "assistant", "content": completion}]
    before = render_prompt(tokenizer, prompt)
    full = render(tokenizer, [*prompt, *completion])
    return _after(before, full)


def segments(tokenizer: Any, messages: Sequence[Any]) -> list[tuple[str, bool]]:
    """``messages`` rendered and cut into ``(text, is_assistant_turn)`` pieces, in order: the
    text before each assistant turn (up to its generation prompt), then the turn."""
    full = render(tokenizer, messages)
    pieces: list[tuple[str, bool]] = []
    start = 0
    for i, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        before = render(tokenizer, messages[:i], generation_prompt=True)
        through = render(tokenizer, messages[: i + 1])
        _after(before, through)
        _after(through, full)
        if len(before) < start:
            raise _not_a_prefix()
        pieces.append((full[start : len(before)], False))
        pieces.append((full[len(before) : len(through)], True))
        start = len(through)
    pieces.append((full[start:], False))
    return [(text, trained) for text, trained in pieces if text]


def completion_message(text: str) -> list[dict[str, str]]:
    """A sampled completion of a conversational prompt as TRL gives it to reward functions:
    one assistant message."""
    return [{"role": "assistant", "content": text}]


def completion_text(completion: Any) -> str:
    """The text of a completion as a reward function receives it: the string itself, or the
    content of its last message."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    raise ConfigError(f"a completion must be text or a list of messages, got {completion!r}.")


def _after(before: str, full: str) -> str:
    if not full.startswith(before):
        raise _not_a_prefix()
    return full[len(before) :]


def _not_a_prefix() -> ConfigError:
    return ConfigError(
        "this chat template renders the start of a conversation differently once later turns "
        "follow (it rewrites earlier turns), so rlx cannot tell which tokens are the "
        "assistant's; give text rows, or a template that only appends."
    )


__all__ = [
    "Message",
    "Prompt",
    "completion_message",
    "completion_text",
    "is_conversation",
    "render",
    "render_completion",
    "render_prompt",
    "segments",
]
