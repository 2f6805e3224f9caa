"""Multi-turn rollouts: a language model acting in text environments, a batch of episodes at
once.

    ids  = [obs_0] [reply_1] [obs_1] [reply_2] [obs_2] ... [reply_T]
    mask =    0        1        0        1        0            1

Each episode is one token sequence: the first observation as a prompt is encoded
(:func:`rlx.llm.batching.encode_prompt`: ``[bos] + text``, or a conversation's chat template),
then the model's reply (its tokens, up to and with its eos), then the environment's answer,
and so on. ``loss_mask`` is True on the model's tokens only: GRPO over episodes
(:mod:`rlx.llm.episode_grpo`) trains those and takes the KL to the reference on those; the
environment's tokens are context, never targets.

An episode ends when its env says so (``terminated``, or ``truncated`` at its turn budget) or
when the next observation or reply would not fit ``max_episode_tokens`` (then ``truncated``).
Each turn the model says at most ``max_new_tokens`` tokens, ending at its eos.

**The key/value cache is kept across turns.** The batch's context is one transformers cache
(:class:`CachedContext`): each forward pass feeds only what is new (the reply's last token and
the env's answer), never the conversation again. Sequences grow at different rates, so a block
fed at once is right-aligned and padded on its left with masked slots (attention mask 0);
positions count a row's real tokens only, so every token sits where a plain forward pass over
the finished sequence puts it, and the log-probabilities of training read the same
distribution the replies were drawn from (a test checks this).

Per episode: token ids, loss mask, reward (the sum of the per-turn rewards, also kept), number
of turns, whether it was truncated, tool calls and tool errors, invalid actions, success. The
metrics of a batch (:func:`episode_metrics`) are named by the constants below.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from rlx import metrics as M
from rlx.errors import ConfigError
from rlx.llm.batching import EncodedSequence, encode_prompt
from rlx.llm.chat import Message, is_conversation, render_prompt
from rlx.llm.text_env import INVALID_ACTION, SUCCESS, TOOL_CALL, TOOL_ERROR, Observation, TextEnv
from rlx.metrics import (
    EPISODE_TRUNCATED_FRACTION,
    EPISODE_TURNS,
    EVAL_EPISODE_REWARD,
    EVAL_EPISODE_TURNS,
    EVAL_EPISODES,
    EVAL_SUCCESS_HIGH,
    EVAL_SUCCESS_LOW,
    EVAL_SUCCESS_RATE,
    INVALID_ACTION_RATE,
    SUCCESS_RATE,
    TOOL_ERROR_RATE,
    TURN_REWARD,
)

EPISODE_METRICS = (
    EPISODE_TURNS,
    EPISODE_TRUNCATED_FRACTION,
    TOOL_ERROR_RATE,
    INVALID_ACTION_RATE,
    TURN_REWARD,
    SUCCESS_RATE,
    EVAL_SUCCESS_RATE,
    EVAL_SUCCESS_LOW,
    EVAL_SUCCESS_HIGH,
    EVAL_EPISODES,
    EVAL_EPISODE_REWARD,
    EVAL_EPISODE_TURNS,
)
"""Every name this module and :mod:`rlx.llm.episode_grpo` log that rlx.metrics lacks."""


@dataclass
class Episode:
    """One finished episode: its tokens, which of them the model said, and how it went."""

    seed: int
    input_ids: list[int] = field(default_factory=list)
    loss_mask: list[bool] = field(default_factory=list)
    """True on the model's tokens (the targets of the loss), False on the env's"""
    prompt_length: int = 0
    """tokens of the first observation"""
    turn_rewards: list[float] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    """the model's replies as the env read them"""
    observations: list[Observation] = field(default_factory=list)
    """what the env showed: the first observation, then its answer to each reply"""
    sampled_logprobs: list[float] = field(default_factory=list)
    """``log pi(token | context)`` of each model token when it was drawn (at the sampling
    temperature), in order: what a full forward pass over ``input_ids`` must give again"""
    turns: int = 0
    terminated: bool = False
    truncated: bool = False
    success: bool = False
    tool_calls: int = 0
    tool_errors: int = 0
    invalid_actions: int = 0
    cut_turns: int = 0
    """replies cut at their token budget before their eos"""

    @property
    def reward(self) -> float:
        """The episode's return, ``sum_t r_t`` (undiscounted: GRPO scores the whole episode)."""
        return float(sum(self.turn_rewards))

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    @property
    def model_tokens(self) -> int:
        return sum(self.loss_mask)

    def sequence(self) -> EncodedSequence:
        """The episode as a training row (:class:`rlx.llm.batching.EncodedSequence`)."""
        mask = list(self.loss_mask)
        if mask:
            mask[0] = False  # token 0 has no context to be predicted from
        return EncodedSequence(list(self.input_ids), mask, self.prompt_length)


