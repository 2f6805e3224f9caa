"""The ``rlx`` command line: parses once, calls the public API, prints. No algorithm logic and
no API logic lives here.

Every command's flags come from a frozen dataclass (:mod:`rlx.flags`, the standard library's
argparse): a field, its default and its docstring are written once, and every ``--help`` is
generated from them. ``rlx train ALGO`` and ``rlx align STAGE`` take the algorithm's config
dataclass itself, beside the options every run takes (:class:`EnvOptions`,
:class:`RunOptions`). A run's flags are parsed once into the values the user gave, and
:func:`rlx.launch.plan.plan` resolves the rest (defaults, the env's preset, a resumed run's record).

A user error (:class:`rlx.errors.RLXError`, a flag that does not parse included) prints one
line on stderr and exits with code 2, without a traceback.

Exit codes of a training command: 0 the run completed its budget; 2 bad input; 3 a doctor rule
of ``--stop-on`` ended the run (``status: stopped`` and ``stopped_by`` in summary.json); 130
Ctrl-C or SIGTERM ended it (``status: interrupted``). Every run that ends early has a checkpoint
that ``--resume`` continues from. Output cut short by a closed pipe (``rlx solve ... | head``)
ends quietly with 141, as a shell's SIGPIPE would.

``rlx --help``, ``rlx --version`` and ``rlx list`` import neither torch nor any algorithm.

Why one module past rlx's 800 lines: the command line is one parser tree, and each command
is its flags' dataclass beside the few lines that hand them on (to :mod:`rlx.launch` for
training); the docs' command-line reference is generated from these in one pass. Splitting per
command would spread one ``--help`` vocabulary over a dozen files that each hold little.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import inspect
import io
import json
import os
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any, Literal

from rlx import flags
from rlx.diagnostics.references import using
from rlx.errors import ConfigError, RLXError, printable

# Exit codes by the status in summary.json (an early end is complete on disk, but the work
# asked for is not done, so a script sees it).
EXIT_CODES = {"completed": 0, "stopped": 3, "interrupted": 130}
BROKEN_PIPE_EXIT = 141
GAME_ENV_HELP = "board game: tictactoe or connect4 (required unless --resume)"


class PrintableOut(io.TextIOBase):
    """A text stream that writes to ``stream`` what :func:`rlx.errors.printable` leaves of
    it: what an ``rlx`` command prints to stdout (a folder's env id, paths, a finding) reaches
    the terminal without a control character."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(printable(text))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def fileno(self) -> int:
        return int(self.stream.fileno())

    def isatty(self) -> bool:
        return bool(self.stream.isatty())

    def writable(self) -> bool:
        return True


def terminal() -> Any:
    """The stream rich writes to: stdout itself, not :class:`PrintableOut` (rich writes escape
    codes of its own, for colour and tables; the text it is given from a folder is passed
    through :func:`rlx.errors.printable` and rich's markup escape first)."""
    out = sys.stdout
    return out.stream if isinstance(out, PrintableOut) else out


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from rlx.launch.references import BOOK

    try:  # every command's doctor compares runs with rlx's references (presets, the zoo)
        with contextlib.redirect_stdout(PrintableOut(sys.stdout)), using(BOOK):
            return _dispatch(argv)
    except RLXError as exc:
        print(f"rlx: error: {printable(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("rlx: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`| head`): point stdout at /dev/null so the interpreter's
        # final flush does not raise again, and end without a word
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE_EXIT


@dataclasses.dataclass(frozen=True)
class Command:
    """One ``rlx`` command: what runs it, and what ``rlx --help`` says of it."""

    run: Callable[[list[str]], int]
    summary: str


def _commands() -> dict[str, Command]:
    return {
        "train": Command(_train, "train an agent into a run folder"),
        "eval": Command(_eval, "evaluate a run's agent"),
        "solve": Command(_solve, "solve a tabular MDP exactly"),
        "list": Command(_list, "the algorithms, and when to use each"),
        "align": Command(_align, "align a language model (extra llm)"),
        "doctor": Command(_doctor, "diagnose runs (rlx, SB3, TRL, TensorBoard)"),
        "report": Command(_report, "a self-contained HTML report of runs or a study"),
        "tune": Command(_tune, "search hyperparameters with Optuna (extra tune)"),
        "recommend": Command(_recommend, "which method to use, and the command"),
        "play": Command(_play, "play a board game against an agent"),
    }


def _dispatch(argv: list[str]) -> int:
    commands = _commands()
    if not argv or argv[0] in ("-h", "--help"):
        print(_top_parser(commands).format_help().rstrip())
        return 0
    if argv[0] == "--version":
        from rlx.version import VERSION

        print(f"rlx {VERSION}")
        return 0
    command, rest = argv[0], argv[1:]
    if command.startswith("-"):
        _top_parser(commands).reject(command)
    if command not in commands:
        close = difflib.get_close_matches(command, list(commands), n=2, cutoff=0.6)
        hint = f"; did you mean {' or '.join(close)}?" if close else "."
        raise ConfigError(f"unknown command {command!r}; choose one of {', '.join(commands)}{hint}")
    return commands[command].run(rest)


def _top_parser(commands: dict[str, Command]) -> flags.FlagParser:
    summaries = {name: command.summary for name, command in commands.items()}
    parser = flags.FlagParser(
        "rlx",
        "Reinforcement learning from the MDP five-tuple to aligning a language model,\n"
        "with a doctor for every run.",
        usage="rlx COMMAND [ARGS ...]",
        epilog=f"{listing('commands', summaries)}\n\nexample:\n"
        "  rlx train q-learning --env FrozenLake-v1 --run-dir runs/ql\n"
        "  rlx eval runs/ql && rlx doctor runs/ql\n\n"
        "Every command has its own --help.",
    )
    parser.add_argument("command", metavar="COMMAND", help="one of the commands below")
    parser.add_argument("--version", action="store_true", help="the version of rlx")
    return parser


def listing(title: str, items: dict[str, str]) -> str:
    """``title:`` and one aligned line per name and what it is, for a parser's epilog."""
    width = max(len(name) for name in items)
    return "\n".join([f"{title}:", *(f"  {name:<{width}}  {what}" for name, what in items.items())])


# ---------------------------------------------------------------------------- rlx list
@dataclasses.dataclass(frozen=True)
class ListArgs:
    """The algorithms rlx trains, what each is, and when to use it (from the method chooser:
    `rlx recommend TARGET` applies it to your env or data)."""


AREAS = (
    ("rlx.tabular.", "Tabular learners (rlx train)"),
    ("rlx.agents.", "Deep RL agents (rlx train)"),
    ("rlx.games.", "Board games (rlx train)"),
    ("rlx.llm.", "Language models (rlx align)"),
)


def _list(argv: list[str]) -> int:
    flags.parse(ListArgs, argv, "rlx list")
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from rlx import registry
    from rlx.recommend import use_when

    console = Console(file=terminal())
    names = registry.names()
    for prefix, title in (*AREAS, ("", "Plug-ins")):
        inside = [n for n in names if _module_of(n).startswith(prefix)]
        names = [n for n in names if n not in inside]
        if not inside:
            continue
        table = Table("algorithm", "use when", "what it is", title=title, title_justify="left")
        for name in inside:
            # escape: summaries quote formulas such as Q[s][a], which rich reads as markup
            table.add_row(name, escape(use_when(name)), escape(registry.summary(name)))
        console.print(table)
    return 0


def _module_of(name: str) -> str:
    from rlx import registry

    builtin = registry.BUILTINS.get(name)
    return builtin.module if builtin is not None else ""


# ---------------------------------------------------------------------------- training runs
@dataclasses.dataclass(frozen=True)
class EnvOptions:
    """Where a run trains."""

    env: str | None = field(default=None, metadata={flags.METAVAR: "ID"})
    """Gymnasium id, GridWorld / GridWorld-RxC, or package.module:factory (your env); required
    unless --resume"""
    env_kwargs: tuple[str, ...] = field(
        default=(), metadata={flags.METAVAR: "KEY=VALUE", flags.REPEATABLE: True}
    )
    """keyword arguments for gymnasium.make or the entry point (numbers and true/false are
    read as such)"""
    trust_env_code: bool = False
    """with --resume, let the run folder's env be rebuilt from code its config.json names (an
    entry point, or a Gymnasium spec that is not the registered one): only for a folder you
    trust"""


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """Where a run is written, and how it is watched."""

    run_dir: str | None = field(default=None, metadata={flags.METAVAR: "DIR"})
    """run folder (default runs/<algo>-<env>-<time>)"""
    resume: bool = False
    """continue the run in --run-dir from its latest checkpoint (a run that ended before its
    first checkpoint starts over)"""
    resume_from: str | None = field(default=None, metadata={flags.METAVAR: "CHECKPOINT"})
    """with --resume, the step checkpoint to continue from (its step, or its file in
    RUN_DIR/checkpoints) instead of the latest: what was logged after it is cut"""
    overwrite: bool = False
    """start over in --run-dir, deleting the run it holds once the new one has started"""
    doctor: bool = True
    """run the doctor's rules on the metrics as they are logged (--no-doctor: only at the
    end, by rlx doctor)"""
    tensorboard: bool = False
    """also write TensorBoard logs to RUN_DIR/tensorboard"""
    wandb: bool = False
    """also log to Weights & Biases (extra wandb), offline in RUN_DIR/wandb unless WANDB_MODE
    is set"""
    progress: bool = True
    """show a progress bar when the terminal is interactive"""
    stop_on: tuple[str, ...] = field(default=(), metadata={flags.METAVAR: "RULE"})
    """doctor rules that end the run (checkpoint saved; exit code 3), e.g. kl-too-high"""
    seeds: tuple[int, ...] = field(default=(), metadata={flags.METAVAR: "SEED"})
    """train one run per seed (e.g. --seeds 0 1 2 3 4) into RUN_DIR/seed-SEED, listed in
    RUN_DIR/group.json; rlx report RUN_DIR shows their mean with a 95% interval"""
    jobs: int | None = field(default=None, metadata={flags.METAVAR: "N"})
    """with --seeds, how many train at once, one process and one torch thread each (default:
    one per seed, up to the CPU cores; 1: one after another)"""
    config: str | None = field(default=None, metadata={flags.METAVAR: "FILE"})
    """a config file: YAML (algo, env, config fields; rlx tune writes one as best.yaml) or a
    run folder's config.json; flags given beside it override it"""
    heal: bool = False
    """when a doctor rule that names a change fires, roll back to the last checkpoint before
    its evidence, apply the change and go on (checkpoints every twentieth of the budget, all
    kept, unless --checkpoint-every-s/--checkpoint-every-steps is given)"""
    heal_max: int | None = field(default=None, metadata={flags.METAVAR: "N"})
    """with --heal, the most rollbacks (default 3)"""


RUN_OPTIONS = frozenset(f.name for c in (EnvOptions, RunOptions) for f in dataclasses.fields(c))


def _train(argv: list[str]) -> int:
    from rlx import registry

    if not argv or argv[0] in ("-h", "--help"):
        if not argv:
            raise ConfigError(
                "rlx train needs an algorithm name first, one of: "
                f"{', '.join(_agent_names())} (see `rlx train --help`)."
            )
        _train_parser().print_help()
        return 0
    if argv[0].startswith("-"):
        algo = _algo_of_config_file(argv)
        if algo is None:
            raise ConfigError(
                f"rlx train needs an algorithm name before {argv[0]}, one of: "
                f"{', '.join(_agent_names())}."
            )
        argv = [algo, *argv]
    name = argv[0].strip().lower().replace("_", "-")
    if name in registry.LANGUAGE_MODEL_STAGES:
        stage = {"rlhf-ppo": "rlhf"}.get(name, name)
        raise ConfigError(f"{name} trains a language model: use `rlx align {stage} ...`.")
    spec = registry.get(argv[0])
    prog = f"rlx train {spec.name}"
    if spec.name in TEXT_ENV_ALGOS:
        given = _run_parser(spec, prog, data_file=False).given(argv[1:])
        _check_text_env(given.get("env"), bool(given.get("trust_env_code")))
    return _run(spec, argv[1:], prog, data_file=False)


def _algo_of_config_file(argv: list[str]) -> str | None:
    """The algorithm the file of ``--config FILE`` names (``rlx train --config FILE``); None
    without ``--config``."""
    from rlx.launch.config_file import read_config_file

    path = None
    for i, arg in enumerate(argv):
        if arg == "--config" and i + 1 < len(argv):
            path = argv[i + 1]
        elif arg.startswith("--config="):
            path = arg.split("=", 1)[1]
    if path is None:
        return None
    algo = read_config_file(path).algo
    if algo is None:
        raise ConfigError(
            f"config file {path} names no algorithm; give it first: rlx train ALGO --config {path}."
        )
    return algo


def _train_parser() -> flags.FlagParser:
    from rlx import registry

    algorithms = {name: registry.summary(name) for name in _agent_names()}
    parser = flags.FlagParser(
        "rlx train",
        "Train an agent into a run folder (config.json, metrics, checkpoints, summary).",
        usage="rlx train ALGO --env ID [--FIELD VALUE ...]",
        epilog=f"{listing('algorithms', algorithms)}\n\n`rlx train ALGO --help` lists every "
        "config field with its default;\n`rlx list` says when to use each; language models "
        "train with `rlx align`.",
    )
    parser.add_argument("algo", metavar="ALGO", help="the algorithm, one of those below")
    return parser


def _agent_names() -> list[str]:
    from rlx import registry

    return [n for n in registry.names() if n not in registry.LANGUAGE_MODEL_STAGES]


def _run_parser(spec: Any, prog: str, *, data_file: bool) -> flags.FlagParser:
    """The flags of one training run: the options every run takes, then the algorithm's
    config fields, in groups."""
    if data_file:
        parser = flags.FlagParser(
            prog,
            f"{spec.name}: {spec.summary}.\n\nNeeds --model DIR and --data FILE. The trained "
            "model is saved to RUN_DIR/model. Fields left at None are chosen from the model and "
            "the data and written to RUN_DIR/config.json.",
            usage=f"{prog} [--model DIR] [--data FILE] [--FIELD VALUE ...]",
        )
    else:
        from rlx.launch.presets import preset_listing

        presets = preset_listing(spec)
        parser = flags.FlagParser(
            prog,
            f"Train {spec.name}: {spec.summary}\n\n"
            f"Budget: {flags.flag_name(spec.budget_field)} ({spec.unit}). Per-environment "
            f"presets (tuned defaults): {presets}. Explicit flags override a preset.",
            usage=f"{prog} --env ID [--FIELD VALUE ...]",
        )
        games = spec.config.__module__.startswith("rlx.games.")
        helps = {"env": GAME_ENV_HELP} if games else None
        flags.add_fields(parser.add_argument_group("the env"), EnvOptions, helps=helps)
    flags.add_fields(parser.add_argument_group("the run"), RunOptions)
    if data_file and _takes_rewards(spec):
        flags.add_fields(parser.add_argument_group("your code"), RewardCodeOptions)
    flags.add_fields(parser.add_argument_group(f"{spec.name} config"), spec.config)
    return parser


def _run(spec: Any, argv: list[str], prog: str, *, data_file: bool) -> int:
    """Parse a run's flags once, plan it with the values given, train, print the summary."""
    from rlx.core.env_recipe import ON_THE_COMMAND_LINE
    from rlx.launch.run import TrainRequest, launch

    parser = _run_parser(spec, prog, data_file=data_file)
    given = parser.given(argv)
    options = {name: given.pop(name) for name in list(given) if name in RUN_OPTIONS}
    resume = options.get("resume", False)
    if "seeds" in options and "seed" in given:
        parser.error("--seed trains one run and --seeds one run per seed; pass one of them")
    if options.get("config") is not None:
        given = _with_config_file(spec, options, given)
        if "seeds" in options:  # the seeds given win over a seed the file records
            given.pop("seed", None)
    group = "seeds" in options or _is_group(options.get("run_dir"))
    if data_file and not resume and not group and not (given.get("model") and given.get("data")):
        raise ConfigError(f"{prog} needs --model DIR and --data FILE.")
    stop_on = options.get("stop_on", ())
    request = TrainRequest(
        spec.name,
        _align_env(spec, given, options) if data_file else options.get("env"),
        env_kwargs=key_values(options.get("env_kwargs", ()), "--env-kwargs"),
        run_dir=options.get("run_dir"),
        resume=resume,
        resume_from=_checkpoint_arg(options.get("resume_from")),
        overwrite=options.get("overwrite", False),
        overrides=given,
        seeds=options.get("seeds"),
        jobs=options.get("jobs"),
        heal=options.get("heal", False),
        heal_max=options.get("heal_max"),
        trust_env_code=options.get("trust_env_code", False),
        consent=ON_THE_COMMAND_LINE,
        command=f"{prog} {shlex.join(argv)}".strip(),
        progress=None if options.get("progress", True) else False,  # None: when interactive
        tensorboard=options.get("tensorboard", False),
        wandb=options.get("wandb", False),
        stop_on=stop_on,
        doctor=options.get("doctor", True),
    )
    if request.is_group:
        return _print_group(launch(request))
    t0 = time.perf_counter()
    agent = launch(request)
    status = _print_summary(agent.run_dir, time.perf_counter() - t0)
    model_dir = getattr(agent, "model_dir", None)
    if model_dir is not None:
        print(f"model saved in {model_dir}")
    return EXIT_CODES.get(status, 1)


def _checkpoint_arg(value: str | None) -> str | int | None:
    """``--resume-from``: a step (digits) or a checkpoint's file name."""
    if value is None:
        return None
    return int(value) if value.isdigit() else value


def _is_group(run_dir: str | None) -> bool:
    from rlx.runs.group import is_group_folder

    return is_group_folder(run_dir)


def _print_group(group: Any) -> int:
    """Print a trained seed group; exit as its worst seed: 130 interrupted, 1 failed, 3
    stopped, else 0."""
    print(group)
    print(f"compare the seeds: rlx report {group.path}; rlx doctor {group.path}")
    statuses = {run.status for run in group.runs}
    for status, code in (("interrupted", 130), ("failed", 1), ("stopped", 3)):
        if status in statuses:
            return code
    return 0


def _with_config_file(spec: Any, options: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """``--config FILE`` under the flags given: the file's fields, then the flags (returned);
    its env and env keywords into ``options`` unless ``--env`` is given."""
    from rlx import registry
    from rlx.launch.config_file import checked_fields, read_config_file

    config_file = read_config_file(options["config"])
    if config_file.algo is not None and registry.get(config_file.algo).name != spec.name:
        raise ConfigError(
            f"config file {config_file.path} holds a {config_file.algo} config, not a "
            f"{spec.name} one; train it with rlx train {config_file.algo} --config "
            f"{options['config']}."
        )
    fields = checked_fields(spec, config_file)
    if config_file.recorded:  # a folder's values: joining a cluster and the like are not taken
        from rlx.core.env_recipe import ON_THE_COMMAND_LINE
        from rlx.launch.plan import without_user_only

        where = str(config_file.path)
        fields = without_user_only(fields, where, given=list(given), consent=ON_THE_COMMAND_LINE)
    if options.get("env") is None and config_file.env is not None:
        if ":" in config_file.env and not options.get("trust_env_code", False):
            raise ConfigError(
                f"config file {config_file.path} names the env {config_file.env!r}, which is "
                f"code to import; pass it yourself as --env {config_file.env}, or add "
                "--trust-env-code."
            )
        options["env"] = config_file.env
        options["env_kwargs"] = {
            **config_file.env_kwargs,
            **key_values(options.get("env_kwargs", ()), "--env-kwargs"),
        }
    return {**fields, **given}


def _print_summary(run_dir: Path, seconds: float) -> str:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from rlx.runs import read_summary

    def cell(text: str) -> str:  # a folder's text: no control character, no rich markup
        return escape(printable(text))

    summary = read_summary(run_dir)
    table = Table("field", "value", title=cell(f"run folder {run_dir}"))
    for key, value in summary.items():
        table.add_row(cell(key), cell(f"{value:.4g}" if isinstance(value, float) else str(value)))
    Console(file=terminal()).print(table)
    return str(summary.get("status"))


def key_values(
    items: Sequence[str] | Mapping[str, Any], flag: str = "--env-kwargs"
) -> dict[str, Any]:
    """``KEY=VALUE`` items as keyword arguments (see :func:`key_value`); a mapping (a config
    file's) as it is."""
    if isinstance(items, Mapping):
        return dict(items)
    return dict(key_value(item, flag) for item in items)


def key_value(item: str, flag: str = "--env-kwargs") -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE read as a bool, an int or a float where it is one."""
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise ConfigError(f"{flag} {item!r} must look like KEY=VALUE, e.g. map_name=8x8.")
    lowered = value.lower()
    if lowered in ("true", "false"):
        return key, lowered == "true"
    for cast in (int, float):
        try:
            return key, cast(value)
        except ValueError:
            pass
    return key, value


# ---------------------------------------------------------------------------- rlx align
ALIGN_STAGES = {"sft": "sft", "rm": "rm", "dpo": "dpo", "grpo": "grpo", "rlhf": "rlhf-ppo"}
ALIGN_DATA = ("arithmetic", "arithmetic-sft", "arithmetic-prefs", "length-biased-prefs")


@dataclasses.dataclass(frozen=True)
class PipelineArgs:
    """RLHF in three stages on a built-in task: SFT -> reward model -> PPO, each stage a run
    folder inside RUN_DIR (sft/, rm/, ppo/)."""

    task: str
    """the built-in task: arithmetic or length-biased"""
    run_dir: str = field(metadata={flags.METAVAR: "DIR"})
    """the folder of the three runs"""
    model: str | None = None
    """start model (default: a tiny one)"""
    sft_model: str | None = None
    """skip SFT: use this SFT model"""
    reward_model: str | None = None
    """skip the reward model: use this one"""
    steps: int | None = None
    """PPO steps (default: from the data)"""
    beta: float = 0.05
    """weight of the KL penalty to the SFT model"""
    seed: int = 0
    """seed of every stage"""


@dataclasses.dataclass(frozen=True)
class TinyArgs:
    """Build a tiny causal LM (random init) with a character tokenizer."""

    out: str = field(metadata={flags.METAVAR: "DIR"})
    """folder to write the model into"""
    texts: str | None = field(default=None, metadata={flags.METAVAR: "FILE"})
    """text or JSONL file whose characters form the vocabulary"""
    arch: Literal["llama", "gpt2"] = "llama"
    """the architecture"""
    hidden_size: int = 128
    """width of the model"""
    num_layers: int = 4
    """transformer blocks"""
    num_heads: int = 4
    """attention heads"""
    seed: int = 0
    """seed of the random weights"""


@dataclasses.dataclass(frozen=True)
class DataArgs:
    """Write a generated task as a JSONL file."""

    kind: Literal["arithmetic", "arithmetic-sft", "arithmetic-prefs", "length-biased-prefs"] = (
        field(metadata={flags.POSITIONAL: "KIND"})
    )
    """the task: arithmetic, arithmetic-sft, arithmetic-prefs or length-biased-prefs"""
    out: str = field(metadata={flags.METAVAR: "FILE"})
    """JSONL file to write"""
    n: int = 3000
    """rows"""
    seed: int = 0
    """seed of the generator"""


@dataclasses.dataclass(frozen=True)
class AlignEvalArgs:
    """Greedy exact-match accuracy of a model on {prompt, answer} rows."""

    model: str = field(metadata={flags.METAVAR: "DIR"})
    """model folder (e.g. RUN_DIR/model)"""
    data: str = field(metadata={flags.METAVAR: "FILE"})
    """JSONL rows {prompt, answer}"""
    device: str = "cpu"
    """cpu, cuda or mps"""


@dataclasses.dataclass(frozen=True)
class RewardCodeOptions:
    """Code of yours that a GRPO run imports."""

    trust_env_code: bool = False
    """import the reward functions named as package.module:function, by --reward or by the
    run folder --resume continues (a folder is data: without this flag its code is refused):
    only code you trust"""


def _takes_rewards(spec: Any) -> bool:
    """Whether a language-model stage names reward functions (GRPO's ``--reward``)."""
    return any(f.name == "reward" for f in dataclasses.fields(spec.config))


def _align_env(spec: Any, given: dict[str, Any], options: dict[str, Any]) -> Any:
    """The run's env of an ``rlx align`` stage: its data, named once by ``--data`` (taken out
    of the config fields here: planning records the file as the config's ``data``); for GRPO,
    with the consent of ``--trust-env-code`` to import the reward functions that ``--reward``
    or the resumed run folder names (:func:`rlx.align.reward_env`)."""
    from rlx.core.env_recipe import ON_THE_COMMAND_LINE

    data = given.pop("data", None)
    if not _takes_rewards(spec):
        return data
    from rlx.align import reward_env

    return reward_env(
        data, reward=given.get("reward"), resume=options.get("resume", False),
        run_dir=options.get("run_dir"), trust_env_code=options.get("trust_env_code", False),
        consent=ON_THE_COMMAND_LINE,
    )  # fmt: skip


def _align_commands() -> dict[str, tuple[Callable[[list[str]], int], str]]:
    from rlx import registry

    stages = {
        command: (_stage(command), registry.summary(name)) for command, name in ALIGN_STAGES.items()
    }
    return {
        "tiny": (_align_tiny, _first_line(TinyArgs)),
        "data": (_align_data, _first_line(DataArgs)),
        **stages,
        "eval": (_align_eval, _first_line(AlignEvalArgs)),
    }


def _first_line(cls: type) -> str:
    line = (cls.__doc__ or "").strip().splitlines()[0].rstrip(".")
    return line[:1].lower() + line[1:]


def _align(argv: list[str]) -> int:
    commands = _align_commands()
    if argv and argv[0] in ("-h", "--help"):
        _align_parser(commands).print_help()
        return 0
    if not argv:
        raise ConfigError(
            f"rlx align needs a command, one of: {', '.join(commands)} (see `rlx align --help`)."
        )
    command, rest = argv[0], argv[1:]
    if command not in commands:
        close = difflib.get_close_matches(command, list(commands), n=2, cutoff=0.6)
        hint = f"; did you mean {' or '.join(close)}?" if close else "."
        raise ConfigError(
            f"unknown align command {command!r}; choose one of {', '.join(commands)}{hint}"
        )
    return commands[command][0](rest)


def _align_parser(commands: dict[str, tuple[Any, str]]) -> flags.FlagParser:
    summaries = {name: summary for name, (_, summary) in commands.items()}
    parser = flags.FlagParser(
        "rlx align",
        "Align a language model (needs the llm extra: pip install 'rlx[llm]').",
        usage="rlx align COMMAND [ARGS ...]",
        epilog=f"{listing('commands', summaries)}\n\n"
        "rlx align rlhf --task arithmetic|length-biased --run-dir DIR runs SFT -> reward model "
        "-> PPO in one go.\nrlx align grpo --env hidden-number|package.module:factory --model DIR "
        "trains over multi-turn episodes of a text env (grpo-episodes; your own env needs "
        "--trust-env-code).\n`rlx align COMMAND --help` lists every field with its default.",
    )
    parser.add_argument("command", metavar="COMMAND", help="one of the commands below")
    return parser


def _stage(command: str) -> Callable[[list[str]], int]:
    def run(argv: list[str]) -> int:
        if command == "rlhf" and any(a == "--task" or a.startswith("--task=") for a in argv):
            return _align_rlhf_pipeline(argv)
        if command == "grpo" and _plays_episodes(argv):
            return _align_episodes(argv)
        from rlx import registry

        spec = registry.get(ALIGN_STAGES[command])
        return _run(spec, argv, f"rlx align {command}", data_file=True)

    return run


ALIGN_EPISODES = "grpo-episodes"
"""What ``rlx align grpo --env ENV`` trains: GRPO over multi-turn episodes of a text env."""
TEXT_ENV_ALGOS = frozenset({"grpo-episodes", "ppo-episodes"})
"""The algorithms whose --env names a text env (a built-in, or code with consent)."""


def _plays_episodes(argv: list[str]) -> bool:
    """Whether ``rlx align grpo`` trains over episodes: ``--env`` is given, or ``--resume``
    continues a folder that records ``grpo-episodes``."""
    if any(a == "--env" or a.startswith("--env=") for a in argv):
        return True
    run_dir = None
    for i, arg in enumerate(argv):
        if arg == "--run-dir" and i + 1 < len(argv):
            run_dir = argv[i + 1]
        elif arg.startswith("--run-dir="):
            run_dir = arg.split("=", 1)[1]
    if "--resume" not in argv or run_dir is None:
        return False
    from rlx.runs import read_record

    try:
        return read_record(run_dir).algo == ALIGN_EPISODES
    except (RLXError, OSError, ValueError):
        return False  # planning the run says what is wrong with the folder


def _align_episodes(argv: list[str]) -> int:
    """``rlx align grpo --env ENV``: the run of ``grpo-episodes`` through the generic path,
    its env checked first. A built-in name must be one (one sentence naming the valid ones);
    ``package.module:factory`` is code, imported only with ``--trust-env-code`` (refused
    before anything is imported, as ``--reward``'s references are)."""
    from rlx import registry

    prog = "rlx align grpo"
    spec = registry.get(ALIGN_EPISODES)
    given = _run_parser(spec, prog, data_file=False).given(argv)
    env = given.get("env")
    if given.get("data"):
        raise ConfigError(
            "--env trains over episodes of a text env and --data over prompt rows; pass one of "
            "them."
        )
    if not given.get("resume") and not given.get("model"):
        raise ConfigError(f"{prog} --env ENV needs --model DIR.")
    _check_text_env(env, bool(given.get("trust_env_code")))
    return _run(spec, argv, prog, data_file=False)


def _check_text_env(env: str | None, trusted: bool) -> None:
    """A text env named on the command line: a built-in name must be one (one sentence naming
    the valid ones); ``package.module:factory`` is code, imported only with
    ``--trust-env-code``, refused before anything is imported (``rlx align grpo --env`` and
    ``rlx train grpo-episodes|ppo-episodes --env`` alike)."""
    from rlx.core.env_recipe import is_entry_point
    from rlx.llm.text_env import TEXT_ENVS, builtin_text_env

    if env is None:
        return
    if is_entry_point(env):
        if not trusted:
            raise ConfigError(
                f"--env {env} is code to import (your text env's factory), which rlx runs only "
                f"with your consent: add --trust-env-code if you trust it, or name a built-in "
                f"text env ({', '.join(TEXT_ENVS)})."
            )
        return
    builtin_text_env(env)  # a ConfigError naming it and the built-ins


def _align_rlhf_pipeline(argv: list[str]) -> int:
    args = flags.parse(
        PipelineArgs,
        argv,
        "rlx align rlhf",
        usage="rlx align rlhf --task TASK --run-dir DIR [--FIELD VALUE ...]",
        see="rlx align rlhf --task arithmetic --help",
    )
    from rlx.align import rlhf_pipeline

    result = rlhf_pipeline(
        args.task, args.run_dir, model=args.model, sft_model=args.sft_model,
        reward_model=args.reward_model, seed=args.seed, beta=args.beta,
        **({"steps": args.steps} if args.steps else {}),
    )  # fmt: skip
    print(f"SFT model {result.sft_model}: exact match {result.sft_exact_match:.1%}")
    print(f"reward model {result.reward_model}")
    print(f"PPO model {result.ppo.model_dir}: exact match {result.ppo_exact_match:.1%}")
    print(f"diagnose it: rlx doctor {result.ppo.run_dir}")
    return 0


def _align_tiny(argv: list[str]) -> int:
    args = flags.parse(TinyArgs, argv, "rlx align tiny")
    from rlx import llm

    texts = None
    if args.texts is not None:
        path = Path(args.texts)
        if not path.is_file():
            raise ConfigError(f"--texts {path} does not exist.")
        texts = [path.read_text()]
    out = llm.make_tiny_lm(
        args.out, texts=texts, arch=args.arch, hidden_size=args.hidden_size,
        num_layers=args.num_layers, num_heads=args.num_heads, seed=args.seed,
    )  # fmt: skip
    model, _ = llm.load_model(out)
    print(f"tiny {args.arch} model with {llm.count_parameters(model):,} parameters in {out}")
    return 0


def _align_data(argv: list[str]) -> int:
    args = flags.parse(DataArgs, argv, "rlx align data")
    if args.n < 1:
        raise ConfigError(f"--n {args.n} must be >= 1.")
    from rlx import llm

    makers = {
        "arithmetic": llm.arithmetic,
        "arithmetic-sft": llm.arithmetic_sft,
        "arithmetic-prefs": llm.arithmetic_preferences,
        "length-biased-prefs": llm.length_biased_preferences,
    }
    path = llm.write_jsonl(args.out, makers[args.kind](args.n, seed=args.seed))
    print(f"{args.n} {args.kind} rows in {path}")
    return 0


def _align_eval(argv: list[str]) -> int:
    args = flags.parse(AlignEvalArgs, argv, "rlx align eval")
    from rlx import llm

    accuracy = llm.exact_match(args.model, args.data, device=args.device)
    print(f"{args.model}: exact match {accuracy:.3f} on {args.data}")
    return 0


# ---------------------------------------------------------------------------- rlx doctor
@dataclasses.dataclass(frozen=True)
class DoctorArgs:
    """Diagnose training runs: the troubleshooting table's rules over the logged metrics.
    RUN is an rlx run folder, or another library's logs: a TensorBoard folder or event file,
    a Stable-Baselines3 progress.csv, a TRL trainer_state.json."""

    runs: tuple[str, ...] = flags.positional("RUN", default=())
    """run folders or log files"""
    strict: bool = False
    """exit 1 when a finding is an error"""
    json: bool = False
    """print the findings as JSON"""
    group: bool = False
    """take the RUN folders as the seeds of one group, and name the seeds that behave
    differently (a folder of rlx train --seeds is a group without it)"""
    fix: bool = False
    """heal the run: train a child run (RUN-healed) from the last checkpoint before the
    findings' evidence with every change they name, and show before and after"""
    run_dir: str | None = field(default=None, metadata={flags.METAVAR: "DIR"})
    """with --fix, the child run's folder (default RUN-healed beside RUN)"""
    trust_env_code: bool = False
    """with --fix, let the run's env be rebuilt from code its config.json names (an entry
    point): only for a folder you trust"""


def _doctor(argv: list[str]) -> int:
    args = flags.parse(DoctorArgs, argv, "rlx doctor")
    if not args.runs:
        raise ConfigError("rlx doctor needs at least one RUN (a run folder or a log file).")
    if args.fix or args.run_dir is not None or args.trust_env_code:
        return _doctor_fix(args)
    from rlx.diagnostics.doctor import Diagnosis, doctor
    from rlx.diagnostics.group_doctor import GroupDiagnosis, doctor_group

    diagnoses: list[Diagnosis | GroupDiagnosis]
    if args.group:
        diagnoses = [doctor_group(args.runs)]
    else:
        diagnoses = [doctor_group(run) if _is_group(run) else doctor(run) for run in args.runs]
    if args.json:
        payload = [d.to_dict() for d in diagnoses]
        print(json.dumps(payload[0] if len(payload) == 1 else payload, indent=2, default=str))
    else:
        print("\n\n".join(str(d) for d in diagnoses))
    return 1 if args.strict and any(d.errors for d in diagnoses) else 0


def _doctor_fix(args: DoctorArgs) -> int:
    """``rlx doctor RUN --fix``: the run's diagnosis, then its healed child beside it."""
    if not args.fix:
        given = "--run-dir" if args.run_dir is not None else "--trust-env-code"
        raise ConfigError(f"{given} goes with --fix (it is for the healed child run); add --fix.")
    if len(args.runs) > 1 or args.group:
        raise ConfigError("rlx doctor --fix heals one run at a time; give one RUN folder.")
    from rlx.core.env_recipe import ON_THE_COMMAND_LINE
    from rlx.diagnostics.doctor import doctor
    from rlx.launch.heal import heal

    run = args.runs[0]
    if not args.json:
        print(doctor(run), end="\n\n", flush=True)
    result = heal(
        run, args.run_dir, trust_env_code=args.trust_env_code, consent=ON_THE_COMMAND_LINE
    )
    print(json.dumps(result.to_dict(), indent=2, default=str) if args.json else result)
    return 0


# ---------------------------------------------------------------------------- rlx report
@dataclasses.dataclass(frozen=True)
class ReportArgs:
    """Write a self-contained HTML report (plots, findings, config) of runs; several runs
    overlay for comparison."""

    runs: tuple[str, ...] = flags.positional("RUN", default=())
    """run folders or log files, or the study folder of rlx tune"""
    out: str | None = field(default=None, metadata={flags.METAVAR: "FILE"})
    """HTML file (default RUN/report.html, or ./report.html for several runs)"""
    title: str | None = None
    """page title"""
    group: bool = False
    """take the RUN folders as the seeds of one group: their mean curve with a 95% interval
    (a folder of rlx train --seeds is a group without it)"""


def _report(argv: list[str]) -> int:
    args = flags.parse(ReportArgs, argv, "rlx report")
    if not args.runs:
        raise ConfigError("rlx report needs at least one RUN (a run folder or a log file).")
    from rlx.diagnostics.study_report import is_study, study_report

    if len(args.runs) == 1 and is_study(args.runs[0]):  # the study folder of rlx tune
        print(f"report written to {study_report(args.runs[0], args.out, title=args.title)}")
        return 0
    groups = [run for run in args.runs if _is_group(run)]
    if args.group or groups:
        from rlx.diagnostics.group_report import report_groups

        if groups and (args.group or len(groups) < len(args.runs)):
            raise ConfigError(
                f"rlx report compares seed groups with seed groups: {groups[0]} is one, so give "
                "only group folders (or run folders alone with --group)."
            )
        path = report_groups(groups or [list(args.runs)], args.out, title=args.title)
        print(f"report written to {path}")
        return 0
    from rlx.diagnostics.report import report

    path = report(list(args.runs), args.out, title=args.title)
    print(f"report written to {path}")
    return 0


# ---------------------------------------------------------------------------- rlx tune
@dataclasses.dataclass(frozen=True)
class TuneOptions:
    """Search an algorithm's hyperparameters with Optuna (extra tune: pip install 'rlx[tune]'):
    TPE proposes each trial's config from the algorithm's search space (rl-baselines3-zoo's
    ranges), each trial trains it on a group of seeds (a seed group in STUDY_DIR/trial-NNNN),
    and the median pruner and the doctor stop the bad trials early. A trial's value is the
    mean of its seeds' final evaluations minus one standard error, so one lucky seed cannot
    make it the best. When the trials are done, the best config and the defaults train on
    held-out seeds no trial used, and the verdict (beats the defaults, no better, or worse,
    with a 95% interval) is printed and written with the best config to STUDY_DIR/best.yaml
    (rlx train --config STUDY_DIR/best.yaml trains it again); rlx report STUDY_DIR shows the
    trials and the check. The same command on the same folder resumes the study (after Ctrl-C
    too) without training the check again."""

    study_dir: str = field(metadata={flags.METAVAR: "DIR"})
    """the study folder: its storage, a seed group per trial, best.yaml, the held-out check"""
    env: str | None = field(default=None, metadata={flags.METAVAR: "ID"})
    """Gymnasium id (required for a new study)"""
    trials: int | None = None
    """trials to complete or prune (default 20; a resumed study keeps its own unless given)"""
    total_steps: int | None = None
    """every trial's budget in env steps (default: the config's)"""
    seed: int | None = None
    """the first of every trial's seeds, and the sampler's (default 0)"""
    seeds_per_trial: int | None = None
    """seeds each trial trains on, SEED, SEED+1, ... the same for every trial (default 3); the
    trial's value is their mean minus one standard error"""
    heldout_seeds: int | None = None
    """seeds of the held-out check once the trials are done: the best config and the defaults
    each train on seeds from SEED+10000 on, which no trial used (default 5; 0 skips the check;
    may change on a resume)"""
    jobs: int = 1
    """worker processes on the study, one trial each at a time (the held-out check trains this
    many seeds at a time)"""
    evaluations: int | None = None
    """evaluations during each trial's training, for the median pruner (default 5; 0: it
    watches the training return)"""
    eval_episodes: int | None = None
    """episodes of each evaluation and of the final one, a seed's value (default 10)"""
    env_kwargs: tuple[str, ...] = field(
        default=(), metadata={flags.METAVAR: "KEY=VALUE", flags.REPEATABLE: True}
    )
    """keyword arguments for gymnasium.make"""
    ray: str | None = field(default=None, metadata={flags.METAVAR: "ADDRESS"})
    """run the --jobs workers as Ray tasks (extra ray): local starts a Ray instance here,
    HOST:PORT or auto joins a cluster whose machines share STUDY_DIR"""
    trust_env_code: bool = False
    """resuming a study (no --env), build its recorded env even when that runs code its
    folder names (package.module:factory); only for a study folder you trust"""


@dataclasses.dataclass(frozen=True)
class TuneResumeFields:
    """Config fields only you set (never taken from the study folder), for every trial of
    the study resumed with no ALGO."""

    ray_address: str | None = field(default=None, metadata={flags.METAVAR: "ADDRESS"})
    """join the Ray cluster at ADDRESS during each trial's training (algorithms that use Ray)"""
    allow_unisolated: bool = False
    """let each trial run model-written code without isolation (algorithms that run it)"""


TUNE_OPTIONS = frozenset(f.name for f in dataclasses.fields(TuneOptions))
TUNE_OWNS = ("total_steps", "seed", "eval_episodes", "eval_every")
"""Config fields the study sets for every trial (its own flags, or from --evaluations)."""


def _tune(argv: list[str]) -> int:
    from rlx import registry

    algo = None
    if argv and not argv[0].startswith("-"):
        algo, argv = registry.get(argv[0]).name, argv[1:]
    parser = _tune_parser(algo)
    given = parser.given(argv)
    options = {name: given.pop(name) for name in list(given) if name in TUNE_OPTIONS}
    from rlx.core.env_recipe import ON_THE_COMMAND_LINE
    from rlx.launch.tune import tune  # what rlx.tune(...) calls

    result = tune(
        algo,
        options.get("env"),
        study_dir=options["study_dir"],
        trials=options.get("trials"),
        total_steps=options.get("total_steps"),
        seed=options.get("seed"),
        jobs=options.get("jobs", 1),
        evaluations=options.get("evaluations"),
        eval_episodes=options.get("eval_episodes"),
        env_kwargs=key_values(options.get("env_kwargs", ()), "--env-kwargs"),
        seeds_per_trial=options.get("seeds_per_trial"),
        heldout_seeds=options.get("heldout_seeds"),
        ray=options.get("ray"),
        trust_env_code=options.get("trust_env_code", False),
        consent=ON_THE_COMMAND_LINE,
        **given,
    )
    print(result)
    print(f"see the trials: rlx report {result.study_dir}")
    return 0


def _tune_parser(algo: str | None) -> flags.FlagParser:
    from rlx import registry

    prog = "rlx tune" if algo is None else f"rlx tune {algo}"
    parser = flags.FlagParser(
        prog,
        inspect.getdoc(TuneOptions),
        usage="rlx tune ALGO --env ID --study-dir DIR [--trials N] [--total-steps N] "
        "[--seeds-per-trial N] [--heldout-seeds N] [--jobs K] [--FIELD VALUE ...]",
        epilog="rlx tune --study-dir DIR (no ALGO) resumes the study in DIR as it was started.\n"
        "Config fields given (--FIELD VALUE) are fixed for every trial and left out of the search.",
    )
    flags.add_fields(parser.add_argument_group("the study"), TuneOptions)
    if algo is None:
        flags.add_fields(parser.add_argument_group("fields only you set"), TuneResumeFields)
    else:
        spec = registry.get(algo)
        names = {f.name for f in dataclasses.fields(spec.config)}
        flags.add_fields(
            parser.add_argument_group(f"{algo} config fields fixed for every trial"),
            spec.config,
            skip=[*TUNE_OWNS, *(TUNE_OPTIONS & names)],
        )
    return parser


# ---------------------------------------------------------------------------- rlx recommend
@dataclasses.dataclass(frozen=True)
class RecommendArgs:
    """Choose a method: the "Choose a method" table applied to an env id (its spaces and
    whether a model is available), a JSONL data file (preferences, verifier rows,
    demonstrations), or a board game name."""

    target: str = flags.positional("TARGET")
    """Gymnasium id, GridWorld id, JSONL file, or game (tictactoe, connect4)"""
    safety_critical: bool = False
    """exploration must stay safe (SARSA)"""
    no_model: bool = False
    """only samples, even if a model exists"""


def _recommend(argv: list[str]) -> int:
    args = flags.parse(RecommendArgs, argv, "rlx recommend")
    from rlx.recommend import recommend

    kwargs = {"has_model": False} if args.no_model else {}
    print(recommend(args.target, safety_critical=args.safety_critical, **kwargs))
    return 0


# ---------------------------------------------------------------------------- rlx eval
@dataclasses.dataclass(frozen=True)
class EvalArgs:
    """Evaluate the agent of a run folder (its latest checkpoint, or --checkpoint best):
    episodes in the env it was trained on (rebuilt from the recipe config.json records), games
    against the run's opponents for a board game, exact match on --data for a language
    model."""

    run_dir: str = flags.positional("RUN_DIR")
    """the run folder written by `rlx train` or `rlx align`"""
    episodes: int = 20
    """episodes, or games for a board game"""
    seed: int = 0
    """seed of the first episode"""
    env: str | None = field(default=None, metadata={flags.METAVAR: "ID"})
    """evaluate on this env instead of the run's: a Gymnasium id or package.module:factory"""
    env_kwargs: tuple[str, ...] = field(
        default=(), metadata={flags.METAVAR: "KEY=VALUE", flags.REPEATABLE: True}
    )
    """keyword arguments for that env (gymnasium.make or the entry point)"""
    trust_env_code: bool = False
    """let the run folder's env be rebuilt from code its config.json names (an entry point, or
    a Gymnasium spec that is not the registered one): only for a folder you trust"""
    data: str | None = field(default=None, metadata={flags.METAVAR: "FILE"})
    """a language model's {prompt, answer} rows (JSONL)"""
    checkpoint: str | None = field(default=None, metadata={flags.METAVAR: "CHECKPOINT"})
    """which checkpoint: latest, best (the best evaluation during training, kept as
    checkpoints/best.pt) or a checkpoint file (default: latest)"""
    json: bool = False
    """print one JSON object (for scripts) instead of a sentence"""
    video: str | None = field(default=None, metadata={flags.METAVAR: "PATH", flags.BARE: ""})
    """also record the agent as an animated GIF: --video alone writes
    RUN_DIR/videos/eval-step<N>.gif (N the checkpoint's step), --video PATH that file; a board
    game's run records a replay of its boards (default: no video)"""
    video_episodes: int = 1
    """episodes (games) in the video"""
    video_frame_skip: int = 2
    """keep every Nth frame of the env in the video"""
    video_scale: float = 0.5
    """factor of the env's frame size in the video"""
    video_max_frames: int = 300
    """the most frames in the video"""
    video_opponent: str = "self"
    """whom a board-game agent plays in its replay: self, random, mcts-K or solver"""


def _eval(argv: list[str]) -> int:
    args = flags.parse(EvalArgs, argv, "rlx eval")
    from rlx.api import evaluate_run
    from rlx.core.env_recipe import ON_THE_COMMAND_LINE
    from rlx.core.video import VideoOptions

    options = VideoOptions(
        args.video_episodes, args.video_frame_skip, args.video_scale, args.video_max_frames,
        args.video_opponent,
    )  # fmt: skip
    result = evaluate_run(
        args.run_dir,
        episodes=args.episodes,
        seed=args.seed,
        env=args.env,
        env_kwargs=key_values(args.env_kwargs),
        data=args.data,
        trust_env_code=args.trust_env_code,
        consent=ON_THE_COMMAND_LINE,
        video=True if args.video == "" else args.video,
        video_options=options,
        checkpoint=args.checkpoint,
    )
    print(json.dumps(result.to_dict(), default=float) if args.json else result)
    return 0


# ---------------------------------------------------------------------------- rlx play
@dataclasses.dataclass(frozen=True)
class PlayArgs:
    """Play a board game against an agent in the terminal. The board is drawn after every
    move; type the number of a cell (tictactoe, 0-8 row by row) or a column (connect4, 0-6).
    q (or the end of input) gives up and exits 0; Ctrl-C exits 130."""

    game: str = flags.positional("GAME")
    """tictactoe or connect4 (or openspiel:<name>)"""
    agent: str | None = field(default=None, metadata={flags.METAVAR: "RUN_DIR"})
    """a run folder of `rlx train alphazero|muzero --env GAME` (default: pure MCTS with 1000
    random-rollout simulations per move)"""
    second: bool = False
    """let the agent move first (you play O)"""
    seed: int = 0
    """seed of the agent's choices"""
    video: str | None = field(default=None, metadata={flags.METAVAR: "PATH"})
    """write the game's boards to this animated GIF when it ends"""


def _play(argv: list[str]) -> int:
    args = flags.parse(PlayArgs, argv, "rlx play")
    from rlx.games.play import play
    from rlx.launch.plan import load

    agent = None if args.agent is None else load(args.agent)
    play(args.game, agent, source=args.agent, human_first=not args.second, seed=args.seed,
         video=args.video)  # fmt: skip
    return 0  # a game played to its end, or given up on purpose; Ctrl-C is 130 (main)


# ---------------------------------------------------------------------------- rlx solve
@dataclasses.dataclass(frozen=True)
class SolveArgs:
    """Solve a tabular MDP exactly and print V* and the optimal policy. ENV is GridWorld,
    GridWorld-RxC, or a Gymnasium toy-text id with a model (FrozenLake-v1, CliffWalking-v1,
    Taxi-v4)."""

    env: str = flags.positional("ENV")
    """GridWorld[-RxC] or a Gymnasium toy-text id"""
    method: Literal["value-iteration", "policy-iteration"] = "value-iteration"
    """policy-iteration takes fewer sweeps when gamma is near 1"""
    gamma: float | None = None
    """discount (default: the env's)"""
    tol: float = 1e-8
    """stopping tolerance"""
    env_kwargs: tuple[str, ...] = field(
        default=(), metadata={flags.METAVAR: "KEY=VALUE", flags.REPEATABLE: True}
    )
    """keyword arguments for the env: gymnasium.make's (map_name=8x8) or GridWorld's (rows,
    cols, slip, step_reward)"""
    make: tuple[str, ...] = field(default=(), metadata={flags.REPEATABLE: True, flags.HIDDEN: True})
    """deprecated name of --env-kwargs"""


def _solve(argv: list[str]) -> int:
    args = flags.parse(SolveArgs, argv, "rlx solve")
    if args.make:
        print("rlx: --make is deprecated; use --env-kwargs KEY=VALUE ...", file=sys.stderr)
    from rlx import planning
    from rlx.mdp import GridWorld, TabularMDP, from_gymnasium

    env_kwargs = key_values((*args.env_kwargs, *args.make))
    gamma = {} if args.gamma is None else {"gamma": args.gamma}
    mdp: GridWorld | TabularMDP
    if GridWorld.is_id(args.env):
        mdp = GridWorld.from_id(args.env, **gamma, **env_kwargs)
    else:
        mdp = from_gymnasium(args.env, **gamma, **env_kwargs)
    t0 = time.perf_counter()
    solve = (
        planning.value_iteration if args.method == "value-iteration" else planning.policy_iteration
    )
    result = solve(mdp, tol=args.tol)
    seconds = time.perf_counter() - t0
    print(
        f"{mdp.name}: S={mdp.n_states}, A={mdp.n_actions}, gamma={mdp.gamma}; {args.method} "
        f"converged={result.converged} in {result.iterations} iterations "
        f"(residual {result.residual:.2e}, {seconds * 1e3:.1f} ms)\n"
    )
    print("V*:")
    print(planning.format_values(mdp, result.V))
    print("\noptimal policy:")
    print(planning.format_policy(mdp, result.policy))
    return 0


if __name__ == "__main__":
    sys.exit(main())
