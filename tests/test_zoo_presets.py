"""rl-baselines3-zoo's hyperparameters as rlx presets (rlx.launch.zoo, rlx.launch.presets).

The carried files are the zoo's, unaltered and credited; every entry for a Gymnasium env
translates into a config rlx accepts or is refused in one sentence; translations checked by
hand against the YAML; rlx's own presets win, flags win over the zoo, a run records and says
which preset it started from, and a resume applies none again. Written partly as an attacker
would: policy_kwargs is Python in the zoo, and rlx never evaluates it.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import inspect
import json
import re
import sys
import time
from pathlib import Path

import pytest

import rlx
from rlx import registry
from rlx.cli import main
from rlx.errors import ConfigError, RLXError
from rlx.launch import presets, zoo
from rlx.launch.plan import plan

ROOT = Path(__file__).resolve().parents[1]
CARRIED = zoo.CARRIED_DIR
SDE_FIELDS = {"use_sde", "sde_sample_freq", "use_expln"}


SOURCE_FOR = zoo.source_for


@pytest.fixture(autouse=True)
def the_carried_files(monkeypatch):
    """Every test reads the copy rlx carries, even where the zoo extra installs rl_zoo3."""
    monkeypatch.setattr(
        zoo,
        "source_for",
        lambda algo: zoo.ZooSource(
            algo, CARRIED / f"{algo}.yml", zoo.CARRIED_VERSION, installed=False
        ),
    )


def entry(algo: str, env_id: str) -> dict:
    return zoo.read_hyperparams(CARRIED / f"{algo}.yml")[env_id]


def fields_of(algo: str) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(registry.get(algo).config))


def one_sentence(text: str) -> bool:
    """One line, ending with a full stop, no second sentence begun after one."""
    return "\n" not in text and text.endswith(".") and not re.search(r"\.\s+[A-Z]", text)


# ============================================================================ the carried files
def test_the_carried_files_are_rl_zoo3_2_9_2_unaltered_and_credited():
    readme = (CARRIED / "README.md").read_text()
    for algo in zoo.ALGORITHMS:
        digest = hashlib.sha256((CARRIED / f"{algo}.yml").read_bytes()).hexdigest()
        assert f"| {algo}.yml | {digest} |" in readme, algo
    assert f"version {zoo.CARRIED_VERSION}" in readme and zoo.CARRIED_VERSION == "2.9.2"
    assert "MIT" in readme and "Copyright (c) 2019 Antonin RAFFIN" in readme
    assert "github.com/DLR-RM/rl-baselines3-zoo" in readme
    license_text = (CARRIED / "LICENSE").read_text()
    assert license_text.startswith("MIT License") and "Antonin RAFFIN" in license_text
    assert "rl_zoo3 pulls" in zoo.__doc__.replace("``", "").replace("\n", " ")


def test_the_carried_files_ship_as_package_data():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = data["tool"]["setuptools"]["package-data"]["rlx.launch"]
    package = ROOT / "src" / "rlx" / "launch"
    for path in CARRIED.iterdir():
        name = str(path.relative_to(package))
        assert any(fnmatch.fnmatch(name, g) for g in globs), f"{name} would not ship"
    extras = data["project"]["optional-dependencies"]
    assert extras["zoo"] == ["rl_zoo3>=2.3"] and extras["box2d"] == ["gymnasium[box2d]>=1.0"]
    assert "gymnasium[box2d]>=1.0" in extras["dev"]


def test_sb3_defaults_are_stable_baselines3s_own():
    sb3 = pytest.importorskip("stable_baselines3")
    for algo, defaults in zoo.SB3_DEFAULTS.items():
        cls = getattr(sb3, algo.upper())
        signature = inspect.signature(cls.__init__).parameters
        for name, value in defaults.items():
            if name in ("n_envs", "normalize", "noise_type"):  # the zoo's, not SB3's
                continue
            assert signature[name].default == value, (algo, name)


# ============================================================================ every entry
@pytest.mark.parametrize("algo", zoo.ALGORITHMS)
def test_every_entry_for_a_gymnasium_env_gives_a_config_or_one_sentence(algo):
    spec = registry.get(algo)
    hyperparams = zoo.read_hyperparams(CARRIED / f"{algo}.yml")
    used, refused = [], []
    for env_id in hyperparams:
        if env_id in zoo.NOT_PRESETS or not zoo.is_gymnasium_env(env_id):
            assert zoo.zoo_preset(algo, env_id, spec.config) is None
            continue
        try:
            found = zoo.zoo_preset(algo, env_id, spec.config)
        except ConfigError as exc:
            assert one_sentence(str(exc)), str(exc)
            refused.append(env_id)
            continue
        assert found is not None and found.source.startswith("rl-baselines3-zoo 2.9.2")
        spec.config(**found.values)  # rlx accepts it
        assert all(one_sentence(s) for s in found.unfollowed), found.unfollowed
        assert all(s.startswith("rl-baselines3-zoo sets ") for s in found.unfollowed)
        used.append(env_id)
    # CarRacing's entries wrap the env (frame skip, resizing, an autoencoder): refused
    assert refused == (["CarRacing-v3"] if algo in ("ppo", "sac") else [])
    classic_and_box2d = {
        "a2c": 9,
        "ppo": 9,
        "dqn": 4,
        "sac": 5,
        "td3": 5,
    }
    box2d_or_classic = [e for e in used if not e.endswith("-v4")]
    assert len(box2d_or_classic) == classic_and_box2d[algo], box2d_or_classic


@pytest.mark.parametrize("algo", zoo.ALGORITHMS)
def test_every_entry_of_any_env_translates_or_refuses_without_crashing(algo):
    """The entries for envs rlx does not make (PyBullet, MiniGrid, robotics, custom) are not
    used, but reading them is still a translation or one ConfigError, never another error."""
    for env_id, settings in zoo.read_hyperparams(CARRIED / f"{algo}.yml").items():
        try:
            zoo.translate(algo, env_id, settings, fields_of(algo))
        except ConfigError as exc:
            assert one_sentence(str(exc)), str(exc)


@pytest.mark.parametrize("algo", ["ppo", "a2c", "sac"])
def test_without_the_gsde_fields_the_sde_settings_are_said_not_silently_dropped(algo):
    """Before (or without) a config's gSDE fields, use_sde and its friends are sentences;
    with them, values: the decision is read from the config's fields when translating."""
    env_id = {"ppo": "MountainCarContinuous-v0", "a2c": "Pendulum-v1", "sac": "BipedalWalker-v3"}
    without = fields_of(algo) - SDE_FIELDS - ({"log_std_init"} if algo == "sac" else set())
    values, unfollowed = zoo.translate(algo, env_id[algo], entry(algo, env_id[algo]), without)
    assert not SDE_FIELDS & set(values)
    assert any(s.startswith("rl-baselines3-zoo sets use_sde=True") for s in unfollowed)
    registry.get(algo).config(**values)
    if algo == "sac":
        assert any("log_std_init=-3" in s for s in unfollowed)
        assert any("use_expln=True" in s for s in unfollowed)
    if fields_of(algo) >= SDE_FIELDS:  # the gSDE fields rlx has now
        values, unfollowed = zoo.translate(
            algo, env_id[algo], entry(algo, env_id[algo]), fields_of(algo)
        )
        assert values["use_sde"] is True and not any("use_sde" in s for s in unfollowed)