# ============================================================================ transcripts
WORD_JOINER = "\u2060"
"""Put after the first character of a special token's text in the env's answers: the text reads
the same, and no longer tokenizes to that special token."""


def defused(text: str, tokenizer: Any) -> str:
    """``text`` with every special or added token's text of ``tokenizer`` (``<eos>``, a chat
    template's role markers, tool-call tags ...) broken by :data:`WORD_JOINER`, so that it
    tokenizes as plain text. Added tokens count though not marked special: the tokenizer turns
    their text into their ids all the same (``<|im_start|>`` often is one)."""
    # a lone surrogate (a JSON "\\ud800" the model wrote, echoed back) cannot be encoded
    text = text.encode("utf-8", "replace").decode("utf-8")
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    markers = {*(getattr(tokenizer, "all_special_tokens", ()) or ()),
               *(str(getattr(t, "content", t)) for t in added.values())}  # fmt: skip
    for special in sorted(markers, key=len, reverse=True):
        if special and special in text:
            text = text.replace(special, special[0] + WORD_JOINER + special[1:])
    return text


def defused_message(value: Any, tokenizer: Any) -> Any:
    """A message (or any part of one) with every string in it :func:`defused`, however deep:
    a template may render a tool message's ``name``, or content given as a list of parts."""
    if isinstance(value, str):
        return defused(value, tokenizer)
    if isinstance(value, Mapping):
        return {key: defused_message(item, tokenizer) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [defused_message(item, tokenizer) for item in value]
    return value


class Transcript:
    """An episode's tokens as they grow, observation by reply: text observations are encoded
    as they are; a conversation's turns are what its chat template adds after the tokens so
    far (the template must only append, as :mod:`rlx.llm.chat` requires)."""

    def __init__(
        self, tokenizer: Any, episode: Episode, tools: Sequence[dict[str, Any]] | None = None
    ) -> None:
        self.tokenizer, self.episode = tokenizer, episode
        self.tools = list(tools) if tools else None
        self.messages: list[Message] | None = None
        self.rendered = ""
        self.pending_messages: list[Message] = []
        self.pending_text = ""

    def start(self, observation: Observation) -> list[int]:
        """Encode the first observation; its token ids."""
        if self.tools is not None and not is_conversation(observation):
            raise ConfigError(
                "an env with tools must start its episodes with chat messages (the tools are "
                "shown through the chat template), not text."
            )
        self.episode.observations.append(observation)
        # the env's text, first observation included, never becomes a special token
        if isinstance(observation, str):
            observation = defused(observation, self.tokenizer)
        else:
            observation = [defused_message(m, self.tokenizer) for m in observation]
        if is_conversation(observation):
            self.messages = [dict(m) for m in observation]
            self.rendered = render_prompt(self.tokenizer, self.messages, self.tools)
            ids = list(self.tokenizer(self.rendered, add_special_tokens=False)["input_ids"])
        else:
            ids = encode_prompt(self.tokenizer, observation)
        self.episode.input_ids, self.episode.loss_mask = list(ids), [False] * len(ids)
        self.episode.prompt_length = len(ids)
        return ids

    def add_reply(self, tokens: Sequence[int]) -> str:
        """Append the model's reply tokens; the reply's text as the env reads it."""
        self.episode.input_ids += tokens
        self.episode.loss_mask += [True] * len(tokens)
        text: str = self.tokenizer.decode(list(tokens), skip_special_tokens=True)
        if self.messages is not None:
            said: str = self.tokenizer.decode(list(tokens), skip_special_tokens=False)
            self.rendered += said
            # the turn as the model said it, special tokens within it kept (a sampled one
            # mid-reply must render as it was said), its closing eos left to the template
            eos = self.tokenizer.eos_token_id
            body = list(tokens[:-1]) if tokens and tokens[-1] == eos else list(tokens)
            content = self.tokenizer.decode(body, skip_special_tokens=False)
            self.messages.append({"role": "assistant", "content": content})
        return text

    def observation_tokens(self, observation: Observation) -> list[int]:
        """The token ids of the env's answer (not yet appended). The env's text never becomes
        a special token (:func:`defused`): a tool's output that prints ``<eos>`` or a role
        marker cannot end the episode's text or fake a turn of the conversation."""
        if self.messages is None:
            text = observation if isinstance(observation, str) else _as_text(observation)
            text = defused(text, self.tokenizer)
            return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        added = (
            [{"role": "user", "content": defused(observation, self.tokenizer)}]
            if isinstance(observation, str)
            else [defused_message(m, self.tokenizer) for m in observation]
        )
        full = render_prompt(self.tokenizer, [*self.messages, *added], self.tools)
        if not full.startswith(self.rendered):
            raise ConfigError(
                "the chat template renders this conversation differently from the tokens the "
                "model said (it rewrites earlier turns, or its tokens do not decode to their "
                "text), so rlx cannot tell the model's tokens from the environment's; use text "
                "observations or a template that only appends."
            )
        self.pending_messages, self.pending_text = added, full
        return list(
            self.tokenizer(full[len(self.rendered) :], add_special_tokens=False)["input_ids"]
        )

    def add_observation(self, tokens: Sequence[int]) -> None:
        """Append the env's answer (as :meth:`observation_tokens` gave it)."""
        self.episode.input_ids += tokens
        self.episode.loss_mask += [False] * len(tokens)
        if self.messages is not None:
            self.messages.extend(self.pending_messages)
            self.rendered = self.pending_text


def env_tools(env: TextEnv) -> list[dict[str, Any]] | None:
    """The JSON schemas of the tools ``env`` offers (its ``tool_schemas``), None without."""
    schemas = getattr(env, "tool_schemas", None)
    return list(schemas) if schemas else None


def _as_text(messages: list[Message]) -> str:
    return "\n".join(str(m.get("content", "")) for m in messages)


def record_step(episode: Episode, result: tuple[Any, float, bool, bool, dict[str, Any]]) -> None:
    """Count one env step into the episode: its reward, its ending, tool use, invalid actions."""
    _, reward, terminated, truncated, info = result
    episode.turns += 1
    episode.turn_rewards.append(float(reward))
    episode.tool_calls += bool(info.get(TOOL_CALL, False))
    episode.tool_errors += bool(info.get(TOOL_ERROR, False))
    episode.invalid_actions += bool(info.get(INVALID_ACTION, False))
    episode.terminated, episode.truncated = bool(terminated), bool(truncated)
    if terminated or truncated:
        episode.success = bool(info.get(SUCCESS, terminated and episode.reward > 0))


# ============================================================================ the cache
def cache_argument(model: Any) -> tuple[str, bool]:
    """The name ``model.forward`` takes its key/value cache under (``cache`` since
    transformers 5, ``past_key_values`` before) and whether it takes ``logits_to_keep``."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft
    params = inspect.signature(inner.forward).parameters
    return ("cache" if "cache" in params else "past_key_values"), "logits_to_keep" in params


class CachedContext:
    """The key/value cache of ``rows`` growing sequences and each row's next-token logits.

    :meth:`feed` appends a block of new tokens per row (any lengths, none for a row that
    waits): right-aligned, padded on the left with masked slots, at positions that count each
    row's real tokens, so the cache holds exactly what one forward pass over each row's tokens
    would."""

    def __init__(self, model: Any, rows: int, pad_id: int) -> None:
        self.model, self.pad_id = model, pad_id
        self.device = next(model.parameters()).device
        self.cache: Any = None
        self.mask = torch.zeros((rows, 0), dtype=torch.long, device=self.device)
        self.count = torch.zeros(rows, dtype=torch.long, device=self.device)
        self.logits: Tensor | None = None
        self.cache_name, self.keeps_logits = cache_argument(model)

    def feed(self, blocks: Sequence[Sequence[int]]) -> None:
        """Run the new tokens of each row through the model, keeping the cache."""
        width = max(len(b) for b in blocks)
        if width == 0:
            return
        ids = torch.full((len(blocks), width), self.pad_id, dtype=torch.long)
        new = torch.zeros((len(blocks), width), dtype=torch.long)
        for row, block in enumerate(blocks):
            if block:
                ids[row, width - len(block) :] = torch.as_tensor(list(block), dtype=torch.long)
                new[row, width - len(block) :] = 1
        ids, new = ids.to(self.device), new.to(self.device)
        positions = (self.count[:, None] + new.cumsum(1) - 1).clamp(min=0)
        self.mask = torch.cat([self.mask, new], dim=1)
        extra = {"logits_to_keep": 1} if self.keeps_logits else {}
        if self.cache is not None:
            extra[self.cache_name] = self.cache
        out = self.model(input_ids=ids, attention_mask=self.mask, position_ids=positions,
                         use_cache=True, **extra)  # fmt: skip
        cache = out.get("cache")
        self.cache = out.get("past_key_values") if cache is None else cache
        if self.cache is None:
            raise ConfigError(
                f"{type(self.model).__name__} returned no key/value cache; multi-turn episodes "
                "need a model that keeps one (any transformers causal LM with use_cache)."
            )
        logits = out.logits[:, -1].float()
        fed = new[:, -1].bool()[:, None]  # rows with nothing new keep their last logits
        self.logits = logits if self.logits is None else torch.where(fed, logits, self.logits)
        self.count += new.sum(1)


def draw(logits: Tensor, temperature: float, greedy: bool) -> tuple[Tensor, Tensor]:
    """``x ~ softmax(logits / T)`` (argmax when ``greedy``) and ``log softmax(logits / T)[x]``."""
    logp = torch.log_softmax(logits / temperature, dim=-1)
    tokens = logp.argmax(-1) if greedy else torch.multinomial(logp.exp(), 1).squeeze(1)
    return tokens, logp.gather(-1, tokens[:, None]).squeeze(1)


# ============================================================================ rollouts
def context_length(model: Any) -> int | None:
    """The model's context in tokens (None when its config does not say)."""
    config = getattr(model, "config", None)
    return getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)


