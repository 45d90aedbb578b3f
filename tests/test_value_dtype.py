"""Stored value types: float32 only where it is exact to say so, float32 on request, float64 as before.

`value_dtype=auto` stores float32 only when every value of the file is recoverable from its
float32 (at most 7 significant digits, and the float32 rounded to 7 digits gives back the text);
the float32 stored is the one nearest to the text (rounded once, from the decimal). `float32` stores
the nearest float32 of every value. Data sets stored before value types existed read as float64 and
train exactly as before.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from service.ingest.number_kernels import V_OK, V_SLOW, V_WIDEN, VAL_AUTO, VAL_F32, f32_values
from service.ingest.parser import ParseLimits, UploadParseError, nearest_float32, parse_upload, recoverable_float32
from tests.helpers import upload, wait_job

BIG = ParseLimits(max_decompressed_bytes=1 << 30, max_rows=1 << 30, max_features=1 << 30, max_nnz=1 << 30)


def _kernel_f32(tokens, vmode):
    raw = [t.encode() for t in tokens]
    buf = bytearray(b"".join(raw))
    ends = np.cumsum([len(r) for r in raw]).astype(np.int64)
    starts = ends - np.array([len(r) for r in raw], dtype=np.int64)
    out = np.empty(len(raw), dtype=np.float32)
    check = np.empty(len(raw), dtype=np.int64)
    f32_values(np.frombuffer(buf, dtype=np.uint8), starts, ends, vmode, out, check)
    return out, check


def _short_tokens(seed: int, n: int) -> list[str]:
    """Decimals of 1 to 9 significant digits over float32's range, in several spellings."""
    rng = np.random.default_rng(seed)
    tokens = []
    for digits, exponent, sign in zip(rng.integers(1, 10, n), rng.integers(-45, 40, n), rng.integers(0, 2, n)):
        mantissa = int(rng.integers(10 ** (digits - 1), 10**digits))
        text = f"{'-' if sign else ''}{mantissa}e{int(exponent) - int(digits) + 1}"
        tokens.append(text)
        value = float(text)
        if 1e-30 < abs(value) < 1e30:
            tokens.append(f"{value:.{int(digits) - 1}e}")
            tokens.append(repr(value))
    # decades and binades where 7 digits are finer than float32's spacing, and powers of ten
    for base in (8.589973e9, 1.6777217e7, 9.999999e-5, 1e-5, 1e-38, 3.4028235e38, 3.4028236e38):
        tokens.append(repr(base))
        tokens += [f"{base * (1 + 1e-7 * k):.7g}" for k in range(-30, 31)]
    tokens += ["0", "-0", "0.000", "1", "0.1234", "0.5", "1e-40", "16777217", "16777216", "0.0001"]
    return tokens


def test_auto_stores_float32_only_when_the_text_is_recoverable():
    tokens = _short_tokens(0, 3000)
    out, check = _kernel_f32(tokens, VAL_AUTO)
    assert set(check.tolist()) <= {V_OK, V_WIDEN, V_SLOW}
    kept = [i for i, c in enumerate(check) if c == V_OK]
    widened = [i for i, c in enumerate(check) if c == V_WIDEN]
    assert len(kept) > len(tokens) // 3 and len(widened) > 100  # both outcomes are exercised
    for i in kept:
        # exact: the stored float32 is the one nearest to the decimal, and gives the decimal back
        assert float(out[i]) == nearest_float32(tokens[i]), tokens[i]
        assert recoverable_float32(tokens[i], float(out[i])), tokens[i]
    # what the kernel refuses is not recoverable, except within its safety margin (values whose
    # float32 lies within 1e-6 of half a unit of the text's last digit from the text)
    for i in widened:
        single = nearest_float32(tokens[i])
        if recoverable_float32(tokens[i], single):
            exact = Fraction(tokens[i])
            exponent = math.floor(math.log10(abs(float(exact))))
            digits = len(tokens[i].lower().split("e")[0].lstrip("+-").replace(".", "").strip("0"))
            half = Fraction(5) * Fraction(10) ** (exponent - digits)
            other = 2 * exact - Fraction(single)
            if other == Fraction(nearest_float32(str(float(other)))):
                continue  # the decimal lies halfway between two float32: the kernel leaves ties to float64
            assert abs(Fraction(single) - exact) >= half * (1 - Fraction(2, 10**6)) / 10, tokens[i]


