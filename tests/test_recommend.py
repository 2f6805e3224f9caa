"""The method chooser: each row of the "Choose a method" table, read from a target."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest

from rlx import registry
from rlx.errors import ConfigError
from rlx.recommend import (
    ALIGN_NAMES,
    ROWS,
    SOLVERS,
    Recommendation,
    describe_space,
    is_available,
    recommend,
)

# The table, verbatim: (Situation, Method).
CHOOSE_A_METHOD = [
    ("Small tabular MDP, known model", "value iteration or policy iteration"),
    ("Small tabular MDP, samples only", "Q-learning"),
    ("On-policy, safety critical", "SARSA or Expected SARSA"),
    ("High dimensional state, discrete actions", "DQN, with Double DQN in production"),
    ("Continuous control", "PPO with Gaussian policy, or SAC and TD3"),
    ("LLM alignment from preferences", "DPO first, RLHF-PPO with KL penalty"),
    ("LLM math and code reasoning", "GRPO with a verifier reward"),
    ("Two player board games", "AlphaZero or MuZero"),
]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def alternative_names(rec: Recommendation) -> list[str]:
    return [name for name, _ in rec.alternatives]


def test_rows_quote_the_table_in_order():
    assert [(row.situation, row.table_method) for row in ROWS] == CHOOSE_A_METHOD


def test_a_continuous_state_and_discrete_actions_get_double_dqn_with_ppo_alternative():
    """MountainCar-v0 (nothing measured on it): the table's row, DQN."""
    rec = recommend("MountainCar-v0")
    assert rec.method == "dqn"
    assert "ppo" in alternative_names(rec)
    assert "Box(2,) observations" in rec.reason and "Discrete(3) actions" in rec.reason
    assert "Double DQN" in rec.reason
    assert rec.command == "rlx train dqn --env MountainCar-v0"
    assert rec.available
    assert registry.get("dqn").config().double  # the reason's claim: Double DQN by default


def test_a_state_of_a_few_numbers_is_not_called_high_dimensional():
    """Two numbers are a continuous state, not a high dimensional one; an Atari frame stack is."""
    text = str(recommend("MountainCar-v0"))
    first = text.splitlines()[0]
    assert first.startswith("Recommended: dqn  (a continuous state of 2 numbers, discrete actions")
    assert "not high dimensional" in text
    assert "a high dimensional state of" not in text
    frames = recommend("ALE/Pong-v5")
    assert "a high dimensional state of 28224 numbers" in frames.reason  # 4 x 84 x 84
    assert (
        str(frames)
        .splitlines()[0]
        .startswith("Recommended: dqn  (High dimensional state, discrete actions:")
    )


def test_cartpole_follows_the_measurement_that_ppo_gets_there_sooner():
    """rlx's own benchmark measured PPO reaching CartPole's goal several times sooner than DQN:
    the answer follows it, names the table's DQN as the first alternative, and never advises
    DQN beside a note that contradicts it."""
    rec = recommend("CartPole-v1")
    assert rec.method == "ppo"
    assert rec.command == "rlx train ppo --env CartPole-v1"
    assert alternative_names(rec)[0] == "dqn"
    assert "rlx follows its own measurement" in rec.reason and "x sooner" in rec.reason
    assert rec.situation == "High dimensional state, discrete actions"


def test_pendulum_gets_gaussian_ppo_then_sac_and_td3():
    """rlx measured Pendulum itself (and keeps its own presets there): the zoo's published
    agents are not cited, and the table's order stands."""
    rec = recommend("Pendulum-v1")
    assert rec.method == "ppo"
    assert alternative_names(rec) == ["sac", "td3"]  # the table's order
    assert "Box(3,) observations" in rec.reason and "Box(-2, 2, (1,)) actions" in rec.reason
    assert rec.command == "rlx train ppo --env Pendulum-v1"
    assert "rl-baselines3-zoo" not in rec.reason


