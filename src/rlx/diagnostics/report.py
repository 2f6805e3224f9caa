"""One self-contained HTML page per run, or per set of runs to compare.

``rlx.report(run_dir)`` and ``rlx report RUN_DIR [RUN_DIR ...]`` write ``report.html``: the
doctor's findings on top (severity, symptom, evidence, cause, fix with the suggested change),
the learning curve with the evaluation points, one plot per logged metric with the rules'
thresholds drawn as dashed lines and each finding's evidence window shaded, and the config
of every run side by side. Several runs (seeds, double vs vanilla DQN) overlay in each plot.

The page needs no network: plots are inline SVG (crisp, and their text stays searchable),
the CSS is inline, and nothing is fetched. Every run goes through :func:`~rlx.diagnostics.
doctor.doctor`, so another library's logs (TensorBoard, SB3, TRL) get a report as well.

A run folder that holds a clip of its agent (``rlx eval RUN_DIR --video``: an episode, or a
board game's replay) shows its newest one under the learning curve, inlined into the page as
a base64 ``data:`` URI, so the page stays one file; a clip too big to inline
(``MAX_INLINE_VIDEO_BYTES``) is linked by its path relative to the page instead.

Hooks the tests and the browser check rely on: ``<section id="findings">`` holds one element
``class="finding severity-<severity>" data-rule="<rule id>"`` per finding; every plot is a
``<figure class="plot" data-metric="<metric>">`` with a ``<figcaption>``; every clip a
``<figure class="video" data-run="<label>">``.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from rlx import metrics as M
from rlx.diagnostics.doctor import (
    Diagnosis,
    Finding,
    applicable,
    applicable_metrics,
    doctor,
    heal_markers,
)
from rlx.diagnostics.rules import RULES
from rlx.diagnostics.series import RunLog, Series
from rlx.diagnostics.sources import episode_series
from rlx.errors import ConfigError, RunError
from rlx.runs.files import read_regular, write_atomic
from rlx.runs.folder import newest_video

REPORT_FILE = "report.html"
MAX_INLINE_VIDEO_BYTES = 8 * 1024 * 1024
"""A bigger clip is linked instead of inlined, so that the page does not grow past what a
browser opens at once."""
MAX_PLOT_POINTS = 2000
"""Longer series are thinned to this many points for plotting (min/max per bucket, so spikes
survive): the page stays small and the SVG quick to draw."""

EVAL_METRICS = (M.EVAL_RETURN_MEAN, "eval_return")
"""Evaluation returns logged during training (rlx's ``eval_every``; ``eval_return`` from other
logs): markers on the learning curve, ± ``eval_return_std`` where logged, no own plot."""

# matplotlib's default cycle (tab10): a run keeps its colour in every plot and in the header.
RUN_COLORS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)

RunInput = str | Path | RunLog


@dataclass
class ReportedRun:
    """One run on the page: its short ``label`` (legends), ``color`` and the doctor's
    ``diagnosis`` (which carries the :class:`RunLog`)."""

    label: str
    color: str
    diagnosis: Diagnosis

    @property
    def log(self) -> RunLog:
        return self.diagnosis.log


# ============================================================================ entry point
def report(
    runs: RunInput | Sequence[RunInput],
    out: str | Path | None = None,
    *,
    title: str | None = None,
) -> Path:
    """Write a self-contained HTML report of one or several runs and return its path.

    Args:
        runs: a run folder (rlx's, or another library's logs), a :class:`RunLog`, or a
            sequence of them to overlay for comparison.
        out: the HTML file to write (default: ``RUN_DIR/report.html`` for one run,
            ``./report.html`` for several).
        title: the page's heading (default: names the run, or how many runs).
    """
    inputs = _as_list(runs)
    diagnoses = [doctor(run) for run in inputs]
    labels = run_labels([d.log for d in diagnoses])
    reported = [
        ReportedRun(label, RUN_COLORS[i % len(RUN_COLORS)], diagnosis)
        for i, (label, diagnosis) in enumerate(zip(labels, diagnoses, strict=True))
    ]
    path = Path(out) if out is not None else _default_out(reported)
    page = render_html(reported, title or _default_title(reported), page=path)
    write_atomic(path, page)  # never through a link planted at the page's name
    return path


def _as_list(runs: RunInput | Sequence[RunInput]) -> list[RunInput]:
    if isinstance(runs, (str, Path, RunLog)):
        return [runs]
    runs = list(runs)
    if not runs:
        raise ConfigError("report: no runs given; pass one or more run folders.")
    return runs


def _default_out(runs: Sequence[ReportedRun]) -> Path:
    """``RUN_DIR/report.html`` for one run (beside the log file for a foreign log file),
    ``./report.html`` for several."""
    if len(runs) > 1:
        return Path(REPORT_FILE)
    source = runs[0].log.source
    return (source if source.is_dir() else source.parent) / REPORT_FILE


def _default_title(runs: Sequence[ReportedRun]) -> str:
    if len(runs) == 1:
        return f"rlx report: {runs[0].log.label}"
    return f"rlx report: {len(runs)} runs"


def run_labels(logs: Sequence[RunLog]) -> list[str]:
    """Short, distinct legend labels: the folder names when they differ (``seed0``,
    ``seed1``), else the paths, else the paths numbered."""
    names = [log.source.name or str(log.source) for log in logs]
    if len(set(names)) == len(names):
        return names
    paths = [str(log.source) for log in logs]
    if len(set(paths)) == len(paths):
        return paths
    return [f"{path} #{i + 1}" for i, path in enumerate(paths)]


# ============================================================================ page
def render_html(runs: Sequence[ReportedRun], title: str, page: Path | None = None) -> str:
    """The whole page: header, findings, learning curve, the agent's clips, diagnostics,
    config. ``page``: where it is written (a clip too big to inline is linked from there)."""
    sections = [
        _header_html(runs, title),
        _findings_html(runs),
        _learning_curve_html(runs),
        _videos_html(runs, page),
        _diagnostics_html(runs),
        _config_html(runs),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_e(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        + "\n".join(sections)
        + "\n</body>\n</html>\n"
    )


CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem auto;
       max-width: 960px; padding: 0 1rem; color: #222; line-height: 1.4; }
h1 { font-size: 1.5rem; margin-bottom: .3rem; } h2 { border-bottom: 1px solid #ddd; }
.meta { color: #666; font-size: .85rem; }
.swatch { display: inline-block; width: .8em; height: .8em; border-radius: 2px;
          margin-right: .4em; vertical-align: middle; }
.finding { border-left: 5px solid #e6a700; background: #fff8e1; padding: .5rem 1rem;
           margin: .5rem 0; border-radius: 3px; }
.finding.severity-error { border-color: #d32f2f; background: #fdecea; }
.finding h4 { margin: .2rem 0; } .severity { text-transform: uppercase; font-size: .8rem;
  font-weight: bold; margin-right: .5em; }
.finding dl { display: grid; grid-template-columns: max-content 1fr; gap: .1rem 1rem;
              margin: .3rem 0; }
.finding dt { font-weight: bold; color: #555; } .finding dd { margin: 0; }
.no-findings { color: #2e7d32; }
figure.plot, figure.video { margin: 1rem 0; } figure.video img { max-width: 100%; }
figure.plot svg, figure.plot img { max-width: 100%; height: auto; }
figcaption { color: #555; font-size: .85rem; }
table { border-collapse: collapse; font-size: .9rem; }
th, td { border: 1px solid #ddd; padding: .2rem .6rem; text-align: left; vertical-align: top; }
tr.differs td { background: #fff8e1; }
code { font-size: .9em; }
"""


