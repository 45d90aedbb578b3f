"""The data of a cutting-plane solve that does not fit in the memory the job may use, read from its files in
passes (``StreamedData``): ocas and cpa out of core.

An ocas or cpa iteration touches the data only in passes (``worker.solvers.data_passes``): a *gather* of the
outputs <x_i, w> of every row, and a *scatter* of a cut's rows into a vector over the features. Neither
needs the rows at once, only in order. So a data set larger than the job's memory (``memory_bytes``) trains
by holding what it can and reading the rest, block by block, from the worker cache's files on every pass:

* **packed rows**: when the solve starts, the rows are rewritten once into an unnamed scratch file beside the
  data set's, every index as its 16-bit gap from the previous one (an escape for the rare gap past 65,535):
  6 bytes a non-zero instead of 8 with float32 values, a quarter less to read on every pass and a third more
  rows held in memory (``PackedRows``; data whose indices do not pack smaller is read as stored);
* **pinned rows**: the first rows, as many as fit in ``memory_bytes`` less two blocks, copied into memory
  once (a copy, not the memory map: pages of a map are evicted by the kernel's LRU, which on a cyclic pass
  over data larger than memory evicts exactly the page needed next, so that every pass would read all of the
  data from disk);
* **streamed rows**: the rest, in blocks of at most ``block_nnz`` non-zeros, read into one of two buffers while
  the other is computed on (a thread reads the next block in pieces, several at once; the kernels and the read
  overlap), with ``O_DIRECT`` where the file system has it (no copy through the page cache, which costs a
  core's worth of CPU at the disk's speed; elsewhere the pages are dropped after the read). Successive gathers
  walk the blocks in alternate directions and the blocks still in the buffers are not read again. A scatter
  over few rows of a block reads those rows alone.

The sums are the in-memory ones bit for bit: a gather's row sums do not depend on the order of the rows,
and a scatter adds the rows in the order listed, block after block, as ``scatter_rows`` does over the whole
data. What it costs: every streamed byte read from disk once per pass, at the disk's sequential speed, and the
packing's one read and write when the solve starts. An ocas iteration is one pass and a few rows: its next cut
is guessed during the pass for the outputs of w_t (``outputs``' guess, ``cut_data.CurrentCut.guess``),
so that the cut's own scatter reads only the rows the guess got wrong (up to rounding, the cut's sum is then
taken in another order); tests/benchmarks/README.md ("Out of core") has the figures.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from worker.solvers.data_files import (
    DIRECT_ALIGN,
    READ_THREADS,
    ArraySource,
    NotSmaller,
    PackedRows,
    aligned_buffer,
    buffer_bytes,
)
from worker.solvers.data_passes import (
    gather_outputs,
    gather_packed,
    pack_rows,
    row_chunks,
    scatter_guess,
    scatter_packed,
    scatter_rows,
)

BLOCK_NNZ = 4_194_304
"""Non-zeros per streamed block (at most; a longer row is a block of its own): 32-48 MB a buffer."""
ROW_STATE_BYTES = 128
"""Memory a solve takes per row besides the data, unless it says its own (``row_bytes``; ocas: ``OCAS_ROW_BYTES``):
cpa's outputs, cut coefficients and rows, its pairs' counts, the incremental cut's rows and the listed rows'
copies, the labels, the blocks' row pointers: about 16 numbers."""
FEATURE_STATE_BYTES = 64
"""Memory a solve takes per feature besides the cuts (w_t, w_b, the newest cut, temporaries: about 8 numbers)."""
MIN_CUT_ROOM = 16
"""Cuts the first pinned blocks leave room for (each 8 bytes a feature, or 9 a row in the outputs form)."""
PACK_INDICES = True
"""Whether the streamed rows are rewritten with 16-bit index gaps when the solve starts (``PackedRows``)."""
PACK_GAIN = 0.9
"""The packed rows are read instead of the data set's files when they take at most this share of their bytes."""
GAP_PTR_BYTES = 8
"""Memory a row takes when its rows are packed: where its gaps start (int64)."""
ROW_READ_BYTES = 128 << 10
"""A row read alone (two reads: its indices or gaps, its values) costs about as long as reading this many bytes
in sequence (here a random 8 KB read with O_DIRECT took 71 us, against 1.5-1.8 GB/s in sequence): a scatter reads
a block's listed rows one by one when that costs less than reading the block."""


