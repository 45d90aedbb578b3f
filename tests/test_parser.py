"""The streaming upload parser: equality with scikit-learn's reader, exact numbers, errors, limits."""

from __future__ import annotations

import gzip
import math
import pickle
import struct
import zlib

import numpy as np
import pytest
from sklearn.datasets import load_svmlight_file

from service.ingest import builder, parser, sources
from service.ingest.number_kernels import N_BAD, N_NONFINITE, N_OK, parse_numbers
from service.ingest.parser import ParseLimits, UploadLimitError, UploadParseError, parse_upload
from tests.parser_files import BIG, float_bits, parse_file, small_limits, write_upload

# ---------------------------------------------------------------------------------------------
# numbers


def _kernel_numbers(tokens):
    raw = [t.encode() for t in tokens]
    buf = bytearray(b"".join(raw))
    ends = np.cumsum([len(r) for r in raw]).astype(np.int64)
    starts = (ends - np.array([len(r) for r in raw], dtype=np.int64)).astype(np.int64)
    out = np.empty(len(raw))
    status = np.empty(len(raw), dtype=np.int64)
    parse_numbers(np.frombuffer(buf, dtype=np.uint8), starts, ends, out, status)
    return out, status


def _number_tokens(seed, n):
    rng = np.random.default_rng(seed)
    tokens = []
    for bits in rng.integers(0, 2**63, size=n, dtype=np.int64):
        x = struct.unpack("<d", struct.pack("<q", int(bits) * (1 if bits % 2 else -1)))[0]
        if math.isfinite(x):
            tokens.append(repr(x))
    for x in rng.uniform(-1e3, 1e3, size=n):
        tokens += [repr(float(x)), "%.6g" % x, "%.3f" % x, "%d" % int(x), "%.17g" % x]
    for k, e in zip(rng.integers(0, 25, size=n), rng.integers(-330, 309, size=n), strict=True):
        tokens.append("%.*e" % (int(k), float(rng.uniform(1, 10)) * 10.0 ** int(e) if -300 < e < 300 else 1.5))
        tokens.append("%.*fe%d" % (int(k), float(rng.uniform(0, 10)), int(e)))
    subnormals = [struct.unpack("<d", struct.pack("<q", int(b)))[0] for b in rng.integers(1, 2**52, size=n // 10)]
    tokens += [repr(x) for x in subnormals]
    tokens += [
        ".5", "5.", "+.5e-3", "-.5E+3", "0", "-0", "+0", "-0.0", "0e999", "0.000", "00012", "1.e5",
        "4.9e-324", "2.4703282292062327e-324", "2.4703282292062328e-324", "2.2250738585072014e-308",
        "1.7976931348623157e308", "1.7976931348623158e308", "9007199254740993", "9007199254740992",
        "123456789012345678901234567890", "0.000000000000000000000000001234", "1e22", "1e23", "123e20",
        "9007199254740992e22", "9007199254740993e-22", "2.000000000000000000000000", "1e-400", "-1e-400",
        "0.1", "0.2", "0.3", "1e-22", "1.5e-22", "3.14159265358979323846264338327950288",
        "1" + "0" * 30, "0." + "0" * 40 + "1", "1" * 40 + "e-40",
    ]  # fmt: skip
    return tokens


def test_kernel_numbers_equal_python_float_bit_for_bit():
    tokens = _number_tokens(0, 4000)
    out, status = _kernel_numbers(tokens)
    assert not np.any(status == N_BAD)
    fast = status == N_OK
    assert fast.sum() > len(tokens) // 3  # the fast path is actually taken
    expected = np.array([float(t) for t in tokens])
    assert np.array_equal(float_bits(out[fast]), float_bits(expected[fast]))
    # what the fast path declines, it declines for a reason: digits or range
    for t in np.array(tokens)[~fast][:200]:
        assert len(t.replace("-", "").replace(".", "")) > 16 or "e" in t.lower() or float(t) == 0.0


def test_kernel_number_syntax():
    good = ["1", "+1", "-1", ".5", "5.", "+.5e-3", "1E5", "1e+05", "007"]
    bad = [
        "",
        ".",
        "-",
        "+",
        "e5",
        "1e",
        "1e+",
        "+-1",
        "--1",
        "1_000",
        "0x10",
        "1.2.3",
        "1e5.5",
        " 1",
        "1 ",
        "nanx",
        "in",
    ]
    nonfinite = ["nan", "NaN", "-nan", "inf", "-Inf", "+INF", "infinity", "-Infinity"]
    _, status = _kernel_numbers(good + bad + nonfinite)
    assert list(status[: len(good)]) == [N_OK] * len(good)
    assert list(status[len(good) : len(good) + len(bad)]) == [N_BAD] * len(bad)
    assert list(status[len(good) + len(bad) :]) == [N_NONFINITE] * len(nonfinite)


def test_values_through_the_file_equal_python_float(tmp_path):
    tokens = _number_tokens(1, 300)
    rows = [f"{tokens[i]} 1:{tokens[i + 1]} 2:{tokens[i + 2]}" for i in range(0, len(tokens) - 3, 3)]
    rows = [r for r in rows if all(math.isfinite(float(x.split(":")[-1])) for x in r.split())]
    result = parse_file(tmp_path, "\n".join(rows) + "\n", chunk=256)
    labels = np.array([float(r.split()[0]) for r in rows])
    values = np.array([float(x.split(":")[1]) for r in rows for x in r.split()[1:]])
    assert np.array_equal(float_bits(result.y), float_bits(labels))
    assert np.array_equal(float_bits(result.data), float_bits(values))


@pytest.mark.parametrize("value_dtype", ["auto", "float32", "float64"])
def test_one_digit_values_take_the_short_way_to_the_same_bits(tmp_path, value_dtype):
    """A value of one digit skips the general number parser: every digit, before each delimiter the format
    allows, and the tokens next to it that must still take the long way."""
    tokens = [str(d) for d in range(10)] + ["10", "-1", "+1", "1.", "1e0", "0.5", "-0", "9.", "01"]
    rows = []
    for i, token in enumerate(tokens):
        for end in (" ", "\t", "#c", "\r", ""):
            rows.append(f"{i % 3} 1:{token}{end} 4:{token}{end}".rstrip() if end == "" else f"{i % 3} 1:{token}{end}")
    text = "\n".join(rows) + "\n3 2:7"  # the last value ends the text
    result = parse_file(tmp_path, text, chunk=64, value_dtype=value_dtype)
    expected = [float(token.split(":")[1].split("#")[0]) for row in rows for token in row.split()[1:]] + [7.0]
    assert np.array_equal(float_bits(result.data), float_bits(np.asarray(expected, dtype=result.data.dtype)))
    loaded, _ = load_svmlight_file(str(write_upload(tmp_path, text, name="same.svm")))
    np.testing.assert_array_equal(loaded.data, result.data.astype(np.float64))


def test_slow_buffer_overflow_restarts_cleanly(tmp_path, monkeypatch):
    monkeypatch.setattr(builder, "_SLOW_CAP", 2)
    tokens = ["1.00000000000000000000001", "2e-310", "3.141592653589793238462643", "1e300", "5e-320"]
    line = "0.1234567890123456789012 " + " ".join(f"{j + 1}:{tokens[j % 5]}" for j in range(23)) + "\n"
    text = line * 7
    result = parse_file(tmp_path, text, chunk=100)
    assert result.y.tolist() == [float("0.1234567890123456789012")] * 7
    assert np.array_equal(float_bits(result.data), float_bits([float(tokens[j % 5]) for j in range(23)] * 7))


# ---------------------------------------------------------------------------------------------
# equality with scikit-learn


def _random_svmlight(seed, *, n_rows, n_features, zero_based, qid, messy):
    rng = np.random.default_rng(seed)
    labels = ["+1", "-1", "-1.0", "3", "2.000000", "1e0", "0", "7.5"]

    def values():
        choices = [repr(float(rng.normal())), "%.6g" % rng.normal(), str(int(rng.integers(-9, 9))), "0", "-0"]
        choices += ["1e-310", ".5", "%.20f" % rng.uniform(), "1"]
        return str(rng.choice(choices))

    lines = ["# generated by the parser test\n"] if messy else []
    first = 0 if zero_based else 1
    for i in range(n_rows):
        if messy and rng.uniform() < 0.05:
            lines.append(rng.choice(["\n", "   \n", "# a comment line\n", "\t# indented comment\r\n"]))
        k = int(rng.binomial(n_features, 0.15))
        cols = np.sort(rng.choice(n_features, size=k, replace=False)) + first
        if i == 0 and zero_based:
            cols = np.unique(np.concatenate([[0], cols]))
        parts = [str(rng.choice(labels))]
        if qid:
            parts.append(f"qid:{int(rng.integers(0, 1000)) - 5}")
        parts += [f"{c}:{values()}" for c in cols]
        sep = str(rng.choice([" ", "\t", "  ", " \t "])) if messy else " "
        line = sep.join(parts)
        if messy:
            line += str(rng.choice(["", " ", "  ", " # trailing comment", "#x:1"]))
            line += str(rng.choice(["\n", "\r\n"]))
        else:
            line += "\n"
        lines.append(line)
    return "".join(lines)


@pytest.mark.parametrize("qid", [False, True])
@pytest.mark.parametrize("zero_based", [False, True])
@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("chunk", [64, None])
def test_equal_to_scikit_learn(tmp_path, qid, zero_based, gz, chunk):
    seed = 17 * qid + 5 * zero_based + 3 * gz + (chunk or 0)
    text = _random_svmlight(seed, n_rows=150, n_features=40, zero_based=zero_based, qid=qid, messy=True)
    path = write_upload(tmp_path, text, gz=gz, name="f.svm.gz" if gz else "f.svm")
    for mode in ("auto", zero_based):
        got = parse_upload(path, zero_based=mode, limits=BIG, chunk_bytes=chunk)
        loaded = load_svmlight_file(str(path), zero_based=mode, query_id=True)
        X, y, q = loaded
        assert got.indptr.dtype == np.int64 and got.indices.dtype == np.int32 and got.data.dtype == np.float64
        assert np.array_equal(got.indptr, X.indptr)
        assert np.array_equal(got.indices, X.indices)
        assert np.array_equal(float_bits(got.data), float_bits(X.data))
        assert np.array_equal(float_bits(got.y), float_bits(y))
        assert got.n_features == X.shape[1]
        assert got.zero_based is zero_based
        assert got.compressed is gz
        assert got.text_bytes == len(text.encode())
        assert got.feature_names is None
        if qid:
            assert np.array_equal(got.qid, q)
        else:
            assert got.qid is None


def test_long_lines_cross_many_chunks(tmp_path):
    rng = np.random.default_rng(3)
    rows = []
    for i in range(30):
        cols = np.sort(rng.choice(5000, size=int(rng.integers(0, 400)), replace=False)) + 1
        rows.append(f"{i % 3} " + " ".join(f"{c}:{rng.normal():.17g}" for c in cols) + "\n")
    text = "".join(rows)
    X, y = load_svmlight_file(str(write_upload(tmp_path, text, name="x.svm")))
    for chunk in (64, 1000, 7):
        got = parse_file(tmp_path, text, chunk=chunk)
        assert np.array_equal(got.indptr, X.indptr) and np.array_equal(got.indices, X.indices)
        assert np.array_equal(got.data, X.data) and np.array_equal(got.y, y) and got.n_features == X.shape[1]


def test_small_svmlight_details(tmp_path):
    got = parse_file(tmp_path, "\ufeff+1 1:2.5  3:0\n\n-1\t# only a label\n2 2:1 # c\r\n3 3:-0")
    assert got.indptr.tolist() == [0, 2, 2, 3, 4]
    assert got.indices.tolist() == [0, 2, 1, 2]  # one-based, shifted
    assert float_bits(got.data).tolist() == float_bits([2.5, 0.0, 1.0, -0.0]).tolist()
    assert got.y.tolist() == [1.0, -1.0, 2.0, 3.0]
    assert got.n_features == 3 and got.zero_based is False and got.qid is None
    # zero index anywhere makes "auto" zero-based; no index at all gives n_features 1 as scikit-learn
    got = parse_file(tmp_path, "1 5:1\n0 0:1\n")
    assert got.zero_based is True and got.indices.tolist() == [5, 0] and got.n_features == 6
    got = parse_file(tmp_path, "1\n-1 # nothing\n")
    assert got.n_features == 1 and got.indices.size == 0 and got.zero_based is True
    got = parse_file(tmp_path, "1 5:1\n", zero_based=True)
    assert got.indices.tolist() == [5] and got.n_features == 6 and got.zero_based is True
    got = parse_file(tmp_path, "1 qid:-3 2:1\n2 qid:+7 1:1\n")
    assert got.qid.tolist() == [-3, 7]


# ---------------------------------------------------------------------------------------------
# svmlight errors: exact line and column


SVM_ERRORS = [
    # (text, kwargs, line, column, words in the reason)
    ("1 1:abc\n", {}, 1, 5, ["bad feature value", "'abc'"]),
    ("1 2:0.5\nx 1:2\n", {}, 2, 1, ["bad label", "'x'"]),
    ("1 1:nan\n", {}, 1, 5, ["'nan'", "not a finite"]),
    ("1 1:-Infinity\n", {}, 1, 5, ["'-Infinity'", "not a finite"]),
    ("NaN 1:2\n", {}, 1, 1, ["label", "'NaN'", "not a finite"]),
    ("1 1:2\n1 1:1e400\n", {}, 2, 5, ["feature value", "'1e400'", "not a finite"]),
    ("1e400 1:1\n", {}, 1, 1, ["label", "'1e400'", "not a finite"]),
    ("1 0:1\n", {"zero_based": False}, 1, 3, ["index 0", "one-based"]),
    ("1 2:1 -1:2\n", {}, 1, 7, ["negative feature index", "'-1'"]),
    ("1 3:1 2:1\n", {}, 1, 7, ["'2'", "after index 3", "strictly increasing"]),
    ("1 2:1 2:1\n", {}, 1, 7, ["duplicate feature index", "'2'"]),
    ("1:2 3:4\n", {}, 1, 1, ["missing label", "'1:2'"]),
    ("qid:1 3:4\n", {}, 1, 1, ["missing label"]),
    ("1 2 3\n", {}, 1, 3, ["missing ':'", "'2'"]),
    ("1 qid:x 1:2\n", {}, 1, 3, ["bad qid", "'qid:x'"]),
    ("1 qid:1.5 1:2\n", {}, 1, 3, ["bad qid", "'qid:1.5'"]),
    ("1 qid:1 1:2\n# c\n2 1:2\n", {}, 3, 3, ["mixed qid", "has none"]),
    ("1 qid:1 1:2\n2\n", {}, 2, 2, ["mixed qid"]),
    ("1 1:2\n\n2 qid:1 1:2\n", {}, 3, 3, ["mixed qid", "'qid:1'"]),
    ("1 a:2\n", {}, 1, 3, ["bad feature index", "'a'"]),
    ("1 1.0:2\n", {}, 1, 3, ["bad feature index", "'1.0'"]),
    ("1 1:2 3:\x00\n", {}, 1, 9, ["bad feature value", "'\\x00'", "binary"]),
    (b"1 1:2 3:4\xff\n", {}, 1, 9, ["bad feature value", "'4\\xff'", "binary"]),
    ("\x00\x01 1:2\n", {}, 1, 1, ["bad label", "binary"]),
    ("1 99999999999:1\n", {}, 1, 3, ["too large", "int32"]),
    ("# c\n\n1 1:2\n  2 x:1\n", {}, 4, 5, ["bad feature index", "'x'"]),
    ("1 1:2\r\n1 2:x\r\n", {}, 2, 5, ["'x'"]),
    ("1\t1:2\t\t3:x y\n", {}, 1, 10, ["'x'"]),
    ("1 1:2 3:4:5\n", {}, 1, 9, ["'4:5'"]),
    ("1 1:2 3:" + "7" * 100 + "x\n", {}, 1, 9, ["bad feature value", "'" + "7" * 40 + "...'"]),
    ("1 1:\n", {}, 1, 5, ["bad feature value", "''"]),
    ("1 1: 2\n", {}, 1, 5, ["bad feature value"]),
    ("1 1_0:2\n", {}, 1, 3, ["bad feature index"]),
    ("1 1:1_000\n", {}, 1, 5, ["bad feature value", "'1_000'"]),
]


@pytest.mark.parametrize("text,kwargs,line,column,words", SVM_ERRORS)
@pytest.mark.parametrize("gz", [False, True])
def test_svmlight_errors(tmp_path, text, kwargs, line, column, words, gz):
    with pytest.raises(UploadParseError) as info:
        parse_file(tmp_path, text, gz=gz, chunk=8, **kwargs)
    err = info.value
    assert (err.line, err.column) == (line, column), str(err)
    assert str(err) == f"line {line}, column {column}: {err.reason}"
    for word in words:
        assert word in err.reason, (word, err.reason)


def test_error_line_numbers_are_absolute_across_chunks(tmp_path):
    good = "".join(f"{i % 2} 1:{i} 7:0.25 # row {i}\n" for i in range(2000))
    for chunk in (64, 4096, None):
        with pytest.raises(UploadParseError) as info:
            parse_file(tmp_path, good + "\n1 1:2 5:x\n", chunk=chunk)
        assert (info.value.line, info.value.column) == (2002, 9)


def test_empty_and_comment_only_files(tmp_path):
    for text in ("", "\n\n", "# only\n# comments\n"):
        with pytest.raises(UploadParseError) as info:
            parse_file(tmp_path, text)
        assert (info.value.line, info.value.column) == (0, 0)
        assert ("the uploaded file is empty" if text == "" else "no data rows") in info.value.reason
        assert "line 0" not in str(info.value)  # no position for a file without rows


def test_errors_pickle():
    err = pickle.loads(pickle.dumps(UploadParseError(3, 4, "why")))
    assert (err.line, err.column, err.reason, str(err)) == (3, 4, "why", "line 3, column 4: why")
    lim = pickle.loads(pickle.dumps(UploadLimitError("max_rows", 10, 11)))
    assert (lim.limit, lim.value, lim.line) == ("max_rows", 10, 11) and "max_rows" in str(lim)


def test_bad_arguments():
    with pytest.raises(ValueError, match="format"):
        parse_upload("x", format="arff", limits=BIG)
    with pytest.raises(ValueError, match="zero_based"):
        parse_upload("x", zero_based="yes", limits=BIG)


# ---------------------------------------------------------------------------------------------
# gzip


@pytest.mark.parametrize("inflater", sorted(sources.INFLATERS))
def test_gzip_truncated_corrupt_trailing_and_multimember(tmp_path, inflater):
    text = "".join(f"{i % 2} 1:{i} 2:0.5\n" for i in range(3000)).encode()
    packed = gzip.compress(text)
    with pytest.raises(UploadParseError) as info:
        parse_upload(
            write_upload(tmp_path, packed[: len(packed) // 2]), limits=BIG, inflater=inflater, chunk_bytes=1000
        )
    assert "truncated" in info.value.reason and info.value.line > 1
    with pytest.raises(UploadParseError) as info:
        parse_upload(write_upload(tmp_path, packed[:15]), limits=BIG, inflater=inflater)
    assert (info.value.line, info.value.column) == (0, 0) and "truncated" in info.value.reason
    broken = bytearray(packed)
    broken[40:60] = b"\xff" * 20
    with pytest.raises(UploadParseError, match="corrupt gzip|truncated"):
        parse_upload(write_upload(tmp_path, bytes(broken)), limits=BIG, inflater=inflater)
    with pytest.raises(UploadParseError, match="after the end of the gzip data"):
        parse_upload(write_upload(tmp_path, packed + b"garbage"), limits=BIG, inflater=inflater)
    got = parse_upload(write_upload(tmp_path, packed + b"\0" * 100), limits=BIG, inflater=inflater)
    assert got.y.size == 3000
    got = parse_upload(write_upload(tmp_path, packed + b"\0" * 100), limits=BIG, inflater=inflater, chunk_bytes=16)
    assert got.y.size == 3000
    with pytest.raises(UploadParseError, match="after the end of the gzip data"):
        parse_upload(write_upload(tmp_path, packed + b"\0" * 40 + b"x"), limits=BIG, inflater=inflater, chunk_bytes=16)
    got = parse_upload(
        write_upload(tmp_path, gzip.compress(text[:1000]) + gzip.compress(text[1000:])),
        limits=BIG,
        inflater=inflater,
        chunk_bytes=64,
    )
    assert got.y.size == 3000 and got.data[-1] == 0.5 and got.compressed and got.text_bytes == len(text)


class _CountingInflater:
    """Stands in for an inflater module inside the parser and counts the bytes it inflates."""

    def __init__(self, module):
        self.module = module
        self.error = module.error
        self.inflated = 0

    def decompressobj(self, **kwargs):
        inner = self.module.decompressobj(**kwargs)
        counter = self

        class Wrapped:
            def decompress(self, data, max_length=0):
                out = inner.decompress(data, max_length)
                counter.inflated += len(out)
                return out

            def __getattr__(self, name):
                return getattr(inner, name)

        return Wrapped()


@pytest.mark.parametrize("inflater", sorted(sources.INFLATERS))
def test_gzip_bomb_stops_at_the_limit(tmp_path, monkeypatch, inflater):
    bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
    packed = bomb.compress(b"0" * (50 << 20)) + bomb.flush()
    assert len(packed) < 100_000
    counting = _CountingInflater(sources.inflater_module(inflater))
    monkeypatch.setattr(parser, "inflater_module", lambda name: counting)
    limit = 1 << 20
    limits = ParseLimits(max_decompressed_bytes=limit, max_rows=10, max_features=10, max_nnz=10)
    with pytest.raises(UploadLimitError) as info:
        parse_upload(write_upload(tmp_path, packed), limits=limits)
    assert info.value.limit == "max_decompressed_bytes" and info.value.value == limit
    assert "max_decompressed_bytes" in str(info.value) and "line 1" in str(info.value)
    assert limit < counting.inflated <= limit + 1


def test_plain_text_limit(tmp_path):
    text = "1 1:1\n" * 100
    limits = ParseLimits(max_decompressed_bytes=599, max_rows=1000, max_features=10, max_nnz=1000)
    with pytest.raises(UploadLimitError) as info:
        parse_file(tmp_path, text, limits=limits)
    assert info.value.limit == "max_decompressed_bytes"
    with pytest.raises(UploadLimitError) as info:
        parse_file(tmp_path, text, gz=True, limits=limits, chunk=64)
    assert info.value.limit == "max_decompressed_bytes" and info.value.line == 100
    limits = ParseLimits(max_decompressed_bytes=600, max_rows=1000, max_features=10, max_nnz=1000)
    assert parse_file(tmp_path, text, gz=True, limits=limits).text_bytes == 600


# ---------------------------------------------------------------------------------------------
# limits


def test_row_and_nnz_limits(tmp_path):
    text = "# c\n" + "".join("1 1:1 2:1\n" for _ in range(10))
    assert parse_file(tmp_path, text, limits=small_limits(max_rows=10, max_nnz=20)).y.size == 10
    with pytest.raises(UploadLimitError) as info:
        parse_file(tmp_path, text, limits=small_limits(max_rows=9), chunk=16)
    assert (info.value.limit, info.value.value, info.value.line) == ("max_rows", 9, 11)
    with pytest.raises(UploadLimitError) as info:
        parse_file(tmp_path, text, limits=small_limits(max_nnz=19), chunk=16)
    assert (info.value.limit, info.value.value, info.value.line) == ("max_nnz", 19, 11)
    with pytest.raises(UploadLimitError) as info:
        parse_file(tmp_path, text, limits=small_limits(max_rows=0))
    assert info.value.line == 2


def test_feature_limit(tmp_path):
    text = "1 1:1 5:1\n1 2:1\n1 9:1\n1 3:1\n"
    assert parse_file(tmp_path, text, limits=small_limits(max_features=9)).n_features == 9
    for mode in ("auto", False):
        with pytest.raises(UploadLimitError) as info:
            parse_file(tmp_path, text, zero_based=mode, limits=small_limits(max_features=8))
        assert (info.value.limit, info.value.value, info.value.line) == ("max_features", 8, 3)
    with pytest.raises(UploadLimitError) as info:  # zero-based: index 8 means 9 features
        parse_file(tmp_path, "1 1:1\n1 8:1\n", zero_based=True, limits=small_limits(max_features=8))
    assert info.value.line == 2
    # auto resolves to zero-based only at the end: the limit is checked then, at the line of the max index
    with pytest.raises(UploadLimitError) as info:
        parse_file(tmp_path, "1 1:1\n1 8:1\n1 0:1\n", limits=small_limits(max_features=8))
    assert info.value.line == 2


# ---------------------------------------------------------------------------------------------
# following an upload that is still being written


def _write_slowly(path, marker, content: bytes, pieces: list[int], status: dict):
    import json
    import os
    import threading
    import time

    def run():
        with open(path, "ab") as out:
            start = 0
            for size in pieces + [len(content)]:
                out.write(content[start : start + size])
                out.flush()
                start += size
                time.sleep(0.01)
                if start >= len(content):
                    break
        tmp = str(marker) + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(json.dumps(status))
        os.replace(tmp, marker)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.parametrize("gz", [False, True])
def test_followed_upload_parses_as_the_whole_file(tmp_path, gz):
    text = _random_svmlight(11, n_rows=300, n_features=30, zero_based=False, qid=False, messy=True).encode()
    content = gzip.compress(text) if gz else text
    path, marker = tmp_path / "upload.part", tmp_path / "upload.done"
    path.write_bytes(b"")
    writer = _write_slowly(path, marker, content, [1, 1, 50, 999, 3000], {"status": "complete", "meta": {"bytes": 1}})
    sink = parser.ArrayCollector()
    followed = []

    def open_text():
        followed.append(parser.FollowedFile(path, marker))
        return followed[-1]

    summary = parser.parse_into(sink, open_text, limits=BIG, chunk_bytes=257)
    writer.join()
    whole = parse_file(tmp_path, content, chunk=257)
    got = sink.arrays()
    assert summary.compressed is gz and summary.n_rows == whole.y.size
    assert np.array_equal(got["indptr"], whole.indptr) and np.array_equal(got["indices"], whole.indices)
    assert np.array_equal(float_bits(got["data"]), float_bits(whole.data)) and np.array_equal(got["y"], whole.y)
    assert followed[-1].outcome == {"status": "complete", "meta": {"bytes": 1}}


def test_a_followed_upload_is_read_in_pieces_of_at_least_min_piece(tmp_path):
    """The API writes small pieces; the parser gets at least min_piece bytes a read until the upload is complete."""
    content = bytes(range(256)) * 40  # 10,240 bytes
    path, marker = tmp_path / "upload.part", tmp_path / "upload.done"
    path.write_bytes(b"")
    writer = _write_slowly(path, marker, content, [100] * 60, {"status": "complete"})
    followed = parser.FollowedFile(path, marker, min_piece=1_000)
    sizes = []
    while piece := followed.read(4_096):
        sizes.append(len(piece))
    writer.join()
    followed.close()
    assert sum(sizes) == len(content) and max(sizes) <= 4_096
    assert all(size >= 1_000 for size in sizes[:-1]), sizes


def test_followed_upload_that_is_abandoned_raises(tmp_path):
    text = _random_svmlight(12, n_rows=100, n_features=10, zero_based=False, qid=False, messy=False).encode()
    path, marker = tmp_path / "upload.part", tmp_path / "upload.done"
    path.write_bytes(b"")
    writer = _write_slowly(path, marker, text[: len(text) // 2], [100], {"status": "aborted", "reason": "client gone"})
    with pytest.raises(parser.UploadAborted, match="client gone"):
        parser.parse_into(
            parser.ArrayCollector(), lambda: parser.FollowedFile(path, marker), limits=BIG, chunk_bytes=64
        )
    writer.join()


def test_an_inflater_whose_package_is_missing_is_refused_when_the_settings_are_read(monkeypatch):
    import importlib.util

    from pydantic import ValidationError

    from core.config import Settings

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "zlib_ng" else real_find_spec(name))
    monkeypatch.setenv("HINGE_GZIP_INFLATER", "zlib-ng")
    with pytest.raises(ValidationError, match="HINGE_GZIP_INFLATER=zlib-ng needs the zlib-ng package"):
        Settings()
    monkeypatch.setenv("HINGE_GZIP_INFLATER", "zlib")
    assert Settings().gzip_inflater == "zlib"