def test_where_rlx_measured_nothing_the_zoos_published_agents_choose():
    """MountainCarContinuous-v0: rlx has no measurement and no preset of its own; the zoo
    published SAC at 94.679 (std 1.134), TD3 at 93.483 and PPO at 88.343 (its benchmark.md):
    SAC is recommended with its figure, the table's PPO stays the first alternative, and the
    command runs on the zoo's preset."""
    from rlx.launch.zoo_agents import published

    assert published("sac", "MountainCarContinuous-v0").mean_reward == 94.679
    rec = recommend("MountainCarContinuous-v0")
    assert rec.method == "sac" and alternative_names(rec)[0] == "ppo"
    assert "94.679" in rec.reason and "50,000 env steps" in rec.reason
    assert rec.command == "rlx train sac --env MountainCarContinuous-v0"
    config, chosen = plan_config("sac", "MountainCarContinuous-v0")
    assert chosen.from_zoo and config.use_sde  # what "the settings rlx applies" says


def test_a_published_agent_as_good_within_its_spread_on_fewer_steps_wins():
    """Acrobot-v1: the zoo's PPO scored -73.5 (std 18.2) after 1M steps, its DQN -76.6 after
    100k: within one standard deviation, so the table's DQN stays, on a tenth of the steps.
    LunarLander-v3: PPO 242.1 (std 31.8) against DQN's 154.4 is beyond it: PPO."""
    rec = recommend("Acrobot-v1")
    assert rec.method == "dqn" and "-76.639" in rec.reason and "100,000 env steps" in rec.reason
    rec = recommend("LunarLander-v3")
    assert rec.method == "ppo" and "242.119" in rec.reason and "dqn 154.382" in rec.reason
    assert alternative_names(rec)[0] == "dqn"


def plan_config(algo: str, env_id: str):
    from rlx.launch.plan import configured

    return configured(registry.get(algo), env_id, {})


def test_frozenlake_with_model_is_solved_by_value_iteration():
    rec = recommend("FrozenLake-v1")
    assert rec.method == "value-iteration"
    assert alternative_names(rec) == ["policy-iteration"]
    assert "Discrete(16) observations" in rec.reason and "Discrete(4) actions" in rec.reason
    assert rec.command == "rlx solve FrozenLake-v1"
    assert rec.available


def test_frozenlake_without_model_gets_q_learning():
    rec = recommend("FrozenLake-v1", has_model=False)
    assert rec.method == "q-learning"
    assert rec.situation == "Small tabular MDP, samples only"
    assert rec.command == "rlx train q-learning --env FrozenLake-v1"


def test_frozenlake_safety_critical_gets_sarsa_or_expected_sarsa():
    rec = recommend("FrozenLake-v1", safety_critical=True)
    assert rec.method == "sarsa"
    assert "expected-sarsa" in alternative_names(rec)


def test_taxi_with_model_is_solved_by_value_iteration():
    # Gymnasium 1.x registers Taxi-v4 (Taxi-v3 is deprecated there).
    rec = recommend("Taxi-v4")
    assert rec.method == "value-iteration"
    assert "Discrete(500) observations" in rec.reason and "Discrete(6) actions" in rec.reason
    assert rec.command == "rlx solve Taxi-v4"


def test_cliffwalking_safety_critical_gets_sarsa():
    rec = recommend("CliffWalking-v1", safety_critical=True)
    assert rec.method == "sarsa"
    assert "cliff" in rec.reason.lower()
    assert rec.command == "rlx train sarsa --env CliffWalking-v1"


def test_gridworld_id_and_env_object_are_read_too():
    assert recommend("GridWorld-3x5").command == "rlx solve GridWorld-3x5"
    env = gym.make("CartPole-v1")
    try:
        rec = recommend(env)
    finally:
        env.close()
    assert rec.method == "ppo" and rec.command == "rlx train ppo --env CartPole-v1"


def test_preference_file_gets_dpo_then_rlhf(tmp_path):
    data = write_jsonl(
        tmp_path / "prefs.jsonl", [{"prompt": "2+2=", "chosen": "4", "rejected": "5"}]
    )
    rec = recommend(str(data))
    assert rec.method == "dpo"
    assert "rlhf" in alternative_names(rec)
    assert "KL penalty" in dict(rec.alternatives)["rlhf"]
    assert '{"prompt", "chosen", "rejected"}' in rec.reason
    assert rec.command == f"rlx align dpo --model MODEL --data {data}"