def csr_bytes(indices: np.ndarray, data: np.ndarray) -> int:
    """The bytes of a CSR's indices and values (what a solve holds in memory for the data)."""
    return int(indices.shape[0]) * (indices.itemsize + data.itemsize)


def state_bytes(n: int, d: int, row_bytes: int = ROW_STATE_BYTES) -> int:
    """Memory a solve over n rows and d features takes besides the data and the cuts (``row_bytes`` a row)."""
    return row_bytes * n + FEATURE_STATE_BYTES * (d + 1)


def memory_room(n: int, d: int, memory_bytes: int, row_bytes: int = ROW_STATE_BYTES) -> int:
    """What is left of ``memory_bytes`` for the data, once the solve's vectors and MIN_CUT_ROOM cuts are counted."""
    return int(memory_bytes) - state_bytes(n, d, row_bytes) - MIN_CUT_ROOM * min(8 * (d + 1), 9 * n)


class StreamedData:
    """The CSR of a solve with its first rows in memory and the rest read from disk on every pass; the same
    interface as ``cut_data.Data`` for the cut stores and the solvers (module docstring)."""

    kind = "streamed"

    def __init__(
        self,
        indptr,
        indices,
        data,
        n_features,
        B,
        chunks,
        n_threads,
        memory_bytes,
        block_nnz=None,
        row_bytes: int = ROW_STATE_BYTES,
        guess_cuts: bool = False,
    ):
        self.indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        self.n = self.indptr.shape[0] - 1
        self.d = int(n_features)
        self.B = float(B)
        self.chunks = chunks
        self.n_threads = int(n_threads)
        self.serial = self.n_threads == 1
        self.nnz = int(self.indptr[-1])
        self.index_bytes = indices.itemsize
        self.value_bytes = data.itemsize
        self.columns_state = -1  # never a column copy: it would hold the data in memory
        per_nnz = self.index_bytes + self.value_bytes
        block_nnz = max(1, int(BLOCK_NNZ if block_nnz is None else block_nnz))
        # blocks: row ranges of at most block_nnz non-zeros (a longer row alone)
        starts = [0]
        row = 0
        while row < self.n:
            limit = self.indptr[row] + block_nnz
            end = min(self.n, max(row + 1, int(np.searchsorted(self.indptr, limit, side="right")) - 1))
            starts.append(end)
            row = end
        self.block_starts = np.array(starts, dtype=np.int64)
        self.n_blocks = len(starts) - 1
        self.block_indptr = [
            self.indptr[r0 : r1 + 1] - self.indptr[r0] for r0, r1 in zip(starts[:-1], starts[1:], strict=True)
        ]
        self.block_chunks = [row_chunks(local) for local in self.block_indptr]
        biggest = max((int(local[-1]) for local in self.block_indptr), default=0)
        self._indices = ArraySource(indices)
        self._data = ArraySource(data)
        self._index_dtype, self._value_dtype = indices.dtype, data.dtype
        # a buffer: the indices' part, then the values' from the next aligned byte (or a packed block's bytes)
        self._values_at = -(-buffer_bytes(biggest, indices.itemsize) // DIRECT_ALIGN) * DIRECT_ALIGN
        self._buffers = [aligned_buffer(self._values_at + buffer_bytes(biggest, data.itemsize)) for _ in range(2)]
        self._views: list[tuple[np.ndarray, np.ndarray]] = [(np.empty(0), np.empty(0))] * 2
        self._held = [-1, -1]  # the block each buffer holds
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hinge-stream")
        self._io = ThreadPoolExecutor(max_workers=READ_THREADS, thread_name_prefix="hinge-read")
        self._forward = True
        self.passes = 0
        self.read_bytes = 0
        self.released_blocks = 0
        self.repinned_blocks = 0
        self.pack_seconds = 0.0
        # what the solve may hold: memory_bytes, less its vectors over the rows and the features and the two
        # buffers; the first blocks that fit are pinned (copied into memory), the cuts take the rest
        self.memory_limit = int(memory_bytes)
        self.reserved = state_bytes(self.n, self.d, row_bytes) + 2 * biggest * per_nnz
        self.cut_bytes = 0
        # OCAS's cut guessed in a gather (``outputs``, ``guess_cuts``): a partial sum over the features for each
        # thread (nothing reserved for a solver that guesses none: cpa)
        self._parts: np.ndarray | None = None
        self.guess_cuts = bool(guess_cuts)
        parts_bytes = 8 * (self.d + 1) * max(1, self.n_threads) if self.guess_cuts else 0
        self.reserved += parts_bytes
        self._no_indices = np.zeros(0, dtype=self._index_dtype)
        self._no_gaps = np.zeros(0, dtype=np.uint16)
        self._no_indptr = np.zeros(0, dtype=np.int64)
        room = memory_room(self.n, self.d, self.memory_limit, row_bytes) - 2 * biggest * per_nnz - parts_bytes
        self.pinned: list[tuple[np.ndarray, np.ndarray]] = []
        self.packed: PackedRows | None = None
        if PACK_INDICES and self._indices.from_file and self._data.from_file and self.d < 2**32:
            self.packed = self._pack(room - GAP_PTR_BYTES * (self.n + self.n_blocks))
        if self.packed is not None:
            self.reserved += GAP_PTR_BYTES * (self.n + self.n_blocks)
            self.block_bytes = [
                2 * self.packed.n_gaps[b] + int(self.block_indptr[b][-1]) * self.value_bytes
                for b in range(self.n_blocks)
            ]
        else:
            self.block_bytes = [int(local[-1]) * per_nnz for local in self.block_indptr]
            held = 0
            for b in range(self.n_blocks):
                if held + self.block_bytes[b] > room:
                    break
                s0, s1 = int(self.indptr[starts[b]]), int(self.indptr[starts[b + 1]])
                self.pinned.append((np.array(indices[s0:s1]), np.array(data[s0:s1])))
                held += self.block_bytes[b]
        self.cut_memory = max(0, self.memory_limit - self.reserved)
        """Bytes against which the cut store's share is counted (``cut_data.cut_budget``): the solve's memory less
        its vectors; cuts past what the pinned rows leave take pinned rows back (``make_room``)."""

    def _pack(self, room: int) -> PackedRows | None:
        """Rewrite the rows into a ``PackedRows`` file, block by block (the next block read while the current
        one is packed and written), pinning the first packed blocks that fit in ``room``; None (and nothing
        pinned) where the packed rows would not be at least PACK_GAIN smaller than the data set's."""
        started = time.perf_counter()
        biggest = max(int(local[-1]) for local in self.block_indptr) if self.n_blocks else 0
        gaps = np.empty(3 * biggest, dtype=np.uint16)
        staging = aligned_buffer(PackedRows.region(3 * biggest, biggest, self.value_bytes)[1])
        slot_bytes = self._buffers[0].shape[0]
        held = 0
        raw = packed_total = 0
        packed: PackedRows | None = None
        try:
            packed = PackedRows(os.path.dirname(self._indices.filename) or ".", self._value_dtype)
            for b, idx, val in self._blocks(range(self.n_blocks), count=False):
                local = self.block_indptr[b]
                gap_ptr = np.empty(local.shape[0], dtype=np.int64)
                n_gaps = pack_rows(local, idx, gap_ptr, gaps)
                if PackedRows.region(n_gaps, val.shape[0], self.value_bytes)[1] > slot_bytes:
                    raise NotSmaller  # a block of far-apart features: it would not fit a read buffer
                packed.append(gap_ptr, gaps[:n_gaps], val, staging)
                size = 2 * n_gaps + val.nbytes
                raw += idx.nbytes + val.nbytes
                packed_total += size
                if held + size <= room and len(self.pinned) == b:
                    self.pinned.append((gaps[:n_gaps].copy(), val.copy()))
                    held += size
            if packed_total > PACK_GAIN * raw:
                raise NotSmaller
        except (NotSmaller, OSError):  # no gain, or no room for the scratch file: the data set's own files
            if packed is not None:
                packed.close()
            self.pinned = []
            return None
        finally:
            self._held = [-1, -1]  # the buffers hold the data set's rows, not packed ones
        packed.finish()
        self.pack_seconds = time.perf_counter() - started
        return packed

    @property
    def pinned_rows(self) -> int:
        """Rows held in memory (the first ones)."""
        return int(self.block_starts[len(self.pinned)])

    @property
    def memory_bytes(self) -> int:
        """Bytes of the rows held in memory."""
        return sum(self.block_bytes[: len(self.pinned)])

    @property
    def streamed_bytes(self) -> int:
        """Bytes of the rows read from disk on every pass."""
        return sum(self.block_bytes[len(self.pinned) :])

    def can_hold(self, cut_bytes: int) -> bool:
        """Whether ``cut_bytes`` of cuts fit in the solve's memory, once every pinned row went back to disk."""
        return self.reserved + int(cut_bytes) <= self.memory_limit

    def _room_for(self, b: int) -> bool:
        """Whether block b fits in memory besides the pinned blocks and the cuts, with room for two more cuts."""
        slack = 2 * min(8 * (self.d + 1), 9 * self.n)
        return self.reserved + self.memory_bytes + self.block_bytes[b] + self.cut_bytes + slack <= self.memory_limit

    def make_room(self, cut_bytes: int) -> None:
        """The cut store is about to hold ``cut_bytes``: give back pinned blocks, the last first, until the data
        and the cuts fit in the solve's memory (while any is left: past that the cuts take more)."""
        self.cut_bytes = int(cut_bytes)
        while self.pinned and self.reserved + self.memory_bytes + self.cut_bytes > self.memory_limit:
            self.pinned.pop()
            self.released_blocks += 1

    # -- reading -----------------------------------------------------------------------------------

    def _read_block(self, b: int, slot: int, count: bool = True) -> None:
        r0, r1 = int(self.block_starts[b]), int(self.block_starts[b + 1])
        s0, s1 = int(self.indptr[r0]), int(self.indptr[r1])
        buffer = self._buffers[slot]
        self._held[slot] = -1
        if self.packed is not None and self.packed.file is not None:
            self._views[slot] = self.packed.block(b, s1 - s0, buffer, self._io)
            n_bytes = self.block_bytes[b]
        else:
            self._views[slot] = (
                self._indices.block(s0, s1 - s0, buffer[: self._values_at], self._io),
                self._data.block(s0, s1 - s0, buffer[self._values_at :], self._io),
            )
            n_bytes = (s1 - s0) * (self.index_bytes + self.value_bytes)
        self._held[slot] = b
        if count:
            self.read_bytes += n_bytes

    def _blocks(self, order, count: bool = True):
        """Yield (block, indices or gaps, values) for the blocks in ``order``: a pinned block from memory, the others
        from disk, the next one read while the caller computes on the current one (the first one while the caller
        computes on the pinned blocks); a block still held in a buffer is not read again. A block read just after
        the pinned ones is pinned again (a copy of the buffer, no read) when the memory the cuts leave has room for
        it: pinned blocks given back while the cut store grew (its copy holds both) come back as it settles."""
        order = list(order)
        n_pinned = len(self.pinned)
        streamed = [b for b in order if b >= n_pinned]
        pending: Future | None = None
        slot = 0
        if streamed:
            first = streamed[0]
            if first in self._held:
                slot = self._held.index(first)
            else:
                pending = self._reader.submit(self._read_block, first, slot, count)
        position = 0
        try:
            for b in order:
                if b < n_pinned:
                    yield b, *self.pinned[b]
                    continue
                if pending is not None:
                    pending.result()
                    pending = None
                nxt = streamed[position + 1] if position + 1 < len(streamed) else None
                position += 1
                other = 1 - slot
                if nxt is not None and self._held[other] != nxt:
                    pending = self._reader.submit(self._read_block, nxt, other, count)
                if count and b == len(self.pinned) and self._room_for(b):
                    self.pinned.append((self._views[slot][0].copy(), self._views[slot][1].copy()))
                    self.repinned_blocks += 1
                yield b, *self._views[slot]
                slot = other
        finally:
            if pending is not None:
                pending.result()

    # -- the passes ----------------------------------------------------------------------------------

    def outputs(self, w: np.ndarray, out: np.ndarray, guess=None) -> None:
        """out = X_aug w for w of length d + 1 (last entry: the bias weight). ``guess`` (a ``cut_data.CutGuess``):
        OCAS's next cut guessed in the same pass, from each block's outputs (``data_passes.scatter_guess``)."""
        w_bias = self.B * float(w[self.d])
        n_pinned = len(self.pinned)
        streamed = range(n_pinned, self.n_blocks) if self._forward else range(self.n_blocks - 1, n_pinned - 1, -1)
        self._forward = not self._forward
        self.passes += 1
        parts = self._parts
        if guess is not None:
            if not self.guess_cuts:
                raise ValueError("outputs with a guess on data made without guess_cuts (no room was reserved for it)")
            if parts is None:
                self._parts = parts = np.zeros((max(1, self.n_threads), self.d + 1))
            else:
                parts.fill(0.0)
        for b, idx, val in self._blocks([*range(n_pinned), *streamed]):
            r0, r1 = int(self.block_starts[b]), int(self.block_starts[b + 1])
            gap_ptr = self.packed.gap_ptr[b] if self.packed is not None else None
            if gap_ptr is not None:
                gather_packed(
                    self.block_indptr[b], gap_ptr, idx, val, w, w_bias, self.block_chunks[b], out[r0:r1], self.serial
                )
            else:
                gather_outputs(self.block_indptr[b], idx, val, w, w_bias, self.block_chunks[b], out[r0:r1], self.serial)
            if guess is not None:
                if gap_ptr is not None:
                    rows = (self._no_indices, val, gap_ptr, idx)  # (indices, values, gap_ptr, gaps)
                else:
                    rows = (idx, val, self._no_indptr, self._no_gaps)
                span = slice(r0, r1)
                scatter_guess(
                    self.block_indptr[b],
                    *rows,
                    self.block_chunks[b],
                    out[span],
                    guess.k,
                    guess.lam,
                    guess.y[span],
                    guess.o_b[span],
                    guess.previous[span],
                    guess.rebuild,
                    parts,
                )
        if guess is not None and parts is not None:
            z = guess.z
            for part in parts:  # in order: the same sums for the same threads
                z += part

    def cut_outputs(self, z: np.ndarray, out: np.ndarray) -> None:
        """out = X_aug z (no column copy out of core: the row-wise gather)."""
        self.outputs(z, out)

    def scatter(self, coef, rows, n_rows, z) -> None:
        """z[f] += sum_q coef[rows[q]] * x_{rows[q], f} over q < n_rows, rows in increasing order (added in that
        order, block after block: the in-memory sums bit for bit)."""
        rows = rows[:n_rows]
        if n_rows == 0:
            return
        if np.any(rows[1:] < rows[:-1]):
            raise ValueError("rows of a streamed scatter must be in increasing order")
        bounds = np.searchsorted(rows, self.block_starts)
        listed = [b for b in range(self.n_blocks) if bounds[b + 1] > bounds[b]]
        n_pinned = len(self.pinned)
        by_rows = {b for b in listed if b >= n_pinned and self._few_rows(b, rows[bounds[b] : bounds[b + 1]])}
        blocks = self._blocks([b for b in listed if b not in by_rows])
        for b in listed:
            r0, r1 = int(self.block_starts[b]), int(self.block_starts[b + 1])
            local = rows[bounds[b] : bounds[b + 1]] - r0
            if b in by_rows:
                self._scatter_rows_read(b, local, coef[r0:r1], z)
                continue
            got, idx, val = next(blocks)
            assert got == b
            if self.packed is not None:
                scatter_packed(
                    self.block_indptr[b], self.packed.gap_ptr[b], idx, val, coef[r0:r1], local, local.shape[0], z
                )
            else:
                scatter_rows(self.block_indptr[b], idx, val, coef[r0:r1], local, local.shape[0], z)
        blocks.close()

    def _few_rows(self, b: int, rows: np.ndarray) -> bool:
        """Whether a scatter reads block b's listed rows one by one (ROW_READ_BYTES) rather than the block."""
        if b in self._held:
            return False
        return rows.shape[0] * ROW_READ_BYTES < self.block_bytes[b]

    def _scatter_rows_read(self, b: int, local: np.ndarray, coef, z) -> None:
        """Scatter the listed rows of block b (``local``: their numbers in the block; ``coef``: the block's rows'),
        reading them alone."""
        rows = np.arange(local.shape[0])
        sub_coef = np.ascontiguousarray(coef[local])
        if self.packed is not None:
            indptr, gap_ptr, gaps, val = self.packed.rows(b, self.block_indptr[b], local)
            self.read_bytes += gaps.nbytes + val.nbytes
            scatter_packed(indptr, gap_ptr, gaps, val, sub_coef, rows, local.shape[0], z)
            return
        block_indptr = self.block_indptr[b]
        counts = block_indptr[local + 1] - block_indptr[local]
        s0 = int(self.indptr[int(self.block_starts[b])])
        indptr = np.zeros(local.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        idx = np.empty(int(indptr[-1]), dtype=self._index_dtype)
        val = np.empty(int(indptr[-1]), dtype=self._value_dtype)
        for q in range(local.shape[0]):
            a, e = int(indptr[q]), int(indptr[q + 1])
            if e > a:
                first = s0 + int(block_indptr[local[q]])
                self._indices.read(first, idx[a:e])
                self._data.read(first, val[a:e])
        self.read_bytes += idx.nbytes + val.nbytes
        scatter_rows(indptr, idx, val, sub_coef, rows, local.shape[0], z)

    def weights(self, coef: np.ndarray) -> np.ndarray:
        """X_aug^T coef as a dense vector of length d + 1 (the rows with coef != 0)."""
        rows = np.flatnonzero(coef)
        w = np.zeros(self.d + 1)
        self.scatter(coef, rows, rows.shape[0], w)
        w[self.d] = self.B * float(np.sum(coef))
        return w

    def describe(self) -> dict:
        """What the trace's ``extra`` says of the data: held and streamed bytes, blocks, passes, bytes read, and
        whether (and in how long) the rows were packed."""
        return {
            "form": "streamed",
            "pinned_rows": self.pinned_rows,
            "memory_bytes": self.memory_bytes,
            "streamed_bytes": self.streamed_bytes,
            "blocks": self.n_blocks,
            "released_blocks": self.released_blocks,
            "repinned_blocks": self.repinned_blocks,
            "passes": self.passes,
            "read_bytes": self.read_bytes,
            "packed": self.packed is not None,
            "pack_seconds": round(self.pack_seconds, 3),
        }

    def close(self) -> None:
        """Stop the reader threads and close the files (the scratch file of packed rows goes with its descriptor)."""
        self._reader.shutdown(wait=True)
        self._io.shutdown(wait=True)
        self._indices.close()
        self._data.close()
        if self.packed is not None:
            self.packed.close()