# ============================================================================ by hand
def test_ppo_cartpole_by_hand_against_the_yaml():
    values, unfollowed = zoo.translate(
        "ppo", "CartPole-v1", entry("ppo", "CartPole-v1"), fields_of("ppo")
    )
    expected = {
        "num_envs": 8,
        "num_steps": 32,
        "minibatch_size": 256,
        "gae_lambda": 0.8,
        "gamma": 0.98,
        "num_epochs": 20,
        "ent_coef": 0.0,
        "learning_rate": 0.001,
        "anneal_lr": True,
        "clip_eps": 0.2,
        "anneal_clip": True,
        "total_steps": 100_000,
        # left to SB3's defaults by the zoo: rlx's would differ (no normalisation in SB3)
        "vf_coef": 0.5,
        "max_grad_norm": 0.5,
        "normalize_obs": False,
        "normalize_rewards": False,
        "hidden_sizes": (64, 64),
        "activation": "tanh",
    }
    assert {k: values[k] for k in expected} == expected
    assert unfollowed == ()


def test_dqn_mountain_car_by_hand_against_the_yaml():
    values, unfollowed = zoo.translate(
        "dqn", "MountainCar-v0", entry("dqn", "MountainCar-v0"), fields_of("dqn")
    )
    expected = {
        "total_steps": 120_000,
        "learning_rate": 4e-3,
        "learning_rate_end": None,
        "batch_size": 128,
        "buffer_size": 10_000,
        "learning_starts": 1_000,
        "gamma": 0.98,
        "sync_every": 600,
        "train_freq": 16,
        "gradient_steps": 8,
        "exploration_fraction": 0.2,
        "epsilon_start": 1.0,
        "epsilon_end": 0.07,
        "hidden_sizes": (256, 256),
        "num_envs": 1,
        "tau": 1.0,
        "max_grad_norm": 10.0,
        "loss": "huber",
        "double": False,
        "normalize_obs": False,
    }
    assert {k: values[k] for k in expected} == expected
    assert unfollowed == ()