@torch.no_grad()
def run_episodes(
    model: Any,
    tokenizer: Any,
    envs: Sequence[TextEnv],
    seeds: Sequence[int],
    *,
    max_new_tokens: int = 16,
    max_episode_tokens: int | None = None,
    temperature: float = 1.0,
    greedy: bool = False,
) -> list[Episode]:
    """Play one episode in each of ``envs`` (``envs[i].reset(seeds[i])``) to its end.

    Turns alternate: every unfinished episode's reply is sampled at once (one batched decoding
    step per token, ``x ~ softmax(logits / T)``, or argmax when ``greedy``), cut at its eos or
    ``max_new_tokens``, then each env answers its reply. ``max_episode_tokens`` (None: the
    model's context) caps an episode's whole sequence. The model is in eval mode while it
    plays, as it was after."""
    if len(envs) != len(seeds):
        raise ConfigError(f"got {len(envs)} envs and {len(seeds)} seeds; they must match.")
    if max_new_tokens < 1:
        raise ConfigError(f"max_new_tokens={max_new_tokens} must be >= 1.")
    if temperature <= 0:
        raise ConfigError(f"temperature={temperature} must be > 0.")
    budget = max_episode_tokens or context_length(model) or 1 << 30
    episodes = [Episode(seed) for seed in seeds]
    transcripts = [
        Transcript(tokenizer, e, env_tools(env)) for e, env in zip(episodes, envs, strict=True)
    ]
    pending = [t.start(env.reset(s)) for t, env, s in zip(transcripts, envs, seeds, strict=True)]
    for episode in episodes:
        if not episode.input_ids or len(episode.input_ids) >= budget:
            raise ConfigError(
                f"a first observation of {len(episode.input_ids)} tokens (seed {episode.seed}) "
                f"leaves no room for a reply within max_episode_tokens={budget}; raise it or "
                "shorten the observation."
            )
    was_training = model.training
    model.eval()
    try:
        context = CachedContext(model, len(envs), tokenizer.pad_token_id)
        context.feed(pending)
        while any(not e.done for e in episodes):
            replies, pending = reply_turn(
                context, episodes, max_new_tokens, budget, tokenizer.eos_token_id, temperature,
                greedy,
            )  # fmt: skip
            for i, env in enumerate(envs):
                if episodes[i].done:
                    continue
                pending[i] += answer(env, transcripts[i], replies[i], budget)
                if episodes[i].done:
                    pending[i] = []  # never read again
            context.feed(pending)
    finally:
        model.train(was_training)
    return episodes


