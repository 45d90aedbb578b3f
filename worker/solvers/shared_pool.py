"""The data passes of the cutting-plane solvers, and the process pool that splits them over shared memory.

What runs here. The three O(nnz) or O(n log n) subtasks of one OCAS iteration (Franc & Sonnenburg
2008, paper 000, Section 3.1) and the two of a CPA iteration (Joachims 2006, paper 001, Lemma 1):

* output computation  o_i = <x_i, w> for every row (``_pass_outputs``), split by rows;
* line-search preparation (paper 000, Appendix A): the slopes B_i, offsets C_i and the breakpoints
  k_i = -C_i / B_i > 0 of G(k), each process sorting its own rows' breakpoints (``_ocas_prep``);
  the main process then merges the p sorted runs while it sweeps (``_ocas_sweep``);
* cut sum  z = sum_i gamma_i x_i  with gamma_i = y_i pi_i (classification) or c+_i - c-_i (pairs):
  by rows in one process for cpa (``_pass_cut_rows``); for ocas over a fixed set of row segments
  (``cut_segments``: at most 8, balanced by nnz, chosen from the data alone), each segment summed
  into its own buffer (``_pass_cut_parts``), the processes taking contiguous groups of segments,
  and the main process adding the buffers in segment order (``_sum_parts``).

Same answer for any number of processes. Every row-wise value is computed by the same code whatever
the partition. Every scalar sum over rows is accumulated per fixed block of rows (``block_rows_for(n)``,
a function of n alone, at most ``BLOCK_ROWS``), chunks start on block boundaries, and the main
process adds the blocks in order. The cut sum uses the same fixed segments and the same order of
additions whatever the number of processes. The breakpoints are sorted stably (LSD radix sort) and
the merge breaks ties towards the lower chunk, so
the merged order is the stable order by (key, row). Hence one process and p processes produce
bit-identical iterates (the tests check 1 vs 2 processes).

The caller's main module must be importable without side effects (the usual rule of the 'spawn'
start method: scripts guard their entry point with ``if __name__ == "__main__":``).

The pool. ``SharedData`` copies arrays once into ``multiprocessing.shared_memory`` segments;
``WorkerPool(shared, n_processes)`` starts n_processes - 1 helper processes, forked when numba runs
on its fork-safe 'workqueue' threading layer (as in the workers: milliseconds, kernels already
loaded), else with the 'spawn' start method (no fork of a process that may hold OpenMP threads),
each attaching to the segments once, then receiving only tiny command tuples over a pipe.
The main process works on chunk 0 while the helpers work on theirs. ``close()`` stops and joins the
helpers (terminating any that do not exit) and unlinks the segments; callers run it in ``finally``,
so no helper outlives a solve. A helper whose parent dies sees its pipe close and exits.
(multiprocessing's own resource-tracker helper, started by the spawn machinery, is the stdlib's and
lives as long as the calling process.)
"""

from __future__ import annotations

import time
import traceback
from multiprocessing import get_context, shared_memory

import numpy as np
from numba import njit

BLOCK_ROWS = 4096
MAX_CUT_SEGMENTS = 8
CUT_BUFFER_ENTRIES = 1 << 24  # 128 MB of float64 at most for the cut's per-segment buffers


# ---------------------------------------------------------------------------------------------
# kernels (arrays in, arrays out; w has n_features + 1 entries, the last one the bias weight)
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def _pass_outputs(indptr, indices, data, w, B, row_start, row_end, out):
    """out[i] = <x_i, w[:-1]> + B * w[-1] for rows in [row_start, row_end)."""
    wB = B * w[w.shape[0] - 1]
    for i in range(row_start, row_end):
        acc = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            acc += data[k] * w[indices[k]]
        out[i] = acc + wB


