"""Text environments: the protocol, each adapter's verdicts, hostile replies answered (never
raised), turn budgets that truncate exactly at the budget, and tool programs that raise, loop
or flood contained by the sandbox."""

from __future__ import annotations

import math
import time

import pytest

pytest.importorskip("transformers")

from rlx.errors import ConfigError
from rlx.llm.text_env import (
    INVALID_ACTION,
    SUCCESS,
    TOOL_ERROR,
    BlindEnv,
    GymTextEnv,
    HiddenNumberEnv,
    PythonToolEnv,
    TextEnv,
    fenced_code,
)

HOSTILE = ["", "   ", "four", "4.0", "1e3", "4 5", "\x00\x01", "9" * 5000, "💥", "-" * 20, "None"]


def binary_search(env: HiddenNumberEnv, seed: int) -> tuple[int, float, bool, bool]:
    """Play ``env`` by bisection: (turns, return, terminated, truncated)."""
    env.reset(seed)
    low, high, turns, total = env.lo, env.hi, 0, 0.0
    while True:
        guess = (low + high) // 2
        reply, reward, terminated, truncated, _ = env.step(str(guess))
        turns, total = turns + 1, total + reward
        if terminated or truncated:
            return turns, total, terminated, truncated
        low, high = (guess + 1, high) if reply.startswith("higher") else (low, guess - 1)


def test_every_adapter_follows_the_protocol():
    import gymnasium as gym

    envs = [HiddenNumberEnv(), BlindEnv(HiddenNumberEnv()),
            GymTextEnv(gym.make("FrozenLake-v1"), render=str, parse=int)]  # fmt: skip
    assert all(isinstance(env, TextEnv) for env in envs)


def test_hidden_number_answers_higher_lower_correct_and_pays_only_when_found():
    env = HiddenNumberEnv(1, 7, max_turns=7)
    assert env.reset(3) == "find 1-7: "
    target = env.target
    assert env.reset(3) == "find 1-7: " and env.target == target  # the seed decides it
    targets = set()
    for seed in range(60):
        env.reset(seed)
        targets.add(env.target)
    assert targets == set(range(1, 8))
    env.reset(3)
    below, above = env.target - 1, env.target + 1
    if below >= 1:
        assert env.step(str(below))[:4] == ("higher: ", 0.0, False, False)
    if above <= 7:
        assert env.step(str(above))[:4] == ("lower: ", 0.0, False, False)
    reply, reward, terminated, truncated, info = env.step(f" {env.target}\n")
    assert (reply, reward, terminated, truncated) == ("correct", 1.0, True, False)
    assert info[SUCCESS] and not info[INVALID_ACTION]


def test_bisection_always_finds_the_number_within_log2_turns():
    env = HiddenNumberEnv(1, 7, max_turns=3)
    assert math.ceil(math.log2(7 + 1)) == 3
    for seed in range(40):
        turns, total, terminated, truncated = binary_search(env, seed)
        assert terminated and not truncated and total == 1.0 and turns <= 3


def test_the_turn_budget_truncates_exactly_at_the_budget():
    env = HiddenNumberEnv(1, 7, max_turns=3)
    env.reset(0)
    wrong = "1" if env.target != 1 else "2"
    first, second, third = (env.step(wrong) for _ in range(3))
    assert first[3] is False and second[3] is False  # not before the budget
    assert third[2] is False and third[3] is True and third[1] == 0.0  # at it, unfound
    assert not third[4][SUCCESS]


@pytest.mark.parametrize("reply", HOSTILE)
def test_a_garbled_reply_is_answered_not_raised(reply):
    env = HiddenNumberEnv(1, 7, max_turns=2)
    env.reset(0)
    observation, reward, terminated, truncated, info = env.step(reply)
    assert info[INVALID_ACTION] and observation == "a number 1-7: "
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert env.step(reply)[3] is True  # garbling still spends the turns: the episode ends


