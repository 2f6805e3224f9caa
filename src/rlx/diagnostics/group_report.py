"""One HTML page for seed groups: the mean learning curve with its 95% bootstrap band, and the
interquartile mean of the final returns with its interval, as ``rliable`` recommends.

``rlx report GROUP [GROUP ...]`` (folders written by ``rlx train ALGO --seeds ...``), or
``rlx report --group RUN RUN ...`` (run folders taken as the seeds of one group), writes a page
with, for each group (several overlay, e.g. PPO against A2C on one env):

- **Final returns over seeds**: each seed's final return (:mod:`rlx.diagnostics.group_doctor`
  says which measure), their interquartile mean ``IQM`` (the mean of the middle 50% of the
  seeds) and mean, each with its 95% percentile-bootstrap interval over seeds
  (:mod:`rlx.diagnostics.stats`); a plot of the seeds and the IQM with its interval;
- **Learning curve**: each seed's training returns (``episodes.csv``), smoothed by a trailing
  moving average and interpolated onto one step grid over the steps every seed reached; their
  mean, and the 95% bootstrap band at each step (the seeds resampled, each keeping its whole
  curve); each seed faintly;
- **Findings**: the seeds that behave differently (the group doctor's block) and each seed's
  findings;
- **Config** of each group, side by side.

The page is self-contained like :mod:`rlx.diagnostics.report`'s (whose figure, colours and style
it reuses). Hooks for tests: ``<section id="seed-statistics">`` holds a
``<tr data-group="...">`` per group with ``td.iqm`` and ``td.interval``; the curve is
``<figure class="plot" data-metric="episode_return">``.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from rlx import metrics as M
from rlx.diagnostics import stats
from rlx.diagnostics.group_doctor import (
    SOURCE_WORDS,
    GroupDiagnosis,
    GroupInput,
    doctor_group,
    training_returns,
)
from rlx.diagnostics.report import CSS, REPORT_FILE, RUN_COLORS, figure_svg, plain_label
from rlx.errors import ConfigError
from rlx.runs.files import write_atomic

SMOOTHING_SHARE = 20
"""Each seed's returns are averaged over ``episodes / SMOOTHING_SHARE`` episodes (1 to 100)."""

EXTRA_CSS = """
td.iqm { font-weight: bold; } td.interval { color: #444; }
.differences li { margin: .2rem 0; } .seed-findings { font-size: .9rem; color: #444; }
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def report_groups(
    groups: Sequence[GroupInput], out: str | Path | None = None, *, title: str | None = None
) -> Path:
    """Write the page of one or several seed groups and return its path.

    Args:
        groups: group folders (``group.json``), or sequences of run folders, each taken as the
            seeds of one group; several overlay for comparison.
        out: the HTML file (default ``GROUP/report.html`` for one group folder,
            ``./report.html`` otherwise).
        title: the page's heading (default: names the group, or how many).
    """
    groups = list(groups)
    if not groups:
        raise ConfigError("report: no seed group given; pass one or more group folders.")
    diagnoses = [doctor_group(group) for group in groups]
    path = Path(out) if out is not None else _default_out(diagnoses)
    page = render_group_html(diagnoses, title or _default_title(diagnoses))
    write_atomic(path, page)  # never through a link planted at the page's name
    return path


def _default_out(diagnoses: Sequence[GroupDiagnosis]) -> Path:
    if len(diagnoses) == 1 and diagnoses[0].group.path is not None:
        return diagnoses[0].group.path / REPORT_FILE
    return Path(REPORT_FILE)


def _default_title(diagnoses: Sequence[GroupDiagnosis]) -> str:
    if len(diagnoses) == 1:
        return f"rlx report: {diagnoses[0].title}"
    return f"rlx report: {len(diagnoses)} seed groups"


def _labels(diagnoses: Sequence[GroupDiagnosis]) -> list[str]:
    """Distinct legend labels: the groups' names, their paths where names repeat."""
    names = [d.group.label for d in diagnoses]
    if len(set(names)) == len(names):
        return names
    return [f"{d.group.path or d.group.label} #{i + 1}" for i, d in enumerate(diagnoses)]


# ============================================================================ page
def render_group_html(diagnoses: Sequence[GroupDiagnosis], title: str) -> str:
    """The whole page: header, final returns, learning curve, findings, config."""
    labels = _labels(diagnoses)
    colors = [RUN_COLORS[i % len(RUN_COLORS)] for i in range(len(diagnoses))]
    rows = list(zip(labels, colors, diagnoses, strict=True))
    sections = [
        _header_html(rows, title),
        _statistics_html(rows),
        _curve_html(rows),
        _findings_html(rows),
        _config_html(rows),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_e(title)}</title>\n<style>{CSS}{EXTRA_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(sections)
        + "\n</body>\n</html>\n"
    )


Row = tuple[str, str, GroupDiagnosis]


def _swatch(color: str) -> str:
    return f'<span class="swatch" style="background:{color}"></span>'


