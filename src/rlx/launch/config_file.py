"""Config files: a run's settings in a file, for ``rlx train --config FILE``.

A config file is YAML (or JSON, which YAML reads too), or a run folder's ``config.json``
(give the file or the folder). It is one mapping:

```yaml
algo: ppo                 # optional: `rlx train --config FILE` then needs no ALGO
env: CartPole-v1          # optional: --env given beside it wins
env_kwargs: {}            # optional: keyword arguments for gymnasium.make
config:                   # the algorithm's config fields (rlx train ALGO --help lists them)
  learning_rate: 0.001
  num_steps: 64
```

Config fields may also sit at the top level beside ``algo`` and ``env`` (a flat file of
fields). A run folder's ``config.json`` gives its algorithm, env (with its keyword arguments)
and every field; what it records about the run (history, versions, ...) is left out. Flags
given beside ``--config`` override the file's values. ``rlx tune`` writes its best trial as
such a file (``STUDY_DIR/best.yaml``, :func:`write_config_file`).

A file that is not YAML, names a field the algorithm does not have, or gives a value of the
wrong type is one :class:`~rlx.errors.ConfigError` sentence naming the file and the field.
A number written the way people write it (``3e-4``, which YAML 1.1 reads as text) is read as
the number it is.

Whose values are these? A config file given on the command line is the user's own, except one
a folder records: a run folder's ``config.json`` (or any file in a run folder) and a study's
``best.yaml`` (any file in a study folder) travel with folders other people write, so what
they say about joining a Ray cluster or running code unisolated is not taken from them
(:attr:`ConfigFile.recorded`, :data:`rlx.launch.plan.USER_ONLY_FIELDS`): the flag on the command
that trains is. Their env, when it is code, needs ``--trust-env-code`` as any file's does.
YAML is read with its aliases bounded (:data:`MAX_ALIASES`): a file that expands into more
than that is refused in one sentence instead of filling the memory.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlx.errors import ConfigError

RUN_KEYS = ("algo", "env", "env_kwargs", "config")
"""The keys of a config file that are not config fields."""
RECORD_KEYS = ("seed", "preset", "env_recipe", "versions", "created", "command", "history")
"""What a run folder's ``config.json`` records about the run besides its settings: ignored."""
CONFIG_JSON = "config.json"
_NUMBER = re.compile(r"^[+-]?(\d[\d_]*\.?\d*|\.\d+)([eE][+-]?\d+)?$")


@dataclasses.dataclass(frozen=True)
class ConfigFile:
    """What a config file says: the algorithm and env (None when it names none), the env's
    keyword arguments, and the config fields as written."""

    path: Path
    algo: str | None
    env: str | None
    env_kwargs: dict[str, Any]
    fields: dict[str, Any]
    recorded: bool = False
    """True for a file a folder records (a run folder's ``config.json``, any file in a run or
    study folder such as ``best.yaml``): its values are data, and what only the user sets
    (:data:`rlx.launch.plan.USER_ONLY_FIELDS`: joining a Ray cluster, running code unisolated) is
    not taken from it. A config file elsewhere is the user's own."""


def read_config_file(path: str | Path) -> ConfigFile:
    """Read a YAML config file or a run folder's ``config.json`` (the file, or its folder).

    The fields are read as written; :func:`checked_fields` checks them against an algorithm.
    """
    path = Path(path)
    if path.is_dir():
        if not (path / CONFIG_JSON).is_file():
            raise ConfigError(
                f"--config {path} is a folder without a {CONFIG_JSON}; give a YAML file or a "
                "run folder."
            )
        path = path / CONFIG_JSON
    data = _load(path)
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise ConfigError(
            f"config file {path} holds {kind}, not a mapping of settings (algo, env, config)."
        )
    record = path.name == CONFIG_JSON and "versions" in data  # a run folder's record
    algo, env = _text(data, "algo", path), _text(data, "env", path)
    env_kwargs = _mapping(data, "env_kwargs", path)
    fields = _mapping(data, "config", path)
    if record:
        recipe = data.get("env_recipe")
        if isinstance(recipe, dict) and isinstance(recipe.get("kwargs"), dict):
            env_kwargs = {**recipe["kwargs"], **env_kwargs}
    else:
        flat = {k: v for k, v in data.items() if k not in RUN_KEYS}
        twice = sorted(set(flat) & set(fields))
        if twice:
            raise ConfigError(
                f"config file {path} sets {twice[0]} twice, at the top level and under config; "
                "keep one."
            )
        fields = {**flat, **fields}
    return ConfigFile(path, algo, env, env_kwargs, fields, recorded=in_a_folder(path))


