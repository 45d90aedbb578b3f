"""What every solver shares: its result, its stop reasons, the control it polls, input checks.

A solver reports; one dispatcher (worker.training.fit) decides what to do with the report. Solvers
import only numpy, scipy and numba (and ``core.stop_reason``, the one enum they share with the API's
schemas, standard library only): no Redis, no HTTP, no pydantic. The service's C convention holds
for all of them: minimize 0.5*|w|^2 + C * sum_i loss_i (each solver converts internally when its
paper uses C/m or C/n).

A solver's outer loop runs in Python between numba kernels and calls ``control.check()`` after each
outer iteration, and between the passes over the data inside one (a kernel that may run long on big
data, such as dcd's epoch, watches ``monotonic_s()`` and hands back every ``SLICE_SECONDS``): that is
where a deadline or a cancel request stops it, within a second, and it then returns the best model
so far as an ordinary result (``stop_reason`` says why). ``control.record(point)`` hands each
convergence point to whoever watches (the worker streams them to Redis).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from core.stop_reason import StopReason as StopReason  # the solvers take what they share from this module


class SolverInputError(ValueError):
    """A solver argument is out of its domain; the message names the parameter, value and what is allowed."""


@dataclass(frozen=True)
class SolverResult:
    """The outcome of one binary (or structured) training run.

    ``w`` holds the weights over the data set's features; ``bias`` is the learned offset b, so that
    the decision value of x is ``<w, x> + bias`` (for a bias feature of value B, b = B * w_B).
    Kernel solvers leave ``w`` None (smo's linear kernel fills it with the folded weights) and put the
    expansion in ``extra["support_indices"]`` (row ids) and ``extra["dual_coef"]`` (y_i alpha_i there).
    ``objective`` is the primal objective of the returned model in the service's convention.
    ``trace`` is the list of convergence points, as recorded through the control.
    ``solver_seconds`` excludes the time spent evaluating trace points (``trace_seconds``).
    """

    w: np.ndarray | None
    bias: float
    n_iter: int
    converged: bool
    stop_reason: StopReason
    objective: float
    solver_seconds: float
    trace_seconds: float = 0.0
    trace: tuple[dict, ...] = ()
    extra: dict = field(default_factory=dict)


class SolverControl:
    """Deadline, cancel flag and trace sink that a solver polls between outer iterations.

    ``deadline`` is a ``time.monotonic()`` instant or None. ``cancel_requested`` is a cheap callable
    (the worker throttles its Redis look-ups); ``on_point`` receives each trace point dict.
    ``check()`` returns the StopReason that should stop the solver now, or None to go on.
    """

    def __init__(
        self,
        deadline: float | None = None,
        cancel_requested: Callable[[], bool] | None = None,
        on_point: Callable[[dict], None] | None = None,
        cores: Callable[[int | None], int] | None = None,
    ) -> None:
        self.deadline = deadline
        self._cancel_requested = cancel_requested
        self._on_point = on_point
        self._cores = cores
        self.points: list[dict] = []
        self.thread_limit: int | None = None
        """Threads the solver may use now (None: as many as it started with; set by ``check`` when ``cores`` is given)."""
        self._thread_ceiling: int | None = None

    def check(self) -> StopReason | None:
        """Return CANCELED or DEADLINE when the solver must stop now, else None.

        With ``cores`` (the job's share of the machine's cores, ``worker.runtime.core_budget``: called with the
        threads in use, it answers how many the job may use now), numba's threads for the next passes
        are set to that share, never above what the solve started with; ``thread_limit`` says it for
        solvers with threads of their own (smo's row team). It is called first with None (the job's
        share so far), then with the threads in use."""
        if self._cores is not None:
            self._follow_cores(self._cores)
        if self._cancel_requested is not None and self._cancel_requested():
            return StopReason.CANCELED
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return StopReason.DEADLINE
        return None

    def _follow_cores(self, cores: Callable[[int | None], int]) -> None:
        import numba

        if self._thread_ceiling is None:
            self._thread_ceiling = numba.get_num_threads()
        allowed = max(1, min(self._thread_ceiling, cores(self.thread_limit)))
        if allowed != self.thread_limit:
            numba.set_num_threads(allowed)
            self.thread_limit = allowed

    def record(self, point: dict[str, Any]) -> None:
        """Keep one convergence point and pass it to the watcher, if any."""
        clean = {key: _json_number(value) for key, value in point.items()}
        self.points.append(clean)
        if self._on_point is not None:
            self._on_point(clean)


def _json_number(value: Any) -> Any:
    """Turn numpy scalars into Python numbers and non-finite floats into None (JSON has no inf)."""
    kind = type(value)
    if kind is int or kind is bool or kind is str or value is None:  # most of a point: nothing to turn
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    return value


def check_csr(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, n_features: int) -> None:
    """Validate a CSR triple once, up front: dtypes, shapes, index range and finiteness.

    Values may be float32 (what the service stores when the text holds them exactly); every solver
    accumulates in float64."""
    if (
        indptr.dtype != np.int64
        or indices.dtype not in (np.int32, np.int64)
        or data.dtype not in (np.float64, np.float32)
    ):
        raise SolverInputError(
            f"CSR arrays must be (int64 indptr, int32 or int64 indices, float64 or float32 data), got "
            f"({indptr.dtype}, {indices.dtype}, {data.dtype})"
        )
    if indptr.ndim != 1 or indptr.size < 1 or indptr[0] != 0 or indptr[-1] != indices.size:
        raise SolverInputError("indptr must start at 0 and end at len(indices)")
    if indices.size != data.size:
        raise SolverInputError(f"indices has {indices.size} entries but data has {data.size}")
    if indices.size and (indices.min() < 0 or indices.max() >= n_features):
        raise SolverInputError(f"feature indices must lie in [0, {n_features})")
    if not np.all(np.isfinite(data)):
        raise SolverInputError("data contains NaN or infinite values")


def check_positive(name: str, value: float) -> float:
    """Return value as float if it is finite and > 0, else raise naming the parameter."""
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise SolverInputError(f"{name} must be a finite number > 0, got {value!r}")
    return value


def check_int(name: str, value, minimum: int, maximum: int | None = None, *, or_none: bool = False) -> int:
    """Return value as int if it is an integer (a bool is not) in [minimum, maximum], else raise naming the
    parameter. ``or_none`` only says in the message that None is allowed too (the caller handles None)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, np.integer))
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        allowed = f"an integer >= {minimum}" if maximum is None else f"an integer in [{minimum}, {maximum}]"
        raise SolverInputError(f"{name} must be {allowed}{' or None' if or_none else ''}, got {value!r}")
    return int(value)


