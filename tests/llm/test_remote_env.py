"""OpenEnv-style remote envs: a real local HTTP server plays a seeded guessing game through
the stdlib client and the text-env adapter, and a hostile server tries each way an answer can
go wrong (not JSON, an error status, a flood, a hang, a trickle, missing or mistyped fields,
redirects to a file or another port); every verdict is an EnvError naming the URL, and nothing
the model writes is ever raised."""

from __future__ import annotations

import contextlib
import io
import json
import random
import socket
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

pytest.importorskip("transformers")

from rlx import llm
from rlx.errors import ConfigError, EnvError
from rlx.llm.episodes import run_episodes
from rlx.llm.remote_env import (
    HTTPEnvClient,
    OpenEnvTextEnv,
    RemoteStep,
    message_action,
    observation_text,
    openenv_text_env,
    read_limited,
    takes_seed,
)
from rlx.llm.text_env import INVALID_ACTION, SUCCESS, TextEnv

HUGE = 10_000_000
"""Bytes of the flooding answer: ten times the client's default limit."""
GAME_STEPS = 5
"""The server's own episode length: it answers done after this many guesses."""


# ============================================================================ the servers
class Game:
    """Guess the number in 1..7, drawn from the seed; each guess answered higher/lower/correct,
    reward 1 when found; done when found or after GAME_STEPS guesses."""

    def __init__(self) -> None:
        self.target, self.steps = 1, 0

    def reset(self, body: dict) -> dict:
        self.target = random.Random(body.get("seed", 0)).randint(1, 7)
        self.steps = 0
        return {"observation": {"text": "guess 1-7: "}, "reward": None, "done": False}

    def step(self, body: dict) -> dict:
        self.steps += 1
        message = str(body["action"]["message"]).strip()
        if not message.isdigit():
            text, reward, found = "a number 1-7: ", 0.0, False
        else:
            guess = int(message)
            found = guess == self.target
            text = "correct" if found else ("higher: " if guess < self.target else "lower: ")
            reward = 1.0 if found else 0.0
        done = found or self.steps >= GAME_STEPS
        return {"observation": {"text": text}, "reward": reward, "done": done}


HOSTILE_BODIES = {
    "not-json": b"<html>Internal proxy page</html>",
    "not-utf8": b"\xff\xfe\x00garbage",
    "not-object": b"[1, 2, 3]",
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "no-observation": json.dumps({"reward": 1.0, "done": False}).encode(),
    "no-done": json.dumps({"observation": {"text": "hi"}, "reward": 1.0}).encode(),
    "reward-nan-string": json.dumps({"observation": {}, "reward": "NaN", "done": False}).encode(),
    "reward-list": json.dumps({"observation": {}, "reward": [1.0], "done": False}).encode(),
    "reward-bool": json.dumps({"observation": {}, "reward": True, "done": False}).encode(),
    "reward-nan": b'{"observation": {}, "reward": NaN, "done": false}',
    "reward-inf": b'{"observation": {}, "reward": 1e999, "done": false}',
    "done-string": json.dumps({"observation": {}, "reward": 0.0, "done": "false"}).encode(),
    "done-int": json.dumps({"observation": {}, "reward": 0.0, "done": 0}).encode(),
}


