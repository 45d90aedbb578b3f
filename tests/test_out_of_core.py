"""ocas and cpa on data larger than the memory they may use (``worker.solvers.streamed_data``), against the same
solve in memory; the memory budget of a job and the refusal of the solvers that need their data in memory."""

from __future__ import annotations

import numpy as np
import pytest

from core.schemas.solver_params import CpaParams, DcdParams, OcasParams
from worker.runtime import memory_budget
from worker.solvers import cut_data, streamed_data
from worker.solvers.cpa import solve_cpa
from worker.solvers.cut_data import prepare_data
from worker.solvers.ocas import solve_ocas
from worker.training.context import FitContext
from worker.training.fit import train_model

pytestmark = pytest.mark.unit


def random_csr(n: int, d: int, per_row: int, seed: int = 0):
    """Rows of ``per_row`` sorted features, float32 values, labels from a planted vector with 10% flipped."""
    rng = np.random.default_rng(seed)
    indptr = np.arange(n + 1, dtype=np.int64) * per_row
    indices = np.sort(rng.integers(0, d, size=(n, per_row)), axis=1).astype(np.int32).ravel()
    data = rng.random(n * per_row).astype(np.float32)
    planted = rng.normal(size=d)
    margin = np.add.reduceat(data * planted[indices], indptr[:-1])
    y = np.where(margin >= np.median(margin), 1.0, -1.0)
    y[rng.random(n) < 0.1] *= -1
    return indptr, indices, data, y


def mapped(tmp_path, indices, data):
    """The arrays as the worker cache gives them: ``.npy`` files mapped copy-on-write."""
    np.save(tmp_path / "indices.npy", indices)
    np.save(tmp_path / "data.npy", data)
    return np.load(tmp_path / "indices.npy", mmap_mode="c"), np.load(tmp_path / "data.npy", mmap_mode="c")


@pytest.fixture()
def small_blocks(monkeypatch):
    """Blocks of a few rows and reads in pieces of a few hundred bytes, so that a small data set has many."""
    monkeypatch.setattr(streamed_data, "BLOCK_NNZ", 997)
    monkeypatch.setattr(streamed_data, "READ_PIECE", 512)


@pytest.mark.parametrize("shape", [(3000, 200), (500, 5000)], ids=["dense_cuts", "output_cuts"])
def test_ocas_out_of_core_is_the_in_memory_solve_bit_for_bit(tmp_path, small_blocks, monkeypatch, shape):
    monkeypatch.setattr(cut_data, "MIN_CUTS", 1000)  # the same cuts kept in memory and out of core,
    monkeypatch.setattr(streamed_data, "MIN_CUT_ROOM", 400)  # and room for them (and their copy as they grow)
    n, d = shape
    indptr, indices, data, y = random_csr(n, d, 20)
    params = OcasParams(C=1.0, tol_rel=1e-4)
    in_memory = solve_ocas(indptr, indices, data, y, n_features=d, params=params)
    mapped_indices, mapped_data = mapped(tmp_path, indices, data)
    # the solve's vectors, room for 400 cuts, and about half of the data: the rest streamed
    memory = -streamed_data.memory_room(n, d, 0) + indices.size * 4
    streamed = solve_ocas(indptr, mapped_indices, mapped_data, y, n_features=d, params=params, memory_bytes=memory)
    report = streamed.extra["data"]
    assert in_memory.extra["data"] == {"form": "memory"}
    assert report["form"] == "streamed" and report["blocks"] >= 3 and 0 < report["pinned_rows"] < n
    assert report["passes"] >= streamed.n_iter and report["read_bytes"] > 0
    assert streamed.n_iter == in_memory.n_iter
    assert streamed.objective == in_memory.objective
    assert np.array_equal(streamed.w, in_memory.w) and streamed.bias == in_memory.bias


def test_ocas_with_its_cuts_taking_back_pinned_rows_reaches_the_same_optimum(tmp_path, small_blocks):
    indptr, indices, data, y = random_csr(3000, 200, 20, seed=1)
    params = OcasParams(C=1.0, tol_rel=1e-4)
    in_memory = solve_ocas(indptr, indices, data, y, n_features=200, params=params)
    mapped_indices, mapped_data = mapped(tmp_path, indices, data)
    memory = streamed_data.state_bytes(3000, 200) + 2 * 997 * 8 + 300 * 8 * 201  # the vectors, buffers and cuts
    streamed = solve_ocas(indptr, mapped_indices, mapped_data, y, n_features=200, params=params, memory_bytes=memory)
    report = streamed.extra["data"]
    assert report["pinned_rows"] < 3000 and report["streamed_bytes"] > 0
    # fewer cuts kept (their budget is a share of the memory): other iterates, both certified within tol_rel
    assert streamed.converged and in_memory.converged
    assert abs(streamed.objective - in_memory.objective) <= 1e-4 * in_memory.objective