def test_more_translations_by_hand():
    def of(algo, env_id):
        return zoo.translate(algo, env_id, entry(algo, env_id), fields_of(algo))

    # gradient_steps: -1 is as many as the vector steps collected, train_freq
    values, _ = of("dqn", "LunarLander-v3")
    assert (values["train_freq"], values["gradient_steps"], values["learning_starts"]) == (4, 4, 0)
    # a fixed temperature; 'auto' starts at SB3's 1.0; lin_ learning rate said, kept constant
    values, _ = of("sac", "MountainCarContinuous-v0")
    assert (values["autotune"], values["alpha"], values["hidden_sizes"]) == (False, 0.1, (64, 64))
    assert values["actor_learning_rate"] == values["critic_learning_rate"] == 3e-4
    values, unfollowed = of("sac", "LunarLanderContinuous-v3")
    assert (values["autotune"], values["alpha"], values["target_entropy"]) == (True, 1.0, None)
    assert values["actor_learning_rate"] == pytest.approx(7.3e-4)
    assert unfollowed == (
        "rl-baselines3-zoo sets learning_rate='lin_7.3e-4' for SAC on LunarLanderContinuous-v3; "
        "rlx's SAC keeps its learning rate constant, at 0.00073.",
    )
    # TD3: normal noise is rlx's, in the same units; no noise_type is no noise in SB3
    values, unfollowed = of("td3", "LunarLanderContinuous-v3")
    assert (values["exploration_noise"], values["hidden_sizes"]) == (0.1, (400, 300))
    assert (values["learning_starts"], values["buffer_size"], values["gamma"]) == (
        10_000,
        200_000,
        0.98,
    )
    values, _ = zoo.translate("td3", "X-v0", {"n_timesteps": 100}, fields_of("td3"))
    assert values["exploration_noise"] == 0.0
    # PPO: a batch larger than the rollout is the whole rollout, as SB3 takes it
    values, unfollowed = of("ppo", "MountainCarContinuous-v0")
    assert (values["num_envs"], values["num_steps"], values["minibatch_size"]) == (1, 8, 8)
    assert (values["log_std_init"], values["normalize_obs"], values["normalize_rewards"]) == (
        -3.29,
        True,
        True,
    )
    # net_arch dict(pi, vf) with nn.ReLU
    values, _ = of("ppo", "HalfCheetah-v4")
    assert (values["hidden_sizes"], values["activation"]) == ((256, 256), "relu")
    # A2C: normalize true, lin_ learning rate as anneal_lr
    values, _ = of("a2c", "Pendulum-v1")
    assert (values["learning_rate"], values["anneal_lr"], values["num_steps"]) == (7e-4, True, 8)
    assert (values["vf_coef"], values["gae_lambda"], values["normalize_advantages"]) == (
        0.4,
        0.9,
        False,
    )