class Handler(BaseHTTPRequestHandler):
    """Routes ``/<mode>/<id>/{reset,step}``: ``game`` plays :class:`Game` (one per id, so each
    id is a server of its own), the other modes answer as an attacker would."""

    server: Server

    def log_message(self, *args: object) -> None:  # keep the test output quiet
        pass

    def do_POST(self) -> None:
        self.server.requests.append(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        mode, _, rest = self.path.strip("/").partition("/")
        key, _, route = rest.rpartition("/")
        if mode == "game":
            game = self.server.games.setdefault(key, Game())
            if route == "reset":
                self.server.seeds.append(body.get("seed"))
            self.send_json(json.dumps(getattr(game, route)(body)).encode())
        elif mode in HOSTILE_BODIES:
            self.send_json(HOSTILE_BODIES[mode])
        elif mode == "error":
            self.send_json(b"Traceback (most recent call last): boom " + b"x" * 5000, status=500)
        elif mode == "redirect-file":
            self.redirect("file:///etc/passwd")
        elif mode == "redirect-port":
            self.redirect(f"http://127.0.0.1:{self.server.other_port}/game/0/{route}")
        elif mode == "hang":
            self.server.stop.wait(10)
            self.send_json(b'{"observation": {}, "reward": 0, "done": false}')
        elif mode == "trickle":
            self.send_response(200)
            self.end_headers()
            for _ in range(200):
                if self.server.stop.wait(0.1):
                    break
                self.wfile.write(b" ")
                self.wfile.flush()
        elif mode == "long-length":  # a Content-Length too long for int() to read
            self.send_response(200)
            self.send_header("Content-Length", "9" * 5000)
            self.end_headers()
            self.wfile.write(b'{"observation": {}, "reward": 0, "done": false}')
        elif mode in ("huge", "endless"):
            self.flood(announce=mode == "huge")
        else:
            self.send_json(b"not found", status=404)

    def do_GET(self) -> None:  # a followed redirect arrives as a GET
        self.server.requests.append(self.path)
        self.send_json(b"{}", status=405)

    def send_json(self, data: bytes, status: int = 200) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def flood(self, announce: bool) -> None:
        """Write HUGE bytes (announced in Content-Length) or far more (unannounced, the body
        ends when the connection does), counting what the socket took before the client left."""
        self.send_response(200)
        if announce:
            self.send_header("Content-Length", str(HUGE))
        self.end_headers()
        total = HUGE if announce else 100 * HUGE
        chunk = b'{"observation": "' + b"A" * 65_536
        try:
            while self.server.flooded < total:
                self.wfile.write(chunk)
                self.server.flooded += len(chunk)
        except OSError:
            self.server.flood_cut = True


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.games: dict[str, Game] = {}
        self.seeds: list[int | None] = []
        self.requests: list[str] = []
        self.stop = threading.Event()
        self.flooded, self.flood_cut, self.other_port = 0, False, 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def servers():
    """Two servers on free local ports (the second a redirect's target), shut down after."""
    started = [Server(), Server()]
    started[0].other_port = started[1].server_address[1]
    threads = [threading.Thread(target=s.serve_forever, args=(0.01,), daemon=True) for s in started]
    for thread in threads:
        thread.start()
    yield started
    for server in started:
        server.stop.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def server(servers):
    return servers[0]


# ============================================================================ honest play
def play(env: TextEnv, seed: int, replies: list[str]) -> list[tuple]:
    """``env.reset(seed)`` then each reply until the episode ends: the steps it answered."""
    env.reset(seed)
    steps = []
    for reply in replies:
        steps.append(env.step(reply))
        if steps[-1][2] or steps[-1][3]:
            break
    return steps


def test_an_episode_over_http_finds_the_number_the_seed_drew(server):
    env = openenv_text_env(f"{server.url}/game/0", max_turns=7)
    assert isinstance(env, TextEnv)
    assert env.reset(3) == "guess 1-7: "
    target = random.Random(3).randint(1, 7)
    steps = play(env, 3, [str(g) for g in range(1, 8)])
    observation, reward, terminated, truncated, info = steps[-1]
    assert (observation, reward, terminated, truncated) == ("correct", 1.0, True, False)
    assert info == {INVALID_ACTION: False, SUCCESS: True}
    assert len(steps) == target
    assert [s[1] for s in steps[:-1]] == [0.0] * (target - 1)
    assert [s[0] for s in steps[:-1]] == ["higher: "] * (target - 1)
    assert server.seeds == [3, 3]
    assert env.name == f"openenv:{server.url}/game/0"


def test_seeds_reach_the_server_and_one_seed_is_one_task(server):
    envs = [openenv_text_env(f"{server.url}/game/{k}") for k in range(3)]
    for env, seed in zip(envs, [11, 11, 12], strict=True):
        env.reset(seed)
    assert server.seeds == [11, 11, 12]
    targets = [server.games[str(k)].target for k in range(3)]
    assert targets[0] == targets[1] == random.Random(11).randint(1, 7)


def test_the_server_ending_is_terminated_and_the_turn_budget_truncates(server):
    ended = play(openenv_text_env(f"{server.url}/game/0"), 5, ["x"] * 10)
    assert len(ended) == GAME_STEPS
    assert ended[-1][1:4] == (0.0, True, False)
    assert ended[-1][4][SUCCESS] is False  # done with reward 0: not solved

    cut = play(openenv_text_env(f"{server.url}/game/1", max_turns=2), 5, ["x"] * 10)
    assert [s[2:4] for s in cut] == [(False, False), (False, True)]
    assert SUCCESS not in cut[-1][4]


def test_an_unreadable_reply_is_answered_with_the_last_observation_never_raised(server):
    def digit(reply: str) -> dict:
        return {"message": str(int(reply))}  # ValueError on anything but an integer

    env = openenv_text_env(f"{server.url}/game/0", parse=digit)
    env.reset(1)
    sent = len(server.requests)
    for hostile in ["", "four", "\x00\x01", "9" * 5000 + "x", "💥", "nan"]:
        observation, reward, terminated, truncated, info = env.step(hostile)
        assert info == {INVALID_ACTION: True}
        assert (reward, terminated, truncated) == (0.0, False, False)
        assert observation.startswith("invalid action ") and observation.endswith("guess 1-7: ")
    assert len(server.requests) == sent  # the server never saw them
    budgeted = openenv_text_env(f"{server.url}/game/1", parse=digit, max_turns=2)
    budgeted.reset(1)
    assert [budgeted.step("oops")[3] for _ in range(2)] == [False, True]  # each costs a turn


def test_an_action_that_cannot_be_sent_is_an_invalid_reply_not_an_error(server):
    env = openenv_text_env(f"{server.url}/game/0", parse=lambda reply: {"value": float(reply)})
    env.reset(0)
    assert env.step("nan")[4] == {INVALID_ACTION: True}  # NaN is not JSON
    assert env.step("inf")[4] == {INVALID_ACTION: True}


class FakeClient:
    """An in-process OpenEnv-style client: results as objects, as OpenEnv's StepResult."""

    def __init__(self, rewards: list[float | None], success: bool | None = None) -> None:
        self.rewards, self.success = rewards, success
        self.seeds: list[int] = []
        self.actions: list[object] = []

    def reset(self, seed: int | None = None) -> SimpleNamespace:
        self.seeds.append(seed)
        return SimpleNamespace(observation={"message": f"task {seed}"}, reward=None, done=False)

    def step(self, action: object) -> SimpleNamespace:
        self.actions.append(action)
        reward = self.rewards[len(self.actions) - 1]
        done = len(self.actions) == len(self.rewards)
        observation = {"message": f"step {len(self.actions)}"}
        if done and self.success is not None:
            observation["success"] = self.success
        return SimpleNamespace(observation=observation, reward=reward, done=done)


def test_an_in_process_client_plays_through_the_adapter():
    client = FakeClient([None, 0.5, 2.0])
    env = OpenEnvTextEnv(client, render=observation_text, parse=message_action, max_turns=5)
    assert env.reset(42) == "task 42"
    steps = play(env, 7, ["a", "b", "c"])
    assert client.seeds == [42, 7]
    assert client.actions == [{"message": m} for m in "abc"]
    assert [s[:4] for s in steps] == [
        ("step 1", 0.0, False, False),
        ("step 2", 0.5, False, False),
        ("step 3", 2.0, True, False),
    ]
    assert steps[-1][4] == {INVALID_ACTION: False, SUCCESS: True}


def test_success_carried_by_the_result_wins_over_the_reward():
    env = OpenEnvTextEnv(FakeClient([3.0], success=False), render=str, parse=str)
    assert play(env, 0, ["go"])[-1][4][SUCCESS] is False
    dicts = OpenEnvTextEnv(DictClient(), render=str, parse=str)
    assert play(dicts, 0, ["go"])[-1][4][SUCCESS] is True


class DictClient:
    """A client that answers plain dicts, its reset without a seed, success on the result."""

    def reset(self) -> dict:
        return {"observation": "start", "reward": None, "done": False}

    def step(self, action: str) -> dict:
        return {"observation": "end", "reward": 0.0, "done": True, "success": True}


def test_a_client_without_seeds_is_reset_without_one():
    assert not takes_seed(DictClient().reset)
    assert takes_seed(FakeClient([1.0]).reset)
    assert takes_seed(lambda **kwargs: None)  # OpenEnv's newer reset(**kwargs)
    env = OpenEnvTextEnv(DictClient(), render=str, parse=str)
    assert env.reset(5) == "start"


def test_an_async_client_or_a_bad_result_is_refused_in_one_sentence():
    class Async:
        async def reset(self, seed=None):
            return {}

        def step(self, action):
            return {}

    with pytest.raises(ConfigError, match=r"Async\.reset returned an awaitable; .*\.sync\(\)"):
        OpenEnvTextEnv(Async(), render=str, parse=str).reset(0)
    with pytest.raises(ConfigError, match="has no step\\(\\) method"):
        OpenEnvTextEnv(SimpleNamespace(reset=lambda: None), render=str, parse=str)
    with pytest.raises(ConfigError, match="max_turns=0 must be >= 1"):
        OpenEnvTextEnv(DictClient(), render=str, parse=str, max_turns=0)
    env = OpenEnvTextEnv(FakeClient([float("nan")]), render=str, parse=str)
    env.reset(0)
    with pytest.raises(EnvError, match="reward=nan; it must be a finite number or None"):
        env.step("go")


def test_default_render_and_parse_read_an_echo_env():
    assert message_action("hi there") == {"message": "hi there"}
    assert observation_text("plain") == "plain"
    assert observation_text({"echoed_message": "hi", "message_length": 2}) == "hi"
    assert observation_text({"text": "a", "message": "b"}) == "a"
    assert observation_text(SimpleNamespace(message="m")) == "m"
    assert observation_text({"board": [1, 2]}) == '{"board": [1, 2]}'


# ============================================================================ hostile servers
def client_for(server: Server, mode: str, **kwargs) -> HTTPEnvClient:
    return HTTPEnvClient(f"{server.url}/{mode}/0", **kwargs)


@pytest.mark.parametrize(
    ("mode", "fragment"),
    [
        ("not-json", "answered a body that is not JSON (Expecting value"),
        ("not-utf8", "answered a body that is not JSON"),
        ("deep", "answered a body that is not JSON (nested too deep)"),
        ("not-object", "answered [1, 2, 3], not a JSON object with observation, reward and done"),
        ("no-observation", "answered without the 'observation' field"),
        ("no-done", "answered without the 'done' field"),
        ("reward-nan-string", "answered reward='NaN'; it must be a finite number or null"),
        ("reward-list", "answered reward=[1.0]; it must be a finite number or null"),
        ("reward-bool", "answered reward=True; it must be a finite number or null"),
        ("reward-nan", "answered reward=nan; it must be a finite number or null"),
        ("reward-inf", "answered reward=inf; it must be a finite number or null"),
        ("done-string", "answered done='false'; it must be true or false"),
        ("done-int", "answered done=0; it must be true or false"),
        ("error", "answered HTTP 500: 'Traceback (most recent call last): boom xxx"),
        ("nowhere", "answered HTTP 404: 'not found'"),
        ("huge", "announced a body of 10000000 bytes, more than max_response_bytes=1000000"),
    ],
)  # fmt: skip
def test_a_malformed_answer_is_an_env_error_naming_the_url(server, mode, fragment):
    client = client_for(server, mode)
    with pytest.raises(EnvError) as caught:
        client.step({"message": "hi"})
    message = str(caught.value)
    assert message.startswith(f"the env server at {server.url}/{mode}/0/step ")
    assert fragment in message
    assert "\n" not in message and len(message) < 600  # one sentence, the body cut short


def test_an_error_body_is_quoted_to_its_first_200_characters(server):
    with pytest.raises(EnvError) as caught:
        client_for(server, "error").reset()
    quoted = str(caught.value).split("HTTP 500: ")[1]
    assert quoted == repr(("Traceback (most recent call last): boom " + "x" * 5000)[:200]) + "."


@pytest.mark.parametrize("mode", ["huge", "endless"])
def test_a_flood_stops_at_the_limit_without_reading_the_rest(server, mode):
    start = time.monotonic()
    with pytest.raises(EnvError, match=r"more than max_response_bytes=1000000"):
        client_for(server, mode).step({"message": "hi"})
    assert time.monotonic() - start < 5
    for _ in range(100):  # the server notices the client left
        if server.flood_cut:
            break
        time.sleep(0.05)
    assert server.flood_cut
    assert server.flooded < (HUGE if mode == "huge" else 100 * HUGE)


def test_a_content_length_too_long_to_read_is_no_crash(server):
    assert client_for(server, "long-length").reset() == RemoteStep({}, 0.0, False)


def test_the_body_is_read_to_its_limit_and_one_byte_more():
    stream = io.BytesIO(b"x" * HUGE)
    with pytest.raises(EnvError, match="answered more than max_response_bytes=1000"):
        read_limited(stream, "http://h/step", 1000, time.monotonic() + 10, 10)
    assert stream.tell() == 1001
    ok = io.BytesIO(b"y" * 1000)
    assert read_limited(ok, "http://h/step", 1000, time.monotonic() + 10, 10) == b"y" * 1000


def test_a_server_that_hangs_times_out(server):
    start = time.monotonic()
    with pytest.raises(EnvError, match=r"/hang/0/step did not answer within timeout_s=0.5 s"):
        client_for(server, "hang", timeout_s=0.5).step({"message": "hi"})
    assert time.monotonic() - start < 3


def test_a_server_that_trickles_its_body_times_out_on_the_whole_body(server):
    start = time.monotonic()
    with pytest.raises(EnvError, match=r"did not answer within timeout_s=0.5 s \(its body was"):
        client_for(server, "trickle", timeout_s=0.5).reset()
    assert time.monotonic() - start < 3  # each byte comes within 0.5 s; the whole never does


def test_a_redirect_to_a_file_is_refused_and_nothing_is_read(server):
    with pytest.raises(EnvError) as caught:
        client_for(server, "redirect-file").reset()
    assert "answered a redirect (HTTP 302) to 'file:///etc/passwd', which rlx does not follow" in (
        str(caught.value)
    )
    assert "root:" not in str(caught.value)


def test_a_redirect_to_another_port_is_refused_and_that_server_never_asked(servers):
    first, second = servers
    with pytest.raises(EnvError, match=r"answered a redirect \(HTTP 302\) to 'http://127.0.0.1:"):
        client_for(first, "redirect-port").step({"message": "hi"})
    assert second.requests == []


def test_why_no_redirect_is_followed_the_stdlib_opener_would_follow_one(servers):
    """urllib's own redirect handler refuses file:// but follows http, https and ftp to any
    host (reading the redirect's whole body first): the client uses an opener without it."""
    first, second = servers
    with pytest.raises(urllib.error.HTTPError, match="Redirection to url 'file:///etc/passwd' "):
        urllib.request.urlopen(f"{first.url}/redirect-file/0/reset", data=b"{}", timeout=5)
    with pytest.raises(urllib.error.HTTPError, match="405"):
        urllib.request.urlopen(f"{first.url}/redirect-port/0/reset", data=b"{}", timeout=5)
    assert second.requests == ["/game/0/reset"]  # followed to another port


def test_nothing_listening_is_connection_refused():
    with socket.socket() as bound:  # bound, never listening: connecting is refused
        bound.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{bound.getsockname()[1]}"
        with pytest.raises(EnvError, match=r"/reset refused the connection; is it running"):
            HTTPEnvClient(url, timeout_s=2).reset(seed=1)


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("file:///etc/passwd", "base_url='file:///etc/passwd' must be an http:// or https:// URL"),
        ("ftp://example.com/env", "base_url='ftp://example.com/env' must be an http:// or https://"),
        ("localhost:8000", "base_url='localhost:8000' must be an http:// or https:// URL"),
        ("http://", "base_url='http://' names no host"),
        ("http://user:secret@host:8000", "base_url names a user or password; pass credentials"),
        ("http://host:8000/?x=1", "has a query or fragment"),
    ],
)  # fmt: skip
def test_a_url_that_is_not_http_is_refused_at_construction(url, fragment):
    with pytest.raises(ConfigError) as caught:
        openenv_text_env(url)
    assert fragment in str(caught.value)
    assert "secret" not in str(caught.value)