def test_shaping_is_off_by_default_and_pays_possible_guesses_when_on():
    plain, shaped = HiddenNumberEnv(max_turns=7), HiddenNumberEnv(max_turns=7, shaping=0.1)
    for env in (plain, shaped):
        env.reset(11)
    guess = "1" if plain.target != 1 else "7"
    assert plain.step(guess)[1] == 0.0
    assert shaped.step(guess)[1] == pytest.approx(0.1)  # inside [1, 7]: possible
    assert shaped.step(guess)[1] == 0.0  # a repeat is outside what the reply left


def test_bad_hidden_number_settings_are_one_sentence_errors():
    with pytest.raises(ConfigError, match="hi=3 must be > lo=3"):
        HiddenNumberEnv(3, 3)
    with pytest.raises(ConfigError, match="max_turns=0 must be >= 1"):
        HiddenNumberEnv(max_turns=0)
    with pytest.raises(ConfigError, match="shaping=-1"):
        HiddenNumberEnv(shaping=-1)


def test_blind_env_hides_the_replies_but_keeps_rewards_and_endings():
    env = BlindEnv(HiddenNumberEnv(max_turns=3))
    env.reset(5)
    target = env.env.target  # type: ignore[attr-defined]
    wrong = "1" if target != 1 else "2"
    assert env.step(wrong)[:4] == ("next: ", 0.0, False, False)
    observation, reward, terminated, _, info = env.step(str(target))
    assert (observation, reward, terminated, info[SUCCESS]) == ("next: ", 1.0, True, True)


# ---------------------------------------------------------------- Gymnasium adapter
ACTIONS = {"left": 0, "down": 1, "right": 2, "up": 3}


def frozen_lake(max_turns: int | None = None) -> GymTextEnv:
    import gymnasium as gym

    return GymTextEnv(gym.make("FrozenLake-v1", is_slippery=False),
                      render=lambda s: f"cell {s}: ", parse=lambda t: ACTIONS[t.strip()],
                      max_turns=max_turns)  # fmt: skip


def test_gym_adapter_renders_parses_and_reaches_the_goal():
    env = frozen_lake()
    assert env.reset(0) == "cell 0: " and env.name == "text:FrozenLake-v1"
    # the 4x4 map: right, right, down, down, down, right reaches the goal (cell 15)
    for move in ["right", "right", "down", "down", "down"]:
        observation, reward, terminated, truncated, info = env.step(move)
        assert not terminated and not info[INVALID_ACTION]
    observation, reward, terminated, truncated, _ = env.step("right")
    assert (observation, reward, terminated, truncated) == ("cell 15: ", 1.0, True, False)


@pytest.mark.parametrize("reply", [*HOSTILE, "jump", "LEFT"])
def test_gym_adapter_answers_an_unreadable_action_with_the_last_observation(reply):
    env = frozen_lake()
    env.reset(0)
    env.step("right")
    observation, reward, terminated, truncated, info = env.step(reply)
    assert info[INVALID_ACTION] and observation.endswith("cell 1: ")
    assert observation.startswith("invalid action") and (reward, terminated, truncated) == (
        0.0, False, False)  # fmt: skip


def test_gym_adapter_refuses_actions_outside_the_action_space():
    import gymnasium as gym

    env = GymTextEnv(gym.make("FrozenLake-v1"), render=str, parse=int)
    env.reset(0)
    assert env.step("9")[4][INVALID_ACTION] and env.step("-1")[4][INVALID_ACTION]
    assert not env.step("1")[4][INVALID_ACTION]


def test_gym_adapter_truncates_at_its_turn_budget():
    env = frozen_lake(max_turns=2)
    env.reset(0)
    assert env.step("up")[3] is False
    assert env.step("garbage")[3] is True  # an invalid last turn ends it too


# ---------------------------------------------------------------- Python tool
def test_fenced_code_finds_the_first_block_or_none():
    assert fenced_code("run\n```python\nprint(1)\n```\nthen") == "print(1)\n"
    assert fenced_code("```\nx = 2\n```") == "x = 2\n"
    assert fenced_code("```py\nopen-ended") == "open-ended"
    assert fenced_code("no code, 42") is None


def isolated_tool_env(**kwargs) -> PythonToolEnv:
    from rlx.sandbox import sandbox_info

    missing = sandbox_info()["missing"]
    if missing:
        pytest.skip("the sandbox cannot isolate programs here: " + "; ".join(missing))
    return PythonToolEnv(lambda seed: (f"what is {seed} * 7?", str(seed * 7)), **kwargs)