def test_train_freq_counts_env_steps_over_all_copies_in_rlx():
    values, _ = zoo.translate(
        "sac",
        "X-v0",
        {"n_timesteps": 100, "n_envs": 4, "train_freq": 8, "gradient_steps": -1},
        fields_of("sac"),
    )
    assert (values["num_envs"], values["train_freq"], values["gradient_steps"]) == (4, 32, 8)
    values, _ = zoo.translate(
        "dqn", "X-v0", {"n_timesteps": 100, "train_freq": [2, "step"]}, fields_of("dqn")
    )
    assert values["train_freq"] == 2


def test_a_setting_rlx_cannot_follow_is_one_sentence():
    values, unfollowed = zoo.translate(
        "ppo",
        "MountainCarContinuous-v0",
        entry("ppo", "MountainCarContinuous-v0"),
        fields_of("ppo"),
    )
    assert values["ortho_init"] is False and unfollowed == ()  # followed since PPO has it
    # an algorithm without the field says so in one sentence
    fields = fields_of("ppo") - {"ortho_init"}
    _, unfollowed = zoo.translate(
        "ppo", "MountainCarContinuous-v0", entry("ppo", "MountainCarContinuous-v0"), fields
    )
    assert (
        "rl-baselines3-zoo sets ortho_init=False for PPO on MountainCarContinuous-v0; rlx has no "
        "such setting and keeps its own (orthogonal) initialisation."
    ) in unfollowed
    _, unfollowed = zoo.translate(
        "td3",
        "MountainCarContinuous-v0",
        entry("td3", "MountainCarContinuous-v0"),
        fields_of("td3"),
    )
    assert unfollowed == (
        "rl-baselines3-zoo sets noise_type='ornstein-uhlenbeck' for TD3 on "
        "MountainCarContinuous-v0; rlx's TD3 explores with Gaussian noise only, here of std 0.5, "
        "uncorrelated in time.",
    )
    # anything the translation does not know is a sentence too, never dropped
    _, unfollowed = zoo.translate(
        "ppo",
        "X-v0",
        {
            "n_timesteps": 64,
            "n_steps": 64,
            "frame_stack": 4,
            "callback": "my.Callback",
            "made_up_key": [1, 2],
            "policy_kwargs": "dict(net_arch=dict(pi=[32], vf=[64]), "
            "activation_fn=nn.GELU, squash_output=True)",
        },
        fields_of("ppo"),
    )
    said = " ".join(unfollowed)
    for key in (
        "frame_stack=4",
        "callback=",
        "made_up_key=",
        "net_arch=",
        "activation_fn=nn.GELU",
        "squash_output=True",
    ):
        assert key in said, key
    assert all(one_sentence(s) for s in unfollowed)


# ============================================================================ using them
def test_rlx_own_preset_wins_over_the_zoos(tmp_path):
    planned = plan("ppo", "CartPole-v1", run_dir=tmp_path / "r")
    own = registry.get("ppo").presets["CartPole-v1"]
    assert planned.config.num_epochs == own["num_epochs"] != 20  # the zoo's is 20
    assert planned.chosen_preset.source == presets.RLX_SOURCE
    assert planned.chosen_preset.record() == {"preset_source": "rlx"}
    assert planned.chosen_preset.lines("ppo", "CartPole-v1") == []


