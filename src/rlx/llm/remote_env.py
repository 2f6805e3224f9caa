"""Remote text environments: OpenEnv-style servers seen as a :class:`~rlx.llm.text_env.TextEnv`.

Meta's OpenEnv serves an environment over HTTP with two calls, each answered with one JSON
object that OpenEnv's clients read as a ``StepResult``:

    POST {base_url}/reset   body {} or {"seed": n}
    POST {base_url}/step    body {"action": ACTION}        (ACTION: a JSON object)
    answer of each          {"observation": ..., "reward": number or null, "done": bool}

Three pieces here:

- :class:`OpenEnvTextEnv`: any client with ``reset()`` and ``step(action)`` that return such a
  result (an object with those three attributes, or a dict with those keys: OpenEnv's own
  clients, :class:`HTTPEnvClient`, a fake in a test) turned into a text env, given ``render``
  (observation -> text or chat messages) and ``parse`` (the model's reply -> an action, None
  when it cannot read one);
- :class:`HTTPEnvClient`: the protocol above spoken with the standard library's ``urllib``,
  every failure of the server or the network an :class:`~rlx.errors.EnvError`;
- :func:`openenv_text_env`: the two together, with defaults for a text server such as
  OpenEnv's echo env.

Why by hand: OpenEnv is not a dependency of rlx, and its client brings ``requests`` (or a
WebSocket stack) and Docker helpers a trainer does not need. The protocol is two POSTs of
JSON, so a stdlib client keeps the integration optional and its failure modes in view: a
server is code rlx does not control, so each answer is size-limited, time-limited and checked
field by field before training sees it, and no redirect is followed (the standard library
would follow one to any host over http, https or ftp, and reads a redirect's whole body first).

Which servers this client fits: those that keep the episode ``/reset`` started for the next
``/step``, as OpenEnv's first HTTP server did (it wrapped one env) and as a hand-written
server does. OpenEnv's current server answers ``/reset`` and ``/step`` over HTTP with a fresh
env each (stateless) and keeps episodes only in WebSocket sessions (``/ws``), and in its
production mode serves no ``/reset`` or ``/step`` at all: for it, hand OpenEnv's own client
(``EnvClient(...).sync()``) to :class:`OpenEnvTextEnv`, as :func:`openenv_text_env` shows.

Such a server holds one episode at a time: episodes that run side by side
(:func:`rlx.llm.episodes.run_episodes` plays a batch at once, GRPO's groups are G episodes of
one seed) need one server, so one URL, each; a ``make_env`` that hands out URLs from a pool of
servers does that. OpenEnv's ``ResetRequest`` takes seeds >= 0.
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import inspect
import json
import math
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from rlx.errors import ConfigError, EnvError
from rlx.llm.text_env import (
    INVALID_ACTION,
    SUCCESS,
    Observation,
    StepResult,
    check_turns,
    invalid_step,
    out_of_turns,
)

SHOWN_CHARS = 200
"""How much of a server's body (or of a bad value) an error sentence quotes."""
READ_CHUNK = 65_536
"""Bytes asked of the socket at a time while a body is read."""
WATCHDOG_GRACE_S = 1.0
"""How long past ``timeout_s`` the watchdog waits for a request before giving it up."""


@dataclasses.dataclass(frozen=True)
class RemoteStep:
    """One answer of an OpenEnv-style server, checked: OpenEnv's ``StepResult`` fields."""

    observation: Any
    reward: float | None
    done: bool