@pytest.mark.parametrize(
    "token, stored",
    [
        ("0.1234", "float32"),
        ("-2.5e-3", "float32"),
        ("1234567", "float32"),
        ("0.000", "float32"),
        # 6 digits where float32's spacing (1.2e-10) is over half a unit of a 7th digit: what a TF-IDF
        # vectorizer's %g writes, judged at its own 6 digits (at 7 a real corpus went to float64)
        ("0.000977133", "float32"),
        ("0.0009771338", "float64"),  # 7 digits there: its float32 gives back 0.0009771337
        ("8589973000", "float64"),  # 7 digits, but float32's spacing there is 1024: 8589973504 rounds to 8589974000
        ("16777217", "float64"),  # 8 digits
        ("0.12345678", "float64"),
        ("1e-40", "float64"),  # float32 subnormal: the float32 does not give 1e-40 back
        ("1e39", "float64"),  # beyond float32
        ("1.00000000000000000000001", "float64"),  # slow path in the kernel, decided in Python
        ("1e-30", "float32"),  # slow path in the kernel (power of ten beyond 10**22), recoverable
    ],
)
def test_auto_decision_for_one_value(tmp_path, token, stored):
    path = tmp_path / "one.svm"
    path.write_text(f"1 1:0.5 2:{token}\n-1 3:0.25\n")
    parsed = parse_upload(path, limits=BIG, value_dtype="auto")
    assert parsed.data.dtype == np.dtype(stored)
    if stored == "float32":
        assert float(parsed.data[1]) == nearest_float32(token)
    else:
        assert parsed.data[1] == float(token)


def test_float32_rounds_the_decimal_once():
    # 1.0000000596046448 lies above 1 + 2**-24, the midpoint between the float32 1 and 1 + 2**-23; its
    # nearest double is that midpoint exactly, so rounding the double would give 1 (ties to even)
    token = "1.0000000596046448"
    assert float(token) == 1 + 2**-24
    assert nearest_float32(token) == 1 + 2**-23
    _, check = _kernel_f32([token], VAL_F32)
    assert check[0] == V_SLOW  # the kernel leaves it to Python
    tokens = _short_tokens(1, 2000) + [repr(float(x)) for x in np.random.default_rng(2).normal(size=500)]
    tokens = [t for t in tokens if abs(float(t)) < 3e38]
    out, check = _kernel_f32(tokens, VAL_F32)
    for i, c in enumerate(check):
        if c == V_OK:
            assert float(out[i]) == nearest_float32(tokens[i]), tokens[i]


def test_float32_through_a_file_with_slow_values(tmp_path):
    tokens = ["1.0000000596046448", "0.1", "16777217", "1.00000000000000000000001", "1e-30", "3.4028235e38"]
    path = tmp_path / "f.svm"
    path.write_text("".join(f"1 1:{t}\n" for t in tokens))
    parsed = parse_upload(path, limits=BIG, value_dtype="float32", chunk_bytes=16)
    assert parsed.data.dtype == np.float32
    assert [float(v) for v in parsed.data] == [nearest_float32(t) for t in tokens]
    assert parsed.data[2] == 16777216.0  # ties to even


def test_float32_refuses_values_beyond_its_range(tmp_path):
    path = tmp_path / "big.svm"
    path.write_text("1 1:0.5\n-1 1:2 3:1e39\n")
    with pytest.raises(UploadParseError) as caught:
        parse_upload(path, limits=BIG, value_dtype="float32")
    assert (caught.value.line, caught.value.column) == (2, 10)
    assert "float32" in str(caught.value)
    path.write_text("a,label\n1e39,1\n")
    with pytest.raises(UploadParseError, match="float32"):
        parse_upload(path, limits=BIG, value_dtype="float32", format="csv")


@pytest.mark.parametrize("chunk", [32, None])
def test_auto_falls_back_to_float64_for_a_late_long_value(tmp_path, chunk):
    rows = [f"{(-1) ** i} {i % 7 + 1}:{i / 1000:.3f} 9:0.25" for i in range(300)]
    rows.append("1 2:0.123456789")
    path = tmp_path / "late.svm"
    path.write_text("\n".join(rows) + "\n")
    parsed = parse_upload(path, limits=BIG, value_dtype="auto", chunk_bytes=chunk)
    reference = parse_upload(path, limits=BIG, value_dtype="float64", chunk_bytes=chunk)
    assert parsed.data.dtype == np.float64
    assert np.array_equal(parsed.data, reference.data)
    assert np.array_equal(parsed.indptr, reference.indptr) and np.array_equal(parsed.indices, reference.indices)
    path.write_text("\n".join(rows[:-1]) + "\n")
    parsed = parse_upload(path, limits=BIG, value_dtype="auto", chunk_bytes=chunk)
    assert parsed.data.dtype == np.float32
    assert np.array_equal(parsed.data, reference.data[: parsed.data.size].astype(np.float32))