def binary_signs(y: np.ndarray) -> np.ndarray:
    """Map a label vector with values in {-1, +1} to float64, refusing anything else."""
    y = np.asarray(y, dtype=np.float64)
    if not np.all((y == 1.0) | (y == -1.0)):
        raise SolverInputError("binary solvers take labels in {-1, +1}; the dispatcher maps user labels")
    return y


# ---------------------------------------------------------------------------------------------
# A clock inside kernels: a pass over a large data set can take seconds, longer than a cancel may wait.
# ---------------------------------------------------------------------------------------------

SLICE_SECONDS = 0.2
"""How long a kernel that watches the clock works before it hands back to its Python loop (which then
looks at the deadline and the cancel flag and calls it again to go on where it stopped)."""

_CLOCK_MONOTONIC = getattr(time, "CLOCK_MONOTONIC", 1)


@intrinsic
def _monotonic_ns(typingctx):
    """clock_gettime(CLOCK_MONOTONIC) in nanoseconds, emitted as a call to the C library (cacheable:
    the symbol is resolved when the compiled kernel is loaded, no address is baked into it)."""

    def codegen(context, builder, signature, args):
        i32, i64 = ir.IntType(32), ir.IntType(64)
        timespec = ir.LiteralStructType([i64, i64])
        fnty = ir.FunctionType(i32, [i32, timespec.as_pointer()])
        clock_gettime = cgutils.get_or_insert_function(builder.module, fnty, "clock_gettime")
        ts = cgutils.alloca_once(builder, timespec)
        builder.call(clock_gettime, [ir.Constant(i32, _CLOCK_MONOTONIC), ts])
        seconds = builder.load(cgutils.gep_inbounds(builder, ts, 0, 0))
        nanoseconds = builder.load(cgutils.gep_inbounds(builder, ts, 0, 1))
        return builder.add(builder.mul(seconds, ir.Constant(i64, 1_000_000_000)), nanoseconds)

    return types.int64(), codegen