def _e(text: Any) -> str:
    """Escaped for HTML text and attribute values."""
    return html.escape(str(text), quote=True)


def _header_html(runs: Sequence[ReportedRun], title: str) -> str:
    """The title, then one line per run: its colour, label, algorithm, env and folder."""
    items = []
    for run in runs:
        log = run.log
        details = []  # already escaped HTML
        if log.algo or log.env:
            details.append(_e(" ".join(str(p) for p in (log.algo, log.env) if p)))
        details.append(f"<code>{_e(log.source)}</code>")
        if log.kind != "rlx":
            details.append(f"{_e(log.kind)} logs")
        items.append(
            f'<li data-run="{_e(run.label)}"><span class="swatch" '
            f'style="background:{run.color}"></span><strong>{_e(run.label)}</strong>: '
            + ", ".join(details)
            + "</li>"
        )
    made = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f'<header>\n<h1>{_e(title)}</h1>\n<ul class="runs">\n'
        + "\n".join(items)
        + f'\n</ul>\n<p class="meta">written by rlx on {made}</p>\n</header>'
    )


# ============================================================================ findings
def _findings_html(runs: Sequence[ReportedRun]) -> str:
    """Every run's findings in the doctor's order (the likeliest fix first), or "no findings"."""
    parts = ['<section id="findings">', "<h2>Findings</h2>"]
    for run in runs:
        parts.append(f'<div class="run-findings" data-run="{_e(run.label)}">')
        if len(runs) > 1:
            parts.append(
                f'<h3><span class="swatch" style="background:{run.color}"></span>'
                f"{_e(run.label)}</h3>"
            )
        if run.diagnosis.healthy:
            checked = ", ".join(sorted(applicable_metrics(run.log))) or "no known metric"
            parts.append(f'<p class="no-findings">No findings (checked {_e(checked)}).</p>')
        parts += [_finding_html(f) for f in run.diagnosis.findings]
        parts.append("</div>")
    parts.append("</section>")
    return "\n".join(parts)