def _header_html(rows: Sequence[Row], title: str) -> str:
    items = []
    for label, color, diagnosis in rows:
        group = diagnosis.group
        what = " ".join(p for p in (group.algo, group.env) if p)
        where = f", <code>{_e(group.path)}</code>" if group.path is not None else ""
        failed = sum(1 for s in diagnosis.seeds if s.member.status == "failed")
        more = f", {failed} failed" if failed else ""
        items.append(
            f'<li data-group="{_e(label)}">{_swatch(color)}<strong>{_e(label)}</strong>: '
            f"{_e(what)}, {len(diagnosis.seeds)} seeds{more}{where}</li>"
        )
    made = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f'<header>\n<h1>{_e(title)}</h1>\n<ul class="groups">\n' + "\n".join(items)
        + f'\n</ul>\n<p class="meta">written by rlx on {made}</p>\n</header>'
    )  # fmt: skip


def _fmt(value: float) -> str:
    return "—" if not np.isfinite(value) else f"{value:.4g}"


def _interval(low: float, high: float) -> str:
    if not (np.isfinite(low) and np.isfinite(high)):
        return "— (needs 2+ seeds)"
    return f"[{low:.4g}, {high:.4g}]"


def _statistics_html(rows: Sequence[Row]) -> str:
    """The table of final returns: IQM and mean with their intervals, each seed's value."""
    body = []
    sources = {d.finals.source for _, _, d in rows}
    for label, color, diagnosis in rows:
        finals = diagnosis.finals
        seeds = ", ".join(f"{k.removeprefix('seed ')}: {v:.4g}" for k, v in finals.values.items())
        body.append(
            f'<tr data-group="{_e(label)}"><th>{_swatch(color)}{_e(label)}</th>'
            f"<td>{len(finals.values)}</td>"
            f'<td class="iqm">{_fmt(finals.iqm)}</td>'
            f'<td class="interval">{_e(_interval(*finals.iqm_ci))}</td>'
            f"<td>{_fmt(finals.mean)}</td>"
            f'<td class="interval">{_e(_interval(*finals.mean_ci))}</td>'
            f"<td>{_e(seeds) or '—'}</td></tr>"
        )
    measure = "; ".join(f"{_e(SOURCE_WORDS[s])}" for s in sorted(sources))
    figure = _figure_html("final_return", final_returns_svg(rows), (
        "Final return of each seed (dots) and the interquartile mean with its 95% bootstrap "
        "interval (bar)."))  # fmt: skip
    return (
        '<section id="seed-statistics">\n<h2>Final returns over seeds</h2>\n'
        f'<p class="meta">Final return: {measure}. IQM: the interquartile mean, the mean of '
        "the middle 50% of the seeds (25% cut from each end), robust to one diverged seed. "
        f"Intervals: 95% percentile bootstrap over seeds ({stats.RESAMPLES:,} resamples), as "
        "rliable reports them (Agarwal et al. 2021, Deep RL at the edge of the statistical "
        "precipice).</p>\n"
        '<table class="seed-statistics"><thead><tr><th>group</th><th>seeds</th><th>IQM</th>'
        "<th>IQM 95% CI</th><th>mean</th><th>mean 95% CI</th><th>each seed</th></tr></thead>"
        "\n<tbody>\n" + "\n".join(body) + "\n</tbody></table>\n" + figure + "\n</section>"
    )


def _figure_html(metric: str, svg: str, caption: str) -> str:
    return (
        f'<figure class="plot" id="plot-{_e(metric)}" data-metric="{_e(metric)}">\n{svg}\n'
        f"<figcaption>{_e(caption)}</figcaption>\n</figure>"
    )


def _new_axes(title: str, height: float = 3.4) -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, height), layout="constrained")
    ax = fig.subplots()
    ax.set_title(title, fontsize=10, loc="left")
    ax.grid(True, alpha=0.3)
    return fig, ax


def final_returns_svg(rows: Sequence[Row]) -> str:
    """One line per group: each seed's final return as a dot, the IQM as a bar with its
    interval."""
    fig, ax = _new_axes("final return", height=0.8 + 0.55 * len(rows))
    for y, (_, color, diagnosis) in enumerate(rows):
        finals = diagnosis.finals
        values = np.array(list(finals.values.values()), dtype=float)
        ax.plot(values, np.full(len(values), y), "o", color=color, alpha=0.6, ms=5)
        if np.isfinite(finals.iqm):
            low, high = finals.iqm_ci
            if np.isfinite(low) and np.isfinite(high):
                ax.plot([low, high], [y, y], color=color, lw=6, alpha=0.35, solid_capstyle="butt")
            ax.plot([finals.iqm], [y], "|", color=color, ms=18, mew=2.5)
    ax.set_yticks(range(len(rows)), [plain_label(label) for label, _, _ in rows])
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.invert_yaxis()
    return figure_svg(fig)