def test_verifier_file_gets_grpo_with_exact_match(tmp_path):
    data = tmp_path / "prompts.jsonl"
    data.write_text('\n{"prompt": "2+2=", "answer": "4"}\n', encoding="utf-8")
    rec = recommend(data)
    assert rec.method == "grpo"
    assert '{"prompt", "answer"}' in rec.reason
    assert rec.command == f"rlx align grpo --model MODEL --data {data} --reward exact-match"
    assert rec.available == ("grpo" in registry.names())
    if not rec.available:
        assert "not yet registered" in rec.note


def test_sft_file_gets_sft(tmp_path):
    data = write_jsonl(tmp_path / "sft.jsonl", [{"prompt": "2+2=", "completion": "4"}])
    rec = recommend(str(data))
    assert rec.method == "sft"
    assert '{"prompt", "completion"}' in rec.reason


@pytest.mark.parametrize("name", ["tictactoe", "Tic-Tac-Toe", "tic_tac_toe"])
def test_tictactoe_gets_alphazero_then_muzero(name):
    rec = recommend(name)
    assert rec.method == "alphazero"
    assert alternative_names(rec) == ["muzero"]
    assert rec.command == "rlx train alphazero --env tictactoe"
    assert "board game" in rec.reason
    assert rec.available and not rec.note  # alphazero is registered


def test_connect_four_names_the_rlx_game():
    assert recommend("connect-four").command == "rlx train alphazero --env connect4"


@pytest.mark.parametrize("target", ["NoSuchEnv-v0", "Taxi-v3", 3.5])
def test_unknown_target_is_a_config_error(target):
    with pytest.raises(ConfigError, match="Gymnasium id"):
        recommend(target)


def test_unknown_or_malformed_data_files_are_config_errors(tmp_path):
    odd = write_jsonl(tmp_path / "odd.jsonl", [{"question": "?", "label": 1}])
    with pytest.raises(ConfigError, match=r"odd\.jsonl.*\['label', 'question'\].*chosen"):
        recommend(str(odd))
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"broken\.jsonl', line 1: not valid JSON"):
        recommend(str(broken))
    with pytest.raises(ConfigError, match="does not exist"):
        recommend(str(tmp_path / "missing.jsonl"))


def test_every_command_names_a_registered_method(tmp_path):
    prefs = write_jsonl(tmp_path / "p.jsonl", [{"prompt": "a", "chosen": "b", "rejected": "c"}])
    targets = [
        ("CartPole-v1", {}),
        ("Pendulum-v1", {}),
        ("FrozenLake-v1", {}),
        ("FrozenLake-v1", {"has_model": False}),
        ("CliffWalking-v1", {"safety_critical": True}),
        ("CartPole-v1", {"safety_critical": True}),
        (str(prefs), {}),
        ("tictactoe", {}),
    ]
    known = set(registry.names()) | set(SOLVERS) | set(ALIGN_NAMES)
    for target, options in targets:
        rec = recommend(target, **options)
        assert rec.method in known, rec
        assert all(name in known for name in alternative_names(rec)), rec
        if rec.method in SOLVERS:
            assert rec.command.startswith("rlx solve ")
        else:  # rlx train NAME ... or rlx align NAME ...
            assert rec.command.split()[2] == rec.method
        assert rec.available == is_available(rec.method)
    for row in ROWS:
        assert row.method in known
        assert all(name in known for name, _ in row.alternatives)


def test_str_shows_method_reason_command_and_alternatives():
    text = str(recommend("Pendulum-v1"))
    assert text.splitlines()[0] == (
        "Recommended: ppo  (Continuous control: PPO with Gaussian policy, or SAC and TD3)"
    )
    assert "Run: rlx train ppo --env Pendulum-v1" in text
    assert "  - sac: " in text and "  - td3: " in text


def test_describe_space():
    assert describe_space(gym.spaces.Discrete(3)) == "Discrete(3)"
    assert describe_space(gym.spaces.Box(-1.0, 1.0, (2, 3))) == "Box(-1, 1, (2, 3))"
    assert describe_space(gym.spaces.Box(-float("inf"), float("inf"), (4,))) == "Box(4,)"


def test_every_method_the_table_names_runs_now():
    """Every row's first choice and alternative is an `rlx solve` method, a registered
    algorithm, or an `rlx align` name of one (rlhf is rlhf-ppo)."""
    for row in ROWS:
        for name in (row.method, *(alt for alt, _ in row.alternatives)):
            assert is_available(name), name