def test_cuts_past_the_memory_are_aggregated_and_the_optimum_is_reached(tmp_path, monkeypatch):
    """Out of core with memory for about 40 dense cuts and every row on disk: past that, the two cuts with the
    smallest weights become their aggregate (a valid cut; w and the lower bound unchanged), and ocas still
    reaches the in-memory optimum, certified (more slowly: 141 cuts were active at the end in memory)."""
    monkeypatch.setattr(streamed_data, "BLOCK_NNZ", 20_000)
    indptr, indices, data, y = random_csr(3000, 200, 20, seed=1)
    params = OcasParams(C=10.0, tol_rel=1e-3, max_inactive=1000)
    in_memory = solve_ocas(indptr, indices, data, y, n_features=200, params=params)
    mapped_indices, mapped_data = mapped(tmp_path, indices, data)
    memory = streamed_data.state_bytes(3000, 200) + 2 * 20_000 * 8 + 40 * 8 * 201
    streamed = solve_ocas(indptr, mapped_indices, mapped_data, y, n_features=200, params=params, memory_bytes=memory)
    assert in_memory.extra["n_cuts"] > 40 and in_memory.extra["aggregated_cuts"] == 0  # it keeps more cuts
    assert streamed.extra["data"]["pinned_rows"] == 0
    assert streamed.extra["aggregated_cuts"] > 0 and streamed.extra["n_cuts"] <= 40
    assert streamed.converged and streamed.extra["gap_rel"] <= 1e-3
    assert abs(streamed.objective - in_memory.objective) <= 1e-3 * in_memory.objective


@pytest.mark.parametrize(("objective", "n", "tol_rel"), [("classification", 1500, 1e-4), ("roc_area", 300, 1e-3)])
def test_cpa_out_of_core_matches_in_memory(tmp_path, small_blocks, monkeypatch, objective, n, tol_rel):
    monkeypatch.setattr(streamed_data, "MIN_CUT_ROOM", 300)  # room for the cuts beside the pinned rows
    indptr, indices, data, y = random_csr(n, 300, 15, seed=2)
    params = CpaParams(C=1.0, tol_rel=tol_rel, objective=objective)
    in_memory = solve_cpa(indptr, indices, data, y, n_features=300, params=params)
    mapped_indices, mapped_data = mapped(tmp_path, indices, data)
    streamed = solve_cpa(
        indptr,
        mapped_indices,
        mapped_data,
        y,
        n_features=300,
        params=params,
        memory_bytes=-streamed_data.memory_room(n, 300, 0) + indices.size * 8 // 3,  # a third of the rows pinned
    )
    assert streamed.extra["data"]["form"] == "streamed"
    assert streamed.converged and in_memory.converged
    # in memory, classification reads a listed share of the rows between full passes (out of core: full passes)
    assert abs(streamed.objective - in_memory.objective) <= tol_rel * in_memory.objective


def test_streamed_passes_give_the_in_memory_sums(tmp_path, small_blocks):
    indptr, indices, data, y = random_csr(800, 50, 9, seed=3)
    mapped_indices, mapped_data = mapped(tmp_path, indices, data)
    X = prepare_data(indptr, indices, data, 50, 1.0, 1)
    memory = -streamed_data.memory_room(800, 50, 0) + 2 * 990 * 8 + 8000  # the buffers, 8000 bytes of rows
    S = prepare_data(indptr, mapped_indices, mapped_data, 50, 1.0, 1, memory_bytes=memory)
    try:
        assert S.kind == "streamed" and S._indices.fd >= 0  # read from the file, not through the map
        assert len(S.pinned) == 1 and S.pinned_rows == 110 and S.memory_bytes == 110 * 9 * 8
        w = np.random.default_rng(0).normal(size=51)
        expected, got = np.zeros(800), np.zeros(800)
        X.outputs(w, expected)
        for _ in range(3):  # forward, backward, forward: the same sums
            got[:] = 0.0
            S.outputs(w, got)
            assert np.array_equal(got, expected)
        coef = np.zeros(800)
        coef[[5, 6, 400, 401, 799]] = [1.0, -1.0, 0.5, 2.0, -3.0]  # few rows: read one by one
        assert np.array_equal(S.weights(coef), X.weights(coef))
        coef = np.random.default_rng(1).normal(size=800)  # every row: whole blocks
        assert np.array_equal(S.weights(coef), X.weights(coef))
        S.make_room(S.memory_limit)  # cuts that need every byte: the pinned rows go back to disk
        assert S.pinned == [] and S.released_blocks == 1 and S.streamed_bytes == 800 * 9 * 8
        S.outputs(w, got)
        assert np.array_equal(got, expected)
        assert np.array_equal(S.weights(coef), X.weights(coef))
        with pytest.raises(ValueError, match="increasing order"):
            S.scatter(coef, np.array([700, 600], dtype=np.int64), 2, np.zeros(51))
    finally:
        S.close()