def _finding_html(finding: Finding) -> str:
    rule, evidence = finding.rule, finding.evidence
    return (
        f'<article class="finding severity-{_e(finding.severity)}" data-rule="{_e(rule.id)}">\n'
        f'<h4><span class="severity">{_e(finding.severity)}</span>{_e(rule.symptom)} '
        f'<code class="rule-id">{_e(rule.id)}</code></h4>\n<dl>\n'
        f'<dt>evidence</dt><dd><a href="#{_plot_id(evidence.metric)}">'
        f"{_e(evidence.describe())}</a></dd>\n"
        f"<dt>cause</dt><dd>{_e(rule.cause)}</dd>\n"
        f"<dt>fix</dt><dd>{_e(finding.change())}</dd>\n</dl>\n</article>"
    )


# ============================================================================ plots
def _learning_curve_html(runs: Sequence[ReportedRun]) -> str:
    """Return per step, every run in its colour; evaluation returns as diamonds."""
    svg, notes = learning_curve_svg(runs)
    caption = (
        "Learning curve: training episode return per step"
        + (f"; {'; '.join(notes)}" if notes else "")
        + "."
    )
    return (
        '<section id="learning-curve">\n<h2>Learning curve</h2>\n'
        + _figure_html(M.EPISODE_RETURN, svg, caption)
        + "\n</section>"
    )


def _videos_html(runs: Sequence[ReportedRun], page: Path | None) -> str:
    """The newest clip of every run folder that has one (none: no section)."""
    figures = []
    for run in runs:
        source = run.log.source
        clip = newest_video(source) if source.is_dir() else None
        if clip is None:
            continue
        size = clip.lstat().st_size
        if size <= MAX_INLINE_VIDEO_BYTES:
            try:  # the folder's own regular file, opened without following a link
                data = read_regular(clip, source, limit=MAX_INLINE_VIDEO_BYTES)
            except RunError:
                continue
            src = "data:image/gif;base64," + base64.b64encode(data).decode("ascii")
            where = f"{clip.parent.name}/{clip.name}"
        else:
            base = (page or Path(REPORT_FILE)).resolve().parent
            src = Path(os.path.relpath(clip.resolve(), base)).as_posix()
            where = f"{src}, linked: {size / 2**20:.0f} MiB is too big to inline"
        figures.append(
            f'<figure class="video" data-run="{_e(run.label)}">\n'
            f'<img src="{_e(src)}" alt="{_e(run.label)}: the agent ({_e(clip.name)})">\n'
            f"<figcaption>{_e(run.label)}: the agent, from {_e(where)} (rlx eval --video)."
            "</figcaption>\n</figure>"
        )
    if not figures:
        return ""
    return '<section id="videos">\n<h2>The agent</h2>\n' + "\n".join(figures) + "\n</section>"


def _diagnostics_html(runs: Sequence[ReportedRun]) -> str:
    figures = []
    for metric in plot_order(runs):
        svg, caption = metric_svg(runs, metric)
        figures.append(_figure_html(metric, svg, caption))
    if not figures:
        figures.append('<p class="meta">No other metric was logged.</p>')
    return (
        '<section id="diagnostics">\n<h2>Diagnostics</h2>\n' + "\n".join(figures) + "\n</section>"
    )


