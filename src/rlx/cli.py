"""The ``rlx`` command line: parses, dispatches, prints. No algorithm logic lives here.

Every subcommand's flags come from a frozen dataclass, parsed by tyro: a field, its default and
its docstring are written once. ``rlx train ALGO`` and ``rlx align STAGE`` take the
algorithm's config dataclass itself. A user error (:class:`rlx.errors.RLXError`, or a flag
tyro cannot parse) prints one line on stderr and exits with code 2, without a traceback.

Exit codes of a training command: 0 the run completed its budget; 2 bad input; 3 a doctor rule
of ``--stop-on`` ended the run (``status: stopped`` and ``stopped_by`` in summary.json); 130
Ctrl-C or SIGTERM ended it (``status: interrupted``). Every run that ends early has a checkpoint
that ``--resume`` continues from. Output cut short by a closed pipe (``rlx solve ... | head``)
ends quietly with 141, as a shell's SIGPIPE would.

``rlx --help``, ``rlx --version`` and ``rlx list`` import neither torch nor any algorithm
(tyro, the flag parser, is light).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import tyro

from rlx.errors import ConfigError, RLXError

# Exit codes by the status in summary.json (an early end is complete on disk, but the work
# asked for is not done, so a script sees it).
EXIT_CODES = {"completed": 0, "stopped": 3, "interrupted": 130}
BROKEN_PIPE_EXIT = 141
ENV_KWARGS_HELP = (
    "KEY=VALUE ... for gymnasium.make or the entry point (numbers and true/false are read as such)"
)
WANDB_HELP = (
    "also log to Weights & Biases (extra wandb), offline in RUN_DIR/wandb unless WANDB_MODE is set"
)
STOP_ON_HELP = "doctor rules that end the run (checkpoint saved; exit code 3), e.g. kl-too-high"
TRUST_ENV_CODE_HELP = (
    "let the run folder's env be rebuilt from code its config.json names (an entry point, or a "
    "Gymnasium spec that is not the registered one): only for a folder you trust"
)
COMMANDS = (
    ("train ALGO --env ID [--FIELD VALUE ...]", "train an agent into a run folder"),
    ("eval RUN_DIR [--episodes N]", "evaluate a run's agent"),
    ("solve ENV [--method policy-iteration]", "solve a tabular MDP exactly"),
    ("list", "the algorithms, and when to use each"),
    ("align tiny|data|sft|rm|dpo|grpo|rlhf|eval", "align a language model (extra llm)"),
    ("doctor RUN [RUN ...] [--strict] [--json]", "diagnose runs (rlx, SB3, TRL, TensorBoard)"),
    ("report RUN [RUN ...]", "a self-contained HTML report of runs"),
    ("recommend TARGET", "which method to use, and the command"),
    ("play GAME [--agent RUN_DIR]", "play a board game against an agent"),
)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _dispatch(argv)
    except RLXError as exc:
        print(f"rlx: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("rlx: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`| head`): point stdout at /dev/null so the interpreter's
        # final flush does not raise again, and end without a word
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE_EXIT


def _dispatch(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(_top_help())
        return 0
    if argv[0] == "--version":
        from rlx.version import VERSION

        print(f"rlx {VERSION}")
        return 0
    handlers = {
        "train": _train,
        "eval": _eval,
        "solve": _solve,
        "list": _list,
        "align": _align,
        "doctor": _doctor,
        "report": _report,
        "recommend": _recommend,
        "play": _play,
    }
    command, rest = argv[0], argv[1:]
    if command not in handlers:
        raise ConfigError(f"unknown command {command!r}; choose one of {', '.join(handlers)}.")
    return handlers[command](rest)


def _top_help() -> str:
    width = max(len(usage) for usage, _ in COMMANDS)
    lines = [
        "usage: rlx COMMAND [ARGS ...]",
        "",
        "Reinforcement learning from the MDP five-tuple to aligning a language model,",
        "with a doctor for every run.",
        "",
        "commands:",
        *(f"  {usage:<{width}}  {what}" for usage, what in COMMANDS),
        "",
        "options:",
        "  -h, --help  this help (every command has its own --help)",
        "  --version   the version of rlx",
        "",
        "example:",
        "  rlx train q-learning --env FrozenLake-v1 --run-dir runs/ql",
        "  rlx eval runs/ql && rlx doctor runs/ql",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- parsing
def parse(cls: type, argv: Sequence[str], prog: str, default: Any = None) -> Any:
    """``argv`` parsed into ``cls`` (a dataclass) by tyro; ``--help`` prints and exits 0, and
    a flag that does not parse raises ConfigError with one sentence."""
    captured = io.StringIO()
    kwargs = {} if default is None else {"default": default}
    try:
        with contextlib.redirect_stderr(captured):
            return tyro.cli(cls, args=list(argv), prog=prog, **kwargs)
    except SystemExit as stop:
        if stop.code in (0, None):
            raise
        raise ConfigError(one_sentence(captured.getvalue(), prog)) from None


_BOX_CHARS = "╭╮╰╯│┃┏┓┗┛┡┩━"
_REWRITES = (
    (r"Error parsing (\S+): invalid literal for int\(\) with base 10: (.+)",
     r"\1 expects a whole number, not \2"),
    (r"Error parsing (\S+): could not convert string to float: (.+)",
     r"\1 expects a number, not \2"),
    (r"Error parsing (\S+): (.+)", r"\1: \2"),
    (r"Missing from [^:]+: (--\S+) \S+ (.+?) \(required\)", r"missing \1 (\2)"),
    (r"Missing from [^:]+: [A-Z_]+ (.+?) \(required\)", r"missing an argument: \1"),
)  # fmt: skip


def one_sentence(text: str, prog: str) -> str:
    """tyro's error box as one line: the first block of its text, without the frame."""
    lines = [line.strip().strip(_BOX_CHARS).strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    title = lines[0].strip("─ ") if lines else "bad arguments"
    body: list[str] = []
    for line in lines[1:]:
        if set(line) <= {"─", " "}:
            if body:
                break
            continue
        body.append(line)
    message = " ".join(body) if body else title
    for pattern, replacement in _REWRITES:
        rewritten = re.sub(pattern, replacement, message)
        if rewritten != message:
            message = rewritten
            break
    message = re.sub(r"\s+", " ", message).rstrip(". ")
    return f"{message} (see `{prog} --help`)."


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
    parse(ListArgs, argv, "rlx list")
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from rlx import registry
    from rlx.diagnostics.recommend import use_when

    console = Console()
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


# ---------------------------------------------------------------------------- rlx train
def _train(argv: list[str]) -> int:
    from rlx import registry

    if not argv or argv[0].startswith("-"):
        if argv and argv[0] in ("-h", "--help"):
            print("usage: rlx train ALGO --env ID [--help] [--<config field> VALUE ...]\n")
            print("algorithms: " + ", ".join(_agent_names()))
            print("`rlx train ALGO --help` lists every config field with its default;")
            print("`rlx list` says when to use each; language models train with `rlx align`.")
            return 0
        raise ConfigError("rlx train needs an algorithm name first, one of: " + _agent_list())
    name = argv[0].strip().lower().replace("_", "-")
    if name in registry.LANGUAGE_MODEL_STAGES:
        stage = {"rlhf-ppo": "rlhf"}.get(name, name)
        raise ConfigError(f"{name} trains a language model: use `rlx align {stage} ...`.")
    spec = registry.get(argv[0])
    args, planned = _parse_run(spec, argv[1:], f"rlx train {spec.name}", data_file=False)
    return _carry_out(planned, args)


def _agent_names() -> list[str]:
    from rlx import registry

    return [n for n in registry.names() if n not in registry.LANGUAGE_MODEL_STAGES]


def _agent_list() -> str:
    return ", ".join(_agent_names())


def _run_options(env_help: str | None, run_dir_help: str) -> list[tuple]:
    """The options every training run takes besides its config fields (tyro fields)."""

    def opt(help_text: str) -> Any:
        return tyro.conf.arg(help=help_text)

    env = []
    if env_help is not None:
        env = [
            ("env", Annotated[str, opt(env_help)]),
            (
                "env_kwargs",
                Annotated[tuple[str, ...], opt(ENV_KWARGS_HELP)],
                dataclasses.field(default=()),
            ),
            (
                "trust_env_code",
                Annotated[bool, opt(f"with --resume, {TRUST_ENV_CODE_HELP}")],
                dataclasses.field(default=False),
            ),
        ]
    return [
        *env,
        ("run_dir", Annotated[str | None, opt(run_dir_help)], dataclasses.field(default=None)),
        (
            "resume",
            Annotated[bool, opt("continue the run in --run-dir from its latest checkpoint")],
            dataclasses.field(default=False),
        ),
        (
            "tensorboard",
            Annotated[bool, opt("also write TensorBoard logs to RUN_DIR/tensorboard")],
            dataclasses.field(default=False),
        ),
        (
            "wandb",
            Annotated[bool, opt(WANDB_HELP)],
            dataclasses.field(default=False),
        ),
        (
            "progress",
            Annotated[bool, opt("show a progress bar when the terminal is interactive")],
            dataclasses.field(default=True),
        ),
        (
            "stop_on",
            Annotated[tuple[str, ...], opt(STOP_ON_HELP)],
            dataclasses.field(default=()),
        ),
    ]


def _args_class(spec: Any, data_file: bool) -> type:
    """The algorithm's config dataclass plus the options every training run takes."""
    if data_file:
        options = _run_options(None, "run folder (default runs/<stage>-<data>-<time>)")
        doc = (
            f"{spec.name}: {spec.summary}.\n\nThe trained model is saved to RUN_DIR/model. "
            "Fields left at None are chosen from the model and the data and written to "
            "RUN_DIR/config.json."
        )
    else:
        env_help = (
            "board game: tictactoe or connect4"
            if spec.config.__module__.startswith("rlx.games.")
            else "Gymnasium id, GridWorld / GridWorld-RxC, or package.module:factory (your env)"
        )
        options = _run_options(env_help, "run folder (default runs/<algo>-<env>-<time>)")
        presets = ", ".join(spec.presets) or "none"
        doc = (
            f"Train {spec.name}: {spec.summary}\n\n"
            f"Budget: --{spec.budget_field.replace('_', '-')} ({spec.unit}). "
            f"Per-environment presets (tuned defaults): {presets}. "
            "Explicit flags override a preset."
        )
    cls = dataclasses.make_dataclass(
        "RunArgs", options, bases=(spec.config,), frozen=True, kw_only=True
    )
    cls.__doc__ = doc
    return cls


def _parse_run(spec: Any, argv: list[str], prog: str, *, data_file: bool) -> tuple[Any, Any]:
    """The parsed flags and the run's :class:`rlx.api.Plan`, the config resolved once: its
    defaults are the algorithm's (with the env's preset) or the resumed run's record, and the
    flags given override them."""
    from rlx import api
    from rlx.core.env_recipe import ON_THE_COMMAND_LINE

    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--env")
    pre.add_argument("--data")
    pre.add_argument("--run-dir")
    pre.add_argument("--resume", action="store_true")
    pre.add_argument("--trust-env-code", action="store_true")
    pre.add_argument("--env-kwargs", nargs="*", default=[])
    known, _ = pre.parse_known_args(argv)
    env_kwargs = dict(key_value(item, "--env-kwargs") for item in known.env_kwargs)
    cls = _args_class(spec, data_file)
    default = None
    base = None
    if known.resume and known.run_dir:
        base = api.plan(spec.name, known.env, run_dir=known.run_dir, resume=True,
                        env_kwargs=env_kwargs, trust_env_code=known.trust_env_code,
                        consent=ON_THE_COMMAND_LINE)  # fmt: skip
        env = {} if data_file else {"env": base.env_id}
        default = cls(**dataclasses.asdict(base.config), **env, run_dir=known.run_dir, resume=True)
    elif known.env and not data_file:
        base = api.plan(spec.name, known.env, run_dir=known.run_dir, env_kwargs=env_kwargs)
        default = cls(**dataclasses.asdict(base.config), env=known.env)
    args = parse(cls, argv, prog, default)
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(spec.config)}
    if data_file and not args.resume and (not values.get("model") or not values.get("data")):
        raise ConfigError(f"{prog} needs --model DIR and --data FILE.")
    env = values["data"] if data_file else args.env
    if base is None or base.resume is None:
        planned = api.plan(
            spec.name, env, run_dir=args.run_dir, overrides=values, env_kwargs=env_kwargs
        )
    else:
        planned = dataclasses.replace(base, config=dataclasses.replace(base.config, **values))
    return args, planned


