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
* at 100k states pymdptoolbox's constructor would take about an hour (extrapolated as
  ``S^2`` from the smaller sizes), so it is not run: its object is made with ``__new__`` and
  given exactly the attributes its constructor would set (``P``, ``R`` via its own
  ``_computeReward``, ``discount``, ``S``, ``A``), and its own ``run()`` loop is timed.
* the memory floor of one sweep: bytes of P (data + indices + indptr) and R streamed per sweep,
  divided by the copy bandwidth measured here (``np.copyto`` of 400 MB; bandwidth counts the
  bytes read plus the bytes written). Two probe kernels split the sweep's time: streaming the
  same bytes alone, and gathering ``V[s']`` for every stored transition alone.
* policy iteration for ``gamma`` close to 1 (0.999), where value iteration needs ~10^4 sweeps.

Run: ``.venv/bin/python benchmarks/bench_value_iteration.py [--sizes 1000 10000 100000]``.
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

import mdptoolbox.mdp as mdptoolbox  # noqa: E402
import numba as nb  # noqa: E402
import numpy as np  # noqa: E402
import scipy  # noqa: E402
import scipy.sparse as sp  # noqa: E402
import scipy.sparse.linalg as spla  # noqa: E402

from results import write_result  # noqa: E402  (benchmarks/results.py)
from rlx.mdp import TabularMDP, random_sparse_mdp  # noqa: E402
from rlx.planning import policy_iteration, value_iteration  # noqa: E402

GAMMA = 0.99
TOL = 1e-8
N_ACTIONS, N_SUCCESSORS = 4, 10
PMT_BUILD_LIMIT = 20_000  # above this, pymdptoolbox's O(S^2) constructor is extrapolated


@dataclass
class Row:
    S: int
    nnz: int
    rlx_build: float
    rlx_solve: float
    sweeps: int
    pmt_build: float
    pmt_build_estimated: bool
    pmt_solve: float
    v_gap: float
    rlx_error: float
    pmt_own_sweeps: int
    pmt_own_error: float
    pmt_own_policy_match: float

    @property
    def rlx_ms_per_sweep(self) -> float:
        return 1e3 * self.rlx_solve / self.sweeps

    @property
    def pmt_ms_per_sweep(self) -> float:
        return 1e3 * self.pmt_solve / self.sweeps

    @property
    def speedup(self) -> float:
        return (self.pmt_build + self.pmt_solve) / (self.rlx_build + self.rlx_solve)


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
def compare(S: int) -> Row:
    model = random_sparse_mdp(S, N_ACTIONS, N_SUCCESSORS, gamma=GAMMA, seed=0)
    P_list = [sp.csr_matrix(P_a) for P_a in model.P]  # pymdptoolbox wants csr_matrix
    R = model.R.copy()

    mdp, rlx_build = timed(lambda: TabularMDP(P_list, R, GAMMA))
    result, rlx_solve = timed(lambda: value_iteration(mdp, tol=TOL))
    V_star = policy_iteration(mdp, evaluation="krylov").V  # reference, exact to ~1e-10

    pmt, pmt_build, estimated = build_pymdptoolbox(P_list, R, S)
    own_sweeps, own_V, own_policy = run_pymdptoolbox_own_rule(pmt, S) if pmt else (0, None, None)
    V_pmt, pmt_solve = run_pymdptoolbox_sweeps(
        pmt or bare_pymdptoolbox(P_list, R), result.iterations
    )
    return Row(
        S=S,
        nnz=mdp.P_stacked.nnz,
        rlx_build=rlx_build,
        rlx_solve=rlx_solve,
        sweeps=result.iterations,
        pmt_build=pmt_build,
        pmt_build_estimated=estimated,
        pmt_solve=pmt_solve,
        v_gap=float(np.max(np.abs(result.V - V_pmt))),
        rlx_error=float(np.max(np.abs(result.V - V_star))),
        pmt_own_sweeps=own_sweeps,
        pmt_own_error=float(np.max(np.abs(own_V - V_star))) if own_V is not None else np.nan,
        pmt_own_policy_match=(
            float(np.mean(own_policy == result.policy)) if own_policy is not None else np.nan
        ),
    )


_build_times: dict[int, float] = {}


def build_pymdptoolbox(P_list, R, S):
    """``(object or None, seconds, estimated)``: extrapolated as ``S^2`` above the limit."""
    if S <= PMT_BUILD_LIMIT:
        # epsilon such that its threshold epsilon (1 - gamma) / gamma equals rlx's tol
        epsilon = TOL * GAMMA / (1 - GAMMA)
        vi, seconds = timed(lambda: mdptoolbox.ValueIteration(P_list, R, GAMMA, epsilon=epsilon))
        _build_times[S] = seconds
        return vi, seconds, False
    S0 = max(_build_times)
    return None, _build_times[S0] * (S / S0) ** 2, True


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
def lu_seconds(S: int, gamma: float) -> float:
    """One sparse LU solve of ``(I - gamma P_pi) V = R_pi`` for a random policy."""
    mdp = random_sparse_mdp(S, N_ACTIONS, N_SUCCESSORS, gamma=gamma, seed=0)
    policy = np.random.default_rng(0).integers(0, N_ACTIONS, S)
    P_pi = mdp.P_stacked[policy * S + np.arange(S)]
    system = (sp.identity(S, format="csc") - gamma * P_pi).tocsc()
    return timed(lambda: spla.spsolve(system, mdp.R[np.arange(S), policy]))[1]


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


def lu_estimate(S: int, gamma: float, sizes=(1000, 2000, 4000)) -> tuple[float, float]:
    """Seconds of one LU solve at ``S``, extrapolated from smaller sizes by a power law."""
    times = [lu_seconds(n, gamma) for n in sizes]
    slope = np.polyfit(np.log(sizes), np.log(times), 1)[0]
    return times[-1] * (S / sizes[-1]) ** slope, slope


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
    return f"~{row.pmt_build:.0f} (est.)" if row.pmt_build_estimated else f"{row.pmt_build:.3f}"


def print_table(rows: list[Row]) -> None:
    head = (
        f"{'S':>7} {'sweeps':>6} | {'rlx build s':>11} {'solve s':>8} {'ms/sweep':>8} | "
        f"{'pmt build s':>13} {'solve s':>8} {'ms/sweep':>8} | {'speedup':>8} {'max|dV|':>8}"
    )
    print("\nvalue iteration, same sweeps from V_0 = 0 (speedup = pmt (build+solve) / rlx)")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r.S:>7} {r.sweeps:>6} | {r.rlx_build:>11.3f} {r.rlx_solve:>8.3f} "
            f"{r.rlx_ms_per_sweep:>8.3f} | {fmt_build(r):>13} {r.pmt_solve:>8.3f} "
            f"{r.pmt_ms_per_sweep:>8.3f} | {r.speedup:>7.1f}x {r.v_gap:>8.1e}"
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
        print(f"  S={r.S:>6}: rlx max|V - V*| = {r.rlx_error:.1e}; {own}")


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


