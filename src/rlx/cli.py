"""The ``rlx`` command line: parses, dispatches, prints. No algorithm logic lives here.

Config flags of ``rlx train ALGO`` are generated from the algorithm's config dataclass with
tyro, so a field, its default and its docstring are written once. User errors
(:class:`rlx.errors.RLXError`) print one line on stderr and exit with code 2.

Exit codes of a training command: 0 the run completed its budget; 2 bad input; 3 a doctor rule
of ``--stop-on`` ended the run (``status: stopped`` and ``stopped_by`` in summary.json); 130
Ctrl-C or SIGTERM ended it (``status: interrupted``). Every run that ends early has a checkpoint
that ``--resume`` continues from.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from rlx.errors import ConfigError, RLXError

TRAIN_OPTIONS = ("env", "run_dir", "resume", "tensorboard", "progress", "stop_on")
# Exit codes by the status in summary.json (an early end is complete on disk, but the work
# asked for is not done, so a script sees it).
EXIT_CODES = {"completed": 0, "stopped": 3, "interrupted": 130}


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


def _dispatch(argv: list[str]) -> int:
    parser = _top_parser()
    if not argv or argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0
    if argv[0] == "--version":
        from rlx import __version__

        print(f"rlx {__version__}")
        return 0
    command, rest = argv[0], argv[1:]
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
    if command not in handlers:
        raise ConfigError(f"unknown command {command!r}; choose one of {', '.join(handlers)}.")
    return handlers[command](rest)


def _top_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rlx",
        description="Reinforcement learning from the MDP five-tuple to a trained agent.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "commands:\n"
            "  train ALGO --env ID [--field value ...]   train an agent into a run folder\n"
            "  eval RUN_DIR [--episodes N]                evaluate a run's agent\n"
            "  solve ENV [--method value-iteration]       solve a tabular MDP exactly\n"
            "  list                                       list the registered algorithms\n"
            "  align tiny|data|sft|rm|dpo|grpo|rlhf|eval  align a language model (extra llm)\n"
            "  doctor RUN_DIR [--strict] [--json]         diagnose a run (rlx, SB3, TRL, TB logs)\n"
            "  report RUN_DIR [RUN_DIR ...]               a self-contained HTML report\n"
            "  recommend ID [--safety-critical]           which method to use, and the command\n"
            "  play GAME [--agent RUN_DIR]                play a board game against an agent\n\n"
            "Every command has --help. Example:\n"
            "  rlx train q-learning --env FrozenLake-v1 --run-dir runs/ql\n"
            "  rlx eval runs/ql"
        ),
    )
    parser.add_argument("--version", action="store_true", help="print the version")
    return parser


# ---------------------------------------------------------------------------- rlx list
def _list(argv: list[str]) -> int:
    argparse.ArgumentParser(
        prog="rlx list", description="List the registered algorithms."
    ).parse_args(argv)
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from rlx import registry

    table = Table("algorithm", "trains for", "what it is")
    for name in registry.names():
        spec = registry.get(name)
        # escape: summaries quote formulas such as Q[s][a], which rich would read as markup
        table.add_row(name, spec.unit, escape(spec.summary))
    Console().print(table)
    return 0


# ---------------------------------------------------------------------------- rlx train
def _train(argv: list[str]) -> int:
    from rlx import registry

    if not argv or argv[0].startswith("-"):
        if argv and argv[0] in ("-h", "--help"):
            print("usage: rlx train ALGO --env ID [--help] [--<config field> VALUE ...]\n")
            print("algorithms: " + ", ".join(registry.names()))
            print("`rlx train ALGO --help` lists every config field with its default.")
            return 0
        raise ConfigError(
            "rlx train needs an algorithm name first, one of: " + ", ".join(registry.names())
        )
    spec = registry.get(argv[0])
    args = _parse_train_args(spec, argv[1:])
    from rlx.api import train

    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(args)}
    options = {k: values.pop(k) for k in TRAIN_OPTIONS}
    env = options.pop("env")
    options["progress"] = None if options["progress"] else False  # None: when interactive
    t0 = time.perf_counter()
    agent = train(spec.name, env, **options, **values)
    status = _print_summary(agent.run_dir, time.perf_counter() - t0)
    return EXIT_CODES.get(status, 1)


def _run_options(run_dir_help: str) -> list[tuple]:
    """The options every training run takes besides its config fields (tyro fields)."""
    import tyro

    def opt(help_text: str) -> Any:
        return tyro.conf.arg(help=help_text)

    return [
        (
            "run_dir",
            Annotated[str | None, opt(run_dir_help)],
            dataclasses.field(default=None),
        ),
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
            "progress",
            Annotated[bool, opt("show a progress bar when the terminal is interactive")],
            dataclasses.field(default=True),
        ),
        (
            "stop_on",
            Annotated[
                tuple[str, ...],
                opt(
                    "doctor rules that end the run (checkpoint saved; exit code 3), e.g. "
                    "kl-too-high"
                ),
            ],
            dataclasses.field(default=()),
        ),
    ]


def _train_args_class(spec: Any) -> type:
    """The config dataclass of ``spec`` plus the options every training run takes."""
    import tyro

    def opt(help_text: str) -> Any:
        return tyro.conf.arg(help=help_text)

    if spec.config.__module__.startswith("rlx.games."):
        env_help = "board game: tictactoe or connect4"
    else:
        env_help = "Gymnasium id, or GridWorld / GridWorld-RxC"
    extra = [
        ("env", Annotated[str, opt(env_help)]),
        *_run_options("run folder (default runs/<algo>-<env>-<time>)"),
    ]
    cls = dataclasses.make_dataclass(
        "TrainArgs", extra, bases=(spec.config,), frozen=True, kw_only=True
    )
    presets = ", ".join(spec.presets) or "none"
    cls.__doc__ = (
        f"Train {spec.name}: {spec.summary}\n\n"
        f"Budget: --{spec.budget_field.replace('_', '-')} ({spec.unit}). "
        f"Per-environment presets (tuned defaults): {presets}. "
        "Explicit flags override a preset."
    )
    return cls


def _parse_train_args(spec: Any, argv: list[str]) -> Any:
    import tyro

    from rlx import registry
    from rlx.runs import CONFIG_FILE, read_json

    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--env")
    pre.add_argument("--run-dir")
    pre.add_argument("--resume", action="store_true")
    known, _ = pre.parse_known_args(argv)
    cls = _train_args_class(spec)
    default = None
    if known.resume and known.run_dir:
        record = read_json(Path(known.run_dir) / CONFIG_FILE)
        config = registry.config_from_record(spec, record["config"])
        env = known.env or record["env"]
        default = cls(**dataclasses.asdict(config), env=env, run_dir=known.run_dir, resume=True)
    elif known.env:
        config, _ = registry.make_config(spec, known.env, {})
        default = cls(**dataclasses.asdict(config), env=known.env)
    return tyro.cli(cls, args=argv, prog=f"rlx train {spec.name}", default=default)


def _print_summary(run_dir: Path, seconds: float) -> str:
    from rich.console import Console
    from rich.table import Table

    from rlx.runs import SUMMARY_FILE, read_json

    summary = read_json(Path(run_dir) / SUMMARY_FILE)
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
    return _align_stage(command, rest)


def _align_rlhf_pipeline(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="rlx align rlhf --task",
        description="RLHF in three stages on a built-in task: SFT -> reward model -> PPO, "
        "each stage a run folder inside RUN_DIR (sft/, rm/, ppo/).",
    )
    parser.add_argument("--task", required=True, help="arithmetic or length-biased")
    parser.add_argument("--run-dir", required=True, help="the folder of the three runs")
    parser.add_argument("--model", default=None, help="start model (default: a tiny one)")
    parser.add_argument("--sft-model", default=None, help="skip SFT: use this SFT model")
    parser.add_argument("--reward-model", default=None, help="skip the RM: use this one")
    parser.add_argument("--steps", type=int, default=None, help="PPO steps (default: from data)")
    parser.add_argument("--beta", type=float, default=0.05, help="KL penalty (default 0.05)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
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


def _align_stage(command: str, argv: list[str]) -> int:
    import tyro

    from rlx import registry
    from rlx.runs import CONFIG_FILE, read_json

    spec = registry.get(ALIGN_STAGES[command])
    cls = _stage_args_class(spec)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--run-dir")
    pre.add_argument("--resume", action="store_true")
    known, _ = pre.parse_known_args(argv)
    default = None
    if known.resume and known.run_dir:
        record = read_json(Path(known.run_dir) / CONFIG_FILE)
        default = cls(**record["config"], run_dir=known.run_dir, resume=True)
    args = tyro.cli(cls, args=argv, prog=f"rlx align {command}", default=default)
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(args)}
    options = {k: values.pop(k) for k in TRAIN_OPTIONS if k != "env"}
    options["progress"] = None if options["progress"] else False
    if not values["model"] or not values["data"]:
        raise ConfigError(f"rlx align {command} needs --model DIR and --data FILE.")
    from rlx.api import train

    t0 = time.perf_counter()
    result = train(spec.name, values["data"], **options, **values)
    status = _print_summary(result.run_dir, time.perf_counter() - t0)
    print(f"model saved in {result.model_dir}")
    return EXIT_CODES.get(status, 1)


def _stage_args_class(spec: Any) -> type:
    """A stage's config dataclass plus the run options (no --env: the data file is it)."""
    extra = _run_options("run folder (default runs/<stage>-<data>-<time>)")
    cls = dataclasses.make_dataclass(
        "AlignArgs", extra, bases=(spec.config,), frozen=True, kw_only=True
    )
    cls.__doc__ = (
        f"{spec.name}: {spec.summary}.\n\nThe trained model is saved to RUN_DIR/model. "
        "Fields left at None are chosen from the model and the data and written to "
        "RUN_DIR/config.json."
    )
    return cls