def test_arrays_in_memory_stream_by_copies(small_blocks):
    """Arrays that are no file's map (a subset made in memory) stream too, copied block by block."""
    indptr, indices, data, y = random_csr(400, 30, 5, seed=4)
    S = prepare_data(indptr, indices, data, 30, 0.0, 1, memory_bytes=0)
    try:
        assert S._indices.fd < 0
        out, expected = np.zeros(400), np.zeros(400)
        w = np.linspace(-1, 1, 31)
        S.outputs(w, out)
        prepare_data(indptr, indices, data, 30, 0.0, 1).outputs(w, expected)
        assert np.array_equal(out, expected)
    finally:
        S.close()


def test_job_memory_is_the_setting_else_the_cgroup_or_the_machine():
    assert memory_budget.job_memory_bytes(123_456_789) == 123_456_789
    auto = memory_budget.job_memory_bytes(0)
    assert 0 < auto <= memory_budget.machine_memory_bytes()
    # less than the worker process itself: nothing for the data, every row streamed
    assert memory_budget.data_memory_bytes(1) == 0


def test_solvers_that_need_memory_refuse_data_larger_than_it():
    indptr, indices, data, y = random_csr(100, 10, 3)
    arrays = {"indptr": indptr, "indices": indices, "data": data, "y": y}
    memory_budget.check_fits("ocas", arrays, 0)  # streams
    memory_budget.check_fits("cpa", arrays, 0)
    memory_budget.check_fits("dcd", arrays, 10_000)  # fits
    with pytest.raises(memory_budget.DataExceedsMemory) as caught:
        memory_budget.check_fits("dcd", arrays, 1000)
    message = str(caught.value)
    assert "dcd needs the data set in memory" in message and "2400 bytes" in message and "may hold 1000" in message
    assert "ocas" in message and "cpa" in message and "HINGE_JOB_MEMORY" in message


def test_a_training_under_a_data_memory_streams_one_vs_rest(small_blocks):
    """The job's data memory reaches every problem's solve (``FitContext.data_memory``): three classes."""
    from tests.helpers import NullSink

    indptr, indices, data, _ = random_csr(600, 40, 6, seed=5)
    y = np.random.default_rng(5).integers(0, 3, size=600).astype(np.float64)
    arrays = {"indptr": indptr, "indices": indices, "data": data, "y": y}
    params = OcasParams(C=0.5)
    plain = train_model("ocas", params, arrays, 40, context=FitContext(NullSink(), n_processes=1))
    streamed = train_model("ocas", params, arrays, 40, context=FitContext(NullSink(), n_processes=1, data_memory=0))
    access = streamed.model.data_access
    assert plain.model.data_access is None
    assert access["form"] == "streamed" and access["memory_bytes"] == 0 and access["streamed_bytes"] == 600 * 6 * 8
    # every pass reads the streamed rows but the two blocks still in the buffers (passes alternate directions)
    assert access["passes"] >= 3 and access["read_bytes"] >= access["passes"] * (access["streamed_bytes"] - 2 * 997 * 8)
    # every problem certified within tol_rel (0.01) of its optimum, in memory and out of core
    for a, b in zip(streamed.model.objectives, plain.model.objectives, strict=True):
        assert abs(a - b) <= 0.01 * max(a, b)


def test_dcd_params_are_not_given_memory_bytes():
    from core.solvers import spec_of
    from worker.training.registry import solve_arguments

    assert "memory_bytes" not in solve_arguments(
        spec_of("dcd"), DcdParams(), class_weight=(1.0, 1.0), parallel=None, memory_bytes=10
    )
    assert (
        solve_arguments(spec_of("ocas"), OcasParams(), class_weight=(1.0, 1.0), parallel=None, memory_bytes=10)[
            "memory_bytes"
        ]
        == 10
    )
