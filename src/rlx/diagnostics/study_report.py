"""The page of a study of ``rlx tune``: ``rlx report STUDY_DIR`` writes STUDY_DIR/report.html.

It shows, top to bottom:

- what was tuned (algorithm, env, budget, the seeds every trial trains on) and how a trial's
  value is made of its seeds' (their mean minus one standard error), and how the trials ended
  (complete, pruned by the median pruner, pruned by the doctor, failed);
- the best trial: its value and its seeds', its config (``best.yaml``), the learning curve of
  each of its seeds and a link to its seed group's report;
- the held-out check: the best config and the defaults on seeds no trial trained on, each
  seed's value, the difference of the means with its 95% interval (Welch's t) and the verdict
  in words (or why there is none: skipped with ``heldout_seeds=0``, or the study not done);
- every trial's value by trial number (completed ones as dots, pruned ones as crosses, the
  best so far as a line);
- the table of trials: number, state, value, each seed's value, the doctor's finding that
  pruned it (rule id and evidence), the config it trained with (a field that is the same in
  every trial is listed once, above the table), and a link to its report.

Each trial's report (``STUDY_DIR/trial-NNNN/report.html``: its seed group's page,
:func:`rlx.diagnostics.group_report.report_groups`, or the run report of a study that trained
one seed per trial) is written as well, so that the links lead somewhere; one newer than what
the trial's runs logged is kept. The page needs no network, as the run reports.

The study is read as the folder's format says (:func:`rlx.runs.study.read_study`), not through
the tuner: the page shows the held-out check that ``heldout.json`` records when it is of the
best trial, its config and the study's held-out seeds.

Hooks the tests rely on: ``<section id="trials">`` holds one ``<tr class="trial
state-<state>" data-trial="<number>">`` per trial, with ``data-rule="<rule id>"`` where the
doctor pruned it; ``<section id="best">`` holds the best trial's curve; ``<section
id="heldout">`` holds the check, its verdict as ``<p class="verdict" data-verdict="...">``.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rlx.diagnostics.report import (
    CSS,
    REPORT_FILE,
    RUN_COLORS,
    ReportedRun,
    figure_svg,
    learning_curve_svg,
    report,
)
from rlx.errors import RunError
from rlx.runs.files import read_regular, write_atomic
from rlx.runs.study import StudyResult, read_study
from rlx.runs.study import is_study as holds_a_study

MAX_YAML_BYTES = 1 << 20
"""The largest ``best.yaml`` the page shows (rlx writes a few hundred bytes)."""
STUDY_CSS = """
.states span { margin-right: 1.2em; }
tr.state-pruned td { background: #fff8e1; } tr.state-failed td { background: #fdecea; }
tr.best td { background: #e8f5e9; font-weight: 600; }
td.config { font-size: .8rem; } td.pruned-by { font-size: .8rem; max-width: 22rem; }
pre.yaml { background: #f6f8fa; padding: .5rem 1rem; font-size: .8rem; overflow-x: auto; }
"""


def is_study(path: str | Path) -> bool:
    """True when ``path`` is the study folder of ``rlx tune`` (:func:`rlx.runs.study.is_study`)."""
    return holds_a_study(path)


def study_report(
    study_dir: str | Path, out: str | Path | None = None, *, title: str | None = None
) -> Path:
    """Write the study's page (default ``STUDY_DIR/report.html``) and each trial's run
    report; returns the page's path."""
    result = read_study(study_dir)
    path = Path(out) if out is not None else result.study_dir / REPORT_FILE
    for trial in result.trials:
        _trial_report(trial.run_dir, [run for _, run in trial.seed_runs()])
    page = render_study(result, title or f"rlx tune: {result.settings.algo} on "
                        f"{result.settings.env} ({result.study_dir})", path.parent)  # fmt: skip
    write_atomic(path, page)  # never through a link planted at the page's name
    return path


def _trial_report(run_dir: Path, seed_dirs: Sequence[Path]) -> Path | None:
    """The trial's report: its seed group's page (or, for a trial that is one run folder, its
    run report), written unless one newer than what its runs logged is there."""
    from rlx.diagnostics.group_report import report_groups
    from rlx.errors import RLXError
    from rlx.runs import METRICS_FILE, is_run_folder
    from rlx.runs.group import GROUP_FILE, is_group_folder

    single = is_run_folder(run_dir)
    if not single and not (is_group_folder(run_dir) and seed_dirs):
        return None
    page = run_dir / REPORT_FILE
    logged = (
        [run_dir / METRICS_FILE]
        if single
        else [run_dir / GROUP_FILE] + [d / METRICS_FILE for d in seed_dirs]
    )
    newest = max((f.stat().st_mtime for f in logged if f.is_file()), default=0.0)
    if page.is_file() and page.stat().st_mtime >= newest:
        return page
    if single:
        return report(run_dir)
    try:
        return report_groups([run_dir])
    except RLXError:  # seeds that logged nothing a page can show: the trial has no page
        return None


# ============================================================================ the page
def render_study(result: StudyResult, title: str, page_dir: Path) -> str:
    """The whole page of a :class:`rlx.runs.study.StudyResult` (links relative to ``page_dir``)."""
    sections = [
        _header_html(result, title),
        _best_html(result, page_dir),
        _heldout_html(result),
        _history_html(result),
        _trials_html(result, page_dir),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_e(title)}</title>\n<style>{CSS}{STUDY_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(sections)
        + "\n</body>\n</html>\n"
    )


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _header_html(result: Any, title: str) -> str:
    s = result.settings
    budget = f"{s.total_steps:,} env steps" if s.total_steps else "the config's budget"
    by_doctor = sum(t.pruned_by == "doctor" for t in result.trials)
    by_median = sum(t.pruned_by == "median" for t in result.trials)
    states = [
        f"<span>{result.count('complete')} complete</span>",
        f"<span>{by_median} pruned by the median pruner</span>",
        f"<span>{by_doctor} pruned by the doctor</span>",
        f"<span>{result.count('failed')} failed</span>",
    ]
    if result.count("running"):
        states.append(f"<span>{result.count('running')} running</span>")
    made = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    seeds = ", ".join(str(seed) for seed in s.trial_seeds())
    value = (
        f"each trial trains on seeds {seeds}, and its value is the mean of their final "
        f"evaluations (the mean return of {s.eval_episodes} evaluation episodes at each run's "
        "end) minus one standard error, so that one lucky seed cannot make a trial the best"
        if s.seeds_per_trial > 1
        else f"each trial trains on seed {seeds}, and its value is the mean return of "
        f"{s.eval_episodes} evaluation episodes at its end"
    )
    return (
        f"<header>\n<h1>{_e(title)}</h1>\n<p>{_e(s.algo)} on {_e(s.env)}: "
        f"{len(result.trials)} trials of {_e(budget)} each; {_e(value)}.</p>\n"
        f'<p class="states">{"".join(states)}</p>\n'
        f'<p class="meta">written by rlx on {made}</p>\n</header>'
    )


def _link(run_dir: Path, page_dir: Path, text: str) -> str:
    target = run_dir / REPORT_FILE
    try:
        href = target.resolve().relative_to(page_dir.resolve())
    except ValueError:
        href = target.resolve()
    return f'<a href="{_e(href.as_posix())}">{_e(text)}</a>'


def _best_html(result: Any, page_dir: Path) -> str:
    best = result.best
    parts = ['<section id="best">', "<h2>The best trial</h2>"]
    if best is None:
        parts.append('<p class="meta">No trial has completed yet.</p>\n</section>')
        return "\n".join(parts)
    seeds = ", ".join(
        f"seed {seed}: {_value(value)}"
        for seed, value in zip(best.seeds, best.seed_values, strict=False)
    )
    report_link = (
        f" ({_link(best.run_dir, page_dir, 'its report')})"
        if (best.run_dir / REPORT_FILE).is_file()
        else ""
    )
    parts.append(
        f"<p>Trial {best.number}: value {best.value:.4g}"
        + (f" ({_e(seeds)})" if seeds else "")
        + f"{report_link}. Train it again with "
        f"<code>rlx train --config {_e(result.best_file)}</code>:</p>"
    )
    if result.best_file.is_file():
        try:  # the study's own regular file, never one a link planted there points to
            best_yaml = read_regular(result.best_file, result.study_dir, limit=MAX_YAML_BYTES)
            parts.append(f'<pre class="yaml">{_e(best_yaml.decode("utf-8", "replace"))}</pre>')
        except RunError as exc:
            parts.append(f"<p>{_e(exc)}</p>")
    curve = _curve(best.seed_runs())
    if curve is not None:
        svg, notes = curve
        caption = "Learning curves of the best trial's seeds" + (
            f"; {'; '.join(notes)}" if notes else ""
        )
        parts.append(
            f'<figure class="plot" data-metric="episode_return">\n{svg}\n'
            f"<figcaption>{_e(caption)}.</figcaption>\n</figure>"
        )
    parts.append("</section>")
    return "\n".join(parts)


def _curve(runs: Sequence[tuple[int, Path]]) -> tuple[str, list[str]] | None:
    """The learning curves of a trial's seeds (those whose run the doctor can read)."""
    from rlx.diagnostics.doctor import doctor
    from rlx.errors import RLXError

    reported: list[ReportedRun] = []
    for seed, run_dir in runs:
        try:
            diagnosis = doctor(run_dir)
        except RLXError:
            continue
        color = RUN_COLORS[len(reported) % len(RUN_COLORS)]
        reported.append(ReportedRun(f"seed {seed}", color, diagnosis))
    return learning_curve_svg(reported) if reported else None


def _value(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _heldout_html(result: Any) -> str:
    """The held-out check: each side's seeds, the difference with its interval, the verdict."""
    s, check = result.settings, result.heldout
    parts = ['<section id="heldout">', "<h2>The held-out check</h2>"]
    if check is None:
        why = (
            "No held-out check: the study was run with heldout_seeds=0."
            if s.heldout_seeds == 0
            else "No held-out check yet: it runs once the study has its trials "
            "(rlx tune on this folder)."
        )
        parts.append(f'<p class="meta">{_e(why)}</p>\n</section>')
        return "\n".join(parts)
    seeds = "".join(f"<th>seed {seed}</th>" for seed in check.seeds)
    sides = [(f"the best config (trial {check.best_trial})", check.best)]
    if not check.same_config:
        sides.append(("the defaults", check.defaults))
    rows = "\n".join(
        f"<tr><td>{_e(name)}</td>"
        + "".join(f"<td>{v:.4g}</td>" for v in side.values)
        + f"<td>{side.mean:.4g}</td></tr>"
        for name, side in sides
    )
    parts.append(
        f"<p>The best trial's config and the defaults (the algorithm's, the env's preset, the "
        f"study's fixed fields and budget), each trained on {len(check.seeds)} seeds that no "
        f"trial trained on (the trials used seeds "
        f"{_e(', '.join(str(x) for x in check.trial_seeds))}); each seed's value is its run's "
        "final evaluation.</p>"
    )
    parts.append(f"<table>\n<tr><th></th>{seeds}<th>mean</th></tr>\n{rows}\n</table>")
    if check.same_config:
        text = "The best trial's config is the defaults' config: there is nothing to compare."
    else:
        low, high = check.interval
        text = (
            f"Difference of the means (best minus defaults): {check.difference:+.4g}, 95% "
            f"interval [{low:.4g}, {high:.4g}] (Welch's t). Verdict: {check.verdict}."
        )
    parts.append(f'<p class="verdict" data-verdict="{_e(check.verdict)}">{_e(text)}</p>')
    parts.append("</section>")
    return "\n".join(parts)


def _history_html(result: Any) -> str:
    """Each trial's value by number; the best so far as a line."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 3.0), layout="constrained")
    ax = fig.subplots()
    ax.set_title("trial value", fontsize=10, loc="left")
    ax.grid(True, alpha=0.3)
    marks = (
        ("complete", None, "o", RUN_COLORS[0], "complete"),
        ("pruned", "median", "x", RUN_COLORS[1], "pruned by the median pruner"),
        ("pruned", "doctor", "x", RUN_COLORS[3], "pruned by the doctor"),
    )
    for state, by, marker, color, label in marks:
        points = [(t.number, t.value) for t in result.trials
                  if t.state == state and t.pruned_by == by and t.value is not None]  # fmt: skip
        if points:
            xs, ys = zip(*points, strict=True)
            ax.scatter(xs, ys, marker=marker, color=color, label=label, zorder=3)
    best, line = None, []
    for t in result.trials:
        if t.state == "complete" and t.value is not None:
            best = t.value if best is None else max(best, t.value)
        line.append(best)
    shown = [(n, v) for n, v in enumerate(line) if v is not None]
    if shown:
        xs, ys = zip(*shown, strict=True)
        ax.step(xs, ys, where="post", color="#2ca02c", alpha=0.7, label="best so far")
    ax.set_xlabel("trial")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="best", framealpha=0.8)
    caption = (
        "Each trial's value by trial number (a pruned trial: its last evaluation before it "
        "stopped)."
    )
    return (
        '<section id="history">\n<h2>Trials</h2>\n<figure class="plot" data-metric="trial_value">'
        f"\n{figure_svg(fig)}\n<figcaption>{_e(caption)}</figcaption>\n</figure>\n</section>"
    )


def _trials_html(result: Any, page_dir: Path) -> str:
    trials = result.trials
    shared = _shared_fields([t.config for t in trials if t.config])
    best = result.best
    rows = []
    for t in trials:
        attrs = f' data-rule="{_e(t.finding["rule"])}"' if t.finding else ""
        css = f"trial state-{t.state}" + (" best" if best is not None and t is best else "")
        value = "" if t.value is None else f"{t.value:.4g}"
        how = {"doctor": "pruned by the doctor", "median": "pruned by the median pruner"}.get(
            t.pruned_by or "", "pruned" if t.state == "pruned" else t.state
        )
        finding = _finding_cell(t)
        seeds = " ".join(_value(v) for v in t.seed_values)
        config = ", ".join(f"{k}={_short(v)}" for k, v in t.config.items() if k not in shared)
        link = _link(t.run_dir, page_dir, "report") if (t.run_dir / REPORT_FILE).is_file() else ""
        rows.append(
            f'<tr class="{css}" data-trial="{t.number}"{attrs}><td>{t.number}</td>'
            f'<td>{_e(how)}</td><td>{_e(value)}</td><td class="seeds">{_e(seeds)}</td>'
            f'<td class="pruned-by">{finding}</td>'
            f'<td class="config">{_e(config)}</td><td>{link}</td></tr>'
        )
    same = ", ".join(f"{k}={_short(v)}" for k, v in shared.items())
    head = f"<p>Every trial: <code>{_e(same)}</code>.</p>" if same else ""
    return (
        '<section id="trials">\n<h2>Every trial</h2>\n'
        f"{head}\n<table>\n<tr><th>trial</th><th>state</th><th>value</th><th>its seeds' "
        "values</th><th>the doctor's finding</th><th>config</th><th></th></tr>\n"
        + "\n".join(rows)
        + "\n</table>\n</section>"
    )


def _finding_cell(trial: Any) -> str:
    if trial.finding:
        f = trial.finding
        return f"<code>{_e(f.get('rule'))}</code>: {_e(f.get('symptom'))} ({_e(_evidence(f))})"
    if trial.error:
        return f"error: {_e(trial.error)}"
    return ""


def _evidence(finding: dict[str, Any]) -> str:
    ev = finding.get("evidence") or {}
    return (
        f"{ev.get('metric')}: {ev.get('statistic')} {_short(ev.get('value'))} vs threshold "
        f"{_short(ev.get('threshold'))}, steps {_short(ev.get('step_start'))}-"
        f"{_short(ev.get('step_end'))}"
    )


def _shared_fields(configs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Fields with one value in every trial (listed once above the table)."""
    if len(configs) < 2:
        return {}
    first = configs[0]
    return {k: v for k, v in first.items()
            if all(json.dumps(c.get(k)) == json.dumps(v) for c in configs)}  # fmt: skip


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return json.dumps(list(value))
    return str(value)


__all__ = ["is_study", "render_study", "study_report"]