def _figure_html(metric: str, svg: str, caption: str) -> str:
    return (
        f'<figure class="plot" id="{_plot_id(metric)}" data-metric="{_e(metric)}">\n{svg}\n'
        f"<figcaption>{_e(caption)}</figcaption>\n</figure>"
    )


def _plot_id(metric: str) -> str:
    return "plot-" + "".join(c if c.isalnum() or c in "-_" else "-" for c in metric)


def plot_order(runs: Sequence[ReportedRun]) -> list[str]:
    """Every metric some run logged, except the learning curve's: those the rules read first
    (in the rule table's order), then the rest alphabetically."""
    logged = {name for run in runs for name in run.log.metrics if run.log.get(name) is not None}
    logged -= {M.EPISODE_RETURN, M.EVAL_RETURN_STD, *EVAL_METRICS}
    ruled: list[str] = []
    for rule in RULES:
        for metric in (rule.metric, *rule.lines):
            if metric in logged and metric not in ruled:
                ruled.append(metric)
    return ruled + sorted(logged - set(ruled))


def threshold_lines(runs: Sequence[ReportedRun], metric: str) -> list[tuple[float, str]]:
    """``(value, label)`` of every rule threshold on ``metric``, for rules that apply to one
    of the runs: one line per value, labelled by what crossing it means."""
    labels: dict[float, str] = {}
    for rule in RULES:
        if metric not in rule.lines or not any(applicable(rule, run.log) for run in runs):
            continue
        for value, meaning in rule.lines[metric]:
            labels.setdefault(float(value), f"{value:g}: {meaning}")
    return sorted(labels.items())


@dataclass(frozen=True)
class YAxis:
    """How a metric's plot reads at a glance: ``log`` when its values span decades, and limits
    that hold the bulk of the points (and the rule thresholds) when a few outliers would squeeze
    the rest into a flat line; ``outside`` counts the points past the limits."""

    log: bool
    limits: tuple[float, float] | None
    outside: int


DECADES_FOR_LOG = 2.0
"""A positive metric whose 5th and 95th percentiles are this many decades apart gets a log axis."""
OUTLIER_IQR = 3.0
"""Points further than this many interquartile ranges beyond the quartiles are outliers."""


def y_axis(values: np.ndarray, thresholds: Sequence[float] = ()) -> YAxis:
    """The y-axis for these (finite) values and threshold lines: see :class:`YAxis`."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if len(values) < 5:
        return YAxis(False, None, 0)
    positive = values[values > 0]
    log = bool(
        len(positive) >= 0.95 * len(values)
        and np.log10(np.percentile(positive, 95) / np.percentile(positive, 5)) >= DECADES_FOR_LOG
    )
    scaled = np.log10(positive) if log else values
    q1, q3 = np.percentile(scaled, [25, 75])
    spread = q3 - q1
    low, high = float(scaled.min()), float(scaled.max())
    if spread <= 0:
        return YAxis(log, None, 0)
    lo = max(low, q1 - OUTLIER_IQR * spread)
    hi = min(high, q3 + OUTLIER_IQR * spread)
    marks = [np.log10(t) if log else t for t in thresholds if (t > 0 or not log)]
    lo, hi = min([lo, *marks]), max([hi, *marks])
    if lo <= low and hi >= high:
        return YAxis(log, None, 0)
    pad = 0.05 * (hi - lo)
    lo, hi = lo - pad, hi + pad
    outside = int(np.sum((scaled < lo) | (scaled > hi)))
    limits = (float(10**lo), float(10**hi)) if log else (float(lo), float(hi))
    return YAxis(log, limits, outside)


def learning_curve_svg(runs: Sequence[ReportedRun]) -> tuple[str, list[str]]:
    """The learning curve's SVG and notes for its caption."""
    fig, ax = _new_axes(M.EPISODE_RETURN)
    notes: list[str] = []
    evaluated: list[str] = []
    for run in runs:
        note = _plot_returns(ax, run)
        if note and note not in notes:
            notes.append(note)
        if _draw_evaluations(ax, run):
            evaluated.append(run.label)
    if evaluated:
        notes.append("diamonds: evaluation return (mean ± std) of " + ", ".join(evaluated))
    if any(_number(run.log.summary.get("best_eval_step")) is not None for run in runs):
        notes.append("ringed: the best evaluation, kept as checkpoints/best.pt")
    healed = [run.label for run in runs if _draw_heal_markers(ax, run)]
    if healed:
        notes.append(
            "dash-dotted: where a heal went on from a checkpoint with a doctor's fix (rlx heal) "
            "in " + ", ".join(healed)
        )
    ax.set_xlabel("step")
    return _finish(fig, ax), notes