@njit(cache=True)
def monotonic_s():
    """time.monotonic() inside a numba kernel (the same clock, about 60 ns a call)."""
    return _monotonic_ns() * 1e-9


# ---------------------------------------------------------------------------------------------
# Deterministic random numbers for kernels: splitmix64, one uint64 of state in a 1-element array.
# Independent of numba's and numpy's global generators, so a seed gives the same run everywhere.
# ---------------------------------------------------------------------------------------------


def rng_state(seed: int) -> np.ndarray:
    """A fresh splitmix64 state for kernels, from a non-negative integer seed."""
    return np.array([(seed & 0xFFFFFFFFFFFFFFFF) ^ 0x9E3779B97F4A7C15], dtype=np.uint64)  # (Python ints: 0.4 us, not 1)


@njit(cache=True)
def rng_next(state):
    """Advance the splitmix64 state and return the next 64-bit value."""
    state[0] += np.uint64(0x9E3779B97F4A7C15)
    z = state[0]
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def rng_below(state, n):
    """A uniform integer in [0, n) (n >= 1): r mod n of a 64-bit draw r, drawing again while r < 2^64 mod n (so
    that the values kept are a whole number of runs of n, each residue equally often; OpenBSD's
    arc4random_uniform does the same). 2^64 mod n < n, so a draw of at least n is kept without computing it: one
    division a draw, not two (a shuffle of a few hundred rows 0.7x of its time; the same values)."""
    bound = np.uint64(n)
    while True:
        r = rng_next(state)
        if r >= bound or r >= (np.uint64(0) - bound) % bound:
            return np.int64(r % bound)


@njit(cache=True)
def shuffle_prefix(index, count, state):
    """Fisher-Yates shuffle of index[:count] in place."""
    for i in range(count - 1, 0, -1):
        j = rng_below(state, i + 1)
        tmp = index[i]
        index[i] = index[j]
        index[j] = tmp


def warm_up() -> None:
    """Compile the shared kernels above for the argument types the solvers call them with."""
    state = rng_state(0)
    monotonic_s()
    rng_next(state)
    rng_below(state, np.int64(3))
    for dtype in (np.int32, np.int64):  # dcd's visiting order: int32 rows, int64 past 2^31
        shuffle_prefix(np.arange(3, dtype=dtype), np.int64(3), state)


def solver_threads(n_threads) -> int:
    """Threads a solver's parallel kernels may use: n_threads (default: numba's), never more than numba allows
    in this process (a subtask process is limited to cores // processes, so processes x threads <= cores)."""
    import numba

    allowed = numba.get_num_threads()
    if n_threads is None:
        return allowed
    return min(check_int("n_threads", n_threads, 1, or_none=True), allowed)


def certified_gap(objective: float, lower: float, note: str) -> dict:
    """A cutting-plane result's ``extra`` entries for its certified gap: the lower bound of the optimum, the gap
    objective - lower, the relative gap (an upper bound on how far above the optimum the objective lies) and how
    the bound was found."""
    return {
        "lower_bound": lower,
        "gap": objective - lower,
        "gap_rel": max(0.0, (objective - lower) / objective) if objective > 0 else 0.0,
        "gap_note": note,
    }