def _carry_out(planned: Any, args: Any) -> int:
    from rlx import api

    t0 = time.perf_counter()
    agent = api.train_planned(
        planned,
        progress=None if args.progress else False,  # None: when the terminal is interactive
        tensorboard=args.tensorboard,
        wandb=args.wandb,
        stop_on=args.stop_on,
    )
    status = _print_summary(agent.run_dir, time.perf_counter() - t0)
    model_dir = getattr(agent, "model_dir", None)
    if model_dir is not None:
        print(f"model saved in {model_dir}")
    return EXIT_CODES.get(status, 1)


def _print_summary(run_dir: Path, seconds: float) -> str:
    from rich.console import Console
    from rich.table import Table

    from rlx.runs import read_summary

    summary = read_summary(run_dir)
    table = Table("field", "value", title=f"run folder {run_dir}")
    for key, value in summary.items():
        table.add_row(key, f"{value:.4g}" if isinstance(value, float) else str(value))
    Console().print(table)
    return str(summary.get("status"))


# ---------------------------------------------------------------------------- rlx align
ALIGN_STAGES = {"sft": "sft", "rm": "rm", "dpo": "dpo", "grpo": "grpo", "rlhf": "rlhf-ppo"}
ALIGN_DATA = ("arithmetic", "arithmetic-sft", "arithmetic-prefs", "length-biased-prefs")