# ============================================================================ the adapter
class OpenEnvTextEnv:
    """An OpenEnv-style client as a text env: ``client.reset()`` and ``client.step(action)``
    each return a result with ``observation``, ``reward`` (None counts as 0) and ``done`` (an
    object with those attributes, or a dict with those keys).

    ``render(observation)`` shows an observation to the model (text, or chat messages);
    ``parse(reply)`` reads the model's reply as the action the client's ``step`` takes (None,
    or a ValueError, TypeError, KeyError or IndexError, when it cannot). An unreadable reply is
    answered with ``"invalid action ...; "`` and the last observation again, reward
    ``invalid_reward``, ``info["invalid_action"]``; the server is not called, and the reply
    costs a turn, as :class:`~rlx.llm.text_env.GymTextEnv` does. ``terminated`` is the
    server's ``done``; ``truncated`` is the turn budget ``max_turns`` spent first (None: no
    budget). On the step that ends the episode, ``info["success"]`` is the result's own
    ``success`` (an attribute or key of the result, then of its observation) when it carries
    one, else whether that step's reward is > 0.

    ``reset(seed)`` hands ``seed`` to the client's ``reset`` when its signature takes a
    ``seed`` (or ``**kwargs``, as OpenEnv's newer clients do); otherwise it calls ``reset()``
    and the seed is lost. A server that ignores seeds (OpenEnv's first HTTP server did; its
    current ``ResetRequest`` takes one, which each env may use or not) then draws a different
    task for each episode of one seed, so GRPO's group baseline, which assumes G tries of
    the same task, compares different tasks: its advantages then mix task difficulty into the
    signal. Check that your server honours the seed before training GRPO on it.

    The client's failures (a server down, a malformed answer) are raised, never turned into
    observations: they are not the model's doing. A client whose ``reset`` returns a coroutine
    (OpenEnv's async ``EnvClient``) must be made synchronous first, with its ``.sync()``."""

    def __init__(
        self,
        client: Any,
        *,
        render: Callable[[Any], Observation],
        parse: Callable[[str], Any],
        max_turns: int | None = None,
        invalid_reward: float = 0.0,
    ) -> None:
        check_turns(max_turns)
        for method in ("reset", "step"):
            if not callable(getattr(client, method, None)):
                raise ConfigError(
                    f"{type(client).__name__} has no {method}() method; an OpenEnv-style "
                    "client needs reset() and step(action), each returning an observation, "
                    "a reward and done."
                )
        self.client, self.render, self.parse = client, render, parse
        self.max_turns, self.invalid_reward = max_turns, invalid_reward
        self.takes_seed = takes_seed(client.reset)
        self.turn = 0
        self.last: Any = None

    @property
    def name(self) -> str:
        url = getattr(self.client, "base_url", None)
        return f"openenv:{url}" if isinstance(url, str) else f"openenv:{type(self.client).__name__}"

    def reset(self, seed: int) -> Observation:
        self.turn = 0
        result = self.client.reset(seed=seed) if self.takes_seed else self.client.reset()
        self.last = self._observation(result, "reset")
        return self.render(self.last)

    def step(self, action: str) -> StepResult:
        self.turn += 1
        move = self._read(action)
        if move is None:
            return invalid_step(action, self.render(self.last), self.turn, self.max_turns,
                                self.invalid_reward)  # fmt: skip
        result = self.client.step(move)
        self.last = self._observation(result, "step")
        reward, done = _reward(field_of(result, "reward")), field_of(result, "done")
        if not isinstance(done, bool):
            raise EnvError(
                f"{type(self.client).__name__}.step returned done={_short(done)}; it must be "
                "True or False."
            )
        info: dict[str, Any] = {INVALID_ACTION: False}
        if done:
            carried = field_of(result, SUCCESS, field_of(self.last, SUCCESS))
            info[SUCCESS] = bool(carried) if carried is not None else reward > 0
        truncated = out_of_turns(self.turn, self.max_turns, done)
        return self.render(self.last), reward, done, truncated, info

    def close(self) -> None:
        """Close the client, when it has a ``close()``."""
        close = getattr(self.client, "close", None)
        if callable(close):
            close()

    def _observation(self, result: Any, call: str) -> Any:
        if inspect.isawaitable(result):
            if inspect.iscoroutine(result):
                result.close()  # never awaited: close it so Python does not warn
            raise ConfigError(
                f"{type(self.client).__name__}.{call} returned an awaitable; an async client "
                "(OpenEnv's EnvClient) must be made synchronous first, with its .sync()."
            )
        return field_of(result, "observation")

    def _read(self, text: str) -> Any:
        """The action ``text`` names, or None: ``parse`` could not read it, or the client's
        ``check_action`` (when it has one) says it cannot send it."""
        try:
            move = self.parse(text)
            check = getattr(self.client, "check_action", None)
            if move is not None and callable(check):
                check(move)
        except (ValueError, TypeError, KeyError, IndexError):
            return None
        return move