def reply_turn(
    context: CachedContext, episodes: Sequence[Episode], max_new_tokens: int, budget: int,
    eos: int | None, temperature: float, greedy: bool,
) -> tuple[list[list[int]], list[list[int]]]:  # fmt: skip
    """One reply per unfinished episode: ``(reply tokens, the tokens not yet fed)``. A row
    whose reply ended keeps waiting (masked) while the others finish theirs; an episode with
    no room left for a reply is truncated here."""
    caps = [0 if e.done else min(max_new_tokens, budget - len(e.input_ids)) for e in episodes]
    for episode, cap in zip(episodes, caps, strict=True):
        if not episode.done and cap <= 0:
            episode.truncated = True
    replies: list[list[int]] = [[] for _ in episodes]
    speaking = [cap > 0 for cap in caps]
    unfed: list[list[int]] = [[] for _ in episodes]
    while any(speaking):
        assert context.logits is not None  # fed before the first reply
        tokens, logps = draw(context.logits, temperature, greedy)
        unfed = [[] for _ in episodes]
        for i, episode in enumerate(episodes):
            if not speaking[i]:
                continue
            token = int(tokens[i])
            replies[i].append(token)
            episode.sampled_logprobs.append(float(logps[i]))
            unfed[i] = [token]
            if token == eos or len(replies[i]) >= caps[i]:
                speaking[i] = False
                episode.cut_turns += token != eos
        if any(speaking):
            context.feed(unfed)
            unfed = [[] for _ in episodes]
    return replies, unfed