def print_gamma_near_one(rows, S: int, gamma: float, lu: tuple[float, float]) -> None:
    print(f"\ngamma = {gamma}: value iteration vs policy iteration")
    for label, size, steps, seconds, gap in rows:
        print(f"  S={size:>6} {label:<30} {steps:>18} {seconds:>8.3f} s   max|V - V_VI| {gap:.1e}")
    bound = gamma * TOL / (1 - gamma)
    print(f"  (value iteration stops at max|V_k+1 - V_k| < {TOL:g}: within {bound:.0e} of V*)")
    est, slope = lu
    print(
        f"  S={S:>6} policy iteration (exact): not run; one sparse LU solve ~{est:.0f} s "
        f"(measured at 1k-4k states, time ~ S^{slope:.1f}: random transitions fill the factors in)"
    )


def print_markdown(rows: list[Row], floor: dict[str, float] | None, pi_rows) -> None:
    print("\n```markdown")
    print(
        "| states | sweeps | rlx build + solve (s) | pymdptoolbox build + solve (s) | "
        "rlx ms/sweep | pymdptoolbox ms/sweep | speedup |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r.S:,} | {r.sweeps} | {r.rlx_build:.3f} + {r.rlx_solve:.3f} | "
            f"{fmt_build(r)} + {r.pmt_solve:.2f} | {r.rlx_ms_per_sweep:.3f} | "
            f"{r.pmt_ms_per_sweep:.3f} | {r.speedup:.0f}x |"
        )
    if floor is not None:
        print(
            f"\nOne sweep at {rows[-1].S:,} states: {floor['sweep_ms']:.2f} ms against a "
            f"streaming floor of {floor['floor_ms']:.2f} ms ({floor['ratio']:.1f}x); "
            f"the random reads of V alone take {floor['gather_ms']:.2f} ms."
        )
    if pi_rows:
        print("\n| gamma 0.999 | states | steps | seconds |")
        print("|---|---:|---:|---:|")
        for label, size, steps, seconds, _ in pi_rows:
            print(f"| {label} | {size:,} | {steps} | {seconds:.3f} |")
    print("```")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--skip-gamma-near-one", action="store_true")
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="where the result file goes (default benchmarks/results)",
    )
    args = parser.parse_args()
    # pymdptoolbox's model check compares a sparse matrix with 0; scipy warns on every call
    warnings.filterwarnings("ignore", category=sp.SparseEfficiencyWarning)

    bandwidth = copy_bandwidth()
    print_header(bandwidth)
    _, compile_s = timed(lambda: value_iteration(random_sparse_mdp(10, n_successors=2)))
    print(f"warm-up     numba kernel load/compile {compile_s:.2f} s (cached on disk after a run)")

    rows = [compare(S) for S in sorted(args.sizes)]
    print_table(rows)
    floor = None
    if rows[-1].S >= 100_000:
        floor = memory_floor(rows[-1].S, bandwidth, rows[-1].rlx_ms_per_sweep)
        print_floor(rows[-1].S, floor)
    pi_rows = []
    if not args.skip_gamma_near_one:
        gamma, S = 0.999, 10_000
        pi_rows = gamma_near_one(S, gamma, S_exact=2_000)
        print_gamma_near_one(pi_rows, S, gamma, lu_estimate(S, gamma))
    print_markdown(rows, floor, pi_rows)
    write_result(
        "value_iteration",
        title="Value iteration: rlx vs pymdptoolbox on random sparse MDPs",
        columns=[
            "states",
            "sweeps",
            "rlx build + solve (s)",
            "pymdptoolbox build + solve (s)",
            "rlx ms/sweep",
            "pymdptoolbox ms/sweep",
            "speedup",
        ],
        rows=[
            [
                r.S,
                r.sweeps,
                round(r.rlx_build + r.rlx_solve, 3),
                round(r.pmt_build + r.pmt_solve, 2),
                round(r.rlx_ms_per_sweep, 3),
                round(r.pmt_ms_per_sweep, 3),
                round(r.speedup, 1),
            ]
            for r in rows
        ],
        figures={
            "speedup_at_largest": round(rows[-1].speedup, 1),
            **({} if floor is None else {"sweep_over_memory_floor": round(floor["ratio"], 2)}),
        },
        notes=(
            "Random sparse MDPs (4 actions, 10 successors, gamma 0.99), the same input to both; "
            "both run the same number of sweeps from V_0 = 0 (pymdptoolbox's stopping rule set "
            "aside, see the script); one thread. At 100k states pymdptoolbox's O(S^2) "
            "constructor is estimated, not run."
        ),
        out_dir=args.out_dir,
    )


if __name__ == "__main__":
    main()