def test_the_zoo_applies_where_rlx_keeps_none_and_flags_override_it(tmp_path):
    planned = plan("dqn", "MountainCar-v0", run_dir=tmp_path / "r")
    assert (planned.preset, planned.config.sync_every, planned.config.learning_rate) == (
        "MountainCar-v0",
        600,
        4e-3,
    )
    planned = plan(
        "dqn",
        "MountainCar-v0",
        run_dir=tmp_path / "r",
        overrides={"learning_rate": 1e-3, "hidden_sizes": (32,)},
    )
    assert (planned.config.learning_rate, planned.config.hidden_sizes) == (1e-3, (32,))
    assert planned.config.sync_every == 600  # the rest of the zoo's stays
    # no preset anywhere: the defaults, and nothing recorded about a preset
    planned = plan("dqn", "CartPole-v0", run_dir=tmp_path / "r")
    assert planned.preset is None and planned.chosen_preset.record() == {}


def test_a_refused_zoo_entry_leaves_the_defaults_and_says_why(tmp_path):
    planned = plan("ppo", "CarRacing-v3", run_dir=tmp_path / "r")
    assert planned.preset is None
    assert planned.config == registry.get("ppo").config()
    record = planned.chosen_preset.record()
    assert record["preset_refused"].startswith("rl-baselines3-zoo's ppo entry for CarRacing-v3")
    (line,) = planned.chosen_preset.lines("ppo", "CarRacing-v3")
    assert line.endswith("ppo starts from rlx's defaults.")


def test_an_override_that_breaks_a_zoo_preset_names_what_the_zoo_set(tmp_path):
    with pytest.raises(ConfigError) as caught:
        plan("ppo", "MountainCar-v0", run_dir=tmp_path / "r", overrides={"num_envs": 3})
    message = str(caught.value)
    assert one_sentence(message) and not message.startswith("PPOConfig")
    named = message.split("rl-baselines3-zoo's preset for MountainCar-v0 set ", 1)[1]
    assert "minibatch_size=64" in named and "num_envs" not in named  # num_envs is the user's


def test_cli_run_records_and_says_the_zoo_source(tmp_path, capsys):
    """rlx train dqn --env MountainCar-v0 picks the zoo's preset; config.json and the first
    lines on stderr say so. (300 steps: fewer than the preset's learning_starts, so no
    gradient step; the resume continues the recorded config, no preset applied again.)"""
    run = tmp_path / "dqn"
    code = main(
        [
            "train",
            "dqn",
            "--env",
            "MountainCar-v0",
            "--total-steps",
            "300",
            "--eval-episodes",
            "0",
            "--run-dir",
            str(run),
            "--no-progress",
        ]
    )
    assert code == 0
    err = capsys.readouterr().err
    assert err.splitlines()[0] == (
        "rlx: preset for dqn on MountainCar-v0: rl-baselines3-zoo 2.9.2, hyperparams/dqn.yml "
        "(rlx keeps none of its own for it); flags you give override it."
    )
    record = json.loads((run / "config.json").read_text())
    assert record["preset"] == "MountainCar-v0"
    assert record["preset_source"] == "rl-baselines3-zoo 2.9.2, hyperparams/dqn.yml"
    assert record["preset_unfollowed"] == []
    assert record["config"]["sync_every"] == 600 and record["config"]["total_steps"] == 300
    # a resume keeps the recorded config (changed here by hand), applies no preset again
    record["config"]["learning_rate"] = 5e-4
    (run / "config.json").write_text(json.dumps(record))
    planned = plan("dqn", run_dir=run, resume=True, overrides={"total_steps": 400})
    assert planned.config.learning_rate == 5e-4 and planned.config.sync_every == 600
    rlx.train("dqn", run_dir=run, resume=True, total_steps=400, progress=False)
    assert "preset for dqn" not in capsys.readouterr().err
    resumed = json.loads((run / "config.json").read_text())
    assert resumed["config"]["learning_rate"] == 5e-4
    assert resumed["preset_source"] == record["preset_source"]