@njit(cache=True)
def _pass_cut_rows(indptr, indices, data, gamma, row_start, row_end, z):
    """z[f] += sum_i gamma_i x_if over rows in [row_start, row_end) with gamma_i != 0 (scatter)."""
    for i in range(row_start, row_end):
        gi = gamma[i]
        if gi != 0.0:
            for k in range(indptr[i], indptr[i + 1]):
                z[indices[k]] += gi * data[k]


@njit(cache=True)
def _pass_cut_parts(indptr, indices, data, gamma, seg_bounds, seg_start, seg_end, z_parts):
    """For each row segment k in [seg_start, seg_end): z_parts[k] = sum over its rows of gamma_i x_i."""
    d = z_parts.shape[1]
    for k in range(seg_start, seg_end):
        zk = z_parts[k]
        for f in range(d):
            zk[f] = 0.0
        for i in range(seg_bounds[k], seg_bounds[k + 1]):
            gi = gamma[i]
            if gi != 0.0:
                for e in range(indptr[i], indptr[i + 1]):
                    zk[indices[e]] += gi * data[e]


@njit(cache=True)
def _sum_parts(z_parts, z):
    """z[f] = ((z_parts[0, f] + z_parts[1, f]) + ...) in segment order, for f < z_parts.shape[1]."""
    K, d = z_parts.shape
    for f in range(d):
        acc = 0.0
        for k in range(K):
            acc += z_parts[k, f]
        z[f] = acc


@njit(cache=True)
def _ocas_prep(y, o_b, o_t, C, row_start, row_end, block_rows, slope_blocks, keys, wts):
    """Line-search terms of paper 000, Appendix A, for rows in [row_start, row_end).

    G(k) = 0.5 k^2 A0 + k B0 + C0 + sum_i max(0, k B_i + C_i) with B_i = C y_i (o_b_i - o_t_i),
    C_i = C (1 - y_i o_b_i). Writes per block the part of the right derivative at k = 0 that the
    rows contribute (B_i where the term is active just right of 0), and the breakpoints k_i > 0
    (where the derivative jumps up by |B_i|) into keys/wts[row_start : row_start + count], sorted
    stably by k_i. Returns count.
    """
    count = 0
    blk = row_start // block_rows
    acc = 0.0
    for i in range(row_start, row_end):
        if i // block_rows != blk:
            slope_blocks[blk] = acc
            acc = 0.0
            blk = i // block_rows
        Bi = C * y[i] * (o_b[i] - o_t[i])
        Ci = C * (1.0 - y[i] * o_b[i])
        if Ci > 0.0 or (Ci == 0.0 and Bi > 0.0):
            acc += Bi
        if (Ci > 0.0 and Bi < 0.0) or (Ci < 0.0 and Bi > 0.0):
            keys[row_start + count] = -Ci / Bi
            wts[row_start + count] = abs(Bi)
            count += 1
    if row_end > row_start:
        slope_blocks[blk] = acc
    if count > 1:
        _radix_sort_pairs(keys[row_start:row_start + count], wts[row_start:row_start + count])
    return count


@njit(cache=True)
def _radix_sort_pairs(keys, wts):
    """Sort keys (positive float64, +inf allowed) ascending in place, carrying wts; stable.

    For positive IEEE doubles the bit patterns read as uint64 are ordered like the values, so an
    LSD radix sort over 8 bytes (passes where every key has the same byte are skipped) sorts them
    in O(8 m), stably: equal keys keep their row order, which makes the merged order of several
    processes' runs equal to the order of one process.
    """
    m = keys.shape[0]
    a_k = keys.view(np.uint64)
    a_w = wts
    b_k = np.empty(m, dtype=np.uint64)
    b_w = np.empty(m, dtype=np.float64)
    count = np.zeros(256, dtype=np.int64)
    src_is_a = True
    for byte in range(8):
        shift = np.uint64(8 * byte)
        if src_is_a:
            src_k, src_w, dst_k, dst_w = a_k, a_w, b_k, b_w
        else:
            src_k, src_w, dst_k, dst_w = b_k, b_w, a_k, a_w
        for b in range(256):
            count[b] = 0
        for q in range(m):
            count[(src_k[q] >> shift) & np.uint64(255)] += 1
        if count[(src_k[0] >> shift) & np.uint64(255)] == m:
            continue
        total = 0
        for b in range(256):
            c = count[b]
            count[b] = total
            total += c
        for q in range(m):
            b = (src_k[q] >> shift) & np.uint64(255)
            pos = count[b]
            dst_k[pos] = src_k[q]
            dst_w[pos] = src_w[q]
            count[b] = pos + 1
        src_is_a = not src_is_a
    if not src_is_a:
        for q in range(m):
            a_k[q] = b_k[q]
            a_w[q] = b_w[q]


