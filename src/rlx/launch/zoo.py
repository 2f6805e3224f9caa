"""rl-baselines3-zoo's tuned hyperparameters as rlx presets: read, translated, explained.

rl-baselines3-zoo (the ``rl_zoo3`` package; MIT license, copyright Antonin Raffin) keeps one
YAML file per algorithm, keyed by env id, of the settings its authors tuned for
Stable-Baselines3 (SB3). rlx uses the entries of its ``a2c.yml``, ``ppo.yml``, ``dqn.yml``,
``sac.yml`` and ``td3.yml`` where an algorithm keeps no preset of its own for an env
(:mod:`rlx.launch.presets` decides; rlx's own preset always wins).

**Which files.** With the ``zoo`` extra installed (``pip install 'rlx[zoo]'``), the installed
``rl_zoo3``'s ``hyperparams/`` folder, read as files (the package is found, never imported),
and its version recorded; otherwise the copy of rl_zoo3 2.9.2's five files that rlx carries,
unaltered, in ``zoo_hyperparams/`` beside this module (its README names the source, version,
license and copyright). rlx carries them rather than depending on ``rl_zoo3`` because
``rl_zoo3`` pulls Stable-Baselines3, sb3-contrib and the Hugging Face hub integration for five
YAML files.

**Which entries.** Those for envs Gymnasium itself registers as classic control, Box2D or
MuJoCo (:data:`GYMNASIUM_FAMILIES`). Never ``default`` or ``atari`` (rlx's defaults and its
Atari presets stay), nor the entries for envs outside Gymnasium (PyBullet, MiniGrid, robotics,
custom envs), which rlx does not make.

**How.** An entry is read on top of SB3's constructor defaults (:data:`SB3_DEFAULTS`, the
settings the zoo's own run starts from), then each name becomes rlx's field:

    n_timesteps -> total_steps     n_envs -> num_envs     n_epochs -> num_epochs (PPO)
    n_steps -> num_steps (PPO, A2C), n_step (DQN)
    batch_size -> minibatch_size (PPO: at most one rollout, as SB3 takes it), batch_size
        (DQN, SAC, TD3)
    learning_rate X or lin_X -> learning_rate (actor_ and critic_learning_rate: SAC, TD3);
        lin_X decays it linearly to 0: anneal_lr (PPO, A2C), learning_rate_end=0 (DQN)
    clip_range X or lin_X -> clip_eps (+ anneal_clip)       clip_range_vf -> clip_value
    ent_coef, vf_coef, max_grad_norm, gae_lambda, gamma, tau, target_kl -> the same names
    normalize_advantage -> normalize_advantages
    normalize (true, or "{'norm_obs': ..., 'norm_reward': ...}") -> normalize_obs and
        normalize_rewards (PPO, A2C), normalize_obs and scale_rewards (DQN)
    policy_kwargs: net_arch -> hidden_sizes, activation_fn -> activation, log_std_init
    DQN: target_update_interval -> sync_every, exploration_fraction,
        exploration_initial_eps -> epsilon_start, exploration_final_eps -> epsilon_end;
        SB3's Huber loss -> loss="huber"
    train_freq -> train_freq x n_envs (rlx counts env steps over all copies, SB3 vector
        steps); gradient_steps (-1: as many as vector steps collected, train_freq)
    SAC: ent_coef 'auto' / 'auto_X' / X -> autotune and alpha (SB3's 'auto' starts at 1.0);
        target_entropy ('auto' -> None, -dim(A))
    TD3: noise_type 'normal' + noise_std -> exploration_noise (both in half-widths of the
        action box); target_policy_noise -> policy_noise, target_noise_clip -> noise_clip

``use_sde``, ``sde_sample_freq``, ``use_expln``, ``log_std_init`` and ``ortho_init`` go to the
config's fields of those names where the config has them (read from
:func:`dataclasses.fields` when translating, so a field added later is followed at once).

A setting rlx cannot follow is kept as one sentence (:attr:`ZooPreset.unfollowed`), e.g.
"rl-baselines3-zoo sets noise_type='ornstein-uhlenbeck' for TD3 on MountainCarContinuous-v0;
rlx's TD3 explores with Gaussian noise only, here of std 0.5, uncorrelated in time." An entry
rlx cannot use at all (env wrappers it cannot apply, a learning-rate form it does not know,
hindsight replay, a ``policy_kwargs`` it will not read) is refused with one
:class:`~rlx.errors.ConfigError` sentence. The zoo evaluates ``policy_kwargs`` as Python; rlx
parses it with :mod:`ast` into literals, ``dict(...)`` calls and dotted names such as
``nn.ReLU``, within bounds on length, depth and size, and never evaluates it.

Why one module past rlx's 800 lines: the zoo's files are read and translated field by field in
one pass (every translation checks the value it reads before it writes rlx's field, so a
hostile or broken file is refused in one sentence); the name table, the translation and the
bounded parser of ``policy_kwargs`` are one reading of one format.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import math
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from rlx.errors import ConfigError, printable

ALGORITHMS = ("a2c", "ppo", "dqn", "sac", "td3")
"""The algorithms rlx has that rl-baselines3-zoo keeps hyperparameters for."""
CARRIED_VERSION = "2.9.2"
"""The rl_zoo3 version of the files in ``zoo_hyperparams/``."""
CARRIED_DIR = Path(__file__).with_name("zoo_hyperparams")
NOT_PRESETS = ("default", "atari")
"""The zoo's entries that are not one env's: rlx's defaults and Atari presets stay."""
GYMNASIUM_FAMILIES = (
    "gymnasium.envs.classic_control",
    "gymnasium.envs.box2d",
    "gymnasium.envs.mujoco",
)
"""The Gymnasium env families whose zoo entries rlx uses (by the registered entry point)."""