def _align_tiny(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="rlx align tiny",
        description="Build a tiny causal LM (random init) with a character tokenizer.",
    )
    parser.add_argument("--out", required=True, help="folder to write the model into")
    parser.add_argument(
        "--texts", default=None, help="text or JSONL file whose characters form the vocabulary"
    )
    parser.add_argument("--arch", choices=("llama", "gpt2"), default="llama")
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument("--num-layers", type=int, default=4)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from rlx import llm

    texts = None
    if args.texts is not None:
        path = Path(args.texts)
        if not path.is_file():
            raise ConfigError(f"--texts {path} does not exist.")
        texts = [path.read_text()]
    out = llm.make_tiny_lm(
        args.out,
        texts=texts,
        arch=args.arch,
        hidden_size=args.hidden_size,
        num_layers=args.num_layers,
        num_heads=args.num_heads,
        seed=args.seed,
    )
    model, _ = llm.load_model(out)
    print(f"tiny {args.arch} model with {llm.count_parameters(model):,} parameters in {out}")
    return 0


def _align_data(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="rlx align data", description="Write a generated task as a JSONL file."
    )
    parser.add_argument("kind", choices=ALIGN_DATA)
    parser.add_argument("--out", required=True, help="JSONL file to write")
    parser.add_argument("--n", type=int, default=3000, help="rows (default 3000)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from rlx import llm

    if args.n < 1:
        raise ConfigError(f"--n {args.n} must be >= 1.")
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
    parser = argparse.ArgumentParser(
        prog="rlx align eval",
        description="Greedy exact-match accuracy of a model on {prompt, answer} rows.",
    )
    parser.add_argument("--model", required=True, help="model folder (e.g. RUN_DIR/model)")
    parser.add_argument("--data", required=True, help="JSONL rows {prompt, answer}")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    from rlx import llm

    accuracy = llm.exact_match(args.model, args.data, device=args.device)
    print(f"{args.model}: exact match {accuracy:.3f} on {args.data}")
    return 0


# ---------------------------------------------------------------------------- rlx doctor
def _doctor(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="rlx doctor",
        description=(
            "Diagnose training runs: the troubleshooting table's rules over the logged metrics. "
            "RUN is an rlx run folder, or another library's logs: a TensorBoard folder or "
            "event file, a Stable-Baselines3 progress.csv, a TRL trainer_state.json."
        ),
    )
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run folders or log files")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a finding is an error")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    args = parser.parse_args(argv)
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
def _report(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="rlx report",
        description="Write a self-contained HTML report (plots, findings, config) of runs; "
        "several runs overlay for comparison.",
    )
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run folders or log files")
    parser.add_argument(
        "--out", default=None, help="HTML file (default RUN/report.html, or ./report.html)"
    )
    parser.add_argument("--title", default=None, help="page title")
    args = parser.parse_args(argv)
    from rlx.diagnostics.report import report

    path = report(args.runs, args.out, title=args.title)
    print(f"report written to {path}")
    return 0


