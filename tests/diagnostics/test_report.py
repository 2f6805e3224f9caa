"""``rlx.diagnostics.report``: one self-contained HTML page per run or set of runs.

Synthetic PPO run folders (one healthy, one whose KL sits at 0.3 in its second half) check
the page's parts; a real tiny q-learning run checks an rlx run folder end to end; a slow test
renders the page in headless Chromium when one is installed.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from rlx.diagnostics.report import MAX_PLOT_POINTS, _downsample, report
from rlx.diagnostics.series import Series
from rlx.diagnostics.sources import read_run

PPO_METRICS = ("approx_kl", "clip_fraction", "entropy", "explained_variance", "episode_return")


# ============================================================================ fixtures
def write_ppo_run(run_dir: Path, *, kl_high: bool, seed: int, points: int = 40) -> Path:
    """An rlx run folder as PPO writes it; with ``kl_high`` the KL is ~0.3 in the last half."""
    rng = np.random.default_rng(seed)
    run_dir.mkdir(parents=True)
    config = {
        "algo": "ppo",
        "env": "CartPole-v1",
        "config": {"learning_rate": 0.001, "num_epochs": 10},
    }
    (run_dir / "config.json").write_text(json.dumps(config))
    rows = []
    for i in range(points):
        high = kl_high and i >= points // 2
        rows.append(
            {
                "step": (i + 1) * 2048,
                "wall_s": float(i),
                "approx_kl": (0.3 if high else 0.01) + 0.002 * rng.standard_normal(),
                "clip_fraction": 0.1 + 0.01 * rng.standard_normal(),
                "entropy": 0.69 - 0.005 * i,
                "explained_variance": min(0.9, 0.1 + 0.03 * i),
                "episode_return": 20.0 + 10.0 * i + 5.0 * rng.standard_normal(),
            }
        )
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = {
        "algo": "ppo",
        "env": "CartPole-v1",
        "seed": seed,
        "steps": points * 2048,
        "eval_return_mean": 400.0,
        "eval_return_std": 30.0,
        "eval_episodes": 10,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return run_dir


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A healthy run, a high-KL run, and the report overlaying both."""
    root = tmp_path_factory.mktemp("report")
    healthy = write_ppo_run(root / "healthy", kl_high=False, seed=0)
    kl_high = write_ppo_run(root / "kl-high", kl_high=True, seed=1)
    page = report([healthy, kl_high], root / "compare" / "report.html")
    return healthy, kl_high, page


def figures(page: str) -> dict[str, str]:
    """``data-metric`` -> the figure's HTML."""
    pattern = r'<figure class="plot"[^>]*data-metric="([^"]+)"[^>]*>(.*?)</figure>'
    return {m.group(1): m.group(2) for m in re.finditer(pattern, page, re.S)}


def svg_texts(figure: str) -> list[str]:
    """The text of every ``<text>`` element of a figure's SVG (legend, labels, ticks)."""
    return [html.unescape(t).strip() for t in re.findall(r"<text[^>]*>([^<]*)</text>", figure)]


def assert_self_contained(page: str) -> None:
    """Nothing on the page is fetched: no external src/href, stylesheet, script or font."""
    external = re.findall(r"""(?:src|href)\s*=\s*["']\s*(?:https?:)?//""", page, re.I)
    assert not external, external
    assert not re.search(r"url\(\s*['\"]?\s*(?:https?:)?//", page, re.I)
    assert not re.search(r"<link\b|<script\b|@import|<iframe\b", page, re.I)


# ============================================================================ synthetic runs
def test_report_of_two_runs_is_one_self_contained_page(two_runs):
    _, _, out = two_runs
    assert out.exists()
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert_self_contained(page)
    assert page.count("<svg") == len(figures(page))  # every plot is inline SVG


def test_every_metric_has_a_figure_and_rules_metrics_come_first(two_runs):
    page = two_runs[2].read_text()
    shown = list(figures(page))
    assert set(shown) == set(PPO_METRICS)
    assert shown[0] == "episode_return"  # the learning curve leads
    assert shown[1:3] == ["approx_kl", "clip_fraction"]  # rule table order
    for figure in figures(page).values():
        assert "<figcaption>" in figure


def test_kl_finding_is_in_findings_section_on_top(two_runs):
    page = two_runs[2].read_text()
    section = re.search(r'<section id="findings">(.*?)</section>', page, re.S)
    assert section is not None
    assert page.index('id="findings"') < page.index('class="plot"')  # findings on top
    findings = section.group(1)
    kl = re.search(r'<article class="finding severity-warning" data-rule="kl-too-high">', findings)
    assert kl is not None
    # cause and fix with the suggested change, and the healthy run says so
    assert "policy drifts" in findings and "learning_rate 0.001 -&gt; 0.0003" in findings
    assert re.search(r'data-run="healthy">.*?No findings', findings, re.S)
    assert findings.count('class="finding ') == 1