def _draw_heal_markers(ax: Any, run: ReportedRun) -> bool:
    """A vertical dash-dotted line, labelled with the change, at each step a healed run went
    on from (:func:`rlx.diagnostics.doctor.heal_markers`); whether there was one. The label is
    the folder's text, drawn as it is (``parse_math=False``: a ``$`` in it is no mathtext)."""
    marks = heal_markers(run.log.summary)
    for i, (step, label) in enumerate(marks):
        ax.axvline(step, color=run.color, ls="-.", lw=1.2, gid=f"heal-{_plot_id(run.label)}-{i}")
        ax.annotate(label, xy=(step, 0.98), xycoords=("data", "axes fraction"), rotation=90,
                    ha="right", va="top", fontsize=7, color=run.color,
                    parse_math=False)  # fmt: skip
    return bool(marks)


def _plot_returns(ax: Any, run: ReportedRun) -> str | None:
    """The run's training returns; returns a note for the caption when there is one."""
    episodes = _per_episode_returns(run.log)
    logged = run.log.get(M.EPISODE_RETURN)
    if episodes is not None and (logged is None or len(episodes) >= len(logged)):
        # rlx's episodes.csv is finer than the logged means, or is what the doctor read (a
        # tabular run logs a mean per 500 episodes): the raw returns faintly, their moving
        # average in the run's colour
        episodes = episodes.finite()
        raw = _downsample(episodes)
        ax.plot(raw.steps, raw.values, color=run.color, alpha=0.25, lw=0.6)
        window = int(np.clip(len(episodes) // 20, 1, 100))
        smooth = _downsample(_moving_average(episodes, window))
        ax.plot(smooth.steps, smooth.values, color=run.color, lw=1.6, label=run.label)
        if window > 1:
            return f"faint: each episode; solid: moving average of {window} episodes"
        return None
    if logged is None:
        return f"{run.label} logged no episode return"
    series = _downsample(logged.finite())
    marker = "o" if len(series) < 3 else None  # a line of one point would be invisible
    ax.plot(
        series.steps, series.values, color=run.color, lw=1.4, label=run.label, marker=marker, ms=4
    )
    return None


def _draw_evaluations(ax: Any, run: ReportedRun) -> bool:
    """Evaluation returns logged during training (± their std where logged, the best one
    ringed), and the final evaluation of ``summary.json`` (``eval_return_mean`` ±
    ``eval_return_std``) at the run's last step."""
    drawn = False
    for name in EVAL_METRICS:
        series = run.log.get(name)
        if series is not None:
            series = series.finite()
            spread = run.log.get(M.EVAL_RETURN_STD) if name == M.EVAL_RETURN_MEAN else None
            same_steps = spread is not None and np.array_equal(spread.steps, series.steps)
            ax.errorbar(
                series.steps,
                series.values,
                yerr=spread.values if same_steps and spread is not None else None,
                ls="none",
                marker="D",
                ms=5,
                capsize=2,
                elinewidth=0.8,
                color=run.color,
                markeredgecolor="black",
                label=f"{run.label} eval",
            )
            drawn = True
            break
    best_step = _number(run.log.summary.get("best_eval_step"))
    best = _number(run.log.summary.get("best_eval_return_mean"))
    if best_step is not None and best is not None:
        ax.plot([best_step], [best], ls="none", marker="o", ms=13, mfc="none",
                mec=run.color, mew=1.6)  # fmt: skip
    summary = run.log.summary
    mean = _number(summary.get("eval_return_mean"))
    if mean is not None:
        step = _number(summary.get("steps"))
        if step is None:
            step = _last_step(run.log)
        std = _number(summary.get("eval_return_std")) or 0.0
        ax.errorbar(
            [step],
            [mean],
            yerr=[std],
            ls="none",
            marker="D",
            ms=7,
            capsize=4,
            color=run.color,
            markeredgecolor="black",
            label=None if drawn else f"{run.label} final eval",
        )
        drawn = True
    return drawn


def metric_svg(runs: Sequence[ReportedRun], metric: str) -> tuple[str, str]:
    """One metric of every run, the rules' thresholds dashed, findings' windows shaded."""
    fig, ax = _new_axes(metric)
    missing = []
    for run in runs:
        series = run.log.get(metric)
        if series is None:
            missing.append(run.label)
            continue
        finite = _downsample(series.finite())
        ax.plot(  # a marker when a line of one point would be invisible
            finite.steps,
            finite.values,
            color=run.color,
            lw=1.3,
            label=run.label,
            marker="o" if len(finite) < 3 else None,
            ms=4,
        )
    lines = threshold_lines(runs, metric)
    values = [logged.finite().values for run in runs if (logged := run.log.get(metric))]
    # the rules' thresholds and every finding's evidence stay inside the y-range
    marks = [v for v, _ in lines] + evidence_values(runs, metric)
    axis = y_axis(np.concatenate(values) if values else np.array([]), marks)
    if axis.log:
        ax.set_yscale("log")
    if axis.limits is not None:
        ax.set_ylim(*axis.limits)
    for value, label in lines:
        ax.axhline(value, color="#c62828", ls="--", lw=1)
        ax.annotate(
            label,
            xy=(0.995, value),
            xycoords=("axes fraction", "data"),
            ha="right",
            va="bottom",
            fontsize=8,
            color="#c62828",
        )
    shaded = _shade_evidence(ax, runs, metric)
    ax.set_xlabel("step")
    caption = metric + ("; log scale" if axis.log else "")
    if axis.outside:
        caption += f"; {axis.outside} outlying point(s) beyond the y-range"
    if lines:
        caption += "; dashed: rule thresholds: " + "; ".join(label for _, label in lines)
    if shaded:
        caption += "; shaded: evidence of " + ", ".join(shaded)
    if missing and len(missing) < len(runs):
        caption += "; not logged by " + ", ".join(missing)
    return _finish(fig, ax), caption


def evidence_values(runs: Sequence[ReportedRun], metric: str) -> list[float]:
    """The lowest and highest finite value of ``metric`` inside each finding's evidence window
    (the steps it read), so the plot's y-range can hold what the finding cites."""
    found: list[float] = []
    for run in runs:
        series = run.log.get(metric)
        if series is None:
            continue
        for finding in run.diagnosis.findings:
            evidence = finding.evidence
            if evidence.metric != metric:
                continue
            cited = series.finite().window(evidence.step_start, evidence.step_end).values
            if len(cited):
                found += [float(cited.min()), float(cited.max())]
    return found


def _shade_evidence(ax: Any, runs: Sequence[ReportedRun], metric: str) -> list[str]:
    """Shade the steps each finding on ``metric`` read (a line for a single step); returns
    the rule ids shaded."""
    shaded = []
    for run in runs:
        for finding in run.diagnosis.findings:
            evidence = finding.evidence
            if evidence.metric != metric:
                continue
            name = finding.rule.id + (f" ({run.label})" if len(runs) > 1 else "")
            if evidence.step_end > evidence.step_start:
                ax.axvspan(evidence.step_start, evidence.step_end, color=run.color, alpha=0.12)
            else:
                ax.axvline(evidence.step_start, color=run.color, ls=":", lw=1.5)
                name += f" (dotted line at step {evidence.step_start:g})"
            shaded.append(name)
    return shaded


# ============================================================================ matplotlib
def _new_axes(metric: str) -> tuple[Any, Any]:
    # a bare Figure, not pyplot: no global backend or figure registry is touched, so the
    # report works headless and leaves a user's interactive session alone
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 3.2), layout="constrained")
    ax = fig.subplots()
    ax.set_title(metric, fontsize=10, loc="left")
    ax.grid(True, alpha=0.3)
    return fig, ax