# ---------------------------------------------------------------------------- rlx recommend
def _recommend(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="rlx recommend",
        description=(
            "Choose a method: the cheat sheet's table applied to an env id (its spaces and "
            "whether a model is available), a JSONL data file (preferences, verifier rows, "
            "demonstrations), or a board game name."
        ),
    )
    parser.add_argument("target", help="Gymnasium id, JSONL file, or game (tictactoe)")
    parser.add_argument(
        "--safety-critical", action="store_true", help="exploration must stay safe (SARSA)"
    )
    parser.add_argument(
        "--no-model", action="store_true", help="only samples, even if a model exists"
    )
    args = parser.parse_args(argv)
    from rlx.diagnostics.recommend import recommend

    kwargs = {"has_model": False} if args.no_model else {}
    print(recommend(args.target, safety_critical=args.safety_critical, **kwargs))
    return 0


# ---------------------------------------------------------------------------- rlx eval
def _eval(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="rlx eval", description="Evaluate the agent of a run folder (latest checkpoint)."
    )
    parser.add_argument("run_dir", help="the run folder written by `rlx train`")
    parser.add_argument(
        "--episodes", type=int, default=20, help="episodes, or games for a board game (default 20)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the first episode")
    parser.add_argument("--env", default=None, help="evaluate on this env instead of the run's")
    args = parser.parse_args(argv)
    import rlx

    agent = rlx.load(args.run_dir)
    if hasattr(agent, "game"):  # a board-game agent: matches against the run's opponents
        from rlx.games.evaluation import arena

        opponents = agent.config.eval_opponents
        for name, result in arena(agent.game, agent, opponents, args.episodes, args.seed).items():
            print(f"{args.run_dir} against {name} over {result.games} games: {result}")
        return 0
    stats = rlx.evaluate(agent, args.env, episodes=args.episodes, seed=args.seed)
    print(f"{args.run_dir}: {stats}")
    return 0