MAX_FILE_BYTES = 1_000_000
"""The largest hyperparameters file read (rl_zoo3's are far smaller)."""
MAX_TEXT = 2_000
"""The longest ``policy_kwargs`` or ``normalize`` text parsed."""
MAX_DEPTH = 6
"""The deepest nesting of calls, lists and dicts in ``policy_kwargs``."""
MAX_NODES = 200
"""The most values in one ``policy_kwargs``."""
MAX_ENVS = 1_024
MAX_COUNT = 10**12
"""The largest step count, buffer size or batch a zoo entry may set."""
MAX_WIDTH = 65_536
MAX_LAYERS = 32

SB3_DEFAULTS: dict[str, dict[str, Any]] = {
    # Stable-Baselines3's constructor defaults (2.x) for what a zoo entry may leave out, in
    # the zoo's names; the zoo's n_envs defaults to 1 and normalize to off
    "ppo": {
        "n_envs": 1, "learning_rate": 3e-4, "n_steps": 2048, "batch_size": 64, "n_epochs": 10,
        "gamma": 0.99, "gae_lambda": 0.95, "clip_range": 0.2, "clip_range_vf": None,
        "normalize_advantage": True, "ent_coef": 0.0, "vf_coef": 0.5, "max_grad_norm": 0.5,
        "target_kl": None, "normalize": False,
    },
    "a2c": {
        "n_envs": 1, "learning_rate": 7e-4, "n_steps": 5, "gamma": 0.99, "gae_lambda": 1.0,
        "ent_coef": 0.0, "vf_coef": 0.5, "max_grad_norm": 0.5, "normalize_advantage": False,
        "use_rms_prop": True, "normalize": False,
    },
    "dqn": {
        "n_envs": 1, "learning_rate": 1e-4, "buffer_size": 1_000_000, "learning_starts": 100,
        "batch_size": 32, "tau": 1.0, "gamma": 0.99, "train_freq": 4, "gradient_steps": 1,
        "n_steps": 1, "target_update_interval": 10_000, "exploration_fraction": 0.1,
        "exploration_initial_eps": 1.0, "exploration_final_eps": 0.05, "max_grad_norm": 10,
        "normalize": False,
    },
    "sac": {
        "n_envs": 1, "learning_rate": 3e-4, "buffer_size": 1_000_000, "learning_starts": 100,
        "batch_size": 256, "tau": 0.005, "gamma": 0.99, "train_freq": 1, "gradient_steps": 1,
        "ent_coef": "auto", "target_entropy": "auto", "target_update_interval": 1,
        "normalize": False,
    },
    "td3": {
        "n_envs": 1, "learning_rate": 1e-3, "buffer_size": 1_000_000, "learning_starts": 100,
        "batch_size": 256, "tau": 0.005, "gamma": 0.99, "train_freq": 1, "gradient_steps": 1,
        "policy_delay": 2, "target_policy_noise": 0.2, "target_noise_clip": 0.5,
        "noise_type": None, "normalize": False,
    },
}  # fmt: skip
"""SB3's constructor defaults for the settings a zoo entry may leave out, in the zoo's names
(tests/test_zoo_presets.py holds them to SB3's signatures where SB3 is installed)."""

SB3_POLICY_DEFAULTS: dict[str, dict[str, Any]] = {
    "ppo": {"net_arch": [64, 64], "activation_fn": "Tanh", "log_std_init": 0.0},
    "a2c": {"net_arch": [64, 64], "activation_fn": "Tanh", "log_std_init": 0.0},
    "dqn": {"net_arch": [64, 64], "activation_fn": "ReLU"},
    "sac": {"net_arch": [256, 256], "activation_fn": "ReLU"},
    "td3": {"net_arch": [400, 300], "activation_fn": "ReLU"},
}
"""SB3's policy defaults (``MlpPolicy``) for what ``policy_kwargs`` leaves out."""

SB3_IMPLIED: dict[str, dict[str, Any]] = {"dqn": {"loss": "huber", "double": False}}
"""What SB3's algorithm fixes and rlx's config exposes: SB3's DQN minimises the Huber loss
and bootstraps on the target network's own max (no Double DQN target). The zoo tuned its
numbers for that algorithm, so its presets take it too (rlx's own presets keep Double DQN)."""

NO_GSDE = "rlx's {algo} has no state-dependent exploration (gSDE) and keeps its own exploration"
REASONS: dict[str, str] = {
    "use_sde": NO_GSDE,
    "sde_sample_freq": NO_GSDE,
    "use_sde_at_warmup": NO_GSDE,
    "use_expln": NO_GSDE,
    "log_std_init": "rlx's {algo} has no initial log std to set and keeps its own",
    "ortho_init": "rlx has no such setting and keeps its own (orthogonal) initialisation",
    "frame_stack": "rlx stacks frames only in its Atari preprocessing, so the agent sees one "
    "observation at a time",
    "callback": "rlx's callbacks are Python objects given to rlx.train, not names in a preset",
    "use_rms_prop": "rlx's A2C always steps with RMSprop",
    "replay_buffer_kwargs": "rlx's replay buffer has no such settings",
    "optimize_memory_usage": "rlx's replay buffer has no such setting",
}
"""Why rlx cannot follow a setting it knows of ("{algo}": the algorithm's name)."""


