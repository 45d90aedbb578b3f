"""The files a streamed solve reads (``streamed_data``): a data set's arrays by ranges of items, and the scratch
file of its rows packed with 16-bit index gaps.

Blocks are read with ``O_DIRECT`` where the file system allows it (offsets, lengths and buffers aligned to
DIRECT_ALIGN), in pieces of READ_PIECE bytes, READ_THREADS at once; elsewhere through the page cache, the pages
dropped after each read. Measured on this kind of machine (a virtual disk, a cold 3.2 GB file, 4 reads in
flight): 1.1-1.2 GB/s either way, 0.06 CPU-seconds a GB with ``O_DIRECT`` against 0.55 through the page cache.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import mmap
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np

READ_THREADS = 4
"""Reads in flight at once for a block, in pieces of READ_PIECE bytes: a virtual disk reads one stream at a fraction
of its speed (here 0.47 GB/s with one 8 MB read at a time, 1.5-1.7 GB/s with 2-8)."""
READ_PIECE = 8 << 20
DIRECT_ALIGN = 4096
"""Alignment of an ``O_DIRECT`` read's file offset, length and buffer (a page: what every file system takes)."""


class BlockFile:
    """A file read by byte ranges, with ``O_DIRECT`` (``direct``: offsets, lengths and buffers DIRECT_ALIGN-aligned,
    nothing through the page cache) or through the page cache (the pages dropped after each read)."""

    def __init__(self, fd: int, direct: bool) -> None:
        self.fd = fd
        self.direct = direct
        self.size = os.fstat(fd).st_size

    def read(self, view: memoryview, position: int, pool: ThreadPoolExecutor | None = None) -> None:
        """Fill ``view`` from ``position`` (the part past the end of the file is left as it is); with ``pool``, in
        pieces of READ_PIECE bytes read at once."""
        piece = -(-READ_PIECE // DIRECT_ALIGN) * DIRECT_ALIGN
        if pool is None or view.nbytes <= piece:
            self._read(view, position)
            return
        pieces = [pool.submit(self._read, view[a : a + piece], position + a) for a in range(0, view.nbytes, piece)]
        wait(pieces)  # every piece done before an error may close the descriptor
        for done in pieces:
            done.result()

    def _read(self, view: memoryview, position: int) -> None:
        done = 0
        while done < view.nbytes and position + done < self.size:
            got = os.preadv(self.fd, [view[done:]], position + done)
            if got <= 0:
                raise OSError(f"short read from {self.fd} at byte {position + done}")
            done += got
        if not self.direct:  # drop what was read from the page cache, whole pages only
            page = mmap.PAGESIZE
            lo = -(-position // page) * page
            hi = (position + done) // page * page
            if hi > lo:
                os.posix_fadvise(self.fd, lo, hi - lo, os.POSIX_FADV_DONTNEED)

    def span(self, position: int, n_bytes: int) -> np.ndarray:
        """The bytes [position, position + n_bytes) in a new array (a few rows' worth: read at once, aligned
        around them when direct)."""
        if not self.direct:
            out = np.empty(n_bytes, dtype=np.uint8)
            self._read(memoryview(out.data), position)
            return out
        lo = position // DIRECT_ALIGN * DIRECT_ALIGN
        hi = -(-(position + n_bytes) // DIRECT_ALIGN) * DIRECT_ALIGN
        cover = aligned_buffer(hi - lo)
        self._read(memoryview(cover.data), lo)
        return cover[position - lo : position - lo + n_bytes]

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class ArraySource:
    """One array read by ranges of items: from its file when it is a memory map of one, else by copying from the
    array.

    A block is read with ``O_DIRECT`` where the file system allows it: the disk writes straight into the buffer,
    with no copy through the page cache and nothing left in it to drop, which on this kind of machine costs
    0.06 CPU-seconds a GB against 0.55 through the cache (a core's worth of copying at the disk's speed, taken
    from the kernels the reads overlap). A few rows go through the page cache.
    """

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self.itemsize = array.itemsize
        self.cached: BlockFile | None = None
        self.direct: BlockFile | None = None
        self.offset = 0
        self.filename = ""
        owner: np.ndarray | None = array
        while owner is not None and not isinstance(owner, np.memmap):
            owner = owner.base if isinstance(owner.base, np.ndarray) else None
        filename = getattr(owner, "filename", None)
        if owner is not None and filename and array.flags.c_contiguous:
            start = array.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
            self.filename = str(filename)
            self.cached = BlockFile(os.open(filename, os.O_RDONLY), direct=False)
            self.offset = int(getattr(owner, "offset", 0)) + int(start)
            fd = open_direct(self.filename) if self.offset % self.itemsize == 0 else -1
            if fd >= 0:
                self.direct = BlockFile(fd, direct=True)

    def block(self, first: int, count: int, buffer: np.ndarray, pool: ThreadPoolExecutor) -> np.ndarray:
        """array[first : first + count], read into ``buffer`` (bytes, DIRECT_ALIGN-aligned, at least
        ``buffer_bytes(count, itemsize)`` long) and returned as a view of it."""
        size = count * self.itemsize
        if self.direct is None:
            out = buffer[:size].view(self.array.dtype)
            self.read(first, out, pool)
            return out
        position = self.offset + first * self.itemsize
        lo = position // DIRECT_ALIGN * DIRECT_ALIGN
        hi = -(-(position + size) // DIRECT_ALIGN) * DIRECT_ALIGN
        try:
            self.direct.read(memoryview(buffer[: hi - lo].data), lo, pool)
        except OSError as error:
            if error.errno != errno.EINVAL:
                raise
            # the file system took the open but not the read: through the page cache from now on
            self.direct.close()
            self.direct = None
            return self.block(first, count, buffer, pool)
        start = position - lo
        return buffer[start : start + size].view(self.array.dtype)

    def read(self, first: int, out: np.ndarray, pool: ThreadPoolExecutor | None = None) -> None:
        """out[:] = array[first : first + len(out)], through the page cache (or a copy of the array's items)."""
        if self.cached is None:
            np.copyto(out, self.array[first : first + out.shape[0]])
            return
        self.cached.read(memoryview(out.view(np.uint8).data), self.offset + first * self.itemsize, pool)

    @property
    def from_file(self) -> bool:
        """Whether the array is read from its file (a memory map of one)."""
        return self.cached is not None

    def close(self) -> None:
        for file in (self.cached, self.direct):
            if file is not None:
                file.close()


class NotSmaller(Exception):
    """The packed rows would not be smaller (``streamed_data.StreamedData``)."""


class PackedRows:
    """The streamed rows rewritten once, when the solve starts, into an unnamed scratch file beside the data
    set's: every block's indices as 16-bit gaps (``data_passes.pack_rows``), then its values, each part starting
    on a DIRECT_ALIGN boundary. On data whose rows' features are less than 65,536 apart (text, most sparse data
    with up to millions of features) a non-zero takes 2 + 4 bytes instead of 4 + 4: every pass reads a quarter
    less. Where the indices do not pack smaller, the solve reads the data set's own files
    (``streamed_data.StreamedData``). The file goes when it is closed or the process ends."""

    def __init__(self, directory: str, value_dtype: np.dtype) -> None:
        handle = tempfile.TemporaryFile(dir=directory)
        self.fd = os.dup(handle.fileno())
        handle.close()  # unnamed (O_TMPFILE or unlinked): the descriptor keeps it
        self.direct = set_direct(self.fd)
        self.value_dtype = np.dtype(value_dtype)
        self.offsets: list[int] = []
        self.n_gaps: list[int] = []
        self.gap_ptr: list[np.ndarray] = []
        self.size = 0
        self.file: BlockFile | None = None

    @staticmethod
    def region(n_gaps: int, nnz: int, value_bytes: int) -> tuple[int, int]:
        """(where the values start, the block's bytes in the file): both parts rounded up to DIRECT_ALIGN."""
        values_at = -(-2 * n_gaps // DIRECT_ALIGN) * DIRECT_ALIGN
        return values_at, values_at + -(-nnz * value_bytes // DIRECT_ALIGN) * DIRECT_ALIGN

    def append(self, gap_ptr: np.ndarray, gaps: np.ndarray, values: np.ndarray, staging: np.ndarray) -> None:
        """Write one block (its gaps and values) at the end of the file, through the aligned ``staging`` bytes."""
        n_gaps = int(gaps.shape[0])
        values_at, total = self.region(n_gaps, values.shape[0], values.itemsize)
        out = staging[:total]
        out[: 2 * n_gaps] = gaps.view(np.uint8)
        out[2 * n_gaps : values_at] = 0
        out[values_at : values_at + values.nbytes] = values.view(np.uint8)
        out[values_at + values.nbytes :] = 0
        view = memoryview(out.data)
        done = 0
        while done < total:
            done += os.pwritev(self.fd, [view[done:]], self.size + done)
        self.offsets.append(self.size)
        self.n_gaps.append(n_gaps)
        self.gap_ptr.append(gap_ptr)
        self.size += total

    def finish(self) -> None:
        """Written: from now on read (the pages a write left in the page cache dropped)."""
        if not self.direct:
            os.fsync(self.fd)
            os.posix_fadvise(self.fd, 0, 0, os.POSIX_FADV_DONTNEED)
        self.file = BlockFile(self.fd, self.direct)

    def block(self, b: int, nnz: int, buffer: np.ndarray, pool: ThreadPoolExecutor) -> tuple[np.ndarray, np.ndarray]:
        """Block b's (gaps, values), read into ``buffer`` and returned as views of it."""
        assert self.file is not None
        values_at, total = self.region(self.n_gaps[b], nnz, self.value_dtype.itemsize)
        self.file.read(memoryview(buffer[:total].data), self.offsets[b], pool)
        return self.split(buffer, b, nnz)

    def split(self, region: np.ndarray, b: int, nnz: int) -> tuple[np.ndarray, np.ndarray]:
        """(gaps, values) of block b's bytes as written in the file (``region``)."""
        values_at, _ = self.region(self.n_gaps[b], nnz, self.value_dtype.itemsize)
        gaps = region[: 2 * self.n_gaps[b]].view(np.uint16)
        values = region[values_at : values_at + nnz * self.value_dtype.itemsize].view(self.value_dtype)
        return gaps, values

    def rows(self, b: int, block_indptr: np.ndarray, local: np.ndarray):
        """The listed rows of block b alone (``local``: their numbers in the block), read row by row: (indptr,
        gap_ptr, gaps, values) of those rows as a packed CSR of their own."""
        assert self.file is not None
        gap_ptr = self.gap_ptr[b]
        values_at, _ = self.region(self.n_gaps[b], int(block_indptr[-1]), self.value_dtype.itemsize)
        counts = block_indptr[local + 1] - block_indptr[local]
        gap_counts = gap_ptr[local + 1] - gap_ptr[local]
        indptr = np.zeros(local.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        sub_gap_ptr = np.zeros(local.shape[0] + 1, dtype=np.int64)
        np.cumsum(gap_counts, out=sub_gap_ptr[1:])
        gaps = np.empty(int(sub_gap_ptr[-1]), dtype=np.uint16)
        values = np.empty(int(indptr[-1]), dtype=self.value_dtype)
        vb = self.value_dtype.itemsize
        base = self.offsets[b]
        for q, r in enumerate(local.tolist()):
            if counts[q] == 0:
                continue
            g0, g1 = int(sub_gap_ptr[q]), int(sub_gap_ptr[q + 1])
            gaps[g0:g1] = self.file.span(base + 2 * int(gap_ptr[r]), 2 * (g1 - g0)).view(np.uint16)
            v0, v1 = int(indptr[q]), int(indptr[q + 1])
            values[v0:v1] = self.file.span(base + values_at + vb * int(block_indptr[r]), vb * (v1 - v0)).view(
                self.value_dtype
            )
        return indptr, sub_gap_ptr, gaps, values

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def open_direct(filename: str) -> int:
    """A descriptor of ``filename`` for reads that bypass the page cache, or -1 where that is not to be had
    (no ``O_DIRECT`` on this system or this file system, e.g. tmpfs)."""
    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return -1
    try:
        return os.open(filename, os.O_RDONLY | flag)
    except OSError:
        return -1


def set_direct(fd: int) -> bool:
    """Turn ``O_DIRECT`` on for an open descriptor; whether the system and the file system took it (an aligned
    write and read of one page tried, as some take the flag and refuse the I/O)."""
    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return False
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | flag)
        probe = aligned_buffer(DIRECT_ALIGN)
        probe[:] = 0
        os.pwritev(fd, [memoryview(probe.data)], 0)
        os.preadv(fd, [memoryview(probe.data)], 0)
        return True
    except OSError:
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~flag)
        return False


def buffer_bytes(count: int, itemsize: int) -> int:
    """Bytes of a block buffer for ``count`` items: the items and an aligned page each side (``ArraySource.block``)."""
    return count * itemsize + 2 * DIRECT_ALIGN


def aligned_buffer(n_bytes: int) -> np.ndarray:
    """A byte array of ``n_bytes`` starting at a DIRECT_ALIGN boundary (what ``O_DIRECT`` reads into)."""
    raw = np.empty(n_bytes + DIRECT_ALIGN, dtype=np.uint8)
    skip = -raw.__array_interface__["data"][0] % DIRECT_ALIGN
    return raw[skip : skip + n_bytes]