# ---------------------------------------------------------------------------- rlx play
def _play(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="rlx play",
        description="Play a board game against an agent in the terminal. The board is drawn "
        "after every move; type the number of a cell (tictactoe, 0-8 row by row) or a column "
        "(connect4, 0-6).",
    )
    parser.add_argument("game", help="tictactoe or connect4 (or openspiel:<name>)")
    parser.add_argument(
        "--agent",
        default=None,
        help="a run folder of `rlx train alphazero|muzero --env GAME` "
        "(default: pure MCTS with 1000 random-rollout simulations per move)",
    )
    parser.add_argument(
        "--second", action="store_true", help="let the agent move first (you play O)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the agent's choices")
    args = parser.parse_args(argv)
    from rlx.games.play import play

    outcome = play(args.game, args.agent, human_first=not args.second, seed=args.seed)
    return 0 if outcome is not None else 130


# ---------------------------------------------------------------------------- rlx solve
def _solve(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="rlx solve",
        description=(
            "Solve a tabular MDP exactly and print V* and the optimal policy. ENV is "
            "GridWorld, GridWorld-RxC, or a Gymnasium toy-text id with a model "
            "(FrozenLake-v1, CliffWalking-v1, Taxi-v4)."
        ),
    )
    parser.add_argument("env", help="GridWorld[-RxC] or a Gymnasium toy-text id")
    parser.add_argument(
        "--method",
        choices=("value-iteration", "policy-iteration"),
        default="value-iteration",
        help="exact solver (default value-iteration; policy-iteration for gamma near 1)",
    )
    parser.add_argument("--gamma", type=float, default=None, help="discount (default: the env's)")
    parser.add_argument("--tol", type=float, default=1e-8, help="stopping tolerance")
    parser.add_argument(
        "--make",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keyword for gymnasium.make, e.g. --make map_name=8x8 (repeatable)",
    )
    args = parser.parse_args(argv)
    from rlx import planning
    from rlx.core.envs import is_gridworld_id, tabular_mdp
    from rlx.mdp import from_gymnasium

    make_kwargs = dict(_key_value(item) for item in args.make)
    if make_kwargs and not is_gridworld_id(args.env):
        gamma = {} if args.gamma is None else {"gamma": args.gamma}
        mdp = from_gymnasium(args.env, **gamma, **make_kwargs)
    else:
        mdp = tabular_mdp(args.env, args.gamma)
    t0 = time.perf_counter()
    if args.method == "value-iteration":
        result = planning.value_iteration(mdp, tol=args.tol)
    else:
        result = planning.policy_iteration(mdp, tol=args.tol)
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


def _key_value(item: str) -> tuple[str, Any]:
    if "=" not in item:
        raise ConfigError(f"--make {item!r} must look like KEY=VALUE, e.g. map_name=8x8.")
    key, value = item.split("=", 1)
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
