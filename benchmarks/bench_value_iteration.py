"""Value iteration: rlx vs pymdptoolbox on random sparse MDPs, side by side in one process.

Both get the same input: ``A`` scipy CSR matrices ``[S, S]`` and ``R [S, A]`` from
``rlx.mdp.random_sparse_mdp(S, 4, 10, gamma=0.99)``. Measured per size:

* build: ``rlx.mdp.TabularMDP(P, R, gamma)`` vs ``mdptoolbox.mdp.ValueIteration(P, R, gamma)``
  (its constructor checks the model and bounds the sweep count column by column: O(S^2)).
* solve: ``rlx.planning.value_iteration(tol=1e-8)`` vs pymdptoolbox's ``run()`` for the same
  number of sweeps from the same ``V_0 = 0`` (its stopping threshold set to 0 and ``max_iter``
  to rlx's count), so both do the same arithmetic and reach the same accuracy. Its own
  stopping rule (span of ``V_k+1 - V_k`` below ``epsilon (1 - gamma) / gamma``) is reported
  separately: it stops much earlier with V far from ``V*`` (the policy is what it guarantees).
* above ``--pmt-build-limit`` states (default 20,000) pymdptoolbox's O(S^2) constructor is
  not run: its build time and the build + solve ratio are reported as "not run", never
  estimated. Its sweeps are still timed: the object is made with ``__new__`` and given
  exactly the attributes its constructor would set (``P``, ``R`` via its own
  ``_computeReward``, ``discount``, ``S``, ``A``), and its own ``run()`` loop is timed.
* every timing is repeated ``--repeats`` times (at least 3) on the same input: median, min and
  spread; the ratios divide medians.
* settings (states, actions, successors, gamma, sweeps, V_0, threads) are the same input and
  arguments on both sides, listed on the page; the goals: rlx's sweep faster than
  pymdptoolbox's at every size, and within 1.5x the memory floor at the largest size.
* the memory floor of one sweep: bytes of P (data + indices + indptr) and R streamed per sweep,
  divided by the copy bandwidth measured here (``np.copyto`` of 400 MB; bandwidth counts the
  bytes read plus the bytes written). Two probe kernels split the sweep's time: streaming the
  same bytes alone, and gathering ``V[s']`` for every stored transition alone.
* policy iteration for ``gamma`` close to 1 (0.999), where value iteration needs ~10^4 sweeps
  (printed; exact policy iteration at 10k states is not run).

Run: ``.venv/bin/python benchmarks/bench_value_iteration.py [--sizes 1000 10000 100000]``;
``--quick`` checks that it works (1,000 and 30,000 states, so the "not run" path runs too).
"""

from __future__ import annotations

import os

# one thread for every library, set before numpy is imported
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import importlib.metadata as metadata  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import mdptoolbox.mdp as mdptoolbox  # noqa: E402
import numba as nb  # noqa: E402
import numpy as np  # noqa: E402
import scipy  # noqa: E402
import scipy.sparse as sp  # noqa: E402

from results import MIN_REPEATS, goal, ratio, settings_table, spread, write_result  # noqa: E402
from rlx.mdp import TabularMDP, random_sparse_mdp  # noqa: E402
from rlx.planning import policy_iteration, value_iteration  # noqa: E402

GAMMA = 0.99
TOL = 1e-8
N_ACTIONS, N_SUCCESSORS = 4, 10
PMT_BUILD_LIMIT = 20_000  # above this, pymdptoolbox's O(S^2) constructor is not run


@dataclass
class Row:
    S: int
    nnz: int
    rlx_build: dict[str, Any]  # spread() of the repeats' seconds
    rlx_solve: dict[str, Any]
    sweeps: int
    pmt_build: dict[str, Any] | None  # None: not run (above the build limit)
    pmt_solve: dict[str, Any]
    v_gap: float
    rlx_error: float
    pmt_own_sweeps: int
    pmt_own_error: float
    pmt_own_policy_match: float

    @property
    def rlx_ms_per_sweep(self) -> float:
        return 1e3 * self.rlx_solve["median"] / self.sweeps

    @property
    def pmt_ms_per_sweep(self) -> float:
        return 1e3 * self.pmt_solve["median"] / self.sweeps

    @property
    def sweep_speedup(self) -> float | None:
        return ratio(self.pmt_solve["median"], self.rlx_solve["median"])

    @property
    def speedup(self) -> float | None:
        """pymdptoolbox's build + solve over rlx's (medians); None when its build was not run."""
        if self.pmt_build is None:
            return None
        return ratio(
            self.pmt_build["median"] + self.pmt_solve["median"],
            self.rlx_build["median"] + self.rlx_solve["median"],
        )


