"""The parser's core: chunks of complete lines handed to the numba kernels (``parse_kernels.svm_chunk`` for
svmlight, ``csv_chunk`` for CSV after its header), the rows they parse handed to the sink, the kernel's
slow values and errors turned into values and messages. ``service.ingest.parser`` drives it."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass

import numpy as np

from core.labels import LabelTally
from service.ingest import parse_kernels as K
from service.ingest.limits import (
    ParseLimits,
    UploadLimitError,
    UploadParseError,
    binary_hint,
    csv_hint,
    f32_overflow,
    quote,
    short_name,
)
from service.ingest.number_kernels import VAL_AUTO, VAL_F64
from service.ingest.values import nearest_float32, recoverable_float32

_SLOW_CAP = 4096  # initial capacity of the slow-token buffer (tests shrink it)
_BOM = b"\xef\xbb\xbf"
_INT64_LIMIT = 1 << 62


class Restart(Exception):
    """The text must be parsed again from its start: "widen" (float64 values) or "zero_based"."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class ParseSummary:
    """What a parse produced besides the arrays it handed to its sink."""

    n_rows: int
    nnz: int
    n_features: int
    zero_based: bool  # how the file's indices were read ("auto" resolved); CSV: False
    feature_names: list[str] | None
    text_bytes: int
    compressed: bool
    has_qid: bool
    labels: LabelTally  # rows per label value, and the values' summary
    value_dtype: str  # "float32" or "float64": how ``data`` was stored