@njit(cache=True)
def _ocas_sweep(keys, wts, run_start, run_count, A0, S):
    """argmin_{k >= 0} G(k) given the right derivative S = G'(0+) < 0 and p sorted breakpoint runs.

    The derivative is A0 k + S between breakpoints and jumps up by wts at each; the runs are merged
    on the fly (ties go to the lower run, i.e. the lower row), and the sweep stops at the first
    point where the subdifferential contains 0.
    """
    p = run_start.shape[0]
    pos = np.zeros(p, dtype=np.int64)
    prev = 0.0
    while True:
        r = -1
        kmin = 0.0
        for q in range(p):
            if pos[q] < run_count[q]:
                kq = keys[run_start[q] + pos[q]]
                if r < 0 or kq < kmin:
                    r = q
                    kmin = kq
        if r < 0:
            break
        if A0 * kmin + S >= 0.0:
            k = -S / A0
            return k if k > prev else prev
        wt = wts[run_start[r] + pos[r]]
        if A0 * kmin + S + wt >= 0.0:
            return kmin
        S += wt
        prev = kmin
        pos[r] += 1
    k = -S / A0
    return k if k > prev else prev


@njit(cache=True)
def _ocas_update(y, o_b, o_t, k, lam, row_start, row_end, block_rows, gamma,
                 hinge_blocks, count_blocks, gsum_blocks):
    """Move o_b to the line-search point, pick the cut rows at w_c, and block-sum hinge and counts.

    o_b <- (1 - k) o_b + k o_t (outputs of the new best-so-far w_b); o_c = (1 - lam) o_b + lam o_t
    (outputs of w_c, eq. (8)); pi_i = [y_i o_c_i <= 1] (Algorithm 1, line 5); gamma_i = y_i pi_i.
    Per block: sum of max(0, 1 - y_i o_b_i), number of pi_i = 1, and sum of gamma_i.
    """
    blk = row_start // block_rows
    h = 0.0
    c = 0.0
    gs = 0.0
    for i in range(row_start, row_end):
        if i // block_rows != blk:
            hinge_blocks[blk] = h
            count_blocks[blk] = c
            gsum_blocks[blk] = gs
            h = 0.0
            c = 0.0
            gs = 0.0
            blk = i // block_rows
        ob = (1.0 - k) * o_b[i] + k * o_t[i]
        o_b[i] = ob
        oc = (1.0 - lam) * ob + lam * o_t[i]
        margin = 1.0 - y[i] * ob
        if margin > 0.0:
            h += margin
        if y[i] * oc <= 1.0:
            gamma[i] = y[i]
            c += 1.0
            gs += y[i]
        else:
            gamma[i] = 0.0
    if row_end > row_start:
        hinge_blocks[blk] = h
        count_blocks[blk] = c
        gsum_blocks[blk] = gs


@njit(cache=True)
def _hinge_blocks(y, o, row_start, row_end, block_rows, hinge_blocks):
    """Per block: sum of max(0, 1 - y_i o_i) over rows in [row_start, row_end)."""
    blk = row_start // block_rows
    h = 0.0
    for i in range(row_start, row_end):
        if i // block_rows != blk:
            hinge_blocks[blk] = h
            h = 0.0
            blk = i // block_rows
        margin = 1.0 - y[i] * o[i]
        if margin > 0.0:
            h += margin
    if row_end > row_start:
        hinge_blocks[blk] = h