def _align(argv: list[str]) -> int:
    commands = ("tiny", "data", *ALIGN_STAGES, "eval")
    if not argv or argv[0] in ("-h", "--help"):
        print(
            "usage: rlx align COMMAND ...  (needs the llm extra: pip install 'rlx[llm]')\n\n"
            "  tiny --out DIR [--texts FILE]           build a tiny local model (char tokenizer)\n"
            "  data KIND --out FILE [--n N]            write a generated task as JSONL\n"
            "                                          (" + ", ".join(ALIGN_DATA) + ")\n"
            "  sft --model DIR --data FILE             supervised fine-tuning\n"
            "  rm  --model DIR --data FILE             Bradley-Terry reward model\n"
            "  dpo --model DIR --data FILE             Direct Preference Optimisation\n"
            "  grpo --model DIR --data FILE            GRPO with a verifier reward (--reward)\n"
            "  rlhf --model DIR --data FILE --reward-model DIR   RLHF-PPO against a reward model\n"
            "  rlhf --task arithmetic|length-biased --run-dir DIR   SFT -> RM -> PPO in one go\n"
            "  eval --model DIR --data FILE            greedy exact-match accuracy\n\n"
            "`rlx align sft --help` lists every field with its default."
        )
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command not in commands:
        raise ConfigError(
            f"unknown align command {command!r}; choose one of {', '.join(commands)}."
        )
    if command == "tiny":
        return _align_tiny(rest)
    if command == "data":
        return _align_data(rest)
    if command == "eval":
        return _align_eval(rest)
    if command == "rlhf" and any(a == "--task" or a.startswith("--task=") for a in rest):
        return _align_rlhf_pipeline(rest)
    from rlx import registry

    spec = registry.get(ALIGN_STAGES[command])
    args, planned = _parse_run(spec, rest, f"rlx align {command}", data_file=True)
    return _carry_out(planned, args)