def test_thresholds_are_drawn_and_evidence_is_named(two_runs):
    page = two_runs[2].read_text()
    kl_figure = figures(page)["approx_kl"]
    assert "0.1: too large a step" in svg_texts(kl_figure)  # the dashed line's label, in the SVG
    caption = re.search(r"<figcaption>(.*?)</figcaption>", kl_figure, re.S).group(1)
    assert "0.1: too large a step" in caption and "shaded" in caption
    assert "0: explains nothing" in svg_texts(figures(page)["explained_variance"])
    assert "kl-too-high" not in figures(page)["entropy"]


def test_runs_overlay_with_a_legend(two_runs):
    page = two_runs[2].read_text()
    for metric in PPO_METRICS:
        texts = svg_texts(figures(page)[metric])
        assert "healthy" in texts and "kl-high" in texts, metric
    # the final evaluation of each run is on the learning curve
    assert "healthy final eval" in svg_texts(figures(page)["episode_return"])


def test_config_table_shows_each_run(two_runs):
    page = two_runs[2].read_text()
    table = re.search(r'<table class="config">(.*?)</table>', page, re.S).group(1)
    assert "<th>healthy</th><th>kl-high</th>" in table
    assert re.search(r"<th>learning_rate</th><td>0.001</td><td>0.001</td>", table)


def test_one_run_report_defaults_to_run_folder(tmp_path):
    run = write_ppo_run(tmp_path / "solo", kl_high=True, seed=3)
    out = report(str(run), title="PPO <solo> & friends")
    assert out == run / "report.html"
    page = out.read_text()
    assert "<h1>PPO &lt;solo&gt; &amp; friends</h1>" in page  # text is escaped
    assert 'data-rule="kl-too-high"' in page


def test_report_accepts_a_run_log(tmp_path):
    log = read_run(write_ppo_run(tmp_path / "log", kl_high=False, seed=4))
    out = report(log, tmp_path / "from-log.html")
    assert set(figures(out.read_text())) == set(PPO_METRICS)


def test_long_series_are_thinned_but_keep_spikes():
    steps = np.arange(100_000, dtype=float)
    values = np.zeros_like(steps)
    values[54_321] = 9.0
    thin = _downsample(Series(steps, values))
    assert len(thin) <= MAX_PLOT_POINTS
    assert thin.values.max() == 9.0 and np.all(np.diff(thin.steps) >= 0)


# ============================================================================ a real run
def test_report_of_a_real_tabular_run(tmp_path):
    import rlx

    run_dir = tmp_path / "frozenlake"
    rlx.train("q-learning", "FrozenLake-v1", episodes=300, seed=0, run_dir=run_dir, progress=False)
    out = report(run_dir)
    assert out == run_dir / "report.html"
    page = out.read_text()
    assert_self_contained(page)
    shown = figures(page)
    assert "episode_return" in shown and "td_error" in shown
    # the run logs its mean return rarely: the curve comes from episodes.csv, smoothed
    assert "moving average" in shown["episode_return"]
    assert '<section id="findings">' in page and "q-learning" in page
    assert out.stat().st_size < 1_000_000


# ============================================================================ in a browser
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")

# Measures what the browser drew: each plot's svg/img box and its drawn content, and where
# the findings section sits. Kept to one expression so both Playwright and the CLI run it.
MEASURE_JS = """
(() => {
  const plots = [...document.querySelectorAll('figure.plot')].map(f => {
    const g = f.querySelector('svg, img');
    const box = g ? g.getBoundingClientRect() : {width: 0, height: 0};
    let drawn = false;
    if (g && g.tagName.toLowerCase() === 'img') drawn = g.complete && g.naturalWidth > 0;
    else if (g) { const b = g.getBBox(); drawn = b.width > 0 && b.height > 0; }
    return {metric: f.dataset.metric, width: box.width, height: box.height, drawn: drawn};
  });
  const s = document.getElementById('findings');
  const box = s.getBoundingClientRect();
  const style = getComputedStyle(s);
  const findings = [...s.querySelectorAll('.finding')].map(f => {
    const b = f.getBoundingClientRect();
    return {rule: f.dataset.rule, width: b.width, height: b.height};
  });
  return {plots: plots, findings: findings, section: {top: box.top, height: box.height,
    display: style.display, visibility: style.visibility, viewport: window.innerHeight}};
})()
"""