# ---------------------------------------------------------------------------------------------
# partitions
# ---------------------------------------------------------------------------------------------


def block_rows_for(n: int) -> int:
    """Rows per summation block: a function of n only (never of the process count), at most BLOCK_ROWS."""
    return int(min(BLOCK_ROWS, max(64, -(-int(n) // 64))))


def row_chunks(indptr: np.ndarray, n_chunks: int, block_rows: int) -> np.ndarray:
    """Chunk boundaries over rows, on block boundaries, balancing nnz + rows; length n_chunks + 1."""
    n = indptr.shape[0] - 1
    n_blocks = max(1, -(-n // block_rows))
    n_chunks = max(1, min(int(n_chunks), n_blocks))
    starts = np.minimum(np.arange(n_blocks + 1, dtype=np.int64) * block_rows, n)
    cost = indptr[starts].astype(np.float64) + starts  # cumulative nnz + rows at block starts
    bounds = [0]
    for q in range(1, n_chunks):
        target = cost[-1] * q / n_chunks
        b = int(np.searchsorted(cost, target))
        b = min(max(b, bounds[-1] + 1), n_blocks - (n_chunks - q))
        bounds.append(b)
    bounds.append(n_blocks)
    return np.array([starts[b] for b in bounds], dtype=np.int64)


def cut_segments(indptr: np.ndarray, n_features: int) -> np.ndarray:
    """Fixed row segments of the cut sum, balanced by nnz: a function of the data only, never of p.

    MAX_CUT_SEGMENTS segments, fewer when the (segments x features) buffers would exceed
    CUT_BUFFER_ENTRIES floats (then fewer processes share the cut sum).
    """
    n = indptr.shape[0] - 1
    K = int(max(1, min(MAX_CUT_SEGMENTS, n, CUT_BUFFER_ENTRIES // max(1, n_features))))
    cost = indptr.astype(np.float64) + np.arange(n + 1)
    bounds = [0]
    for k in range(1, K):
        b = int(np.searchsorted(cost, cost[-1] * k / K))
        bounds.append(min(max(b, bounds[-1]), n))
    bounds.append(n)
    return np.array(bounds, dtype=np.int64)


def segment_groups(n_segments: int, n_processes: int) -> list[tuple[int, int]]:
    """Contiguous groups of segments, one per process (some empty when segments < processes)."""
    edges = np.linspace(0, n_segments, n_processes + 1).round().astype(int)
    return [(int(edges[q]), int(edges[q + 1])) for q in range(n_processes)]


# ---------------------------------------------------------------------------------------------
# operations run on one chunk: op(arrays, *args) -> small picklable result
# ---------------------------------------------------------------------------------------------


def op_outputs_prep(a, row_start, row_end, B, C, block_rows):
    """OCAS subtasks 'output computation' and 'line-search sort' on one row chunk.

    Returns (count, output wall s, sort wall s, output CPU s, sort CPU s): CPU seconds of this
    thread show how much of the wall time the process actually ran (the machine may be shared).
    """
    t0, c0 = time.perf_counter(), time.thread_time()
    _pass_outputs(a["indptr"], a["indices"], a["data"], a["w"], B, row_start, row_end, a["o_t"])
    t1, c1 = time.perf_counter(), time.thread_time()
    count = _ocas_prep(a["y"], a["o_b"], a["o_t"], C, row_start, row_end, block_rows,
                       a["slope_blocks"], a["keys"], a["wts"])
    t2, c2 = time.perf_counter(), time.thread_time()
    return int(count), t1 - t0, t2 - t1, c1 - c0, c2 - c1


def op_update(a, row_start, row_end, k, lam, block_rows):
    """OCAS best-so-far outputs, cut rows at w_c and block sums on one row chunk."""
    t0 = time.perf_counter()
    _ocas_update(a["y"], a["o_b"], a["o_t"], k, lam, row_start, row_end, block_rows, a["gamma"],
                 a["hinge_blocks"], a["count_blocks"], a["gsum_blocks"])
    return time.perf_counter() - t0


def op_cut_parts(a, seg_start, seg_end):
    """OCAS subtask 'cut sum' for the fixed row segments [seg_start, seg_end). Returns (wall s, CPU s)."""
    t0, c0 = time.perf_counter(), time.thread_time()
    _pass_cut_parts(a["indptr"], a["indices"], a["data"], a["gamma"], a["seg_bounds"], seg_start, seg_end,
                    a["z_parts"])
    return time.perf_counter() - t0, time.thread_time() - c0


def op_outputs(a, row_start, row_end, B, block_rows):
    """Outputs of w into o_t and block hinge sums (used for the start and the final exact objective)."""
    t0 = time.perf_counter()
    _pass_outputs(a["indptr"], a["indices"], a["data"], a["w"], B, row_start, row_end, a["o_t"])
    _hinge_blocks(a["y"], a["o_t"], row_start, row_end, block_rows, a["hinge_blocks"])
    return time.perf_counter() - t0


def op_ping(a):
    """Touch the kernels so that a helper loads them from numba's cache before timing starts."""
    warm_up()
    return 0.0


OPS = {
    "outputs_prep": op_outputs_prep,
    "update": op_update,
    "cut_parts": op_cut_parts,
    "outputs": op_outputs,
    "ping": op_ping,
}


# ---------------------------------------------------------------------------------------------
# shared memory and the pool
# ---------------------------------------------------------------------------------------------


class SharedData:
    """Named numpy arrays living in multiprocessing.shared_memory segments owned by this process."""

    def __init__(self) -> None:
        self._segments: list[shared_memory.SharedMemory] = []
        self.arrays: dict[str, np.ndarray] = {}
        self.specs: dict[str, tuple[str, str, tuple[int, ...]]] = {}

    def put(self, name: str, array: np.ndarray) -> np.ndarray:
        """Copy array into a new segment and return the shared view."""
        array = np.ascontiguousarray(array)
        view = self.empty(name, array.shape, array.dtype)
        view[...] = array
        return view

    def empty(self, name: str, shape, dtype) -> np.ndarray:
        """A new shared array (zero-filled by the OS)."""
        dtype = np.dtype(dtype)
        shape = tuple(int(s) for s in np.atleast_1d(shape))
        size = max(1, int(np.prod(shape)) * dtype.itemsize)
        seg = shared_memory.SharedMemory(create=True, size=size)
        self._segments.append(seg)
        view = np.ndarray(shape, dtype=dtype, buffer=seg.buf)
        self.arrays[name] = view
        self.specs[name] = (seg.name, dtype.str, shape)
        return view

    def close(self) -> None:
        """Drop the views, close and unlink every segment."""
        self.arrays = {}
        for seg in self._segments:
            try:
                seg.close()
            except BufferError:  # a view is still referenced somewhere; unlink anyway
                pass
            try:
                seg.unlink()
            except FileNotFoundError:
                pass
        self._segments = []


def start_method() -> str:
    """'fork' when numba runs on its fork-safe 'workqueue' threading layer (as in the workers), else 'spawn'.

    A forked helper starts in milliseconds with every kernel already loaded; a spawned one imports
    numba and loads the kernels from the cache first (one to three seconds).
    """
    import os
    import sys

    if sys.platform.startswith("linux") and os.environ.get("NUMBA_THREADING_LAYER") == "workqueue":
        return "fork"
    return "spawn"


def _worker_main(conn, specs) -> None:
    """Helper process: attach the segments once, then run commands until told to stop."""
    import signal

    # A forked helper inherits the worker's Python signal handlers: it must simply die when told to.
    for number in (signal.SIGTERM, signal.SIGALRM):
        signal.signal(number, signal.SIG_DFL)
    segments = []
    arrays = {}
    try:
        for name, (seg_name, dtype, shape) in specs.items():
            seg = shared_memory.SharedMemory(name=seg_name)
            segments.append(seg)
            arrays[name] = np.ndarray(shape, dtype=np.dtype(dtype), buffer=seg.buf)
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                break
            if msg is None:
                break
            op, args = msg
            try:
                conn.send(("ok", OPS[op](arrays, *args)))
            except Exception:  # report, the main process raises
                conn.send(("error", traceback.format_exc()))
    finally:
        arrays.clear()
        for seg in segments:
            try:
                seg.close()
            except BufferError:
                pass
        conn.close()


class WorkerPool:
    """The main process plus n_processes - 1 spawned helpers, each owning one chunk of every pass."""

    def __init__(self, shared: SharedData, n_processes: int) -> None:
        self.shared = shared
        self.n_processes = int(n_processes)
        self._procs = []
        self._conns = []
        ctx = get_context(start_method())
        try:
            for _ in range(self.n_processes - 1):
                parent, child = ctx.Pipe(duplex=True)
                proc = ctx.Process(target=_worker_main, args=(child, shared.specs), daemon=True)
                proc.start()
                child.close()
                self._procs.append(proc)
                self._conns.append(parent)
            self.run("ping", [()] * self.n_processes)
        except BaseException:
            self.close()
            raise

    def run(self, op: str, args_per_chunk: list[tuple]) -> list:
        """Run op on every chunk (chunk 0 here, chunk q in helper q - 1) and return the results."""
        for conn, args in zip(self._conns, args_per_chunk[1:]):
            conn.send((op, args))
        results = [OPS[op](self.shared.arrays, *args_per_chunk[0])]
        errors = []
        for conn in self._conns:
            status, value = conn.recv()
            if status != "ok":
                errors.append(value)
            results.append(value)
        if errors:
            raise RuntimeError("a cutting-plane helper process failed:\n" + errors[0])
        return results

    def close(self) -> None:
        """Stop and join every helper; terminate those that do not exit within a few seconds."""
        for conn in self._conns:
            try:
                conn.send(None)
            except (OSError, BrokenPipeError):
                pass
        for proc in self._procs:
            proc.join(timeout=5.0)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5.0)
        for conn in self._conns:
            conn.close()
        self._procs = []
        self._conns = []


def warm_up() -> None:
    """Compile every kernel of this module on a tiny problem."""
    indptr = np.array([0, 2, 3, 4], dtype=np.int64)
    indices = np.array([0, 1, 1, 0], dtype=np.int32)
    data = np.array([1.0, -1.0, 2.0, 0.5])
    y = np.array([1.0, -1.0, 1.0])
    w = np.array([0.3, -0.2, 0.1])
    o_b = np.zeros(3)
    o_t = np.zeros(3)
    _pass_outputs(indptr, indices, data, w, 1.0, 0, 3, o_t)
    z = np.zeros(3)
    _pass_cut_rows(indptr, indices, data, y, 0, 3, z)
    seg = np.array([0, 2, 3], dtype=np.int64)
    parts = np.zeros((2, 2))
    _pass_cut_parts(indptr, indices, data, y, seg, 0, 2, parts)
    _sum_parts(parts, z)
    blocks = np.zeros(1)
    keys = np.zeros(3)
    wts = np.zeros(3)
    count = _ocas_prep(y, o_b, o_t, 1.0, 0, 3, BLOCK_ROWS, blocks, keys, wts)
    _ocas_sweep(keys, wts, np.zeros(1, dtype=np.int64), np.array([count], dtype=np.int64), 1.0, -1.0)
    gamma = np.zeros(3)
    _ocas_update(y, o_b, o_t, 0.5, 0.1, 0, 3, BLOCK_ROWS, gamma, blocks, blocks.copy(), blocks.copy())
    _hinge_blocks(y, o_t, 0, 3, BLOCK_ROWS, blocks)