def test_unfollowed_settings_are_recorded_with_the_run(tmp_path):
    planned = plan("td3", "MountainCarContinuous-v0", run_dir=tmp_path / "r")
    record = planned.chosen_preset.record()
    assert record["preset_source"] == "rl-baselines3-zoo 2.9.2, hyperparams/td3.yml"
    assert (
        len(record["preset_unfollowed"]) == 1
        and "ornstein-uhlenbeck" in (record["preset_unfollowed"][0])
    )
    lines = planned.chosen_preset.lines("td3", "MountainCarContinuous-v0")
    assert lines[1].startswith("not followed: rl-baselines3-zoo sets noise_type=")
    # read back from a folder as data: what is not text is left out
    back = presets.ChosenPreset.from_record("X", {**record, "preset_unfollowed": [1, "a."]})
    assert back.unfollowed == ("a.",) and back.source == record["preset_source"]


def test_a_box2d_env_trains_with_its_zoo_preset(tmp_path):
    pytest.importorskip("Box2D")
    rlx.train(
        "dqn",
        "LunarLander-v3",
        run_dir=tmp_path / "ll",
        total_steps=200,
        eval_episodes=0,
        progress=False,
    )
    record = json.loads((tmp_path / "ll" / "config.json").read_text())
    assert record["preset_source"] == "rl-baselines3-zoo 2.9.2, hyperparams/dqn.yml"
    assert record["config"]["hidden_sizes"] == [256, 256]


def test_the_listing_for_help_and_the_covered_envs():
    assert zoo.zoo_envs("dqn") == ["MountainCar-v0", "LunarLander-v3", "Acrobot-v1"]
    assert zoo.zoo_envs("q-learning") == []
    assert "CartPole-v1" not in zoo.zoo_envs("ppo")  # rlx keeps its own
    listing = presets.preset_listing(registry.get("dqn"))
    assert listing == (
        "CartPole-v1, ALE/*; rl-baselines3-zoo 2.9.2's: MountainCar-v0, LunarLander-v3, Acrobot-v1"
    )
    assert "rl-baselines3-zoo" not in presets.preset_listing(registry.get("q-learning"))


def test_the_docs_page_lists_the_pairs_that_start_from_the_zoo():
    page = (ROOT / "docs" / "how-to" / "presets.md").read_text()
    for algo in zoo.ALGORITHMS:
        (row,) = [line for line in page.splitlines() if line.startswith(f"| {algo} |")]
        assert row == f"| {algo} | {', '.join(zoo.zoo_envs(algo))} |"


def test_the_preset_keeps_the_zoos_entry_for_running_the_same_recipe_elsewhere():
    found = zoo.zoo_preset("dqn", "MountainCar-v0")  # the registered config by default
    assert found.entry == entry("dqn", "MountainCar-v0")
    assert found.overrides == found.values and found.overrides is not found.values


# ============================================================================ the installed zoo
def test_an_installed_rl_zoo3_is_read_as_files_never_imported(tmp_path, monkeypatch):
    package = tmp_path / "rl_zoo3"
    (package / "hyperparams").mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('rl_zoo3 was imported')\n")
    (package / "hyperparams" / "dqn.yml").write_text(
        "MountainCar-v0:\n  n_timesteps: 5000\n  policy: 'MlpPolicy'\n  learning_rate: 0.002\n"
    )
    info = tmp_path / "rl_zoo3-9.9.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rl_zoo3\nVersion: 9.9.9\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(zoo, "source_for", SOURCE_FOR)  # the real lookup, this once
    source = zoo.source_for("dqn")
    assert source.installed and source.version == "9.9.9"
    assert source.label == "rl-baselines3-zoo 9.9.9, hyperparams/dqn.yml of the installed rl_zoo3"
    found = zoo.zoo_preset("dqn", "MountainCar-v0", registry.get("dqn").config)
    assert found.values["total_steps"] == 5000 and found.values["learning_rate"] == 0.002
    assert not zoo.source_for("ppo").installed  # no ppo.yml there: the carried copy
    assert "rl_zoo3" not in sys.modules