def find_chromium() -> tuple[str, str] | None:
    """``("cli", path)`` for a Chromium on PATH, ``("playwright", path)`` for Playwright's
    installed browser, or None."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return "cli", path
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    try:
        with sync_playwright() as p:
            path = p.chromium.executable_path
    except Exception:  # playwright installed without its browsers
        return None
    return ("playwright", path) if path and Path(path).exists() else None


def measure_with_playwright(page_path: Path) -> dict:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(headless=True)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            # offline: any request that leaves the file would fail the check below
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto(page_path.as_uri())
            result = page.evaluate(MEASURE_JS)
        finally:
            browser.close()
    assert all(url.startswith(("file:", "data:", "about:")) for url in requests), requests
    return result


def measure_with_cli(chromium: str, page_path: Path, tmp_path: Path) -> dict:
    """Headless Chromium's ``--dump-dom`` of a copy of the page with the measuring script
    added; the script writes its result into an attribute of <body>."""
    probe = tmp_path / "probe.html"
    script = f"<script>document.body.dataset.check = JSON.stringify({MEASURE_JS});</script>"
    probe.write_text(page_path.read_text().replace("</body>", script + "</body>"))
    done = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1200,900",
            "--virtual-time-budget=5000",
            "--dump-dom",
            probe.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'data-check="([^"]*)"', done.stdout)
    assert found, "the measuring script did not run:\n" + done.stdout[:2000]
    return json.loads(html.unescape(found.group(1)))


@pytest.mark.slow
def test_report_renders_in_headless_chromium(two_runs, tmp_path):
    browser = find_chromium()
    if browser is None:
        pytest.skip(
            "no headless Chromium: none of "
            + ", ".join(BROWSERS)
            + " is on PATH and Playwright's browser is not installed (this machine has no "
            "browser and cannot download one; the page's structure is checked by the fast tests)"
        )
    kind, path = browser
    out = two_runs[2]
    result = (
        measure_with_playwright(out)
        if kind == "playwright"
        else measure_with_cli(path, out, tmp_path)
    )
    assert {p["metric"] for p in result["plots"]} == set(PPO_METRICS)
    for plot in result["plots"]:
        assert plot["width"] > 100 and plot["height"] > 50 and plot["drawn"], plot
    section = result["section"]
    assert section["display"] != "none" and section["visibility"] == "visible"
    assert section["height"] > 0 and section["top"] < section["viewport"]  # on the first screen
    assert [f["rule"] for f in result["findings"]] == ["kl-too-high"]
    assert all(f["width"] > 0 and f["height"] > 0 for f in result["findings"])


# ============================================================================ reading at a glance
def test_a_metric_spanning_decades_gets_a_log_axis(tmp_path):
    """A broken run's KL of 50 beside a healthy run's 0.01: on a linear axis the healthy run
    would be a flat line at 0."""
    from rlx.diagnostics.report import y_axis

    healthy = 0.01 + 0.002 * np.random.default_rng(0).random(40)
    broken = np.geomspace(0.02, 50, 40)
    axis = y_axis(np.r_[healthy, broken], [0.1])
    assert axis.log
    flat = y_axis(np.linspace(0.2, 0.9, 40))
    assert not flat.log and flat.limits is None


def test_one_outlier_does_not_squeeze_the_curve():
    """An explained-variance spike of -13 among values in [0.2, 0.9]: the y-range holds the
    bulk (and the threshold at 0), and the caption counts the point left out."""
    from rlx.diagnostics.report import y_axis

    values = np.r_[np.linspace(0.2, 0.9, 60), -13.0]
    axis = y_axis(values, [0.0])
    low, high = axis.limits
    assert -1.0 < low < 0.0 < 0.9 < high < 1.5
    assert axis.outside == 1


def test_each_threshold_line_has_its_own_label(tmp_path):
    """The clip-fraction plot's two lines are two thresholds with two meanings, not both
    labelled with every rule's id."""
    run = write_ppo_run(tmp_path / "run", kl_high=False, seed=0)
    page = report([run], tmp_path / "r.html").read_text()
    texts = svg_texts(figures(page)["clip_fraction"])
    assert "0.005: clip never triggers" in texts and "0.5: overfits its rollout" in texts
    assert not any("clip-fraction-near-zero" in t for t in texts)


def test_each_findings_evidence_lies_inside_the_plotted_range():
    """A healthy run's entropy (0.69 -> 0.3) beside a broken run's that collapses to 1e-6 while
    its return is stuck: the y-range that holds the bulk of the points would leave the broken
    run's collapse, the evidence of its finding, below the plot; the range holds it."""
    from rlx.diagnostics.doctor import doctor
    from rlx.diagnostics.report import ReportedRun, evidence_values, y_axis
    from rlx.diagnostics.series import RunLog

    steps = np.arange(1, 121, dtype=float) * 256
    rng = np.random.default_rng(0)
    healthy = np.linspace(0.69, 0.3, 120) + 0.01 * rng.standard_normal(120)
    collapsed = np.r_[np.linspace(0.69, 0.4, 80), np.geomspace(0.4, 1e-6, 40)]
    stuck = np.r_[np.linspace(20, 60, 40), np.full(80, 60.0)] + rng.normal(0, 1, 120)
    logs = [
        RunLog(Path(name), "rlx", {"entropy": Series(steps, entropy),
                                   "episode_return": Series(steps, returns)},
               algo="ppo", env="CartPole-v1")
        for name, entropy, returns in (("ok", healthy, np.linspace(20, 480, 120)),
                                       ("broken", collapsed, stuck))
    ]  # fmt: skip
    runs = [ReportedRun(log.source.name, "#000", doctor(log)) for log in logs]
    assert "entropy-collapse" in [f.rule.id for f in runs[1].diagnosis]
    values = np.r_[healthy, collapsed]
    assert y_axis(values).limits[0] > 1e-3  # the bulk alone leaves the collapse off the chart
    cited = evidence_values(runs, "entropy")
    limits = y_axis(values, cited).limits  # None: every point is inside
    assert limits is None or (limits[0] <= min(cited) and max(cited) <= limits[1])