class Builder:
    """Feeds chunks of text to a kernel; after each chunk hands its rows to the sink and empties its buffers."""

    def __init__(
        self, fmt: str, mode: int, vmode: int, label_column: str, limits: ParseLimits, sink, labelled: bool = True
    ):
        self.csv = fmt == "csv"
        self.labelled = labelled  # False: the rows have no label (labels=none), every row's is 1
        self.mode = mode
        self.vmode = vmode
        self.label_column = label_column
        self.limits = limits
        self.sink = sink
        self.max_rows = max(0, min(int(limits.max_rows), _INT64_LIMIT))
        self.max_nnz = max(0, min(int(limits.max_nnz), _INT64_LIMIT))
        self.max_features = max(0, min(int(limits.max_features), _INT64_LIMIT))
        st = np.zeros(K.N_STATE, dtype=np.int64)
        st[K.S_HAS_QID] = -1
        st[K.S_MAX_IDX] = -1
        st[K.S_MIN_IDX] = _INT64_LIMIT
        self.st = st
        self.value_dtype = np.float64 if vmode == VAL_F64 else np.float32
        self.row_cap = 0
        self.nnz_cap = 0
        self.indptr = np.zeros(1, dtype=np.int64)
        self.y = np.empty(0, dtype=np.float64)
        self.qid = np.empty(0, dtype=np.int64)
        self.indices = np.empty(0, dtype=np.int32)
        self.data = np.empty(0, dtype=self.value_dtype)
        self.slow = np.empty((_SLOW_CAP, 4), dtype=np.int64)
        self.rows_done = 0  # rows handed to the sink
        self.nnz_done = 0
        self.labels = LabelTally()
        self.started = False
        self.base = 0  # where the first line of the current buffer starts (a BOM is skipped)
        self.names: list[str] | None = None
        self.n_cols = 0
        self.label_col = -1
        self.csv_zero_from_slow = False
        sink.append("indptr", np.zeros(1, dtype=np.int64))

    # -- capacity ---------------------------------------------------------------------------

    def _ensure(self, buf: bytearray, pos: int, end: int) -> None:
        """Make room for every row and entry that buf[pos:end] can hold.

        Bounds from the length alone (counting separators would cost a pass over the text): a row
        takes at least 2 bytes (a label digit and a newline), an svmlight entry at least 4 ("i:v" and
        a space before it), a CSV cell at least 2 ("v,"). The arrays come from np.empty: pages that
        are never written cost no memory.
        """
        size = end - pos
        rows = size // 2 + 1
        entries = size // 2 + 1 if self.csv else size // 4 + 1
        need_rows = min(rows, self.max_rows - self.rows_done)
        need_nnz = min(entries, self.max_nnz - self.nnz_done)
        if need_rows > self.row_cap:
            cap = max(need_rows, 1)
            self.indptr = np.zeros(cap + 1, dtype=np.int64)
            self.y = np.empty(cap, dtype=np.float64)
            self.qid = np.empty(cap, dtype=np.int64)
            self.row_cap = cap
        if need_nnz > self.nnz_cap:
            cap = max(need_nnz, 1)
            self.indices = np.empty(cap, dtype=np.int32)
            self.data = np.empty(cap, dtype=self.value_dtype)
            self.nnz_cap = cap

    # -- one buffer of complete lines -------------------------------------------------------

    def feed(self, buf: bytearray, end: int) -> None:
        """Parse the lines in buf[:end] (complete lines, or the last piece of the text) and emit their rows."""
        pos = 0
        if not self.started:
            self.started = True
            if buf.startswith(_BOM):
                pos = len(_BOM)
        self.base = pos
        if self.csv and self.names is None:
            nl = buf.find(b"\n", pos, end)
            stop = end if nl < 0 else nl
            self._header(bytes(buf[pos:stop]), pos)
            pos = end if nl < 0 else nl + 1
            self.st[K.S_LINE] = 1
            self.base = pos
        if pos >= end:
            return
        st = self.st
        st[K.S_POS] = pos
        self._ensure(buf, pos, end)
        arr = np.frombuffer(buf, dtype=np.uint8)
        rows_left = self.max_rows - self.rows_done
        nnz_left = self.max_nnz - self.nnz_done
        while True:
            if self.csv:
                status = K.csv_chunk(
                    arr, end, st, self.indptr, self.indices, self.data, self.y, self.slow,
                    self.n_cols, self.label_col, self.vmode, rows_left, nnz_left,
                )  # fmt: skip
            else:
                status = K.svm_chunk(
                    arr, end, st, self.indptr, self.indices, self.data, self.y, self.qid, self.slow,
                    self.mode, self.vmode, rows_left, self.max_features, nnz_left, self.labelled,
                )  # fmt: skip
            committed = int(st[K.S_NSLOW])
            if status == K.ST_WIDEN:
                raise Restart("widen")
            if status == K.ST_ZERO_BASED:
                raise Restart("zero_based")
            self._flush_slow(buf)
            if status == K.ST_DONE:
                del arr
                self._emit()
                return
            if status == K.ST_FULL:
                if committed < self.slow.shape[0] // 2:
                    self.slow = np.empty((2 * self.slow.shape[0], 4), dtype=np.int64)
                continue
            del arr
            self._raise_kernel_error(buf)

    def _emit(self) -> None:
        """Hand the rows parsed from the current buffer to the sink and empty the buffers."""
        st = self.st
        n, z = int(st[K.S_NROWS]), int(st[K.S_NNZ])
        if n == 0:
            return
        indptr, indices, data = self.indptr[: n + 1], self.indices[:z], self.data[:z]
        if self.csv_zero_from_slow:  # a CSV cell whose slow value turned out to be 0: not stored
            keep = data != 0.0
            rows = np.repeat(np.arange(n), np.diff(indptr))
            indptr = np.concatenate(([0], np.cumsum(np.bincount(rows[keep], minlength=n)))).astype(np.int64)
            indices, data = indices[keep], data[keep]
            z = int(indices.size)
            self.csv_zero_from_slow = False
        sink = self.sink
        sink.append("indptr", indptr[1:] + self.nnz_done)
        sink.append("indices", indices)
        sink.append("data", data)
        y = self.y[:n]
        sink.append("y", y)
        if st[K.S_HAS_QID] == 1:
            sink.append("qid", self.qid[:n])
        self.labels.add(y)
        self.rows_done += n
        self.nnz_done += z
        st[K.S_NROWS] = 0
        st[K.S_NNZ] = 0
        self.indptr[0] = 0

    def _flush_slow(self, buf: bytearray) -> None:
        n = int(self.st[K.S_NSLOW])
        if not n:
            return
        self.st[K.S_NSLOW] = 0
        data, y = self.data, self.y
        for slot, start, stop, line in self.slow[:n].tolist():
            value = float(buf[start:stop])
            if not math.isfinite(value):
                raw = bytes(buf[start:stop])
                column = start - self._line_start(buf, start) + 1
                if self.csv and slot >= 0:
                    where = self._csv_column(buf, start)
                    reason = f"{quote(raw)} in {where} is not a finite number (overflows float64)"
                else:
                    reason = f"{'label' if slot < 0 else 'feature value'} {quote(raw)} is not a finite number (overflows float64)"
                raise UploadParseError(line, column, reason)
            if slot < 0:
                y[-slot - 1] = value
                continue
            if self.vmode != VAL_F64:
                text = bytes(buf[start:stop])
                single = nearest_float32(text)
                if self.vmode == VAL_AUTO and not recoverable_float32(text, single):
                    raise Restart("widen")
                if math.isinf(single):
                    column = start - self._line_start(buf, start) + 1
                    reason = f32_overflow(text)
                    if self.csv:  # as the kernel's own float32 overflow in a CSV (_raise_kernel_error)
                        reason = f"{reason[len('feature value ') :]} in {self._csv_column(buf, start)}"
                    raise UploadParseError(line, column, reason)
                value = single
            data[slot] = value
            if value == 0.0 and self.csv:
                self.csv_zero_from_slow = True

    def _raise_kernel_error(self, buf: bytearray):
        st = self.st
        code = int(st[K.S_ERR])
        start, stop = int(st[K.S_ERR_START]), int(st[K.S_ERR_END])
        line, ls, aux = int(st[K.S_ERR_LINE]), int(st[K.S_ERR_LINE_START]), int(st[K.S_ERR_AUX])
        column = start - ls + 1
        raw = bytes(buf[start:stop])
        tok = quote(raw)
        hint = binary_hint(raw)
        no_nan = " (NaN and infinity are not allowed)"
        if code == K.E_LIMIT_ROWS:
            raise UploadLimitError("max_rows", self.limits.max_rows, line)
        if code == K.E_LIMIT_NNZ:
            raise UploadLimitError("max_nnz", self.limits.max_nnz, line)
        if code == K.E_LIMIT_FEATURES:
            raise UploadLimitError("max_features", self.limits.max_features, line)
        messages = {
            K.E_BAD_LABEL: f"bad label {tok}: not a number{hint}{csv_hint(raw, line, self.csv)}",
            K.E_NONFINITE_LABEL: f"label {tok} is not a finite number{no_nan}",
            K.E_MISSING_LABEL: f"missing label: the line starts with the feature {tok}"
            " (expected 'label [qid:N] index:value ...'; rows without labels, for a one-class SVM: labels=none)",
            K.E_BAD_QID: f"bad qid {tok}: expected qid:<integer>{hint}",
            K.E_QID_MISSING: "mixed qid: earlier rows have a qid but this row has none",
            K.E_QID_UNEXPECTED: f"mixed qid: this row has {tok} but earlier rows have none",
            K.E_MISSING_COLON: f"missing ':' in feature {tok} (expected index:value){hint}",
            K.E_BAD_INDEX: f"bad feature index {tok}: expected a non-negative integer{hint}",
            K.E_NEGATIVE_INDEX: f"negative feature index {tok}",
            K.E_ZERO_INDEX: "feature index 0 in a one-based file (zero_based=False: indices start at 1)",
            K.E_INDEX_TOO_LARGE: f"feature index {tok} is too large (indices must fit in int32)",
            K.E_UNSORTED_INDEX: f"feature index {tok} comes after index {aux}:"
            " indices must be strictly increasing within a row",
            K.E_DUPLICATE_INDEX: f"duplicate feature index {tok} in the row",
            K.E_BAD_VALUE: f"bad feature value {tok}: not a number{hint}",
            K.E_NONFINITE_VALUE: f"feature value {tok} is not a finite number{no_nan}",
            K.E_F32_OVERFLOW: f32_overflow(raw),
        }
        if self.csv and code == K.E_F32_OVERFLOW:
            messages = {K.E_F32_OVERFLOW: f"{f32_overflow(raw)[len('feature value ') :]} in {self._column_name(aux)}"}
        elif self.csv and code in (K.E_CSV_EMPTY, K.E_CSV_BAD_NUMBER, K.E_CSV_NONFINITE):
            where = self._column_name(aux)
            messages = {
                K.E_CSV_EMPTY: f"empty cell in {where}",
                K.E_CSV_BAD_NUMBER: f"bad number {tok} in {where}{hint}",
                K.E_CSV_NONFINITE: f"{tok} in {where} is not a finite number{no_nan}",
            }
        elif code == K.E_CSV_RAGGED:
            messages = {K.E_CSV_RAGGED: f"wrong number of fields: expected {self.n_cols} as in the header, got {aux}"}
        reason = messages.get(code, f"unparsable text (internal error code {code})")
        raise UploadParseError(line, column, reason)

    def _csv_column(self, buf: bytearray, offset: int) -> str:
        """The CSV column (number and header name) of the field at ``offset``: its line's commas before it
        (a field is a number, quoted or not, so no comma is inside one)."""
        return self._column_name(buf.count(b",", self._line_start(buf, offset), offset))

    def _column_name(self, col: int) -> str:
        assert self.names is not None
        return f"column {col + 1} ({short_name(self.names[col])})"

    # -- CSV header --------------------------------------------------------------------------

    def _header(self, raw: bytes, offset: int) -> None:
        raw = raw.rstrip(b"\r")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UploadParseError(1, offset + exc.start + 1, "the CSV header is not UTF-8 text") from None
        if not text.strip():
            raise UploadParseError(1, 1, "empty CSV header: the first line must name the columns")
        try:
            names = next(csv.reader([text], strict=True))
        except csv.Error as exc:
            raise UploadParseError(1, 1, f"unreadable CSV header ({exc})") from None
        names = [name.strip() for name in names]
        if not self.labelled:  # every column a feature; the label column "past the last" is never met
            if len(names) > self.max_features:
                raise UploadLimitError("max_features", self.limits.max_features, 1)
            self.names, self.n_cols, self.label_col = names, len(names), len(names)
            return
        where = [i for i, name in enumerate(names) if name == self.label_column]
        if not where:
            shown = ", ".join(short_name(n) for n in names[:10])
            more = f" and {len(names) - 10} more" if len(names) > 10 else ""
            raise UploadParseError(
                1, 1, f"label column {short_name(self.label_column)} is not in the CSV header (columns: {shown}{more})"
            )
        if len(where) > 1:
            raise UploadParseError(
                1, 1, f"label column {short_name(self.label_column)} appears {len(where)} times in the CSV header"
            )
        if len(names) - 1 > self.max_features:
            raise UploadLimitError("max_features", self.limits.max_features, 1)
        if len(names) - 1 > K.INT32_MAX:
            raise UploadParseError(1, 1, "too many columns (feature indices must fit in int32)")
        self.names = names
        self.n_cols = len(names)
        self.label_col = where[0]

    def _line_start(self, buf: bytearray, offset: int) -> int:
        return max(buf.rfind(b"\n", 0, offset) + 1, self.base)

    # -- result ------------------------------------------------------------------------------

    def finish(self, text_bytes: int, compressed: bool) -> ParseSummary:
        st = self.st
        n_rows, nnz = self.rows_done, self.nnz_done
        if n_rows == 0:
            lines = int(st[K.S_LINE])
            if text_bytes == 0:
                raise UploadParseError(
                    0, 0, "the uploaded file is empty (0 bytes): send a file with one example per line"
                )
            if self.csv and self.names is None:
                raise UploadParseError(0, 0, "the file is empty (a CSV upload needs a header line and data rows)")
            what = "only a header" if self.csv else "only blank or comment lines"
            raise UploadParseError(0, 0, f"no data rows: the file has {lines} line(s), {what}")
        value_dtype = np.dtype(self.value_dtype).name
        if self.csv:
            assert self.names is not None
            names = self.names[: self.label_col] + self.names[self.label_col + 1 :]
            return ParseSummary(
                n_rows,
                nnz,
                len(names),
                False,
                names,
                int(text_bytes),
                bool(compressed),
                False,
                self.labels,
                value_dtype,
            )
        zero_based = self.mode == K.MODE_ZERO_BASED or (self.mode == K.MODE_AUTO and nnz == 0)
        max_idx = int(st[K.S_MAX_IDX])
        if nnz == 0:
            n_features = 1  # as scikit-learn
        else:
            n_features = max_idx + 1 if zero_based else max_idx
        if n_features > self.max_features:
            raise UploadLimitError("max_features", self.limits.max_features, int(st[K.S_MAX_IDX_LINE]))
        return ParseSummary(
            n_rows,
            nnz,
            int(n_features),
            bool(zero_based),
            None,
            int(text_bytes),
            bool(compressed),
            bool(st[K.S_HAS_QID] == 1),
            self.labels,
            value_dtype,
        )
