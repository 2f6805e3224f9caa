"""``rlx.train``, ``rlx.load``, ``rlx eval``: the package's face.

:func:`train` turns its arguments into one :class:`rlx.launch.run.TrainRequest` and hands it
to :func:`rlx.launch.run.launch`, as ``rlx train`` does with its flags: a plain run, a seed
group (``seeds``) or a run that heals as it trains (``heal``). ``rlx.load`` is
:func:`rlx.launch.plan.load`.
:func:`evaluate_run` evaluates a run folder whatever it trained (an env, a board game, a
language model): what ``rlx eval`` prints.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlx.core.env_recipe import IN_PYTHON, Consent
from rlx.diagnostics.references import using
from rlx.errors import ConfigError
from rlx.launch.plan import env_and_recipe, load, python_call
from rlx.launch.references import BOOK
from rlx.launch.run import TrainRequest, launch


def train(
    algo: str,
    env: Any = None,
    *,
    env_kwargs: dict[str, Any] | None = None,
    run_dir: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool | None = None,
    tensorboard: bool = False,
    wandb: bool = False,
    stop_on: tuple[str, ...] | list[str] = (),
    doctor: bool = True,
    trust_env_code: bool = False,
    callbacks: Sequence[Any] = (),
    seeds: Sequence[int] | None = None,
    jobs: int | None = None,
    resume_from: str | Path | int | None = None,
    heal: bool = False,
    heal_max: int | None = None,
    **overrides: Any,
) -> Any:
    """Train ``algo`` on ``env`` and return the trained agent (with ``seeds``, a
    :class:`rlx.launch.seed_groups.SeedGroup`).

    Args:
        algo: a registered name (``rlx.registry.names()``), e.g. ``"q-learning"``.
        env: a Gymnasium id, a Gymnasium env, or an ``rlx.mdp.TabularMDP``; a board game
            (``"tictactoe"``, ``"connect4"``) for alphazero and muzero; the JSONL data file
            for a language-model stage (``sft``, ``rm``, ``dpo``, ``grpo``, ``rlhf-ppo``).
            Also an entry point ``"package.module:factory"``, a callable that returns an env,
            or any Gymnasium env object; ``config.json`` records how to build it again
            (:mod:`rlx.core.env_recipe`). With ``resume``, None means the run's own env.
        env_kwargs: keyword arguments for ``gymnasium.make`` or the entry point.
        run_dir: the run folder (default ``runs/<algo>-<env>-<time>``).
        resume: continue the run in ``run_dir`` from its latest checkpoint; ``overrides``
            may raise its budget (e.g. ``episodes`` or ``total_steps``). A run that ended
            before its first checkpoint has nothing to continue: it starts over, saying so.
        overwrite: start over in ``run_dir``, which holds an rlx run: its files are deleted
            once the new run has started (kept if the new one is refused before it starts).
            A folder that is not an rlx run folder is refused.
        progress: show a progress bar (None: when stderr is a terminal).
        tensorboard: also log to ``run_dir/tensorboard``.
        wandb: also log to Weights & Biases (extra ``wandb``; offline in ``run_dir/wandb``
            unless ``WANDB_MODE`` says otherwise).
        stop_on: doctor rule ids (``rlx.diagnostics.rules.RULES_BY_ID``) that end the run,
            checkpoint saved, when they fire, e.g. ``["kl-too-high", "non-finite"]``.
        doctor: run the doctor's rules on the metrics as they are logged; a new finding
            prints one line, and the final findings go into ``summary.json``.
        trust_env_code: with ``resume`` and no ``env``, let the run folder's recorded env be
            rebuilt from code it names (an entry point, or a Gymnasium spec's entry point that
            is not the registered one). A run folder is data, so without this such a run
            stops with one sentence naming what it would import; a registered id needs none.
        callbacks: objects with any of ``on_start``, ``on_step``, ``on_update``, ``on_eval``,
            ``on_end`` (each ``(step, payload)``; False stops the run): :mod:`rlx.callbacks`.
        seeds: train one run per seed, e.g. ``[0, 1, 2, 3, 4]``, into
            ``run_dir/seed-<seed>``, listed in ``run_dir/group.json``, and return a
            :class:`rlx.launch.seed_groups.SeedGroup` (:func:`rlx.launch.seed_groups.train_seeds`):
            the seeds train in parallel processes, a failed one is recorded and the others go on;
            ``resume`` continues every seed.
        jobs: with ``seeds``, how many train at once (default: one per seed, up to the CPU
            cores; 1: one after another in this process).
        resume_from: with ``resume``, the step checkpoint to continue from (its step, or its
            file in ``run_dir/checkpoints``) instead of the latest: what was logged after it
            is cut, and the checkpoints written after it are removed once the run has started.
        heal: when a doctor rule that names a change fires, roll back to the last checkpoint
            before its evidence, apply the change and go on (:func:`rlx.launch.heal.train_healing`;
            checkpoints every twentieth of the budget, all kept, unless the config sets a
            cadence); each rollback is recorded in ``summary.json`` and ``config.json``.
        heal_max: with ``heal``, the most rollbacks (default 3).
        **overrides: config fields, e.g. ``total_steps=100_000, seed=0, alpha=0.2``.

    ``config.json`` keeps the history of the folder: every start, resume and start-over with
    its call, budget, time and rlx version.
    """
    call = python_call(algo, env, run_dir=run_dir, resume=resume, overwrite=overwrite,
                       env_kwargs=env_kwargs, seeds=seeds, jobs=jobs, resume_from=resume_from,
                       heal=heal, **overrides)  # fmt: skip
    return launch(
        TrainRequest(
            algo, env, env_kwargs=env_kwargs, run_dir=run_dir, resume=resume,
            resume_from=resume_from, overwrite=overwrite, overrides=overrides, seeds=seeds,
            jobs=jobs, heal=heal, heal_max=heal_max,
            trust_env_code=trust_env_code, consent=IN_PYTHON, command=call, progress=progress,
            tensorboard=tensorboard, wandb=wandb, stop_on=stop_on, doctor=doctor,
            callbacks=callbacks,
        )
    )  # fmt: skip


def doctor(run: Any) -> Any:
    """``rlx.doctor(run_dir)``: :func:`rlx.diagnostics.doctor.doctor` with rlx's references
    installed (its presets, rl-baselines3-zoo's presets and published agents:
    :mod:`rlx.diagnostics.references`), as ``rlx doctor`` has them."""
    from rlx.diagnostics.doctor import doctor as diagnose_run

    with using(BOOK):
        return diagnose_run(run)


def report(runs: Any, out: str | Path | None = None, *, title: str | None = None) -> Path:
    """``rlx.report(run_dir)``: :func:`rlx.diagnostics.report.report` with rlx's references
    installed, as ``rlx report`` has them."""
    from rlx.diagnostics.report import report as write_report

    with using(BOOK):
        return write_report(runs, out, title=title)


@dataclasses.dataclass(frozen=True)
class RunEvaluation:
    """What evaluating a run folder gave (:func:`evaluate_run`): one of

    - an agent of an env (``stats``, on the env ``env`` describes);
    - a board-game agent (``games``: opponent name -> its arena result);
    - a language model (``exact_match`` on ``data``).
    """

    run_dir: Path
    stats: Any = None
    env: Any = None
    game: str | None = None
    games: dict[str, Any] | None = None
    exact_match: float | None = None
    data: str | None = None
    video: Path | None = None
    """the clip written (``video=``): episodes, or a board game's replay"""

    def to_dict(self) -> dict[str, Any]:
        """The result as one JSON object (``rlx eval --json``)."""
        video = {} if self.video is None else {"video": str(self.video)}
        if self.games is not None:
            opponents = {name: {"games": r.games, "win": r.win_rate, "draw": r.draw_rate,
                                "loss": r.loss_rate} for name, r in self.games.items()}  # fmt: skip
            return {"game": self.game, "opponents": opponents, **video}
        if self.exact_match is not None:
            return {"exact_match": self.exact_match, "data": self.data}
        stats = self.stats
        return {"mean": stats.mean_return, "std": stats.std_return, "episodes": stats.episodes,
                "mean_length": stats.mean_length, "env": self.env, **video}  # fmt: skip

    def __str__(self) -> str:
        if self.games is not None:
            return "\n".join(
                [f"{self.run_dir} against {name} over {result.games} games: {result}"
                 for name, result in self.games.items()]
                + ([] if self.video is None else [f"replay: {self.video}"])
            )  # fmt: skip
        if self.exact_match is not None:
            return f"{self.run_dir}: exact match {self.exact_match:.3f} on {self.data}"
        return f"{self.run_dir}: {self.stats}"