# --------------------------------------------------------------------------- machine
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def copy_bandwidth(n_bytes: int = 400_000_000, repeats: int = 5) -> float:
    """Bytes per second of a large ``np.copyto``, counting bytes read plus bytes written."""
    src = np.ones(n_bytes // 8)
    dst = np.empty_like(src)
    best = min(timed(lambda: np.copyto(dst, src))[1] for _ in range(repeats))
    return 2 * src.nbytes / best


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


# --------------------------------------------------------------------------- one size
def compare(S: int, repeats: int, build_limit: int) -> Row:
    model = random_sparse_mdp(S, N_ACTIONS, N_SUCCESSORS, gamma=GAMMA, seed=0)
    P_list = [sp.csr_matrix(P_a) for P_a in model.P]  # pymdptoolbox wants csr_matrix
    R = model.R.copy()

    builds, solves = [], []
    for _ in range(repeats):
        mdp, seconds = timed(lambda: TabularMDP(P_list, R, GAMMA))
        builds.append(seconds)
        result, seconds = timed(lambda m=mdp: value_iteration(m, tol=TOL))
        solves.append(seconds)
    V_star = policy_iteration(mdp, evaluation="krylov").V  # reference, exact to ~1e-10

    pmt, pmt_builds = None, None
    if build_limit >= S:
        pmt_builds = []
        for _ in range(repeats):
            pmt, seconds = timed(lambda: build_pymdptoolbox(P_list, R))
            pmt_builds.append(seconds)
    own_sweeps, own_V, own_policy = run_pymdptoolbox_own_rule(pmt, S) if pmt else (0, None, None)
    sweep_times = []
    for _ in range(repeats):
        V_pmt, seconds = run_pymdptoolbox_sweeps(
            pmt or bare_pymdptoolbox(P_list, R), result.iterations
        )
        sweep_times.append(seconds)
    return Row(
        S=S,
        nnz=mdp.P_stacked.nnz,
        rlx_build=spread(builds),
        rlx_solve=spread(solves),
        sweeps=result.iterations,
        pmt_build=None if pmt_builds is None else spread(pmt_builds),
        pmt_solve=spread(sweep_times),
        v_gap=float(np.max(np.abs(result.V - V_pmt))),
        rlx_error=float(np.max(np.abs(result.V - V_star))),
        pmt_own_sweeps=own_sweeps,
        pmt_own_error=float(np.max(np.abs(own_V - V_star))) if own_V is not None else np.nan,
        pmt_own_policy_match=(
            float(np.mean(own_policy == result.policy)) if own_policy is not None else np.nan
        ),
    )


def build_pymdptoolbox(P_list, R):
    """pymdptoolbox's own constructor (model checks included), with an epsilon whose
    threshold ``epsilon (1 - gamma) / gamma`` equals rlx's tol."""
    epsilon = TOL * GAMMA / (1 - GAMMA)
    return mdptoolbox.ValueIteration(P_list, R, GAMMA, epsilon=epsilon)


def bare_pymdptoolbox(P_list, R):
    """A ValueIteration object with the attributes its constructor sets, minus the O(S^2) checks."""
    vi = mdptoolbox.ValueIteration.__new__(mdptoolbox.ValueIteration)
    vi.S, vi.A = P_list[0].shape[0], len(P_list)
    vi.P = tuple(P_list)
    vi.R = vi._computeReward(R, P_list)
    vi.discount, vi.verbose, vi.epsilon = GAMMA, False, TOL * GAMMA / (1 - GAMMA)
    return vi


def run_pymdptoolbox_own_rule(vi, S):
    vi.V, vi.iter = np.zeros(S), 0
    vi.run()
    return vi.iter, np.asarray(vi.V), np.asarray(vi.policy)


def run_pymdptoolbox_sweeps(vi, sweeps: int):
    """Its own ``run()`` loop, forced to exactly ``sweeps`` sweeps from ``V_0 = 0``."""
    vi.V, vi.iter, vi.max_iter, vi.thresh = np.zeros(vi.S), 0, sweeps, 0.0
    _, seconds = timed(vi.run)
    return np.asarray(vi.V), seconds


def like_for_like(sizes: list[int]) -> list[dict[str, Any]]:
    """The input and arguments of both sides (the same objects are passed to both)."""
    vi = bare_pymdptoolbox([sp.identity(2, format="csr")] * N_ACTIONS, np.zeros((2, N_ACTIONS)))
    same = {
        "states": ", ".join(f"{s:,}" for s in sizes),
        "actions": N_ACTIONS,
        "successors per (s, a)": N_SUCCESSORS,
        "model": "random_sparse_mdp(seed=0), one scipy CSR matrix per action",
        "V_0": "zeros",
        "sweeps": "rlx's count at tol 1e-8, forced on both",
        "threads": os.environ["OMP_NUM_THREADS"],
    }
    return settings_table({**same, "gamma": GAMMA}, {**same, "gamma": vi.discount})


# --------------------------------------------------------------------------- the memory floor
@nb.njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"})
def _stream_only(indptr, indices, data, reward):  # pragma: no cover
    acc = 0.0
    for j in range(data.size):
        acc += data[j] * indices[j]
    for j in range(indptr.size):
        acc += indptr[j]
    for j in range(reward.size):
        acc += reward[j]
    return acc


@nb.njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"})
def _gather_only(indices, V):  # pragma: no cover
    acc = 0.0
    for j in range(indices.size):
        acc += V[np.uint64(indices[j])]
    return acc


def best_of(fn, repeats: int = 20) -> float:
    fn()
    return min(timed(fn)[1] for _ in range(repeats))


def memory_floor(S: int, bandwidth: float, ms_per_sweep: float) -> dict[str, float]:
    mdp = random_sparse_mdp(S, N_ACTIONS, N_SUCCESSORS, gamma=GAMMA, seed=0)
    P = mdp.P_by_state
    R = np.ascontiguousarray(mdp.R).ravel()
    V = np.random.default_rng(0).random(S)
    streamed = P.data.nbytes + P.indices.nbytes + P.indptr.nbytes + R.nbytes
    floor_ms = 1e3 * streamed / bandwidth
    return {
        "bytes": streamed,
        "floor_ms": floor_ms,
        "sweep_ms": ms_per_sweep,
        "ratio": ms_per_sweep / floor_ms,
        "stream_ms": 1e3 * best_of(lambda: _stream_only(P.indptr, P.indices, P.data, R)),
        "gather_ms": 1e3 * best_of(lambda: _gather_only(P.indices, V)),
    }


# --------------------------------------------------------------------------- gamma near 1
def gamma_near_one(S: int, gamma: float, S_exact: int) -> list[tuple[str, int, str, float, float]]:
    rows = []
    for size in (S_exact, S):
        mdp = random_sparse_mdp(size, N_ACTIONS, N_SUCCESSORS, gamma=gamma, seed=0)
        vi, t_vi = timed(lambda m=mdp: value_iteration(m, tol=TOL, max_iterations=1_000_000))
        rows.append(("value iteration", size, f"{vi.iterations} sweeps", t_vi, 0.0))
        for evaluation in ("krylov", "exact") if size == S_exact else ("krylov",):
            pi, t_pi = timed(lambda m=mdp, e=evaluation: policy_iteration(m, evaluation=e))
            gap = float(np.max(np.abs(pi.V - vi.V)))
            label = f"policy iteration ({evaluation})"
            rows.append((label, size, f"{pi.iterations} improvements", t_pi, gap))
    return rows


# --------------------------------------------------------------------------- printing
def print_header(bandwidth: float) -> None:
    print(f"machine     {cpu_model()}, {os.cpu_count()} cores; Python {platform.python_version()}")
    print(
        f"threads     OMP/OpenBLAS/MKL/numba = {os.environ['OMP_NUM_THREADS']}/"
        f"{os.environ['OPENBLAS_NUM_THREADS']}/{os.environ['MKL_NUM_THREADS']}/"
        f"{nb.get_num_threads()}; every kernel here is serial"
    )
    print(
        f"versions    numpy {np.__version__}, scipy {scipy.__version__}, numba {nb.__version__}, "
        f"pymdptoolbox {metadata.version('pymdptoolbox')} (runs unpatched under numpy 2)"
    )
    print(f"bandwidth   {bandwidth / 1e9:.1f} GB/s (np.copyto of 400 MB, bytes read + written)")
    print(
        f"problem     random_sparse_mdp(S, A={N_ACTIONS}, {N_SUCCESSORS} successors), "
        f"gamma={GAMMA}, rlx tol={TOL:g} on max|V_k+1 - V_k|"
    )


def fmt_build(row: Row) -> str:
    return "not run" if row.pmt_build is None else f"{row.pmt_build['median']:.3f}"


def print_table(rows: list[Row]) -> None:
    head = (
        f"{'S':>7} {'sweeps':>6} | {'rlx build s':>11} {'solve s':>8} {'ms/sweep':>8} | "
        f"{'pmt build s':>11} {'solve s':>8} {'ms/sweep':>8} | {'sweep x':>7} {'total x':>8}"
    )
    print("\nvalue iteration, same sweeps from V_0 = 0 (medians of the repeats)")
    print(head)
    print("-" * len(head))
    for r in rows:
        total = "not run" if r.speedup is None else f"{r.speedup:.1f}x"
        print(
            f"{r.S:>7} {r.sweeps:>6} | {r.rlx_build['median']:>11.3f} "
            f"{r.rlx_solve['median']:>8.3f} {r.rlx_ms_per_sweep:>8.3f} | {fmt_build(r):>11} "
            f"{r.pmt_solve['median']:>8.3f} {r.pmt_ms_per_sweep:>8.3f} | "
            f"{r.sweep_speedup:>6.2f}x {total:>8}"
        )
    print("\naccuracy against V* (policy iteration, Krylov solves):")
    for r in rows:
        own = (
            f"pymdptoolbox's own rule: {r.pmt_own_sweeps} sweeps, max|V - V*| = "
            f"{r.pmt_own_error:.2g}, greedy actions equal to rlx's: "
            f"{100 * r.pmt_own_policy_match:.1f}%"
            if r.pmt_own_sweeps
            else "pymdptoolbox's own rule: not run (no constructor)"
        )
        print(f"  S={r.S:>6}: rlx max|V - V*| = {r.rlx_error:.1e}; max|V_rlx - V_pmt| = "
              f"{r.v_gap:.1e}; {own}")  # fmt: skip


def print_floor(S: int, floor: dict[str, float]) -> None:
    print(f"\nmemory floor of one sweep at S={S}:")
    print(
        f"  streamed per sweep: P data+indices+indptr and R = {floor['bytes'] / 1e6:.1f} MB; "
        f"floor = bytes / bandwidth = {floor['floor_ms']:.2f} ms"
    )
    print(
        f"  rlx sweep {floor['sweep_ms']:.2f} ms = {floor['ratio']:.2f}x the floor "
        f"(goal <= 1.5); probes: streaming those bytes alone {floor['stream_ms']:.2f} ms, "
        f"gathering V[s'] for all {S * N_ACTIONS * N_SUCCESSORS:,} transitions alone "
        f"{floor['gather_ms']:.2f} ms"
    )


def print_gamma_near_one(rows, S: int, gamma: float) -> None:
    print(f"\ngamma = {gamma}: value iteration vs policy iteration")
    for label, size, steps, seconds, gap in rows:
        print(f"  S={size:>6} {label:<30} {steps:>18} {seconds:>8.3f} s   max|V - V_VI| {gap:.1e}")
    bound = gamma * TOL / (1 - gamma)
    print(f"  (value iteration stops at max|V_k+1 - V_k| < {TOL:g}: within {bound:.0e} of V*)")
    print(f"  S={S:>6} policy iteration (exact): not run (random transitions fill the sparse "
          "LU factors in)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=MIN_REPEATS,
                        help="timings of each side at each size (same input)")  # fmt: skip
    parser.add_argument("--pmt-build-limit", type=int, default=PMT_BUILD_LIMIT,
                        help="largest size whose pymdptoolbox constructor is run")  # fmt: skip
    parser.add_argument("--skip-gamma-near-one", action="store_true")
    parser.add_argument("--quick", action="store_true",
                        help="1,000 and 30,000 states: checks that it works")  # fmt: skip
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="where the result file goes (default benchmarks/results, --quick: "
        "benchmarks/results/quick)",
    )
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.skip_gamma_near_one = [1_000, 30_000], True
    # pymdptoolbox's model check compares a sparse matrix with 0; scipy warns on every call
    warnings.filterwarnings("ignore", category=sp.SparseEfficiencyWarning)

    bandwidth = copy_bandwidth()
    print_header(bandwidth)
    _, compile_s = timed(lambda: value_iteration(random_sparse_mdp(10, n_successors=2)))
    print(f"warm-up     numba kernel load/compile {compile_s:.2f} s (cached on disk after a run)")

    sizes = sorted(args.sizes)
    rows = [compare(S, args.repeats, args.pmt_build_limit) for S in sizes]
    print_table(rows)
    floor = None
    if rows[-1].S >= 100_000:
        floor = memory_floor(rows[-1].S, bandwidth, rows[-1].rlx_ms_per_sweep)
        print_floor(rows[-1].S, floor)
    if not args.skip_gamma_near_one:
        gamma, S = 0.999, 10_000
        print_gamma_near_one(gamma_near_one(S, gamma, S_exact=2_000), S, gamma)
    goals = [
        goal(f"rlx's sweep faster than pymdptoolbox's at {r.S:,} states (median seconds)",
             "ratio > 1", r.sweep_speedup, r.sweep_speedup is not None and r.sweep_speedup > 1)
        for r in rows
    ]  # fmt: skip
    goals.append(
        goal(f"rlx's sweep within 1.5x the memory floor at {rows[-1].S:,} states",
             "ratio <= 1.5", round(floor["ratio"], 2), floor["ratio"] <= 1.5)
        if floor is not None else
        goal("rlx's sweep within 1.5x the memory floor at 100,000 states", "ratio <= 1.5",
             "not run (largest size below 100,000)", None)
    )  # fmt: skip
    write_result(
        "value_iteration",
        title="Value iteration: rlx vs pymdptoolbox on random sparse MDPs",
        columns=[
            "states",
            "sweeps",
            "rlx build + solve (s)",
            "pymdptoolbox build (s)",
            "pymdptoolbox solve (s)",
            "rlx ms/sweep, median (min)",
            "pymdptoolbox ms/sweep, median (min)",
            "sweep speedup",
            "build + solve speedup",
        ],
        rows=[
            [
                r.S,
                r.sweeps,
                round(r.rlx_build["median"] + r.rlx_solve["median"], 3),
                "not run" if r.pmt_build is None else r.pmt_build["median"],
                r.pmt_solve["median"],
                f"{r.rlx_ms_per_sweep:.3g} ({1e3 * r.rlx_solve['min'] / r.sweeps:.3g})",
                f"{r.pmt_ms_per_sweep:.3g} ({1e3 * r.pmt_solve['min'] / r.sweeps:.3g})",
                r.sweep_speedup,
                "not run" if r.speedup is None else r.speedup,
            ]
            for r in rows
        ],
        libraries=("scipy", "numba", "pymdptoolbox"),
        repeats=args.repeats,
        goals=goals,
        peer="pymdptoolbox",
        settings=like_for_like(sizes),
        figures={}
        if floor is None
        else {"memory_floor": {k: round(v, 3) for k, v in floor.items()}},
        details={
            str(r.S): {
                "rlx_build_s": r.rlx_build,
                "rlx_solve_s": r.rlx_solve,
                "pmt_build_s": r.pmt_build,
                "pmt_solve_s": r.pmt_solve,
                "max_abs_v_gap": r.v_gap,
                "rlx_max_abs_error": r.rlx_error,
                "pmt_own_rule_sweeps": r.pmt_own_sweeps,
            }
            for r in rows
        },
        notes=(
            f"Random sparse MDPs ({N_ACTIONS} actions, {N_SUCCESSORS} successors, gamma "
            f"{GAMMA}), the same input to both; both run the same number of sweeps from V_0 = 0 "
            "(pymdptoolbox's stopping rule set aside, see the script); one thread; "
            f"{args.repeats} repeats of every timing, medians divided. Above "
            f"{args.pmt_build_limit:,} states pymdptoolbox's O(S^2) constructor is not run, so "
            "its build and the build + solve ratio say not run; its sweeps are timed."
        ),
        quick=args.quick,
        out_dir=args.out_dir,
    )


if __name__ == "__main__":
    main()