def answer(env: TextEnv, transcript: Transcript, reply: list[int], budget: int) -> list[int]:
    """Append ``reply``, let ``env`` answer it, append the answer when the episode goes on and
    it fits the budget (else the episode is truncated); the answer's tokens."""
    episode = transcript.episode
    text = transcript.add_reply(reply)
    episode.replies.append(text)
    result = env.step(text)
    record_step(episode, result)
    episode.observations.append(result[0])
    if episode.done:
        return []
    tokens = transcript.observation_tokens(result[0])
    if len(episode.input_ids) + len(tokens) >= budget:  # no room for the next reply
        episode.truncated = True
        return []
    transcript.add_observation(tokens)
    return tokens


def rollout_groups(
    model: Any,
    tokenizer: Any,
    make_env: Callable[[], TextEnv],
    seeds: Sequence[int],
    group_size: int,
    **kwargs: Any,
) -> list[Episode]:
    """``group_size`` episodes of each seed (GRPO's group: one task, G tries), seed-major:
    episodes ``i * G .. i * G + G - 1`` play ``seeds[i]``, each in a fresh ``make_env()``."""
    group = [seed for seed in seeds for _ in range(group_size)]
    return run_episodes(model, tokenizer, [make_env() for _ in group], group, **kwargs)


def scripted_episodes(
    tokenizer: Any,
    make_env: Callable[[], TextEnv],
    seeds: Sequence[int],
    policy: Callable[[list[Observation]], str],
    *,
    max_episode_tokens: int = 1 << 30,
) -> list[Episode]:
    """Episodes played by a Python ``policy`` (the observations so far -> the reply), laid
    out exactly as :func:`run_episodes` lays out the model's (each reply ends with the eos):
    demonstrations for a warm-up on well-formed replies."""
    eos = tokenizer.eos_token_id
    episodes = []
    for seed in seeds:
        env, episode = make_env(), Episode(seed)
        transcript = Transcript(tokenizer, episode, env_tools(env))
        transcript.start(env.reset(seed))
        while not episode.done:
            said = tokenizer(policy(episode.observations), add_special_tokens=False)["input_ids"]
            reply = [*said, *([eos] if eos is not None else [])]
            answer(env, transcript, reply, max_episode_tokens)
        episodes.append(episode)
    return episodes


# ============================================================================ metrics
def episode_metrics(episodes: Sequence[Episode]) -> dict[str, float]:
    """The batch's figures: mean turns, truncated share, reward per turn, invalid-action
    rate, success rate, model tokens per episode (``response_length``), replies cut at their
    token budget (``truncated_fraction``), and with tool calls the tool error rate."""
    n = max(len(episodes), 1)
    turns = sum(e.turns for e in episodes)
    calls = sum(e.tool_calls for e in episodes)
    out = {
        EPISODE_TURNS: turns / n,
        EPISODE_TRUNCATED_FRACTION: sum(e.truncated for e in episodes) / n,
        TURN_REWARD: sum(e.reward for e in episodes) / max(turns, 1),
        INVALID_ACTION_RATE: sum(e.invalid_actions for e in episodes) / max(turns, 1),
        SUCCESS_RATE: sum(e.success for e in episodes) / n,
        M.RESPONSE_LENGTH: sum(e.model_tokens for e in episodes) / n,
        M.TRUNCATED_FRACTION: sum(e.cut_turns for e in episodes) / max(turns, 1),
    }
    if calls:
        out[TOOL_ERROR_RATE] = sum(e.tool_errors for e in episodes) / calls
    return out


__all__ = [
    "EPISODE_METRICS",
    "EPISODE_TRUNCATED_FRACTION",
    "EPISODE_TURNS",
    "EVAL_SUCCESS_RATE",
    "INVALID_ACTION_RATE",
    "SUCCESS_RATE",
    "TOOL_ERROR_RATE",
    "TURN_REWARD",
    "CachedContext",
    "Episode",
    "Transcript",
    "episode_metrics",
    "rollout_groups",
    "run_episodes",
    "scripted_episodes",
]