# ============================================================================ hostile input
HOSTILE_KWARGS = [
    "__import__('os').system('touch {marker}')",
    "dict(net_arch=[64]*10**9)",
    "dict(net_arch=[10**9])",
    "dict(a=" * 300 + "1" + ")" * 300,
    "dict(a=" * 10 + "1" + ")" * 10,
    "[" * 500 + "]" * 500,
    "dict(net_arch=" + "[" * 20 + "64" + "]" * 20 + ")",
    "dict(x=" + "1, " * 5000 + ")",
    "(lambda: 1)()",
    "dict(**globals())",
    "dict(f=open('{marker}', 'w'))",
    "().__class__.__bases__[0].__subclasses__()",
    "{1: 2}",
    "dict(net_arch=[64, 64]) if True else 0",
    "[64, 64]",
    42,
]


@pytest.mark.parametrize("kwargs", HOSTILE_KWARGS, ids=range(len(HOSTILE_KWARGS)))
def test_hostile_policy_kwargs_are_refused_in_one_sentence_and_nothing_runs(kwargs, tmp_path):
    marker = tmp_path / "pwned"
    if isinstance(kwargs, str):
        kwargs = kwargs.replace("{marker}", str(marker))
    t0 = time.perf_counter()
    with pytest.raises(ConfigError) as caught:
        zoo.translate(
            "ppo", "CartPole-v1", {"n_timesteps": 1000, "policy_kwargs": kwargs}, fields_of("ppo")
        )
    assert time.perf_counter() - t0 < 2
    assert isinstance(caught.value, RLXError) and one_sentence(str(caught.value)), caught.value
    assert str(caught.value).startswith("rl-baselines3-zoo's ppo entry for CartPole-v1")
    assert not marker.exists()


def test_the_zoos_own_policy_kwargs_forms_parse():
    parsed = zoo.parse_kwargs(
        "dict(log_std_init=-2,\n  ortho_init=False,\n  activation_fn=th.nn.ReLU,\n"
        "  net_arch=dict(pi=[256, 256], vf=[256, 256]),\n  )"
    )
    assert parsed["log_std_init"] == -2 and parsed["ortho_init"] is False
    assert parsed["activation_fn"] == zoo.PythonName("th.nn.ReLU")
    parsed = zoo.parse_kwargs(
        "dict(optimizer_class=RMSpropTFLike, optimizer_kwargs=dict(eps=1e-5))"
    )
    assert parsed == {
        "optimizer_class": zoo.PythonName("RMSpropTFLike"),
        "optimizer_kwargs": {"eps": 1e-5},
    }
    assert zoo.parse_kwargs("{'norm_obs': True, 'norm_reward': False}") == {
        "norm_obs": True,
        "norm_reward": False,
    }