def takes_seed(reset: Callable[..., Any]) -> bool:
    """Whether ``reset`` takes a ``seed`` keyword (named, or through ``**kwargs``)."""
    try:
        params = inspect.signature(reset).parameters.values()
    except (TypeError, ValueError):  # a builtin or C function without a signature
        return False
    return any(
        (p.name == "seed" and p.kind is not p.POSITIONAL_ONLY) or p.kind is p.VAR_KEYWORD
        for p in params
    )


def field_of(result: Any, name: str, default: Any = None) -> Any:
    """``result[name]`` of a mapping, ``result.name`` of anything else, or ``default``."""
    if isinstance(result, Mapping):
        return result.get(name, default)
    return getattr(result, name, default)


def _reward(value: Any) -> float:
    """A step's reward as a float: None counts as 0; anything but a finite number is refused."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value):
        raise EnvError(
            f"the env returned reward={_short(value)}; it must be a finite number or None."
        )
    return float(value)


def _finite(value: int | float) -> bool:
    """Whether ``value`` is a finite float once converted (an integer of 400 digits is not:
    it overflows a float)."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _short(value: Any) -> str:
    """``repr(value)``, cut to :data:`SHOWN_CHARS` characters for an error sentence."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."


# ============================================================================ HTTP client
class HTTPEnvClient:
    """The OpenEnv HTTP protocol with the standard library: ``reset(seed=None)`` posts ``{}``
    (or ``{"seed": seed}``) to ``{base_url}/reset``, ``step(action)`` posts ``{"action":
    action}`` to ``{base_url}/step``; each returns the server's answer as a
    :class:`RemoteStep`.

    What the server answers is checked before it is returned, and every failure is an
    :class:`~rlx.errors.EnvError` that names the URL: the connection refused or lost, no answer
    within ``timeout_s`` (the longest wait for any byte, and the longest the body may take to
    arrive), an HTTP status >= 300 (the first characters of its body quoted; a redirect is
    never followed, to any host or scheme), a body over ``max_response_bytes`` (at most that
    many bytes and one more are read), a body that is not a JSON object, a missing
    ``observation`` or ``done``, a ``reward`` that is not a finite number or null, a ``done``
    that is not a boolean. ``headers`` are sent with every request (an ``Authorization`` token
    for a hosted env)."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 30.0,
        max_response_bytes: int = 1_000_000,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.base_url = check_base_url(base_url)
        if not timeout_s > 0:
            raise ConfigError(f"timeout_s={timeout_s} must be > 0 (seconds).")
        if max_response_bytes < 1:
            raise ConfigError(f"max_response_bytes={max_response_bytes} must be >= 1.")
        self.timeout_s, self.max_response_bytes = float(timeout_s), int(max_response_bytes)
        self.headers = dict(headers or {})
        self.connections: list[http.client.HTTPConnection] = []
        self.opener = http_only_opener(self.connections)

    def reset(self, seed: int | None = None) -> RemoteStep:
        """Start an episode; ``seed`` is sent when given (a server may ignore it)."""
        return self.post("reset", {} if seed is None else {"seed": int(seed)})

    def step(self, action: Any) -> RemoteStep:
        """Send one action (a JSON-able value, usually a dict; a dataclass or a pydantic model
        is sent as its fields)."""
        return self.post("step", {"action": jsonable(action)})

    def check_action(self, action: Any) -> None:
        """ValueError or TypeError when ``action`` cannot be sent as JSON (a NaN that ``parse``
        read from the model's reply, an object): :class:`OpenEnvTextEnv` then answers the reply
        as unreadable instead of raising for what the model wrote."""
        json.dumps(jsonable(action), allow_nan=False)

    def post(self, route: str, body: dict[str, Any]) -> RemoteStep:
        """POST ``body`` as JSON to ``{base_url}/{route}``; the answer, checked."""
        url = f"{self.base_url}/{route}"
        try:
            data = json.dumps(body, allow_nan=False).encode()
        except (TypeError, ValueError) as error:
            raise ConfigError(
                f"the action for {url} is not JSON ({error}); parse must return a JSON-able "
                "value (a dict of strings, numbers, lists)."
            ) from None
        request = urllib.request.Request(
            url,
            data=data,
            method="POST",
            headers={
                **self.headers,
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
        )
        deadline = time.monotonic() + self.timeout_s
        outcome: dict[str, Any] = {}
        # the whole exchange in a worker, watched: a socket timeout bounds each read, not a
        # server that answers "100 Continue" forever or trickles its headers byte by byte
        worker = threading.Thread(
            target=self._exchange, args=(request, url, deadline, outcome), daemon=True
        )
        self.connections.clear()
        worker.start()
        worker.join(self.timeout_s + WATCHDOG_GRACE_S)
        if worker.is_alive():
            for connection in self.connections:  # ends the worker's blocked read
                with contextlib.suppress(OSError, AttributeError):
                    connection.sock.shutdown(socket.SHUT_RDWR)
            raise EnvError(
                f"the env server at {url} did not answer within timeout_s={self.timeout_s:g} s "
                "(it kept the connection busy without finishing its answer)."
            )
        if "error" in outcome:
            raise outcome["error"]
        return check_answer(outcome["raw"], url)

    def _exchange(
        self, request: urllib.request.Request, url: str, deadline: float, outcome: dict[str, Any]
    ) -> None:
        """Send ``request`` and read its answer into ``outcome["raw"]``, or the EnvError into
        ``outcome["error"]`` (run in :meth:`post`'s watched worker)."""
        try:
            with self.opener.open(request, timeout=self.timeout_s) as response:
                outcome["raw"] = self._read_body(response, url, deadline)
        except urllib.error.HTTPError as error:
            outcome["error"] = self._status_error(url, error)
        except urllib.error.URLError as error:
            outcome["error"] = self._network_error(url, error.reason)
        except (OSError, http.client.HTTPException) as error:
            outcome["error"] = self._network_error(url, error)
        except EnvError as error:
            outcome["error"] = error
        except Exception as error:  # anything else the server's bytes provoke is its fault
            outcome["error"] = EnvError(
                f"the env server at {url} sent an answer that could not be read "
                f"({type(error).__name__}: {str(error)[:SHOWN_CHARS]})."
            )

    def _read_body(self, response: Any, url: str, deadline: float) -> bytes:
        length = getattr(response, "length", None)  # Content-Length as http.client read it
        if isinstance(length, int) and length > self.max_response_bytes:
            raise EnvError(
                f"the env server at {url} announced a body of {length} bytes, more than "
                f"max_response_bytes={self.max_response_bytes}; raise the limit if its "
                "observations are that large."
            )
        return read_limited(response, url, self.max_response_bytes, deadline, self.timeout_s)

    def _status_error(self, url: str, error: urllib.error.HTTPError) -> EnvError:
        try:
            head = error.read(4 * SHOWN_CHARS).decode("utf-8", "replace")[:SHOWN_CHARS]
        except (OSError, http.client.HTTPException, ValueError):
            head = ""
        finally:
            error.close()
        if 300 <= error.code < 400:
            location = error.headers.get("Location", "") if error.headers else ""
            return EnvError(
                f"the env server at {url} answered a redirect (HTTP {error.code}) to "
                f"{location[:SHOWN_CHARS]!r}, which rlx does not follow; give the final URL "
                "as base_url."
            )
        return EnvError(f"the env server at {url} answered HTTP {error.code}: {head!r}.")

    def _network_error(self, url: str, reason: Any) -> EnvError:
        if isinstance(reason, ConnectionRefusedError):
            return EnvError(
                f"the env server at {url} refused the connection; is it running, on that port?"
            )
        if isinstance(reason, (TimeoutError, socket.timeout)):
            return EnvError(
                f"the env server at {url} did not answer within timeout_s={self.timeout_s:g} s."
            )
        return EnvError(
            f"the env server at {url} could not be reached or read ({str(reason)[:SHOWN_CHARS]})."
        )


def check_base_url(base_url: str) -> str:
    """``base_url`` without its trailing ``/``; ConfigError unless it is an http:// or https://
    URL with a host, no user or password, no query and no fragment."""
    if not isinstance(base_url, str):
        raise ConfigError(f"base_url={base_url!r} must be a string, an http:// or https:// URL.")
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme not in ("http", "https"):
        raise ConfigError(
            f"base_url={base_url[:SHOWN_CHARS]!r} must be an http:// or https:// URL (an "
            "OpenEnv server's address, such as http://localhost:8000)."
        )
    if not parts.hostname:
        raise ConfigError(f"base_url={base_url[:SHOWN_CHARS]!r} names no host.")
    if parts.username is not None or parts.password is not None:
        raise ConfigError(
            "base_url names a user or password; pass credentials as headers={'Authorization': "
            "...} instead, so they never appear in a URL or an error message."
        )
    if parts.query or parts.fragment:
        raise ConfigError(
            f"base_url={base_url[:SHOWN_CHARS]!r} has a query or fragment; give the server's "
            "base address, to which /reset and /step are appended."
        )
    return base_url.rstrip("/")


def http_only_opener(
    connections: list[http.client.HTTPConnection] | None = None,
) -> urllib.request.OpenerDirector:
    """A urllib opener that speaks http and https only (no file, ftp or data handler) and
    follows no redirect: a 3xx answer is an HTTPError like any status >= 400. Proxies are
    taken from the environment, as urllib's default opener takes them. Each connection it
    opens is appended to ``connections`` (so a watchdog can shut its socket)."""
    opener = urllib.request.OpenerDirector()
    kept = connections if connections is not None else []
    for handler in (
        urllib.request.ProxyHandler(),
        urllib.request.UnknownHandler(),
        _RecordingHTTPHandler(kept),
        _RecordingHTTPSHandler(kept),
        urllib.request.HTTPDefaultErrorHandler(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener


class _RecordingHTTPHandler(urllib.request.HTTPHandler):
    """urllib's http handler, each connection it opens kept in ``connections``."""

    def __init__(self, connections: list[http.client.HTTPConnection]) -> None:
        super().__init__()
        self.connections = connections

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        def connect(host: str, **kwargs: Any) -> http.client.HTTPConnection:
            connection = http.client.HTTPConnection(host, **kwargs)
            self.connections.append(connection)
            return connection

        return self.do_open(connect, req)


class _RecordingHTTPSHandler(urllib.request.HTTPSHandler):
    """urllib's https handler, each connection it opens kept in ``connections``."""

    def __init__(self, connections: list[http.client.HTTPConnection]) -> None:
        super().__init__()
        self.connections = connections

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        def connect(host: str, **kwargs: Any) -> http.client.HTTPConnection:
            connection = http.client.HTTPSConnection(host, **kwargs)
            self.connections.append(connection)
            return connection

        return self.do_open(connect, req, context=self._context)  # type: ignore[attr-defined]


def read_limited(stream: Any, url: str, limit: int, deadline: float, timeout_s: float) -> bytes:
    """At most ``limit`` bytes of ``stream``: EnvError as soon as byte ``limit + 1`` arrives,
    or when the body is still arriving at ``deadline`` (a server that trickles it)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = stream.read1(min(READ_CHUNK, limit + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise EnvError(
                f"the env server at {url} answered more than max_response_bytes={limit} bytes; "
                "raise the limit if its observations are that large."
            )
        if time.monotonic() > deadline:
            raise EnvError(
                f"the env server at {url} did not answer within timeout_s={timeout_s:g} s (its "
                f"body was still arriving after {size} bytes)."
            )


def check_answer(raw: bytes, url: str) -> RemoteStep:
    """The server's body read as ``{"observation", "reward", "done"}``, or EnvError."""
    try:
        payload = json.loads(raw)
    except (ValueError, RecursionError) as error:  # JSONDecodeError and UnicodeDecodeError
        head = raw[: 4 * SHOWN_CHARS].decode("utf-8", "replace")[:SHOWN_CHARS]
        reason = "nested too deep" if isinstance(error, RecursionError) else str(error)[:80]
        raise EnvError(
            f"the env server at {url} answered a body that is not JSON ({reason}): {head!r}."
        ) from None
    if not isinstance(payload, dict):
        raise EnvError(
            f"the env server at {url} answered {_short(payload)}, not a JSON object with "
            "observation, reward and done."
        )
    for name in ("observation", "done"):
        if name not in payload:
            raise EnvError(
                f"the env server at {url} answered without the {name!r} field; an OpenEnv "
                f"server answers observation, reward and done (got {_short(sorted(payload))[:80]})."
            )
    reward, done = payload.get("reward"), payload["done"]
    if reward is not None and (
        isinstance(reward, bool) or not isinstance(reward, (int, float)) or not _finite(reward)
    ):
        raise EnvError(
            f"the env server at {url} answered reward={_short(reward)}; it must be a finite "
            "number or null."
        )
    if not isinstance(done, bool):
        raise EnvError(
            f"the env server at {url} answered done={_short(done)}; it must be true or false."
        )
    return RemoteStep(payload["observation"], None if reward is None else float(reward), done)


def jsonable(action: Any) -> Any:
    """``action`` as a value :func:`json.dumps` takes: a pydantic model's ``model_dump()``, a
    dataclass's fields, anything else as it is."""
    if hasattr(action, "model_dump") and callable(action.model_dump):
        return action.model_dump()
    if dataclasses.is_dataclass(action) and not isinstance(action, type):
        return dataclasses.asdict(action)
    return action


# ============================================================================ the factory
TEXT_FIELDS = ("text", "message", "echoed_message")
"""The fields of an observation that :func:`observation_text` shows, the first found."""


def observation_text(observation: Any) -> str:
    """An observation as text: itself when it is text, else its first text field of
    :data:`TEXT_FIELDS` (``echoed_message`` is what OpenEnv's echo env answers), else its JSON."""
    if isinstance(observation, str):
        return observation
    for name in TEXT_FIELDS:
        value = field_of(observation, name)
        if isinstance(value, str):
            return value
    try:
        return json.dumps(jsonable(observation), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(observation)


def message_action(reply: str) -> dict[str, str]:
    """The reply as ``{"message": reply}``: the action of OpenEnv's echo env (``EchoAction``,
    one ``message`` field), the shape a text-in, text-out server most often reads."""
    return {"message": reply}


def openenv_text_env(
    base_url: str,
    *,
    render: Callable[[Any], Observation] = observation_text,
    parse: Callable[[str], Any] = message_action,
    max_turns: int | None = None,
    **client_kwargs: Any,
) -> OpenEnvTextEnv:
    """A text env on the OpenEnv server at ``base_url``: :class:`OpenEnvTextEnv` over
    :class:`HTTPEnvClient` (``client_kwargs``: ``timeout_s``, ``max_response_bytes``,
    ``headers``). The defaults suit a text server such as OpenEnv's echo env: the model sees
    :func:`observation_text` and each reply is sent as ``{"message": reply}``
    (:func:`message_action`, which reads every reply, so none is invalid).

    ::

        env = openenv_text_env("http://localhost:8000", max_turns=4)
        first = env.reset(seed=0)
        observation, reward, terminated, truncated, info = env.step("hello")

    With the ``openenv`` package installed, its own clients already have ``reset`` and
    ``step`` returning a ``StepResult``, so :class:`OpenEnvTextEnv` takes them as they are::

        from echo_env import EchoAction, EchoEnv       # OpenEnv's echo env client

        client = EchoEnv(base_url="http://localhost:8000").sync()
        env = OpenEnvTextEnv(client, render=lambda obs: obs.echoed_message,
                             parse=lambda reply: EchoAction(message=reply), max_turns=4)
    """
    return OpenEnvTextEnv(
        HTTPEnvClient(base_url, **client_kwargs), render=render, parse=parse, max_turns=max_turns
    )


__all__ = [
    "HTTPEnvClient",
    "OpenEnvTextEnv",
    "RemoteStep",
    "check_answer",
    "check_base_url",
    "http_only_opener",
    "jsonable",
    "message_action",
    "observation_text",
    "openenv_text_env",
    "read_limited",
    "takes_seed",
]