def dual_trace_due(finished, iteration, trace_every, certified, first, trace_budget, trace_seconds, elapsed) -> bool:
    """Whether a dual coordinate descent pass records a trace point (``dcd``'s ``trace_every`` and ``trace_budget``):
    always the last one and the first; every ``trace_every``-th pass when the stopping check computed its
    objectives already (``certified``), or while the points so far took at most ``trace_budget`` of the time."""
    return finished or (
        iteration % trace_every == 0
        and (certified or first or trace_budget is None or trace_seconds <= trace_budget * elapsed)
    )


def dual_trace_point(iteration, elapsed, primal, dual, violation, active_size) -> dict:
    """A dual coordinate descent trace point: the primal and dual objectives, their gap and the pass's violation."""
    gap = primal - dual
    return {
        "iteration": iteration,
        "elapsed_s": elapsed,
        "primal": primal,
        "dual": dual,
        "gap": gap,
        "relative_gap": gap / max(abs(primal), 1e-300),
        "max_violation": violation,
        "active_size": int(active_size),
    }


GAP_FLOOR = 1e-12
"""An absolute gap that certifies whatever the objective: at an optimum of value 0 (a one-class SVM whose w is 0 on
centered data) no relative gap can."""


def certifies(objectives: tuple[float, float], tol_rel: float) -> bool:
    """Whether (primal, dual) certify the primal within ``tol_rel`` of the optimum (or within ``GAP_FLOOR``)."""
    primal, dual = objectives
    return primal - dual <= tol_rel * abs(primal) + GAP_FLOOR


@dataclass
class DualRun:
    """What ``run_dual_passes`` ends with: the passes made, why they stopped, the last objectives and violation,
    the violation threshold in force, the trace and the seconds (the solver's, the trace points')."""

    iterations: int
    stop_reason: StopReason
    converged: bool
    primal: float
    dual: float
    violation: float
    threshold: float
    trace: tuple
    solver_seconds: float
    trace_seconds: float

    def result(self, w_full: np.ndarray, B: float, setup_seconds: float, gap_note: str, **extra) -> SolverResult:
        """The solver's result: ``w_full`` the weights with the bias feature's last (its offset b = B * w_B), the
        seconds the solver took before its passes, what its dual is, and its own ``extra`` entries."""
        gap_rel = max(0.0, (self.primal - self.dual) / abs(self.primal)) if self.primal else 0.0
        return SolverResult(
            w=w_full[:-1].copy(),
            bias=float(B * w_full[-1]),
            n_iter=self.iterations,
            converged=self.converged,
            stop_reason=self.stop_reason,
            objective=self.primal,
            solver_seconds=setup_seconds + self.solver_seconds,
            trace_seconds=self.trace_seconds,
            trace=self.trace,
            extra={
                **extra,
                "max_violation": self.violation,
                "tol_used": self.threshold,
                "dual": self.dual,
                "gap_rel": gap_rel,
                "gap_note": gap_note,
            },
        )