def _finish(fig: Any, ax: Any) -> str:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="best", framealpha=0.8)
    return figure_svg(fig)


def figure_svg(fig: Any) -> str:
    """The figure as an inline ``<svg>`` element: text kept as text (searchable, and no
    embedded glyphs), no XML prologue, no date (so a page is reproducible). Every text but
    the axes' own (ticks, their offsets) is drawn as it is: titles, legends and annotations
    hold a folder's names (metrics, runs, heal labels), whose ``$`` is no mathtext."""
    import matplotlib

    _plain_texts(fig)
    buffer = io.StringIO()
    # one short font list: matplotlib writes the whole fallback list into every <text>
    with matplotlib.rc_context(
        {"svg.fonttype": "none", "font.sans-serif": ["DejaVu Sans", "Arial"]}
    ):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg") :].strip()


def plain_label(text: str) -> str:
    """``text`` for a tick label matplotlib draws as given: its ``$`` escaped, no mathtext
    (the other texts of a figure are plain already, :func:`figure_svg`)."""
    return str(text).replace("$", r"\$")


def _plain_texts(artist: Any) -> None:
    """``parse_math=False`` on every text under ``artist`` outside its axes' ``Axis`` objects
    (whose tick labels matplotlib writes as mathtext on a log scale)."""
    from matplotlib.axis import Axis
    from matplotlib.text import Text

    for child in artist.get_children():
        if isinstance(child, Axis):
            continue
        if isinstance(child, Text):
            child.set_parse_math(False)
        _plain_texts(child)