def test_client_limits_are_checked_at_construction():
    with pytest.raises(ConfigError, match="timeout_s=0 must be > 0"):
        HTTPEnvClient("http://localhost:8000", timeout_s=0)
    with pytest.raises(ConfigError, match="max_response_bytes=0 must be >= 1"):
        HTTPEnvClient("http://localhost:8000", max_response_bytes=0)


def test_the_client_sends_the_protocols_bodies(server):
    client = HTTPEnvClient(f"{server.url}/game/0/", timeout_s=5)
    assert client.base_url == f"{server.url}/game/0"
    first = client.reset(seed=4)
    assert first == RemoteStep({"text": "guess 1-7: "}, None, False)
    assert client.reset() == first and server.seeds == [4, None]
    assert client.step({"message": "9"}) == RemoteStep({"text": "lower: "}, 0.0, False)


# ============================================================================ the runner
@pytest.fixture(scope="module")
def chat(tmp_path_factory):
    path = llm.make_tiny_chat_lm(
        tmp_path_factory.mktemp("chat") / "m", texts=["guess 1-7: higher lower 1234567"]
    )
    return llm.load_model(path)


def test_the_episode_runner_plays_remote_envs_and_masks_their_tokens(chat, server):
    model, tokenizer = chat
    envs = [openenv_text_env(f"{server.url}/game/{k}", max_turns=3) for k in range(2)]
    episodes = run_episodes(model, tokenizer, envs, [1, 2], max_new_tokens=4)
    assert server.seeds == [1, 2]
    for episode in episodes:
        assert episode.done and 1 <= episode.turns <= 3
        assert episode.terminated or episode.truncated
        assert not any(episode.loss_mask[: episode.prompt_length])
        assert sum(episode.loss_mask) == len(episode.sampled_logprobs)  # only the model's
        if episode.turns > 1:  # an answer of the server sits between two replies, masked
            first_reply_end = episode.loss_mask.index(False, episode.prompt_length)
            assert any(episode.loss_mask[first_reply_end:])