def run_dual_passes(
    one_pass, after_pass, objectives, active_size, params, control: SolverControl, stalled=None
) -> DualRun:
    """The outer loop of a dual coordinate descent (dcd's logistic regression, SVR and L1-regularized SVM; dcd's own
    loop has its shrinking woven in): passes until the violation rule holds on every row and the duality gap
    certifies the model (``tol_rel``; when it does not, the threshold is divided by 10 and the passes go on, the gap
    checked again every tenth of the passes so far), ``max_iter``, or a stop of ``control`` (seen between the slices
    of a pass).

    ``one_pass(stop_at)`` runs a pass, or its slice up to the ``time.monotonic()`` instant ``stop_at``: (largest
    violation, done). ``after_pass(violation, threshold)``: whether the rule holds on every row (the solver's
    bookkeeping between passes: shrinking, inner tolerances). ``objectives()``: (primal, dual); ``active_size()``:
    the rows the passes visit now. ``stalled()`` (optional): whether the solver can make no more progress, which
    ends the run as ``max_iter`` does. ``params``: tol,
    tol_rel, max_iter, trace_every, trace_budget, as dcd's. Trace points as ``dual_trace_point``."""
    tol_rel = 0.0 if params.tol_rel is None else float(params.tol_rel)
    threshold, max_iter = float(params.tol), params.max_iter
    clock_start = time.perf_counter()
    trace_seconds = 0.0
    trace: list[dict] = []
    iteration = 0
    violation = math.inf
    stop_reason, converged = StopReason.MAX_ITER, False
    last: tuple[float, float] | None = None
    held_at = 0  # the pass after which the gap last failed to certify (0: not yet)
    held_threshold = threshold  # the threshold at which the rule last held
    while True:
        stopped_inside = None
        while True:
            violation_pass, done = one_pass(time.monotonic() + SLICE_SECONDS)
            if done:
                break
            stopped_inside = control.check()
            if stopped_inside is not None:
                break
        iteration += 1
        finished = stopped_inside is not None
        certified = None
        if stopped_inside is not None:
            stop_reason = stopped_inside
        else:
            violation = violation_pass
            if after_pass(violation, threshold):
                if tol_rel > 0.0:
                    certified = objectives()
                    converged = certifies(certified, tol_rel)
                    if not converged:  # the rule is not enough here: ask for ten times smaller violations
                        held_threshold, held_at = threshold, iteration
                        threshold = min(threshold, violation) / 10.0
                else:
                    converged = True
            elif held_at and iteration - held_at >= max(1, held_at // 10):
                # the rule at tol held once and the gap did not certify then: the gap alone is checked every tenth
                # of the passes so far (a pass's cost), so that the run ends once it certifies, not only when the
                # tightened rule holds (flights' SVR at C = 10: the gap reached 1% some 100 passes after the rule
                # at 0.1, the rule at 0.01 thousands later)
                held_at = iteration
                certified = objectives()
                converged = certifies(certified, tol_rel)
                if converged:  # the model reports the rule that held (the tightened one did not)
                    threshold = held_threshold
            if converged:
                stop_reason, finished = StopReason.CONVERGED, True
        if not finished and (iteration >= max_iter or (stalled is not None and stalled())):
            stop_reason, finished = StopReason.MAX_ITER, True
        if not finished:
            reason = control.check()
            if reason is not None:
                stop_reason, finished = reason, True
        trace_clock = time.perf_counter()
        elapsed = trace_clock - clock_start - trace_seconds
        if dual_trace_due(
            finished, iteration, params.trace_every, certified is not None, last is None, params.trace_budget,
            trace_seconds, elapsed,
        ):  # fmt: skip
            last = certified if certified is not None else objectives()
            point = dual_trace_point(iteration, elapsed, last[0], last[1], violation, active_size())
            control.record(point)  # (its time counts in the budget: on a few hundred rows it is the point's cost)
            trace_seconds += time.perf_counter() - trace_clock
            trace.append(dict(point))
        if finished:
            break
    assert last is not None, "the last pass records its objectives"
    return DualRun(
        iteration, stop_reason, converged, float(last[0]), float(last[1]), float(violation), threshold, tuple(trace),
        time.perf_counter() - clock_start - trace_seconds, trace_seconds,
    )  # fmt: skip


def l1_rule_scale(y: np.ndarray) -> float:
    """The factor LIBLINEAR's -s 5 and -s 6 put on their -e: max(min(positives, negatives), 1) / rows (its usage
    text: |f'(w)|_1 <= eps * min(pos, neg) / l * |f'(w0)|_1), so that a class of a few rows is not stopped early."""
    positives = int(np.count_nonzero(y > 0))
    return max(min(positives, y.shape[0] - positives), 1) / max(y.shape[0], 1)


RECHECK_SHRUNK = 0.01
"""``RelativeRulePasses``: a pass over every coordinate once the shrunk passes' violation is below this share of the
last full pass's. Without it a tight run could converge a wrongly shrunk problem to tol first (L1 logistic regression
on w8a, tol 1e-9: 31-56 Newton steps to within 1e-5 of the optimum on seeds 0, 3, 5; a9a: not within 400), with
it 15-19 and 60-91; at 0.1 the breast cancer run certified to 1e-8 failed on 4 of 24 seeds, at 0.01 on 1 as
without (tests/benchmarks/README.md, L1)."""


class RelativeRulePasses:
    """The bookkeeping between the passes of a coordinate descent that shrinks and stops by LIBLINEAR's relative rule
    (dcd's SVR, -s 12/13, and its L1-regularized SVM, -s 5): ``one_pass`` and ``after_pass`` for
    ``run_dual_passes``.

    ``run_pass(active, shrink_at, resume, stop_at)`` runs a pass over the first ``active`` coordinates, or its
    slice (``resume``: [next position, largest violation, summed violation], position < 0 for a new pass), shrinking
    against ``shrink_at`` (inf: none), and returns (active, largest violation, summed violation, done). A pass's
    violation, as ``run_dual_passes`` sees it, is its summed violation over the first pass's; the next pass shrinks
    against this one's largest; the rule on shrunk coordinates brings them all back for a pass without shrinking.
    ``rule_scale`` multiplies the first pass's summed violation in the rule: LIBLINEAR -s 5 and -s 6 stop at tol times
    min(positives, negatives) / rows times it (``l1_rule_scale``), -s 12/13 and -s 21 at tol times it (1).
    ``every_pass_full``: every pass starts with every coordinate and shrinks within itself only (newGLMNET's outer
    iterations, whose gradient covers every feature anyway), so that the rule is checked on all of them each pass."""

    def __init__(self, size: int, run_pass, rule_scale: float = 1.0, every_pass_full: bool = False) -> None:
        self.size = size
        self.run_pass = run_pass
        self.rule_scale = rule_scale
        self.every_pass_full = every_pass_full
        self.resume = np.array([-1.0, 0.0, 0.0])
        self.active = size  # the coordinates the passes visit
        self.shrink_at = math.inf  # none in the first pass, nor in the pass after every coordinate came back
        self.full = True  # whether the pass started with every coordinate
        self.worst = 0.0
        self.initial = -1.0  # the first pass's summed violation: the rule's scale
        self.full_ratio = math.inf  # the violation of the last pass that started with every coordinate

    def one_pass(self, stop_at: float) -> tuple[float, bool]:
        """A pass, or its slice up to ``stop_at``: (summed violation over the first pass's, done)."""
        if self.resume[0] < 0.0:
            if self.every_pass_full:
                self.active = self.size
            self.full = self.active == self.size
        self.active, self.worst, total, done = self.run_pass(self.active, self.shrink_at, self.resume, stop_at)
        if not done:
            return total, False
        if self.initial < 0.0:
            self.initial = total * self.rule_scale
        ratio = total / self.initial if self.initial > 0.0 else 0.0
        if self.full:
            self.full_ratio = ratio
        return ratio, True

    def after_pass(self, ratio: float, threshold: float) -> bool:
        """Whether the rule holds on every coordinate (else the next pass's shrinking threshold, or all back)."""
        if ratio >= threshold:
            if not self.full and not self.every_pass_full and ratio < RECHECK_SHRUNK * self.full_ratio:
                # the shrunk problem's violation fell a hundredfold since every coordinate was last seen: see them all
                # again, so that one shrunk wrongly comes back now, not once the shrunk problem is solved to tol
                self.active, self.shrink_at = self.size, math.inf
                return False
            self.shrink_at = self.worst if self.worst > 0.0 else math.inf
            return False
        if not (self.full and (self.active == self.size or self.every_pass_full)):
            self.active, self.shrink_at = self.size, math.inf
            return False
        return True