def _downsample(series: Series, max_points: int = MAX_PLOT_POINTS) -> Series:
    """At most ``max_points`` points: the min and the max of each of ``max_points / 2``
    equal buckets, in step order, so a spike stays visible after thinning."""
    if len(series) <= max_points:
        return series
    keep: list[int] = []
    for bucket in np.array_split(np.arange(len(series)), max_points // 2):
        values = series.values[bucket]
        keep += sorted({int(bucket[np.argmin(values)]), int(bucket[np.argmax(values)])})
    index = np.array(keep)
    return Series(series.steps[index], series.values[index])


def _moving_average(series: Series, window: int) -> Series:
    """The mean of each ``window`` consecutive points (trailing), from the ``window``-th on."""
    if window <= 1 or len(series) < window:
        return series
    sums = np.cumsum(np.insert(series.values, 0, 0.0))
    means = (sums[window:] - sums[:-window]) / window
    return Series(series.steps[window - 1 :], means)


def _per_episode_returns(log: RunLog) -> Series | None:
    """Each finished episode's return from an rlx run's ``episodes.csv`` (None elsewhere)."""
    if log.kind != "rlx" or not log.source.is_dir():
        return None
    series = episode_series(log.source).get(M.EPISODE_RETURN)
    return series if series is not None and len(series) else None


def _last_step(log: RunLog) -> float:
    ends = [float(s.steps[-1]) for s in log.metrics.values() if len(s)]
    return max(ends) if ends else 0.0


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


# ============================================================================ config
def _config_html(runs: Sequence[ReportedRun]) -> str:
    """The runs' configs side by side (one column per run; rows that differ are marked),
    then their final figures from ``summary.json``."""
    parts = ['<section id="config">', "<h2>Config</h2>"]
    configs = [{"algo": run.log.algo, "env": run.log.env, **run.log.config} for run in runs]
    parts.append(_table_html(runs, configs, "config"))
    summaries = [
        {k: v for k, v in run.log.summary.items() if k not in ("algo", "env")} for run in runs
    ]
    if any(summaries):
        parts += ["<h3>Summary</h3>", _table_html(runs, summaries, "summary")]
    parts.append("</section>")
    return "\n".join(parts)


def _table_html(runs: Sequence[ReportedRun], rows: Sequence[Mapping[str, Any]], kind: str) -> str:
    keys = _union_keys(rows)
    if not keys:
        return f'<p class="meta">No {kind} recorded.</p>'
    head = "".join(f"<th>{_e(run.label)}</th>" for run in runs)
    body = []
    for key in keys:
        cells = [_cell(row.get(key)) for row in rows]
        differs = len(runs) > 1 and len(set(cells)) > 1
        row_class = ' class="differs"' if differs else ""
        body.append(
            f"<tr{row_class}><th>{_e(key)}</th>"
            + "".join(f"<td>{_e(c)}</td>" for c in cells)
            + "</tr>"
        )
    return (
        f'<table class="{kind}"><thead><tr><th>field</th>{head}</tr></thead>\n<tbody>\n'
        + "\n".join(body)
        + "\n</tbody></table>"
    )


def _union_keys(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every key, in first-seen order (a config dataclass's field order means something)."""
    keys: dict[str, None] = {}
    for row in rows:
        keys.update(dict.fromkeys(row))
    return list(keys)


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, default=str)
    if isinstance(value, float) and len(str(value)) > 10:
        return f"{value:.6g}"  # 0.30000000000000004 reads as 0.3
    return str(value)