# ============================================================================ the files
@dataclass(frozen=True)
class ZooSource:
    """Where one algorithm's hyperparameters file is read from."""

    algo: str
    path: Path
    version: str
    installed: bool
    """True: the installed ``rl_zoo3``'s file; False: the copy rlx carries"""

    @property
    def label(self) -> str:
        """``rl-baselines3-zoo 2.9.2, hyperparams/dqn.yml`` (and where, when installed)."""
        where = " of the installed rl_zoo3" if self.installed else ""
        return f"rl-baselines3-zoo {self.version}, hyperparams/{self.algo}.yml{where}"


def source_for(algo: str) -> ZooSource:
    """The file ``algo``'s zoo hyperparameters come from: the installed ``rl_zoo3``'s when it
    has one (found without importing the package, which would import SB3), else the copy
    rlx carries."""
    import importlib.metadata
    import importlib.util

    name = f"{algo}.yml"
    try:
        spec = importlib.util.find_spec("rl_zoo3")
    except (ImportError, ValueError):
        spec = None
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(folder) / "hyperparams" / name
        if path.is_file():
            try:
                version = importlib.metadata.version("rl_zoo3")
            except importlib.metadata.PackageNotFoundError:
                version = "(version unknown)"
            return ZooSource(algo, path, version, installed=True)
    return ZooSource(algo, CARRIED_DIR / name, CARRIED_VERSION, installed=False)


def read_hyperparams(path: str | Path) -> dict[str, Any]:
    """A zoo hyperparameters file: env id -> settings, as YAML's safe loader reads it.

    A file that cannot be read, is larger than :data:`MAX_FILE_BYTES`, is not YAML or holds
    something other than a mapping is a ConfigError naming it, in one sentence.
    """
    path = Path(path)
    try:
        info = path.stat()
    except OSError as exc:
        raise ConfigError(
            f"rl-baselines3-zoo's hyperparameters file {path} cannot be read "
            f"({exc.strerror or exc})."
        ) from exc
    return dict(_parsed(str(path), info.st_mtime_ns, info.st_size))


@functools.lru_cache(maxsize=16)
def _parsed(path: str, mtime_ns: int, size: int) -> Mapping[str, Any]:
    """The file's mapping, read once per version of the file (its time and size)."""
    import yaml

    where = f"rl-baselines3-zoo's hyperparameters file {path}"
    if size > MAX_FILE_BYTES:
        raise ConfigError(f"{where} holds {size} bytes, more than the {MAX_FILE_BYTES} rlx reads.")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where} is not UTF-8 text.") from exc
    except OSError as exc:
        raise ConfigError(f"{where} cannot be read ({exc.strerror or exc}).") from exc
    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark is not None else ""
        problem = f"{type(exc).__name__}{line}"
        raise ConfigError(f"{where} is not YAML rlx can read ({problem}).") from exc
    except (RecursionError, ValueError, OverflowError, TypeError) as exc:
        raise ConfigError(f"{where} is not YAML rlx can read ({type(exc).__name__}).") from exc
    if not isinstance(data, dict):
        kind = "nothing" if data is None else f"a {type(data).__name__}"
        raise ConfigError(f"{where} holds {kind}, not a mapping of env ids to settings.")
    return data


def is_gymnasium_env(env_id: str) -> bool:
    """Whether Gymnasium registers ``env_id`` in one of :data:`GYMNASIUM_FAMILIES` (read from
    its registry: nothing is built)."""
    import gymnasium

    spec = gymnasium.envs.registry.get(env_id)
    entry = getattr(spec, "entry_point", None)
    return isinstance(entry, str) and entry.split(":")[0].startswith(GYMNASIUM_FAMILIES)


# ============================================================================ the preset
@dataclass(frozen=True)
class ZooPreset:
    """One zoo entry in rlx's words."""

    algo: str
    env_id: str
    values: dict[str, Any]
    """rlx config field -> value"""
    unfollowed: tuple[str, ...]
    """one sentence per setting rlx cannot follow"""
    source: str
    """where it came from: :attr:`ZooSource.label`"""
    entry: dict[str, Any] = dataclasses.field(default_factory=dict)
    """the zoo's entry as its file holds it (for running the same recipe in SB3)"""

    @property
    def overrides(self) -> dict[str, Any]:
        """:attr:`values`, as ``rlx.train(algo, env, **overrides)`` takes them."""
        return dict(self.values)


def zoo_preset(algo: str, env_id: str, config: type | None = None) -> ZooPreset | None:
    """rl-baselines3-zoo's preset for ``algo`` on ``env_id``, translated into the fields of the
    config class ``config`` (the registered algorithm's when None), which must accept it;
    None where the zoo keeps no entry for it or the env is not one of
    :data:`GYMNASIUM_FAMILIES`. An entry rlx cannot use, or a file it cannot read, is a
    ConfigError in one sentence. (rlx's own presets are not consulted here:
    :func:`rlx.launch.presets.choose_preset` puts them first.)"""
    if algo not in ALGORITHMS or env_id in NOT_PRESETS:
        return None
    source = source_for(algo)
    hyperparams = read_hyperparams(source.path)
    if env_id not in hyperparams or not is_gymnasium_env(env_id):
        return None
    if config is None:
        from rlx import registry

        config = registry.get(algo).config
    fields = frozenset(f.name for f in dataclasses.fields(config))
    values, unfollowed = translate(algo, env_id, hyperparams[env_id], fields)
    try:
        config(**values)
    except (ConfigError, TypeError, ValueError) as exc:
        raise ConfigError(
            f"rl-baselines3-zoo's {algo} entry for {env_id} cannot be used: it gives a config "
            f"rlx refuses ({str(exc).rstrip('.')})."
        ) from exc
    entry = hyperparams[env_id]
    return ZooPreset(algo, env_id, values, unfollowed, source.label, dict(entry))