def test_zero_based_auto_detects_a_late_zero_index(tmp_path):
    rows = [f"1 {j + 1}:1 {j + 3}:2" for j in range(200)] + ["-1 0:5 4:1"]
    path = tmp_path / "zero.svm"
    path.write_text("\n".join(rows) + "\n")
    parsed = parse_upload(path, limits=BIG, chunk_bytes=64)
    assert parsed.zero_based is True
    assert parsed.indices[:2].tolist() == [1, 3] and parsed.indices[-2:].tolist() == [0, 4]
    assert parsed.n_features == 203
    path.write_text("\n".join(rows[:-1]) + "\n")
    parsed = parse_upload(path, limits=BIG, chunk_bytes=64)
    assert parsed.zero_based is False and parsed.indices[:2].tolist() == [0, 2]


# ---------------------------------------------------------------------------------------------
# through the service


def _text(values: list[str]) -> bytes:
    rows = []
    for i in range(120):
        features = " ".join(f"{j + 1}:{values[(i * 3 + j) % len(values)]}" for j in range(0, 6, 2))
        rows.append(f"{1 if i % 2 else -1} {features}")
    return ("\n".join(rows) + "\n").encode()


FOUR_DECIMALS = ["0.1234", "-0.5", "1.25", "0.0001", "-2.7182", "3.1416", "0.3333"]


@pytest.mark.parametrize(
    "option, stored", [(None, "float32"), ("auto", "float32"), ("float32", "float32"), ("float64", "float64")]
)
def test_upload_option_and_what_is_stored(service, http, option, stored):
    params = {"name": f"dtype-{option}"}
    if option is not None:
        params["value_dtype"] = option
    answer = upload(http, _text(FOUR_DECIMALS), **params)
    assert answer.status_code == 201, answer.text
    assert answer.json()["value_dtype"] == stored
    record, arrays = _stored(service, answer.json()["id"])
    assert arrays["data"].dtype == np.dtype(stored) and arrays["indices"].dtype == np.int32
    expected = [float(v) if stored == "float64" else nearest_float32(v) for v in _values_of(_text(FOUR_DECIMALS))]
    assert arrays["data"].tolist() == expected


def test_upload_auto_keeps_float64_for_long_values(http):
    answer = upload(http, _text(FOUR_DECIMALS + ["0.123456789"]), name="long")
    assert answer.status_code == 201 and answer.json()["value_dtype"] == "float64"
    bad = upload(http, _text(["1e39", "1"]), name="huge", value_dtype="float32")
    assert bad.status_code == 422 and "float32" in bad.json()["error"]["message"]
    wrong = upload(http, _text(["1"]), name="x", value_dtype="float16")
    assert wrong.status_code == 422


def _values_of(text: bytes) -> list[str]:
    return [pair.split(":")[1] for line in text.decode().splitlines() for pair in line.split()[1:]]


def _stored(service, dataset_id):
    import redis

    from core.storage.objects import LocalDirectoryStore
    from core.storage.records import datasets_in

    client = redis.Redis.from_url(service.redis_url)
    try:
        store = datasets_in(client, LocalDirectoryStore(service.data_dir / "objects"))
        record = store.get(dataset_id, "public")
        return record, store.load_arrays(record)
    finally:
        client.close()


def _train(http, dataset_id, solver="dcd", **params):
    job = http.post(
        "/v1/jobs", json={"dataset_id": dataset_id, "solver": solver, "params": {"C": 1.0, **params}}
    ).json()
    done = wait_job(http, job["id"])
    assert done["status"] == "succeeded", done
    model = http.get(f"/v1/models/{done['model_id']}").json()
    weights = http.post(
        f"/v1/models/{done['model_id']}/predict",  # one unit row per feature the model has
        json={"instances": [{str(j + 1): 1.0} for j in range(model["n_features"])]},
    ).json()["scores"]
    return model, np.array(weights)