@pytest.mark.parametrize(
    "settings",
    [
        {"n_timesteps": 1000, "learning_rate": "lin_abc"},
        {"n_timesteps": 1000, "learning_rate": "exp_0.1"},
        {"n_timesteps": 1000, "learning_rate": "lin_-1"},
        {"n_timesteps": 1000, "learning_rate": "lin_nan"},
        {"n_timesteps": 1000, "learning_rate": "lin_inf"},
        {"n_timesteps": 1000, "clip_range": "lin_"},
        {"n_timesteps": 1000, "learning_rate": True},
        {"n_timesteps": float("inf")},
        {"n_timesteps": 1e400},
        {"n_timesteps": 10.5},
        {"n_timesteps": "1e5"},
        {"n_timesteps": 1000, "n_envs": 10**9},
        {"n_timesteps": 1000, "normalize": "__import__('os')"},
        {"n_timesteps": 1000, "normalize": "{'norm_obs': 'yes'}"},
        {"n_timesteps": 1000, "env_wrapper": ["gymnasium.wrappers.GrayscaleObservation"]},
        {"n_timesteps": 1000, "policy": "MyPolicy"},
        {"learning_rate": 1e-3},  # no n_timesteps: the zoo needs one too
        {1: 2, "n_timesteps": 1000},
        ["n_timesteps", 1000],
        None,
    ],
    ids=range(20),
)
def test_an_entry_rlx_cannot_use_is_refused_in_one_sentence(settings):
    with pytest.raises(ConfigError) as caught:
        zoo.translate("ppo", "CartPole-v1", settings, fields_of("ppo"))
    assert one_sentence(str(caught.value)), caught.value


def test_an_alias_bomb_is_neither_expanded_nor_shown_in_full(tmp_path):
    lines = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    lines += [
        "CartPole-v1:",
        "  n_timesteps: 1000",
        "  frame_stack: *a9",
        "  policy_kwargs: {net_arch: *a9}",
    ]
    path = tmp_path / "ppo.yml"
    path.write_text("\n".join(lines) + "\n")
    t0 = time.perf_counter()
    settings = zoo.read_hyperparams(path)["CartPole-v1"]
    with pytest.raises(ConfigError) as caught:
        zoo.translate("ppo", "CartPole-v1", settings, fields_of("ppo"))
    assert one_sentence(str(caught.value)) and len(str(caught.value)) < 600
    del settings["policy_kwargs"]
    _, unfollowed = zoo.translate("ppo", "CartPole-v1", settings, fields_of("ppo"))
    assert len(unfollowed) == 1 and len(unfollowed[0]) < 400
    assert time.perf_counter() - t0 < 2


@pytest.mark.parametrize(
    "text",
    [
        "- CartPole-v1\n- MountainCar-v0\n",
        "just text\n",
        "",
        "CartPole-v1: [unclosed\n",
        "\xff\xfe not utf-8",
    ],
    ids=["a list", "a scalar", "empty", "not YAML", "not UTF-8"],
)
def test_a_hyperparams_file_that_is_not_a_mapping_is_refused_in_one_sentence(text, tmp_path):
    path = tmp_path / "dqn.yml"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(ConfigError) as caught:
        zoo.read_hyperparams(path)
    assert one_sentence(str(caught.value)) and str(path) in str(caught.value)


def test_a_broken_zoo_file_does_not_stop_a_run_it_would_have_preset(tmp_path, monkeypatch):
    broken = tmp_path / "dqn.yml"
    broken.write_text("- not a mapping\n")
    carried = zoo.ZooSource("dqn", broken, "0.0", installed=False)
    monkeypatch.setattr(zoo, "source_for", lambda algo: carried)
    chosen = presets.choose_preset(registry.get("dqn"), "MountainCar-v0")
    assert chosen.name is None and "not a mapping" in chosen.refused
    assert presets.preset_listing(registry.get("dqn")) == "CartPole-v1, ALE/*"


def test_every_published_agent_is_of_a_pair_the_carried_files_tune():
    """The published agents rlx cites (benchmark.csv) are of env/algorithm pairs whose tuned
    settings rlx carries, so "with the settings rlx applies as its preset" holds for each;
    one row checked by hand against the zoo's benchmark.md."""
    from rlx.launch.zoo_agents import published, published_agents

    for agent in published_agents():
        assert (
            agent.env_id in zoo.zoo_envs(agent.algo)
            or agent.env_id in registry.get(agent.algo).presets
        ), agent
    dqn = published("dqn", "MountainCar-v0")
    assert (dqn.mean_reward, dqn.std_reward, dqn.n_timesteps) == (-100.849, 9.925, 120_000)