def in_a_folder(path: Path) -> bool:
    """Whether the config file ``path`` is what a run or study folder records: a run
    folder's ``config.json``, or any file beside one or beside a study's journal."""
    from rlx.runs.folder import STUDY_JOURNAL

    folder = path.parent
    return (
        path.name == CONFIG_JSON
        or (folder / CONFIG_JSON).is_file()
        or (folder / STUDY_JOURNAL).is_file()
    )


MAX_YAML_NODES = 100_000
"""The most values a YAML config file may expand into, its aliases followed (a config is a
few dozen; a "billion laughs" of nested aliases is refused before it is built)."""


def _load(path: Path) -> Any:
    from rlx.errors import RunError
    from rlx.runs.files import JsonDepthError, loads_json, read_text_bounded

    try:
        text = read_text_bounded(path)
    except FileNotFoundError as exc:
        raise ConfigError(f"config file {path} does not exist.") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not YAML (not UTF-8 text).") from exc
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read ({exc.strerror or exc}).") from exc
    except RunError as exc:
        raise ConfigError(f"config file {path} is not one rlx reads ({exc})") from exc
    if path.suffix == ".json":
        try:
            return loads_json(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"config file {path} is not valid JSON ({exc.msg} at line {exc.lineno})."
            ) from exc
        except (JsonDepthError, ValueError) as exc:
            raise ConfigError(f"config file {path} is not JSON rlx reads ({exc}).") from exc
    return _load_yaml(text, path)


@functools.cache
def _loader() -> Any:
    """YAML's safe loader with the scalars a config never holds left as text: a timestamp
    (``2001-13-45`` is a ValueError to YAML's own) and a base-60 number (``1:2:...`` of
    thousands of parts); an integer of more than :data:`rlx.runs.files.MAX_INT_DIGITS` digits
    is refused (Python converts at most 4300)."""
    import yaml

    from rlx.runs.files import MAX_INT_DIGITS

    class Loader(yaml.SafeLoader):
        pass

    def text(loader: Any, node: Any) -> str:
        return str(loader.construct_scalar(node))

    def number(kind: str) -> Any:
        def construct(loader: Any, node: Any) -> Any:
            value = str(loader.construct_scalar(node))
            if ":" in value:
                return value  # base 60: text, as YAML 1.2 reads it
            if kind == "int" and len(value.lstrip("+-").replace("_", "")) > MAX_INT_DIGITS:
                raise yaml.constructor.ConstructorError(
                    None, None, f"an integer of more than {MAX_INT_DIGITS} digits", node.start_mark
                )
            parent = yaml.SafeLoader.yaml_constructors[f"tag:yaml.org,2002:{kind}"]
            return parent(loader, node)

        return construct

    Loader.add_constructor("tag:yaml.org,2002:timestamp", text)
    Loader.add_constructor("tag:yaml.org,2002:int", number("int"))
    Loader.add_constructor("tag:yaml.org,2002:float", number("float"))
    return Loader