@dataclasses.dataclass(frozen=True)
class PipelineArgs:
    """RLHF in three stages on a built-in task: SFT -> reward model -> PPO, each stage a run
    folder inside RUN_DIR (sft/, rm/, ppo/)."""

    task: str
    """arithmetic or length-biased"""
    run_dir: str
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


def _align_rlhf_pipeline(argv: list[str]) -> int:
    args = parse(PipelineArgs, argv, "rlx align rlhf --task")
    from rlx.llm.pipeline import rlhf_pipeline

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


@dataclasses.dataclass(frozen=True)
class TinyArgs:
    """Build a tiny causal LM (random init) with a character tokenizer."""

    out: str
    """folder to write the model into"""
    texts: str | None = None
    """text or JSONL file whose characters form the vocabulary"""
    arch: str = "llama"
    """llama or gpt2"""
    hidden_size: int = 128
    """width of the model"""
    num_layers: int = 4
    """transformer blocks"""
    num_heads: int = 4
    """attention heads"""
    seed: int = 0
    """seed of the random weights"""


def _align_tiny(argv: list[str]) -> int:
    args = parse(TinyArgs, argv, "rlx align tiny")
    if args.arch not in ("llama", "gpt2"):
        raise ConfigError(f"--arch {args.arch!r} must be llama or gpt2.")
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