def evaluate_run(
    run_dir: str | Path,
    *,
    episodes: int = 20,
    seed: int = 0,
    env: Any = None,
    env_kwargs: dict[str, Any] | None = None,
    data: str | Path | None = None,
    trust_env_code: bool = False,
    consent: Consent = IN_PYTHON,
    video: bool | str | Path | None = None,
    video_options: Any = None,
    checkpoint: str | Path | None = None,
) -> RunEvaluation:
    """Evaluate the agent of a run folder (its latest checkpoint, or ``checkpoint``: ``"best"``,
    the best evaluation's, or a checkpoint file, as :func:`rlx.launch.plan.load` takes) as what it
    is: ``episodes`` deterministic episodes on its env (rebuilt from the recipe
    ``config.json`` records, or ``env`` with ``env_kwargs``), as many games against the run's
    arena opponents for a board game, or exact match on ``data`` (rows ``{prompt, answer}``)
    for a language model.
    ``consent`` words the errors for where the user is.

    ``video`` (True, or a ``.gif`` file) also records the agent, by
    ``video_options`` (:class:`rlx.core.video.VideoOptions`): episodes drawn by its env, or
    the boards of a board game's games (:mod:`rlx.games.game_video`); True writes
    ``RUN_DIR/videos/eval-step<N>.gif``."""
    from rlx.core.agent import GameAgent, TextAgent
    from rlx.core.evaluation import evaluate

    if not isinstance(episodes, int) or isinstance(episodes, bool) or episodes < 1:
        raise ConfigError(
            f"evaluating takes a whole number >= 1 of episodes ({consent.arg('episodes', 'N')}), "
            f"not {episodes!r}."
        )
    agent = load(run_dir, checkpoint, trust_env_code=trust_env_code)
    folder = agent.run_dir
    if isinstance(agent, GameAgent):
        from rlx.games.evaluation import arena

        replay = None
        if video is not None and video is not False:
            from rlx.games.game_video import record_game_video

            replay = record_game_video(agent, video, video_options, seed=seed).path
        games = arena(agent.game, agent, agent.config.eval_opponents, episodes, seed)
        return RunEvaluation(folder, game=agent.game.name, games=games, video=replay)
    if isinstance(agent, TextAgent):
        if video is not None and video is not False:
            raise ConfigError(
                f"{folder} holds a language model, which has no video "
                f"({consent.arg('video')}): evaluate it without one."
            )
        if data is None:
            raise ConfigError(
                f"{folder} holds a language model: give its data ({consent.arg('data', 'FILE')}, "
                "rows {prompt, answer}), or evaluate its model folder with rlx.llm.exact_match "
                f"(rlx align eval --model {folder}/model --data FILE)."
            )
        from rlx import llm

        accuracy = llm.exact_match((agent.model, agent.tokenizer), str(data))
        return RunEvaluation(folder, exact_match=accuracy, data=str(data))
    if env is not None:
        made, recipe = env_and_recipe(env, env_kwargs)
    else:
        recipe = agent.env_recipe.cleared(
            trust_env_code, consent, source=f"the run folder {folder}"
        )
        made = recipe.as_env
    stats = evaluate(
        agent, made, episodes=episodes, seed=seed, video=video, video_options=video_options
    )
    return RunEvaluation(folder, stats=stats, env=recipe.record(), video=stats.video)