def _load_yaml(text: str, path: Path) -> Any:
    """YAML's safe loader (:func:`_loader`: timestamps and base-60 numbers are text, integers
    bounded), its document refused when it expands (aliases followed) into more than
    :data:`MAX_YAML_NODES` values, refers to itself, or nests past Python's limit."""
    import yaml

    loader = _loader()(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _count_nodes(node, {}, set(), path)
            return loader.construct_document(node)
        return None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise ConfigError(f"config file {path} is not YAML ({problem}{where}).") from exc
    except RecursionError as exc:
        raise ConfigError(f"config file {path} nests too deeply to be a config.") from exc
    except (ValueError, OverflowError) as exc:  # a scalar YAML's constructors cannot convert
        raise ConfigError(f"config file {path} holds a value YAML cannot read ({exc}).") from exc
    finally:
        loader.dispose()


def _count_nodes(node: Any, counted: dict[int, int], open_: set[int], path: Path) -> int:
    """How many values ``node`` expands into, its aliases (shared nodes) followed; ConfigError
    past :data:`MAX_YAML_NODES` or for a node inside itself."""
    key = id(node)
    if key in counted:
        return counted[key]
    if key in open_:
        raise ConfigError(f"config file {path} holds a YAML alias that refers to itself.")
    open_.add(key)
    total = 1
    if isinstance(node.value, list):
        for item in node.value:
            for child in item if isinstance(item, tuple) else (item,):
                total += _count_nodes(child, counted, open_, path)
                if total > MAX_YAML_NODES:
                    raise ConfigError(
                        f"config file {path} expands into more than {MAX_YAML_NODES} values "
                        "(YAML aliases repeated inside each other); a config is a few dozen."
                    )
    open_.discard(key)
    counted[key] = total
    return total


def _text(data: Mapping[str, Any], key: str, path: Path) -> str | None:
    value = data.get(key)
    if value is None or isinstance(value, str):
        return value
    raise ConfigError(f"config file {path} gives {key}={value!r}; it must be text.")


def _mapping(data: Mapping[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ConfigError(
            f"config file {path} gives {key} as {type(value).__name__}; it must be a mapping of "
            "names to values."
        )
    return dict(value)


def checked_fields(spec: Any, config_file: ConfigFile) -> dict[str, Any]:
    """The file's fields for the algorithm ``spec`` (a :class:`rlx.registry.Algorithm`):
    renamed fields under their new names, numbers written as text read as numbers, lists as
    tuples; ConfigError naming the file and the first field the config has not, or whose
    value has the wrong type."""
    from rlx.launch.plan import check_names, check_types

    fields = {spec.renamed.get(k, k): v for k, v in config_file.fields.items()}
    hints = typing.get_type_hints(spec.config)
    fields = {name: _as_field_type(value, hints.get(name)) for name, value in fields.items()}
    try:
        check_names(spec, fields)
        check_types(spec, fields, where="")
    except ConfigError as exc:
        raise ConfigError(f"config file {config_file.path}: {exc}") from None
    return fields


def _as_field_type(value: Any, annotation: Any) -> Any:
    """``"3e-4"`` as 3e-4 for a float field (YAML 1.1 reads a number without a dot in its
    mantissa as text); a list as a tuple for a tuple field."""
    if annotation is None:
        return value
    args = typing.get_args(annotation)
    floats = annotation is float or float in args
    if floats and isinstance(value, str) and _NUMBER.match(value.strip()):
        return float(value.replace("_", ""))
    tuples = typing.get_origin(annotation) is tuple or any(
        typing.get_origin(a) is tuple for a in args
    )
    if tuples and isinstance(value, list):
        return tuple(value)
    return value


def write_config_file(
    path: str | Path,
    *,
    algo: str,
    env: str,
    fields: Mapping[str, Any],
    env_kwargs: Mapping[str, Any] | None = None,
    comment: str = "",
) -> Path:
    """Write a YAML config file (``comment``: lines at its top), atomically."""
    import yaml

    from rlx.runs.files import write_atomic

    path = Path(path)
    data: dict[str, Any] = {"algo": algo, "env": env}
    if env_kwargs:
        data["env_kwargs"] = dict(env_kwargs)
    data["config"] = {name: _plain(value) for name, value in fields.items()}
    head = "".join(f"# {line}\n" if line else "#\n" for line in comment.splitlines())
    text = head + yaml.dump(data, Dumper=_dumper(), sort_keys=False, default_flow_style=False)
    write_atomic(path, text)  # never through a link planted at its name or its temporary's
    return path


def _dumper() -> type:
    import yaml

    class Dumper(yaml.SafeDumper):
        """Mappings as blocks, lists on one line (``hidden_sizes: [64, 64]``)."""

    def flow_list(dumper: yaml.SafeDumper, value: list) -> Any:
        return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=True)

    Dumper.add_representer(list, flow_list)
    return Dumper


def _plain(value: Any) -> Any:
    """A value YAML writes plainly: tuples as lists, numpy numbers as Python ones."""
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    return value


__all__ = ["ConfigFile", "checked_fields", "read_config_file", "write_config_file"]