def test_the_table_stays_and_a_measured_alternative_is_named(tmp_path):
    """CartPole: the table says DQN; where rlx's own benchmark measured PPO reaching the goal
    much sooner, the answer says so, with the figures from the result files."""
    import json

    from rlx.recommend import measured_alternative

    def result(name, algo, seconds):
        figures = {"env": "CartPole-v1", "goal": "a last-20 mean of 475",
                   "rlx_median_seconds_to_goal": {algo: seconds}}  # fmt: skip
        (tmp_path / f"{name}.json").write_text(json.dumps({"name": name, "figures": figures}))

    assert measured_alternative("CartPole-v1", "dqn", tmp_path) == ""  # nothing measured yet
    result("bench_dqn", "dqn", 60.0)
    result("bench_policy_gradient", "ppo", 6.0)
    note = measured_alternative("CartPole-v1", "dqn", tmp_path)
    assert "ppo reached a last-20 mean of 475 on CartPole-v1 in 6 s" in note
    assert "60 s for dqn, 10.0x sooner" in note and "bench_policy_gradient.json" in note
    assert measured_alternative("CartPole-v1", "ppo", tmp_path) == ""  # ppo is the faster one
    assert measured_alternative("Pendulum-v1", "dqn", tmp_path) == ""


@pytest.mark.parametrize("name", ["chess", "go", "tictactoe", "connect4"])
def test_the_command_for_a_board_game_runs(name, tmp_path):
    """Every board-game command plans and passes the arena's check of its opponents (chess
    printed `--env chess`, which no game is, and the default's tictactoe-only solver)."""
    import shlex

    from rlx import games
    from rlx.cli import RUN_OPTIONS, _run_parser
    from rlx.games.evaluation import check_opponents
    from rlx.launch.plan import plan

    pytest.importorskip("pyspiel")
    command = shlex.split(recommend(name).command)
    assert command[:2] == ["rlx", "train"]
    spec = registry.get(command[2])
    given = _run_parser(spec, "rlx train", data_file=False).given(command[3:])
    options = {key: given.pop(key) for key in list(given) if key in RUN_OPTIONS}
    planned = plan(spec.name, options["env"], run_dir=tmp_path / "run", overrides=given)
    check_opponents(games.make(options["env"]), planned.config.eval_opponents)


def test_the_packaged_measured_figures_are_the_result_files():
    """An installed rlx has no benchmarks folder: rlx recommend reads the package's copy of the
    measured figures, which must be what benchmarks/results holds (rewritten by
    ``python docs/gen_pages.py benchmarks``); and no module reaches outside the package."""
    from rlx import recommend
    from tests.conftest import ROOT

    packaged = recommend.packaged_measured_speed()
    assert packaged == recommend.measured_speed(ROOT / "benchmarks" / "results")
    assert packaged, "no benchmark measured a time to a goal"
    for env, algos in packaged.items():
        for algo in algos:
            assert recommend.measured_alternative(env, algo) == recommend.measured_alternative(
                env, algo, ROOT / "benchmarks" / "results"
            )
    source = Path(recommend.__file__).read_text()
    assert "parents[" not in source


def test_rlx_recommend_from_an_installed_wheel_gives_the_checkouts_answer(tmp_path):
    """The wheel carries the chooser and its measured figures: unpacked away from the checkout
    (no benchmarks folder beside it), ``rlx.recommend`` answers as it does here."""
    import subprocess
    import sys
    import zipfile

    from rlx.recommend import recommend
    from tests.conftest import ROOT

    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation",
         "-q", "-w", str(tmp_path / "dist")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("rlx-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert {"rlx/recommend.py", "rlx/measured_speed.json"} <= names
        archive.extractall(tmp_path / "site")
    code = "import rlx; print(rlx.recommend('CartPole-v1')); print(rlx.__file__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, env={"PYTHONPATH": str(tmp_path / "site"),
                                            "PATH": "/usr/bin:/bin"}, check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    answer, location = out.stdout.rsplit("\n", 2)[:2]
    assert location.startswith(str(tmp_path / "site"))
    assert answer == str(recommend("CartPole-v1"))