def test_a_data_set_stored_before_value_types_trains_as_before(service, http):
    """A record without `value_dtype` (float64 arrays, as stored before) reads as float64 and trains like a float64 upload."""
    from dataclasses import replace

    import redis

    from core.storage.records import datasets_in

    text = _text(FOUR_DECIMALS)
    fresh = upload(http, text, name="fresh-float64", value_dtype="float64").json()
    record, arrays = _stored(service, fresh["id"])
    legacy = replace(record, id="ds_legacy0000000000000", name="legacy", arrays={}, value_dtype=None, shards=None)
    assert "value_dtype" not in legacy.to_document()
    client = redis.Redis.from_url(service.redis_url)
    try:
        datasets_in(client, None).create(legacy, arrays)  # arrays in Redis, as data sets were stored then
    finally:
        client.close()
    shown = http.get("/v1/datasets/ds_legacy0000000000000").json()
    assert shown["value_dtype"] == "float64" and shown["nnz"] == fresh["nnz"]
    for solver in ("dcd", "ocas"):
        model_legacy, scores_legacy = _train(http, "ds_legacy0000000000000", solver)
        model_fresh, scores_fresh = _train(http, fresh["id"], solver)
        assert model_legacy["n_iter"] == model_fresh["n_iter"]
        assert np.array_equal(scores_legacy, scores_fresh)


@pytest.mark.parametrize("solver", ["ocas", "cpa", "dcd"])
def test_float32_data_set_trains_on_the_widened_values(http, solver):
    """Training sees float64(float32(v)): the same model as a float64 data set holding exactly those values."""
    text = _text(FOUR_DECIMALS)
    single = upload(http, text, name="as-float32").json()
    assert single["value_dtype"] == "float32"
    widened = text.decode()
    for value in set(FOUR_DECIMALS):
        widened = widened.replace(f":{value}\n", f":{float(np.float32(value))!r}\n").replace(
            f":{value} ", f":{float(np.float32(value))!r} "
        )
    double = upload(http, widened.encode(), name="widened", value_dtype="float64").json()
    assert double["value_dtype"] == "float64"
    model_single, scores_single = _train(http, single["id"], solver)
    model_double, scores_double = _train(http, double["id"], solver)
    assert model_single["n_iter"] == model_double["n_iter"]
    np.testing.assert_allclose(scores_single, scores_double, rtol=1e-12, atol=1e-12)


def test_linear_scores_by_row_blocks_equal_the_whole_product(monkeypatch):
    """Scoring a large float32 matrix goes by blocks of rows (no float64 copy of all of it): same scores, bit for bit."""
    import scipy.sparse as sp

    from core.scoring import models
    from core.storage.documents import ModelDescription

    rng = np.random.default_rng(5)
    matrix = sp.random(3000, 200, density=0.05, format="csr", random_state=6, dtype=np.float32)
    scorer = models.Scorer(
        ModelDescription(kind="linear", n_features=200, labels=[-1.0, 1.0, 2.0]),
        {"weights": rng.normal(size=(3, 200)), "offsets": rng.normal(size=3)},
    )
    whole = scorer.decision_values(matrix)
    monkeypatch.setattr(models, "SCORE_BLOCK_NNZ", 100)
    blocked = scorer.decision_values(matrix)
    assert np.array_equal(blocked, whole)
    assert np.array_equal(blocked, matrix.astype(np.float64) @ scorer.weights_t + scorer.offsets)


def test_a_linear_scorer_keeps_its_weights_in_the_layout_the_product_reads():
    """scipy's CSR x dense product reads the dense factor's rows: the scorer holds the weights transposed and
    contiguous, so scoring does not copy a (k, n_features) matrix's transpose at every call (one row against
    sector's 105 x 55,197 model: 15 ms, 0.01 ms now); the values are those of the weights as stored."""
    import scipy.sparse as sp

    from core.scoring import models
    from core.storage.documents import ModelDescription

    rng = np.random.default_rng(8)
    weights = rng.normal(size=(4, 300))
    scorer = models.Scorer(
        ModelDescription(kind="linear", n_features=300, labels=[0.0, 1.0, 2.0, 3.0]),
        {"weights": weights, "offsets": rng.normal(size=4)},
    )
    assert scorer.weights_t.flags.c_contiguous and scorer.weights_t.shape == (300, 4)
    row = sp.random(1, 300, density=0.1, format="csr", random_state=9)
    assert np.array_equal(scorer.decision_values(row), row @ weights.T + scorer.offsets)
    dense = rng.normal(size=(3, 300))
    assert np.allclose(scorer.decision_values(dense), dense @ weights.T + scorer.offsets, rtol=1e-12, atol=1e-12)