# ---------------------------------------------------------------- servers that never finish
def raw_server(talk) -> tuple[str, threading.Event]:
    """A bare TCP server on 127.0.0.1 whose one connection ``talk(conn, stop)`` serves;
    its URL and the event that stops it."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        with listener:
            listener.settimeout(10)
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            # the client hanging up (what the watchdog is for) ends the talk
            with conn, contextlib.suppress(OSError):
                talk(conn, stop)

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}", stop


def endless_continue(conn: socket.socket, stop: threading.Event) -> None:
    conn.recv(65536)
    while not stop.is_set():
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        time.sleep(0.01)


def slow_headers(conn: socket.socket, stop: threading.Event) -> None:
    conn.recv(65536)
    for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 1000:
        if stop.is_set():
            return
        conn.sendall(bytes([byte]))
        time.sleep(0.3)  # each byte well inside the socket timeout: only a watchdog ends it


@pytest.mark.parametrize("talk", [endless_continue, slow_headers])
def test_a_server_that_never_finishes_its_headers_is_stopped_by_the_watchdog(talk):
    url, stop = raw_server(talk)
    client = HTTPEnvClient(url, timeout_s=1.0)
    started = time.monotonic()
    try:
        with pytest.raises(EnvError, match="did not answer within timeout_s=1 s"):
            client.reset(0)
    finally:
        stop.set()
    assert time.monotonic() - started < 5.0


def test_a_reward_too_large_for_a_float_is_an_env_error_not_an_overflow():
    from rlx.llm.remote_env import check_answer

    huge = b'{"observation": "x", "reward": 1' + b"0" * 400 + b', "done": false}'
    with pytest.raises(EnvError, match="must be a finite number or null"):
        check_answer(huge, "http://127.0.0.1:1/step")
    assert check_answer(b'{"observation": "x", "reward": 10, "done": false}', "u").reward == 10
