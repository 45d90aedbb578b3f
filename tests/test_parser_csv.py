"""The streaming upload parser on CSV (equality with a naive reader, errors with their line and column,
limits, the label column), and its warm-up: nothing left to compile for an upload."""

from __future__ import annotations

import numpy as np
import pytest

from service.ingest.parser import UploadLimitError, UploadParseError
from tests.helpers import kernels_compiled_after_warm_up
from tests.naive import csv_dense
from tests.parser_files import parse_file, small_limits


def test_csv_matches_naive_reader(tmp_path):
    rng = np.random.default_rng(5)
    dense = rng.normal(size=(60, 6)) * (rng.uniform(size=(60, 6)) < 0.4)
    labels = rng.choice([-1.0, 1.0, 2.5], size=60)
    header = 'f0,"x, y",label,f3 ,  f4,f5,f6\r\n'
    lines = []
    for i in range(60):
        cells = [repr(float(v)) if v != 0 else rng.choice(["0", "0.0", "-0"]) for v in dense[i]]
        cells.insert(2, repr(float(labels[i])))
        cells[0] = f'"{cells[0]}"'
        lines.append(" , ".join(cells) if i % 7 == 0 else ",".join(cells))
    text = header + "\r\n".join(lines) + "\r\n\r\n\n"
    X, y, names = csv_dense(text, "label")
    for chunk in (64, None):
        for gz in (False, True):
            got = parse_file(tmp_path, text, format="csv", chunk=chunk, gz=gz)
            assert got.feature_names == ["f0", "x, y", "f3", "f4", "f5", "f6"] == names
            assert got.n_features == 6 and got.zero_based is False and got.qid is None
            dense_got = np.zeros((got.y.size, got.n_features))
            for r in range(got.y.size):
                sl = slice(got.indptr[r], got.indptr[r + 1])
                assert np.all(np.diff(got.indices[sl]) > 0)
                dense_got[r, got.indices[sl]] = got.data[sl]
            assert np.array_equal(dense_got, X) and np.array_equal(got.y, y)
            assert np.all(got.data != 0)
            assert got.indices.size == np.count_nonzero(X)


def test_csv_slow_zero_is_dropped(tmp_path):
    got = parse_file(tmp_path, "a,b,label\n1e-400,2,1\n3,0.0000000000000000000000000000000001,0\n", format="csv")
    assert got.indptr.tolist() == [0, 1, 3] and got.indices.tolist() == [1, 0, 1]
    assert got.data.tolist() == [2.0, 3.0, 1e-34]


CSV_ERRORS = [
    ("a,b\n1,2\n", 1, 1, ["label column 'label'", "'a', 'b'"]),
    ("a,label,label\n1,2,3\n", 1, 1, ["appears 2 times"]),
    ("a,label\n1,2\n1,2,3\n", 3, 5, ["expected 2", "got 3"]),
    ("a,b,label\n1,2,3\n1,2\n", 3, 4, ["expected 3", "got 2"]),
    ("a,label\n,1\n", 2, 1, ["empty cell", "column 1 ('a')"]),
    ("a,label\n1,\n", 2, 3, ["empty cell", "column 2 ('label')"]),
    ("a,label\n1,  \n", 2, 3, ["empty cell"]),
    ('a,label\n"",1\n', 2, 1, ["empty cell"]),
    ("a,label\n1x,1\n", 2, 1, ["bad number", "'1x'", "column 1 ('a')"]),
    ("a,label\n1,2 3\n", 2, 3, ["bad number", "'2 3'"]),
    ('a,label\n"1,1\n', 2, 1, ["bad number"]),
    ("a,label\nnan,1\n", 2, 1, ["'nan'", "not a finite"]),
    ("a,label\n1,-inf\n", 2, 3, ["'-inf'", "not a finite"]),
    ("a,label\n1,1e999\n", 2, 3, ["label", "'1e999'", "not a finite"]),
    ("a,label\n1,1\n1e999,1\n", 3, 1, ["column 1 ('a')", "'1e999'", "not a finite"]),
    ('a,b,label\n1,2,1\n1, "1e999" ,1\n', 3, 5, ["column 2 ('b')", "'1e999'", "not a finite"]),
    ("a,label\n1,2\n\x00,1\n", 3, 1, ["bad number", "binary"]),
    ("", 0, 0, ["empty"]),
    ("a,label\n\n", 0, 0, ["no data rows"]),
    ("\n1,2\n", 1, 1, ["empty CSV header"]),
    (b"a\xff,label\n1,2\n", 1, 2, ["not UTF-8"]),
]


@pytest.mark.parametrize("text,line,column,words", CSV_ERRORS)
def test_csv_errors(tmp_path, text, line, column, words):
    with pytest.raises(UploadParseError) as info:
        parse_file(tmp_path, text, format="csv", chunk=8)
    err = info.value
    assert (err.line, err.column) == (line, column), str(err)
    for word in words:
        assert word in err.reason, (word, err.reason)


def test_csv_limits_and_label_column(tmp_path):
    text = "label,a,b,c\n1,0,0,1\n2,1,1,1\n"
    got = parse_file(tmp_path, text, format="csv")
    assert got.y.tolist() == [1, 2] and got.indices.tolist() == [2, 0, 1, 2] and got.feature_names == ["a", "b", "c"]
    got = parse_file(tmp_path, text, format="csv", label_column="b")
    assert got.y.tolist() == [0, 1] and got.feature_names == ["label", "a", "c"]
    with pytest.raises(UploadLimitError) as info:
        parse_file(tmp_path, text, format="csv", limits=small_limits(max_features=2))
    assert (info.value.limit, info.value.line) == ("max_features", 1)
    with pytest.raises(UploadLimitError) as info:
        parse_file(tmp_path, text, format="csv", limits=small_limits(max_rows=1))
    assert (info.value.limit, info.value.line) == ("max_rows", 3)
    with pytest.raises(UploadLimitError) as info:
        parse_file(tmp_path, text, format="csv", limits=small_limits(max_nnz=3))
    assert (info.value.limit, info.value.line) == ("max_nnz", 3)


def test_warm_up_leaves_nothing_for_an_upload_to_compile():
    """After warm_up, parsing svmlight (with qid, zero- or one-based) and CSV, plain or gzip, into every value
    dtype an upload may ask for compiles no further kernel in the parser process."""
    use = """
import gzip, io
from service.ingest.parser import ArrayCollector, ParseLimits, parse_into
limits = ParseLimits(1 << 20, 1000, 1000, 1000)
texts = ((b"1 qid:1 1:0.5 3:2.25\\n-1 qid:2 2:1e-3\\n", "svmlight", "auto"),
         (b"+1 0:1 2:0.1\\n-1 1:3.5\\n", "svmlight", True),
         (b"1 1:0.1 4:7\\n-1 2:1\\n", "svmlight", False),
         (b"x,label,z\\n0.5,1,0\\n2,-1,1e-7\\n", "csv", "auto"))
for text, fmt, zero_based in texts:
    for raw in (text, gzip.compress(text)):
        for value_dtype in ("float64", "float32", "auto"):
            parse_into(ArrayCollector(), lambda raw=raw: io.BytesIO(raw), format=fmt, zero_based=zero_based,
                       value_dtype=value_dtype, limits=limits)
"""
    missed = kernels_compiled_after_warm_up(
        ["service.ingest.number_kernels", "service.ingest.parse_kernels", "service.ingest.parser"],
        "from service.ingest import parser; parser.warm_up()",
        use,
    )
    assert missed == []