def seed_curves(diagnosis: GroupDiagnosis) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each seed's training returns ``(steps, values)``, smoothed by one trailing window for
    the whole group (:data:`SMOOTHING_SHARE`)."""
    series = []
    for seed in diagnosis.seeds:
        if seed.diagnosis is None:
            continue
        returns = training_returns(seed.diagnosis.log)
        if returns is not None and len(returns):
            series.append(returns)
    if not series:
        return []
    episodes = int(np.median([len(s) for s in series]))
    window = int(np.clip(episodes // SMOOTHING_SHARE, 1, 100))
    return [(s.steps, stats.moving_average(s.values, window)) for s in series]


def _curve_html(rows: Sequence[Row]) -> str:
    fig, ax = _new_axes(M.EPISODE_RETURN)
    notes = []
    for label, color, diagnosis in rows:
        curves = seed_curves(diagnosis)
        if not curves:
            notes.append(f"{label} has no training episodes")
            continue
        try:
            band = stats.mean_curve(curves)
        except ValueError:
            notes.append(f"the seeds of {label} share no span of steps")
            continue
        for curve in band.per_seed:
            ax.plot(band.steps, curve, color=color, lw=0.6, alpha=0.3)
        ax.plot(band.steps, band.mean, color=color, lw=1.8, label=f"{label} ({band.seeds} seeds)")
        if np.all(np.isfinite(band.low)):
            ax.fill_between(band.steps, band.low, band.high, color=color, alpha=0.2, lw=0)
    ax.set_xlabel("step")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="best", framealpha=0.8)
    caption = (
        "Mean training return over seeds (solid) with its 95% bootstrap band over seeds "
        f"(shaded; {stats.CURVE_RESAMPLES:,} resamples of whole seeds); faint: each seed. "
        "Each seed's episode returns are smoothed by a trailing moving average and "
        "interpolated onto one grid over the steps every seed of its group reached"
        + (f"; {'; '.join(notes)}" if notes else "")
        + "."
    )
    return (
        '<section id="learning-curve">\n<h2>Learning curve</h2>\n'
        + _figure_html(M.EPISODE_RETURN, figure_svg(fig), caption)
        + "\n</section>"
    )


def _findings_html(rows: Sequence[Row]) -> str:
    parts = ['<section id="findings">', "<h2>Findings</h2>"]
    for label, color, diagnosis in rows:
        parts.append(f'<div class="group-findings" data-group="{_e(label)}">')
        parts.append(f"<h3>{_swatch(color)}{_e(label)}: seeds that behave differently</h3>")
        if diagnosis.differences:
            parts.append('<ul class="differences">')
            parts += [
                f'<li class="finding difference" data-kind="{_e(d.kind)}" '
                f'data-seeds="{_e(" ".join(d.seeds))}">{_e(d.reason)}</li>'
                for d in diagnosis.differences
            ]
            parts.append("</ul>")
        else:
            parts.append('<p class="no-findings">None: every final return within Tukey\'s '
                         "fences, every finding on all seeds or on none.</p>")  # fmt: skip
        items = []
        for seed in diagnosis.seeds:
            if seed.diagnosis is None:
                continue
            ids = ", ".join(f.rule.id for f in seed.diagnosis.findings) or "no findings"
            items.append(f"<li>{_e(seed.member.label)}: {_e(ids)}</li>")
        if items:
            parts.append('<ul class="seed-findings">' + "".join(items) + "</ul>")
        where = diagnosis.group.path or diagnosis.group.label
        parts.append(f'<p class="meta">Each finding in full: <code>rlx doctor {_e(where)}'
                     "</code>.</p></div>")  # fmt: skip
    parts.append("</section>")
    return "\n".join(parts)


def _config_html(rows: Sequence[Row]) -> str:
    """Each group's config (its first seed's, the seed left out), one column per group."""
    configs = []
    for _, _, diagnosis in rows:
        logs = [s.diagnosis.log for s in diagnosis.seeds if s.diagnosis is not None]
        config = dict(logs[0].config) if logs else {}
        config.pop("seed", None)
        configs.append({"algo": diagnosis.group.algo, "env": diagnosis.group.env, **config})
    keys = list(dict.fromkeys(k for config in configs for k in config))
    head = "".join(f"<th>{_swatch(color)}{_e(label)}</th>" for label, color, _ in rows)
    body = []
    for key in keys:
        cells = [_cell(config.get(key)) for config in configs]
        differs = ' class="differs"' if len(rows) > 1 and len(set(cells)) > 1 else ""
        body.append(f"<tr{differs}><th>{_e(key)}</th>"
                    + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>")  # fmt: skip
    return (
        '<section id="config">\n<h2>Config</h2>\n'
        f'<table class="config"><thead><tr><th>field</th>{head}</tr></thead>\n<tbody>\n'
        + "\n".join(body)
        + "\n</tbody></table>\n</section>"
    )


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, default=str)
    if isinstance(value, float) and len(str(value)) > 10:
        return f"{value:.6g}"
    return str(value)


__all__ = ["final_returns_svg", "render_group_html", "report_groups", "seed_curves"]