def zoo_envs(algo: str) -> list[str]:
    """The env ids whose rl-baselines3-zoo entry is ``algo``'s preset in rlx, in the file's
    order: the usable entries (:func:`zoo_preset`) for envs where rlx keeps no preset of its
    own. Empty for an algorithm the zoo does not cover."""
    if algo not in ALGORITHMS:
        return []
    from rlx import registry

    spec = registry.get(algo)
    found = []
    for env_id in read_hyperparams(source_for(algo).path):
        if not isinstance(env_id, str) or registry.preset_for(spec, env_id)[0] is not None:
            continue
        try:
            usable = zoo_preset(algo, env_id, spec.config) is not None
        except ConfigError:
            usable = False
        if usable:
            found.append(env_id)
    return found


# ============================================================================ translation
def translate(
    algo: str, env_id: str, entry: Any, fields: frozenset[str] | set[str]
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """One zoo entry (on top of :data:`SB3_DEFAULTS`) as rlx config values for a config with
    ``fields``, and one sentence per setting rlx cannot follow; a ConfigError in one sentence
    for an entry rlx cannot use. The config itself is not built here."""
    if algo not in ALGORITHMS:
        raise ConfigError(
            f"rl-baselines3-zoo's hyperparameters are read for {', '.join(ALGORITHMS)}, "
            f"not {algo!r}."
        )
    t = _Translation(algo, env_id, frozenset(fields))
    if not isinstance(entry, Mapping):
        t.refuse(f"its entry is {_kind(entry)}, not a mapping of settings")
    for key in entry:
        if not isinstance(key, str):
            t.refuse(f"it holds the key {_shown(key)}, which is not a setting's name")
    settings = {**SB3_DEFAULTS[algo], **entry}
    t.refusals(settings)
    n_envs = t.whole(settings, "n_envs", 1, MAX_ENVS)
    t.put("num_envs", n_envs)
    t.put("total_steps", t.whole(settings, "n_timesteps", 1, MAX_COUNT))
    t.learning_rate(settings.pop("learning_rate"))
    t.policy_kwargs(settings.pop("policy_kwargs", None))
    t.normalize(settings.pop("normalize", False), settings.pop("normalize_kwargs", None))
    t.sde(settings)
    if algo in ("ppo", "a2c"):
        t.on_policy(settings, n_envs)
    else:
        t.off_policy(settings, n_envs)
    for key, value in settings.items():
        t.cannot(key, value, REASONS.get(key, "rlx's {algo} has no such setting"))
    return t.values, tuple(t.unfollowed)


class _Translation:
    """The values and sentences of one entry's translation, and the checks of its values."""

    def __init__(self, algo: str, env_id: str, fields: frozenset[str]) -> None:
        self.algo, self.env_id, self.fields = algo, env_id, fields
        self.name = algo.upper()
        self.values: dict[str, Any] = dict(SB3_IMPLIED.get(algo, {}))
        self.unfollowed: list[str] = []

    # ---------------------------------------------------------------- words
    def refuse(self, why: str) -> NoReturn:
        raise ConfigError(
            f"rl-baselines3-zoo's {self.algo} entry for {printable(self.env_id)} cannot be used: "
            f"{why}."
        )

    def cannot(self, key: str, value: Any, why: str) -> None:
        """One sentence for a setting rlx does not follow."""
        self.unfollowed.append(
            f"rl-baselines3-zoo sets {printable(key)}={_shown(value)} for {self.name} on "
            f"{printable(self.env_id)}; {why.replace('{algo}', self.name)}."
        )

    def put(self, field: str, value: Any) -> bool:
        """Set ``field`` if the config has it; whether it does."""
        if field in self.fields:
            self.values[field] = value
            return True
        return False

    def follow(self, key: str, value: Any, field: str, *, unless: Any = None) -> None:
        """``key`` to the config's ``field`` when it has one; else a sentence, unless the
        value is ``unless`` (what rlx does anyway)."""
        if not self.put(field, value) and value != unless:
            self.cannot(key, value, REASONS.get(key, "rlx's {algo} has no such setting"))

    # ---------------------------------------------------------------- values
    def take(self, settings: dict[str, Any], key: str) -> Any:
        """The setting ``key`` (an entry that leaves out one SB3 has no default for, such as
        ``n_timesteps``, is refused)."""
        if key not in settings:
            self.refuse(f"it sets no {key}")
        return settings.pop(key)

    def number(self, settings: dict[str, Any], key: str) -> float:
        value = self.take(settings, key)
        if not _is_number(value):
            self.refuse(f"{key}={_shown(value)} is not a number")
        return float(value)

    def optional_number(self, settings: dict[str, Any], key: str) -> float | None:
        if settings.get(key) is None:
            settings.pop(key, None)
            return None
        return self.number(settings, key)

    def whole(self, settings: dict[str, Any], key: str, low: int, high: int) -> int:
        value = self.take(settings, key)
        if not _is_whole(value, low, high):
            self.refuse(f"{key}={_shown(value)} is not a whole number from {low} to {high}")
        return int(value)

    def flag(self, settings: dict[str, Any], key: str) -> bool:
        value = self.take(settings, key)
        if not isinstance(value, bool):
            self.refuse(f"{key}={_shown(value)} is not true or false")
        return value

    def schedule(self, key: str, value: Any) -> tuple[float, bool]:
        """A number, or the zoo's ``lin_X`` (X decayed linearly to 0): ``(X, linear)``."""
        if isinstance(value, str):
            if not value.startswith("lin_"):
                self.refuse(
                    f"{key}={_shown(value)} is neither a number nor lin_<number>, the zoo's "
                    "linear schedule"
                )
            try:
                rate = float(value[len("lin_") :])
            except ValueError:
                rate = math.nan
            if not math.isfinite(rate) or rate <= 0:
                self.refuse(f"{key}={_shown(value)} is not lin_<a number above 0>")
            return rate, True
        if not _is_number(value):
            self.refuse(f"{key}={_shown(value)} is not a number or lin_<number>")
        return float(value), False

    # ---------------------------------------------------------------- settings
    def refusals(self, settings: dict[str, Any]) -> None:
        """What makes an entry unusable, and the policy's kind."""
        for key in ("env_wrapper", "vec_env_wrapper"):
            wrappers = settings.pop(key, None)
            if wrappers:
                self.refuse(
                    f"it wraps the env in {_shown(wrappers)} ({key}), which rlx cannot apply, "
                    "and its other settings are tuned for what those wrappers show the agent"
                )
        replay = settings.pop("replay_buffer_class", None)
        if replay:
            self.refuse(f"it replays with {_shown(replay)}, which rlx does not have")
        policy = settings.pop("policy", "MlpPolicy")
        if policy in ("CnnPolicy", "MultiInputPolicy"):
            self.cannot(
                "policy",
                policy,
                "rlx picks its network from the observations themselves (a CNN "
                "for images, an MLP for vectors, flattened dicts)",
            )
        elif policy != "MlpPolicy":
            self.refuse(
                f"policy={_shown(policy)} is not one of SB3's MlpPolicy, CnnPolicy and "
                "MultiInputPolicy"
            )

    def learning_rate(self, value: Any) -> None:
        rate, linear = self.schedule("learning_rate", value)
        rates = [
            f
            for f in ("learning_rate", "actor_learning_rate", "critic_learning_rate")
            if self.put(f, rate)
        ]
        if not rates:
            self.cannot("learning_rate", value, "rlx's {algo} has no learning rate to set")
        elif "anneal_lr" in self.fields:
            self.values["anneal_lr"] = linear
        elif "learning_rate_end" in self.fields:
            self.values["learning_rate_end"] = 0.0 if linear else None
        elif linear:
            why = f"rlx's {{algo}} keeps its learning rate constant, at {rate:g}"
            self.cannot("learning_rate", value, why)

    def policy_kwargs(self, value: Any) -> None:
        given = self.parsed("policy_kwargs", value) if value is not None else {}
        kwargs = {**SB3_POLICY_DEFAULTS[self.algo], **given}
        self.put("hidden_sizes", self.net_arch(kwargs.pop("net_arch")))
        activation = kwargs.pop("activation_fn")
        name = activation.dotted if isinstance(activation, PythonName) else str(activation)
        short = name.rpartition(".")[2].lower()
        if "activation" in self.fields:
            if short in ("tanh", "relu") and name in (short, *_torch_names(short)):
                self.values["activation"] = short
            else:
                default = self.values.get("activation", "tanh")
                self.cannot(
                    "activation_fn",
                    activation,
                    f"rlx's {{algo}} has tanh and relu between hidden layers and keeps {default}",
                )
        elif short != "relu" or name not in (short, *_torch_names(short)):
            self.cannot("activation_fn", activation, "rlx's {algo} uses ReLU between hidden layers")
        if "log_std_init" in kwargs:
            log_std = kwargs.pop("log_std_init")
            if not _is_number(log_std):
                self.refuse(f"policy_kwargs log_std_init={_shown(log_std)} is not a number")
            self.follow("log_std_init", float(log_std), "log_std_init")
        for key in ("ortho_init", "use_expln"):
            if key in kwargs:
                flag = kwargs.pop(key)
                if not isinstance(flag, bool):
                    self.refuse(f"policy_kwargs {key}={_shown(flag)} is not true or false")
                # without the field: rlx initialises orthogonally (ortho_init=True is what it
                # does) and has no expln (use_expln=False is)
                self.follow(key, flag, key, unless=(key == "ortho_init"))
        for key, rest in kwargs.items():
            self.cannot(key, rest, "rlx's {algo} has no such setting")

    def net_arch(self, arch: Any) -> tuple[int, ...]:
        """SB3's ``net_arch``: a list of widths, or ``dict(pi=..., vf=...)`` (``qf`` for the
        critics of SAC and TD3); rlx's networks share one list, the policy's."""
        if isinstance(arch, dict):
            other = "vf" if self.algo in ("ppo", "a2c") else "qf"
            unknown = sorted(set(arch) - {"pi", other})
            if unknown:
                self.refuse(
                    f"policy_kwargs net_arch names {', '.join(map(str, unknown))}, not "
                    f"pi and {other}"
                )
            policy = self.widths(arch.get("pi", []))
            value = self.widths(arch.get(other, []))
            if policy != value:
                self.cannot(
                    "net_arch",
                    arch,
                    f"rlx's {{algo}} gives the policy and the {'value' if other == 'vf' else 'Q'} "
                    f"networks the same hidden layers and uses the policy's, {list(policy)}",
                )
            return policy
        return self.widths(arch)

    def widths(self, widths: Any) -> tuple[int, ...]:
        if (
            not isinstance(widths, list)
            or len(widths) > MAX_LAYERS
            or not all(_is_whole(w, 1, MAX_WIDTH) for w in widths)
        ):
            self.refuse(
                f"policy_kwargs net_arch {_shown(widths)} is not a list of at most {MAX_LAYERS} "
                f"layer widths from 1 to {MAX_WIDTH}"
            )
        return tuple(int(w) for w in widths)

    def normalize(self, value: Any, kwargs: Any) -> None:
        """SB3's VecNormalize: ``normalize`` true (observations and rewards), or its keywords
        as text or a mapping; ``normalize_kwargs`` adds keywords."""
        options: dict[str, Any] = {}
        if isinstance(value, bool) or value is None:
            options = {"norm_obs": bool(value), "norm_reward": bool(value)}
        else:
            options = {"norm_obs": True, "norm_reward": True, **self.parsed("normalize", value)}
        if kwargs is not None:
            options.update(self.parsed("normalize_kwargs", kwargs))
        obs, reward = options.pop("norm_obs"), options.pop("norm_reward")
        if not isinstance(obs, bool) or not isinstance(reward, bool):
            self.refuse(
                f"normalize={_shown(value)} sets norm_obs or norm_reward to other than "
                "true or false"
            )
        if self.algo in ("ppo", "a2c", "dqn"):
            self.put("normalize_obs", obs)
            self.put("normalize_rewards" if self.algo != "dqn" else "scale_rewards", reward)
        else:
            if obs:
                self.cannot("normalize", value, "rlx's {algo} does not normalise observations")
            if reward:
                self.cannot("normalize", value, "rlx's {algo} does not scale rewards")
        for key, rest in options.items():
            self.cannot(f"normalize {key}", rest, "rlx's running normalisation has no such setting")

    def sde(self, settings: dict[str, Any]) -> None:
        """gSDE, where the config has its fields (another rlx version may); off is what rlx
        does without them."""
        use = settings.pop("use_sde", False)
        if not isinstance(use, bool):
            self.refuse(f"use_sde={_shown(use)} is not true or false")
        self.follow("use_sde", use, "use_sde", unless=False)
        for key, off in (("sde_sample_freq", -1), ("use_sde_at_warmup", False)):
            if key not in settings:
                continue
            value = settings.pop(key)
            if not self.put(key, value) and (use or value != off):
                self.cannot(key, value, REASONS[key])

    def on_policy(self, s: dict[str, Any], n_envs: int) -> None:
        n_steps = self.whole(s, "n_steps", 1, MAX_COUNT)
        self.put("num_steps", n_steps)
        self.put("gamma", self.number(s, "gamma"))
        self.put("gae_lambda", self.number(s, "gae_lambda"))
        self.put("ent_coef", self.number(s, "ent_coef"))
        self.put("vf_coef", self.number(s, "vf_coef"))
        self.put("max_grad_norm", self.number(s, "max_grad_norm"))
        self.put("normalize_advantages", self.flag(s, "normalize_advantage"))
        if self.algo == "a2c":
            if not self.flag(s, "use_rms_prop"):
                self.cannot("use_rms_prop", False, REASONS["use_rms_prop"])
            return
        rollout = n_envs * n_steps
        batch = self.whole(s, "batch_size", 1, MAX_COUNT)
        minibatch = min(batch, rollout)  # SB3 takes the whole rollout when the batch is larger
        if rollout % minibatch:
            even = max(d for d in _divisors(rollout) if d <= minibatch)
            self.cannot(
                "batch_size",
                batch,
                f"SB3 ends each epoch over {rollout} samples with a smaller minibatch, rlx "
                f"splits a rollout evenly and takes minibatches of {even}",
            )
            minibatch = even
        self.put("minibatch_size", minibatch)
        self.put("num_epochs", self.whole(s, "n_epochs", 1, MAX_COUNT))
        clip, linear = self.schedule("clip_range", s.pop("clip_range"))
        self.put("clip_eps", clip)
        if linear and not self.put("anneal_clip", True):
            self.cannot("clip_range", f"lin_{clip:g}", "rlx's {algo} keeps its clip constant")
        elif not linear:
            self.put("anneal_clip", False)
        value_clip = s.pop("clip_range_vf")
        if isinstance(value_clip, str):
            self.cannot("clip_range_vf", value_clip, "rlx's value clip is a constant: it stays off")
        elif value_clip is not None and not _is_number(value_clip):
            self.refuse(f"clip_range_vf={_shown(value_clip)} is not a number")
        else:
            self.put("clip_value", None if value_clip is None else float(value_clip))
        self.put("target_kl", self.optional_number(s, "target_kl"))

    def off_policy(self, s: dict[str, Any], n_envs: int) -> None:
        self.put("buffer_size", self.whole(s, "buffer_size", 1, MAX_COUNT))
        self.put("learning_starts", self.whole(s, "learning_starts", 0, MAX_COUNT))
        self.put("batch_size", self.whole(s, "batch_size", 1, MAX_COUNT))
        self.put("tau", self.number(s, "tau"))
        self.put("gamma", self.number(s, "gamma"))
        # SB3 counts train_freq in vector steps, rlx in env steps over all copies
        train_freq = self.train_freq(s.pop("train_freq"))
        self.put("train_freq", train_freq * n_envs)
        gradient_steps = self.whole(s, "gradient_steps", -1, MAX_COUNT)
        self.put("gradient_steps", train_freq if gradient_steps == -1 else gradient_steps)
        n_steps = s.pop("n_steps", 1)
        if "n_step" in self.fields:
            s["n_steps"] = n_steps
            self.put("n_step", self.whole(s, "n_steps", 1, MAX_COUNT))
        elif n_steps != 1:
            self.cannot("n_steps", n_steps, "rlx's {algo} learns from one-step targets")
        if self.algo == "dqn":
            self.put("sync_every", self.whole(s, "target_update_interval", 1, MAX_COUNT))
            self.put("exploration_fraction", self.number(s, "exploration_fraction"))
            self.put("epsilon_start", self.number(s, "exploration_initial_eps"))
            self.put("epsilon_end", self.number(s, "exploration_final_eps"))
            self.put("max_grad_norm", self.number(s, "max_grad_norm"))
        elif self.algo == "sac":
            self.entropy(s)
        else:
            self.noise(s)
            self.put("policy_delay", self.whole(s, "policy_delay", 1, MAX_COUNT))
            self.put("policy_noise", self.number(s, "target_policy_noise"))
            self.put("noise_clip", self.number(s, "target_noise_clip"))

    def train_freq(self, value: Any) -> int:
        """An int, or SB3's ``[n, "step"]``; ``[n, "episode"]`` has no rlx counterpart."""
        if isinstance(value, (list, tuple)) and len(value) == 2 and value[1] == "step":
            value = value[0]
        if isinstance(value, (list, tuple)) and len(value) == 2 and value[1] == "episode":
            self.refuse(
                f"train_freq={_shown(value)} trains once per episode, and rlx's train_freq "
                "counts env steps"
            )
        if not _is_whole(value, 1, MAX_COUNT):
            self.refuse(f"train_freq={_shown(value)} is not a whole number of steps from 1")
        return int(value)

    def entropy(self, s: dict[str, Any]) -> None:
        """SAC's temperature: ``'auto'`` (tuned from 1.0, SB3's start), ``'auto_X'`` (tuned
        from X) or a fixed X; the target entropy ``'auto'`` (-dim(A)) or a number."""
        coef = s.pop("ent_coef")
        if isinstance(coef, str):
            start = 1.0 if coef == "auto" else math.nan
            if coef.startswith("auto_"):
                try:
                    start = float(coef[len("auto_") :])
                except ValueError:
                    start = math.nan
            if not math.isfinite(start) or start <= 0:
                self.refuse(
                    f"ent_coef={_shown(coef)} is not 'auto', 'auto_<number above 0>' or a number"
                )
            self.put("autotune", True)
            self.put("alpha", start)
        elif _is_number(coef):
            self.put("autotune", False)
            self.put("alpha", float(coef))
        else:
            self.refuse(f"ent_coef={_shown(coef)} is not 'auto', 'auto_<number>' or a number")
        target = s.pop("target_entropy")
        if target == "auto":
            self.put("target_entropy", None)
        elif _is_number(target):
            self.put("target_entropy", float(target))
        else:
            self.refuse(f"target_entropy={_shown(target)} is not 'auto' or a number")
        interval = s.pop("target_update_interval")
        if interval != 1:
            self.cannot(
                "target_update_interval",
                interval,
                "rlx's SAC moves its target critics every gradient step",
            )

    def noise(self, s: dict[str, Any]) -> None:
        """TD3's exploration noise: SB3 adds none unless the entry names a kind; ``normal``
        with ``noise_std`` is rlx's Gaussian noise (both in half-widths of the box)."""
        kind = s.pop("noise_type")
        if kind is None:
            self.put("exploration_noise", 0.0)
            return
        if "noise_std" not in s:
            self.refuse(f"noise_type={_shown(kind)} comes without noise_std")
        std = self.number(s, "noise_std")
        self.put("exploration_noise", std)
        if kind != "normal":
            self.cannot(
                "noise_type",
                kind,
                f"rlx's TD3 explores with Gaussian noise only, here of std "
                f"{std:g}, uncorrelated in time",
            )

    # ---------------------------------------------------------------- policy_kwargs text
    def parsed(self, key: str, value: Any) -> dict[str, Any]:
        """``policy_kwargs`` (or ``normalize``) text as a dict, read by :func:`parse_kwargs`;
        a mapping as it is, its values checked the same way."""
        try:
            parsed = parse_kwargs(value)
        except ValueError as exc:
            self.refuse(
                f"its {key} {exc}; rlx reads only dict(...) and {{...}} of numbers, text, lists "
                "and names such as nn.ReLU, and never evaluates it"
            )
        return parsed


# ============================================================================ safe parsing
@dataclass(frozen=True)
class PythonName:
    """A dotted name in ``policy_kwargs`` (``nn.ReLU``), kept as its text, never looked up."""

    dotted: str

    def __repr__(self) -> str:
        return self.dotted


def parse_kwargs(value: Any) -> dict[str, Any]:
    """The zoo's ``policy_kwargs`` text (``"dict(net_arch=[64, 64], activation_fn=nn.ReLU)"``)
    as a dict, read from its :mod:`ast`: only ``dict(...)`` calls with keywords, ``{...}`` with
    text keys, lists, tuples, numbers (a leading minus), text, True/False/None and dotted names
    (:class:`PythonName`). Nothing is evaluated; a longer text than :data:`MAX_TEXT`, deeper
    than :data:`MAX_DEPTH` or of more than :data:`MAX_NODES` values is a ValueError saying why.
    A mapping is checked the same way."""
    if isinstance(value, Mapping):
        counter = [0]
        return {k: _checked_value(v, 1, counter) for k, v in _checked_keys(value).items()}
    if not isinstance(value, str):
        raise ValueError(f"is {_kind(value)}, not text")
    if len(value) > MAX_TEXT:
        raise ValueError(f"is {len(value)} characters long, more than the {MAX_TEXT} rlx reads")
    try:
        tree = ast.parse(value.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ValueError(f"is not a Python expression ({type(exc).__name__})") from None
    result = _literal(tree.body, 0, [0])
    if not isinstance(result, dict):
        raise ValueError(f"is {_kind(result)}, not dict(...)")
    return result


def _literal(node: ast.AST, depth: int, counter: list[int]) -> Any:
    counter[0] += 1
    if counter[0] > MAX_NODES:
        raise ValueError(f"holds more than {MAX_NODES} values")
    if depth > MAX_DEPTH:
        raise ValueError(f"nests deeper than {MAX_DEPTH} levels")
    if isinstance(node, ast.Constant):
        if isinstance(node.value, (bool, int, float, str)) or node.value is None:
            return node.value
        raise ValueError(f"holds the constant {_shown(node.value)}")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = node.operand.value if isinstance(node.operand, ast.Constant) else None
        if isinstance(operand, (int, float)) and not isinstance(operand, bool):
            return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(item, depth + 1, counter) for item in node.elts]
    if isinstance(node, ast.Dict):
        result = {}
        for key, item in zip(node.keys, node.values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                raise ValueError("holds a {...} whose keys are not all text")
            result[key.value] = _literal(item, depth + 1, counter)
        return result
    if isinstance(node, ast.Call):
        if not (isinstance(node.func, ast.Name) and node.func.id == "dict"):
            raise ValueError("calls something other than dict(...)")
        if node.args or any(k.arg is None for k in node.keywords):
            raise ValueError("calls dict(...) with other than name=value arguments")
        return {k.arg: _literal(k.value, depth + 1, counter) for k in node.keywords}
    if isinstance(node, (ast.Name, ast.Attribute)):
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.insert(0, node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or len(parts) > 3:
            raise ValueError("holds an attribute of something other than a name")
        return PythonName(".".join([node.id, *parts]))
    raise ValueError(f"holds an expression rlx does not read ({type(node).__name__})")


def _checked_keys(mapping: Mapping[Any, Any]) -> dict[str, Any]:
    if not all(isinstance(k, str) for k in mapping):
        raise ValueError("is a mapping whose keys are not all text")
    return dict(mapping)


def _checked_value(value: Any, depth: int, counter: list[int]) -> Any:
    """A YAML value in a mapping given for ``policy_kwargs``: the same kinds as the text."""
    counter[0] += 1
    if counter[0] > MAX_NODES or depth > MAX_DEPTH:
        raise ValueError(f"holds more than {MAX_NODES} values or nests deeper than {MAX_DEPTH}")
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_checked_value(v, depth + 1, counter) for v in value]
    if isinstance(value, Mapping):
        return {k: _checked_value(v, depth + 1, counter) for k, v in _checked_keys(value).items()}
    raise ValueError(f"holds {_kind(value)}")


# ============================================================================ small helpers
def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_whole(value: Any, low: int, high: int) -> bool:
    if not _is_number(value) or not low <= value <= high:
        return False
    return isinstance(value, int) or float(value).is_integer()


def _divisors(n: int) -> list[int]:
    """The divisors of ``n``, by trial up to its square root."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def _torch_names(short: str) -> tuple[str, ...]:
    """How the zoo writes torch's activation (``nn.ReLU``, ``th.nn.ReLU``, ``torch.nn.ReLU``)."""
    cls = {"tanh": "Tanh", "relu": "ReLU"}[short]
    return (cls, f"nn.{cls}", f"th.nn.{cls}", f"torch.nn.{cls}")


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple, _REPR.maxdict = 3, 8, 8, 8
_REPR.maxstring, _REPR.maxother, _REPR.maxlong = 60, 60, 40


def _shown(value: Any, limit: int = 80) -> str:
    """A value as a sentence shows it: its repr, bounded (:mod:`reprlib`: a few levels and
    items, so a YAML alias bomb is not expanded), cut at ``limit`` characters, control
    characters escaped."""
    text = printable(_REPR.repr(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


__all__ = [
    "ALGORITHMS",
    "CARRIED_VERSION",
    "SB3_DEFAULTS",
    "PythonName",
    "ZooPreset",
    "ZooSource",
    "is_gymnasium_env",
    "parse_kwargs",
    "read_hyperparams",
    "source_for",
    "translate",
    "zoo_envs",
    "zoo_preset",
]