@dataclasses.dataclass(frozen=True)
class DataArgs:
    """Write a generated task as a JSONL file."""

    kind: tyro.conf.Positional[str]
    """arithmetic, arithmetic-sft, arithmetic-prefs or length-biased-prefs"""
    out: str
    """JSONL file to write"""
    n: int = 3000
    """rows"""
    seed: int = 0
    """seed of the generator"""


def _align_data(argv: list[str]) -> int:
    args = parse(DataArgs, argv, "rlx align data")
    if args.kind not in ALIGN_DATA:
        raise ConfigError(f"kind {args.kind!r} must be one of {', '.join(ALIGN_DATA)}.")
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


@dataclasses.dataclass(frozen=True)
class AlignEvalArgs:
    """Greedy exact-match accuracy of a model on {prompt, answer} rows."""

    model: str
    """model folder (e.g. RUN_DIR/model)"""
    data: str
    """JSONL rows {prompt, answer}"""
    device: str = "cpu"
    """cpu, cuda or mps"""


def _align_eval(argv: list[str]) -> int:
    args = parse(AlignEvalArgs, argv, "rlx align eval")
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

    runs: tyro.conf.Positional[tuple[str, ...]]
    """run folders or log files"""
    strict: bool = False
    """exit 1 when a finding is an error"""
    json: bool = False
    """print the findings as JSON"""


def _doctor(argv: list[str]) -> int:
    args = parse(DoctorArgs, argv, "rlx doctor")
    if not args.runs:
        raise ConfigError("rlx doctor needs at least one RUN (a run folder or a log file).")
    from rlx.diagnostics.doctor import doctor

    diagnoses = [doctor(run) for run in args.runs]
    if args.json:
        import json

        payload = [d.to_dict() for d in diagnoses]
        print(json.dumps(payload[0] if len(payload) == 1 else payload, indent=2, default=str))
    else:
        print("\n\n".join(str(d) for d in diagnoses))
    return 1 if args.strict and any(d.errors for d in diagnoses) else 0


# ---------------------------------------------------------------------------- rlx report
@dataclasses.dataclass(frozen=True)
class ReportArgs:
    """Write a self-contained HTML report (plots, findings, config) of runs; several runs
    overlay for comparison."""

    runs: tyro.conf.Positional[tuple[str, ...]]
    """run folders or log files"""
    out: str | None = None
    """HTML file (default RUN/report.html, or ./report.html for several runs)"""
    title: str | None = None
    """page title"""