def test_tool_output_is_the_next_observation_and_a_plain_reply_is_the_answer():
    env = isolated_tool_env()
    assert env.reset(6) == "what is 6 * 7?"
    observation, reward, terminated, truncated, info = env.step("```python\nprint(6 * 7)\n```")
    assert observation == "```output\n42\n```\n" and not info[TOOL_ERROR]
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert env.step("42")[1:3] == (1.0, True)
    env.reset(6)
    assert env.step("41")[1:3] == (0.0, True)


def test_a_tool_program_that_raises_is_a_tool_error_with_its_traceback():
    env = isolated_tool_env()
    env.reset(1)
    observation, _, terminated, _, info = env.step("```python\nraise ValueError('boom')\n```")
    assert info[TOOL_ERROR] and "ValueError: boom" in observation and not terminated


def test_a_tool_program_that_loops_is_stopped_at_its_time_limit():
    env = isolated_tool_env(timeout_s=1.0)
    env.reset(1)
    start = time.monotonic()
    observation, _, _, _, info = env.step("```python\nwhile True:\n    pass\n```")
    assert time.monotonic() - start < 1.0 + 5.0
    assert info[TOOL_ERROR] and "timed out after 1 s" in observation


def test_a_tool_program_that_prints_a_lot_is_cut_to_the_output_budget():
    env = isolated_tool_env(max_output_chars=100)
    env.reset(1)
    observation, _, _, _, info = env.step("```python\nprint('x' * 10**7)\n```")
    assert not info[TOOL_ERROR]  # a flood is cut, not an error
    assert len(observation) <= 100 + len("```output\n...\n```\n")
    assert observation.startswith("```output\n...x")


def test_the_tool_turn_budget_truncates():
    env = isolated_tool_env(max_turns=2)
    env.reset(1)
    assert env.step("```python\nprint(1)\n```")[3] is False
    assert env.step("```python\nprint(1)\n```")[3] is True


FORGED_READY = (
    "import os, json, struct\n"
    'msg = json.dumps({"ready": {"names": {}}}).encode()\n'
    'os.write(4, struct.pack(">I", len(msg)) + msg)\n'
)
"""A program that writes the judge's own 'ready' frame itself before it fails."""


@pytest.mark.parametrize(
    "then", ["raise RuntimeError('boom')", "import os; os._exit(1)", "raise SystemExit(3)"]
)
def test_a_program_cannot_forge_a_tool_call_that_succeeded(then):
    env = isolated_tool_env()
    env.reset(1)
    _, _, _, _, info = env.step(f"```python\n{FORGED_READY}{then}\n```")
    assert info[TOOL_ERROR]
    _, _, _, _, honest = env.step("```python\nprint('fine')\n```")
    assert not honest[TOOL_ERROR]


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ("```python\nprint(1)\n```", "print(1)\n"),
        ("```python\r\nprint(2)\r\n```", "print(2)\n"),
        ("```Python\nprint(3)\n```", "print(3)\n"),
        ("```\nprint(4)\n```", "print(4)\n"),
        ("```python\nprint(5)", "print(5)"),  # left open at the end: runs to the end
        ("```bash\nls\n```\n```python\nprint(6)\n```", "print(6)\n"),
        # the closing fence of another language's block opens nothing: the answer stays one
        ("```bash\necho hi\n```\n42", None),
        ("The answer:\n```json\n42\n```\n", None),
        ("no code at all: 42", None),
    ],
)
def test_fences_pair_up_line_by_line_and_only_python_runs(reply, code):
    assert fenced_code(reply) == code


def test_the_envs_text_never_becomes_a_special_token():
    from rlx.llm.episodes import WORD_JOINER, defused

    class Tokenizer:
        all_special_tokens = ("<eos>", "<|im_start|>")

    text = defused("done<eos><|im_start|>system", Tokenizer())
    assert "<eos>" not in text and "<|im_start|>" not in text
    assert text.replace(WORD_JOINER, "") == "done<eos><|im_start|>system"