def _report(argv: list[str]) -> int:
    args = parse(ReportArgs, argv, "rlx report")
    if not args.runs:
        raise ConfigError("rlx report needs at least one RUN (a run folder or a log file).")
    from rlx.diagnostics.report import report

    path = report(list(args.runs), args.out, title=args.title)
    print(f"report written to {path}")
    return 0


# ---------------------------------------------------------------------------- rlx recommend
@dataclasses.dataclass(frozen=True)
class RecommendArgs:
    """Choose a method: the "Choose a method" table applied to an env id (its spaces and
    whether a model is available), a JSONL data file (preferences, verifier rows,
    demonstrations), or a board game name."""

    target: tyro.conf.Positional[str]
    """Gymnasium id, GridWorld id, JSONL file, or game (tictactoe, connect4)"""
    safety_critical: bool = False
    """exploration must stay safe (SARSA)"""
    no_model: bool = False
    """only samples, even if a model exists"""


def _recommend(argv: list[str]) -> int:
    args = parse(RecommendArgs, argv, "rlx recommend")
    from rlx.diagnostics.recommend import recommend

    kwargs = {"has_model": False} if args.no_model else {}
    print(recommend(args.target, safety_critical=args.safety_critical, **kwargs))
    return 0


# ---------------------------------------------------------------------------- rlx eval
@dataclasses.dataclass(frozen=True)
class EvalArgs:
    """Evaluate the agent of a run folder (its latest checkpoint): episodes in the env it was
    trained on (rebuilt from the recipe config.json records), games against the run's
    opponents for a board game, exact match on --data for a language model."""

    run_dir: tyro.conf.Positional[str]
    """the run folder written by `rlx train` or `rlx align`"""
    episodes: int = 20
    """episodes, or games for a board game"""
    seed: int = 0
    """seed of the first episode"""
    env: str | None = None
    """evaluate on this env instead of the run's: a Gymnasium id or package.module:factory"""
    env_kwargs: tuple[str, ...] = ()
    """KEY=VALUE ... for that env (gymnasium.make or the entry point)"""
    trust_env_code: bool = False
    """let the run folder's env be rebuilt from code its config.json names (an entry point, or
    a Gymnasium spec that is not the registered one): only for a folder you trust"""
    data: str | None = None
    """a language model's {prompt, answer} rows (JSONL)"""
    json: bool = False
    """print one JSON object (for scripts) instead of a sentence"""


def _eval(argv: list[str]) -> int:
    args = parse(EvalArgs, argv, "rlx eval")
    if args.episodes < 1:
        raise ConfigError(f"--episodes {args.episodes} must be >= 1.")
    import rlx
    from rlx.core.agent import GameAgent, TextAgent

    agent = rlx.load(args.run_dir)
    if isinstance(agent, GameAgent):
        from rlx.games.evaluation import arena

        opponents = agent.config.eval_opponents
        results = arena(agent.game, agent, opponents, args.episodes, args.seed)
        if args.json:
            return _print_json({"game": agent.game.name, "opponents": {
                name: {"games": r.games, "win": r.win_rate, "draw": r.draw_rate,
                       "loss": r.loss_rate} for name, r in results.items()}})  # fmt: skip
        for name, result in results.items():
            print(f"{args.run_dir} against {name} over {result.games} games: {result}")
        return 0
    if isinstance(agent, TextAgent):
        if args.data is None:
            raise ConfigError(
                f"{args.run_dir} holds a language model: give --data FILE (rows {{prompt, "
                f"answer}}), or run rlx align eval --model {args.run_dir}/model --data FILE."
            )
        from rlx import llm

        accuracy = llm.exact_match((agent.model, agent.tokenizer), args.data)
        if args.json:
            return _print_json({"exact_match": accuracy, "data": args.data})
        print(f"{args.run_dir}: exact match {accuracy:.3f} on {args.data}")
        return 0
    env, label = _eval_env(agent, args)
    stats = rlx.evaluate(agent, env, episodes=args.episodes, seed=args.seed)
    if args.json:
        return _print_json({"mean": stats.mean_return, "std": stats.std_return,
                            "episodes": stats.episodes, "mean_length": stats.mean_length,
                            "env": label})  # fmt: skip
    print(f"{args.run_dir}: {stats}")
    return 0


def _eval_env(agent: Any, args: Any) -> tuple[Any, Any]:
    """The env to evaluate on, and how the JSON names it: ``--env`` if given, else the run's
    own, rebuilt from its recipe (an env that cannot be rebuilt is an error saying so, and
    one built by code the folder names needs --trust-env-code)."""
    from rlx.api import env_and_recipe
    from rlx.core.env_recipe import ON_THE_COMMAND_LINE

    if args.env is not None:
        kwargs = dict(key_value(item, "--env-kwargs") for item in args.env_kwargs)
        env, recipe = env_and_recipe(args.env, kwargs)
        return env, recipe.record()
    recipe = agent.env_recipe.cleared(
        args.trust_env_code, ON_THE_COMMAND_LINE, source=f"the run folder {args.run_dir}"
    )
    return recipe.as_env, recipe.record()


def _print_json(payload: dict[str, Any]) -> int:
    import json

    print(json.dumps(payload, default=float))
    return 0


# ---------------------------------------------------------------------------- rlx play
@dataclasses.dataclass(frozen=True)
class PlayArgs:
    """Play a board game against an agent in the terminal. The board is drawn after every
    move; type the number of a cell (tictactoe, 0-8 row by row) or a column (connect4, 0-6)."""

    game: tyro.conf.Positional[str]
    """tictactoe or connect4 (or openspiel:<name>)"""
    agent: str | None = None
    """a run folder of `rlx train alphazero|muzero --env GAME` (default: pure MCTS with 1000
    random-rollout simulations per move)"""
    second: bool = False
    """let the agent move first (you play O)"""
    seed: int = 0
    """seed of the agent's choices"""


def _play(argv: list[str]) -> int:
    args = parse(PlayArgs, argv, "rlx play")
    from rlx.games.play import play

    outcome = play(args.game, args.agent, human_first=not args.second, seed=args.seed)
    return 0 if outcome is not None else 130


# ---------------------------------------------------------------------------- rlx solve
@dataclasses.dataclass(frozen=True)
class SolveArgs:
    """Solve a tabular MDP exactly and print V* and the optimal policy. ENV is GridWorld,
    GridWorld-RxC, or a Gymnasium toy-text id with a model (FrozenLake-v1, CliffWalking-v1,
    Taxi-v4)."""

    env: tyro.conf.Positional[str]
    """GridWorld[-RxC] or a Gymnasium toy-text id"""
    method: str = "value-iteration"
    """value-iteration or policy-iteration (fewer sweeps when gamma is near 1)"""
    gamma: float | None = None
    """discount (default: the env's)"""
    tol: float = 1e-8
    """stopping tolerance"""
    make: tyro.conf.UseAppendAction[tuple[str, ...]] = ()
    """KEY=VALUE for the env, repeatable: gymnasium.make keywords (--make map_name=8x8) or
    GridWorld's (rows, cols, slip, step_reward)"""


def _solve(argv: list[str]) -> int:
    args = parse(SolveArgs, argv, "rlx solve")
    methods = ("value-iteration", "policy-iteration")
    if args.method not in methods:
        raise ConfigError(f"--method {args.method!r} must be one of {', '.join(methods)}.")
    from rlx import planning
    from rlx.mdp import GridWorld, from_gymnasium

    make_kwargs = dict(key_value(item) for item in args.make)
    gamma = {} if args.gamma is None else {"gamma": args.gamma}
    if GridWorld.is_id(args.env):
        mdp = GridWorld.from_id(args.env, **gamma, **make_kwargs)
    else:
        mdp = from_gymnasium(args.env, **gamma, **make_kwargs)
    t0 = time.perf_counter()
    solve = (
        planning.value_iteration
        if args.method == "value-iteration"
        else (planning.policy_iteration)
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


def key_value(item: str, flag: str = "--make") -> tuple[str, Any]:
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


if __name__ == "__main__":
    sys.exit(main())
