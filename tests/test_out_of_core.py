"""ocas and cpa on data larger than the memory they may use (``worker.solvers.streamed_data``), against the same
solve in memory; the memory budget of a job and the refusal of the solvers that need their data in memory."""

from __future__ import annotations

import numpy as np
import pytest

from core.schemas.solver_params import CpaParams, DcdParams, OcasParams
from worker.runtime import memory_budget
from worker.solvers import cut_data, cut_store, data_files, data_passes, streamed_data
from worker.solvers.common import SolverControl
from worker.solvers.cpa import solve_cpa
from worker.solvers.cut_data import prepare_data
from worker.solvers.data_passes import available_cores
from worker.solvers.ocas import OCAS_ROW_BYTES, solve_ocas
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
    monkeypatch.setattr(data_files, "READ_PIECE", 512)
    monkeypatch.setattr(streamed_data, "ROW_READ_BYTES", 512)  # a block's 2 listed rows read alone, not 11


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
    memory = -streamed_data.memory_room(n, d, 0, OCAS_ROW_BYTES) + indices.size * 4
    streamed = solve_ocas(indptr, mapped_indices, mapped_data, y, n_features=d, params=params, memory_bytes=memory)
    report = streamed.extra["data"]
    assert in_memory.extra["data"] == {"form": "memory"}
    # rows streamed (read_bytes), the block after the pinned ones pinned again as the room the cuts leave allows
    assert report["form"] == "streamed" and report["blocks"] >= 3 and report["packed"]
    assert report["passes"] >= streamed.n_iter and report["read_bytes"] > 0 and report["repinned_blocks"] > 0
    assert streamed.n_iter == in_memory.n_iter
    assert streamed.objective == in_memory.objective
    assert np.array_equal(streamed.w, in_memory.w) and streamed.bias == in_memory.bias


@pytest.mark.parametrize("step_error", [0.0, 0.3], ids=["last_step", "wrong_step"])
def test_ocas_out_of_core_guesses_its_next_cut_in_the_pass_for_the_outputs(tmp_path, monkeypatch, step_error):
    """The pass for the outputs of w_t also moves the current cut to the one the last step would give (row by row,
    as the outputs come); the cut's
    own scatter then reads only the rows the guess got wrong. Whatever the guess (the last step, or a step 0.3
    away from it: many rows wrong), the cuts are those of the solve without a guess, with fewer bytes read."""
    monkeypatch.setattr(streamed_data, "BLOCK_NNZ", 4000)  # 15 blocks, each read whole (no row read alone)
    n, d = 3000, 200
    indptr, indices, data, y = random_csr(n, d, 20, seed=2)
    # 41 iterations of 15 blocks each (at tol_rel 1e-4: 479, 15 CPU-s a case in the suite for the same checks)
    params = OcasParams(C=1.0, tol_rel=1e-3)
    mapped_indices, mapped_data = mapped(tmp_path, indices, data)
    monkeypatch.setattr(cut_data, "PARALLEL_NNZ", 1000)  # two threads: a partial cut each
    memory = streamed_data.state_bytes(n, d, OCAS_ROW_BYTES) + 2 * 4000 * 8 + 2 * 8 * (d + 1) + 30 * 8 * (d + 1)
    guess_cut = cut_data.CurrentCut.guess
    steps: list[float] = []

    def guess_at(self, y, o_b, k, lam):
        steps.append(k)
        return guess_cut(self, y, o_b, k + step_error, lam)

    monkeypatch.setattr(cut_data.CurrentCut, "guess", guess_at)
    runs = {}
    for guess in (False, True):
        monkeypatch.setattr(cut_data.CurrentCut, "GUESS", guess)
        runs[guess] = solve_ocas(
            indptr, mapped_indices, mapped_data, y, n_features=d, params=params, n_processes=2, memory_bytes=memory
        )
    plain, guessed = runs[False], runs[True]
    assert plain.extra["data"]["pinned_rows"] == 0 and guessed.extra["data"]["pinned_rows"] == 0
    assert guessed.extra["threads"] == 2 or available_cores() == 1
    assert len(set(steps)) > 5  # guessed at the last step of each iteration
    assert guessed.n_iter == plain.n_iter and guessed.converged
    assert guessed.objective == pytest.approx(plain.objective, rel=1e-12)
    assert np.allclose(guessed.w, plain.w, rtol=0, atol=1e-9 * np.abs(plain.w).max())
    if step_error == 0.0:  # a pass an iteration and a few rows, not two passes
        read = guessed.extra["data"]["read_bytes"] / plain.extra["data"]["read_bytes"]
        assert read < 0.75, read


def test_ocas_with_its_cuts_taking_back_pinned_rows_reaches_the_same_optimum(tmp_path, small_blocks):
    indptr, indices, data, y = random_csr(3000, 200, 20, seed=1)
    params = OcasParams(C=1.0, tol_rel=1e-4)
    in_memory = solve_ocas(indptr, indices, data, y, n_features=200, params=params)
    mapped_indices, mapped_data = mapped(tmp_path, indices, data)
    memory = (
        streamed_data.state_bytes(3000, 200, OCAS_ROW_BYTES) + 2 * 997 * 8 + 300 * 8 * 201
    )  # vectors, buffers, cuts
    streamed = solve_ocas(indptr, mapped_indices, mapped_data, y, n_features=200, params=params, memory_bytes=memory)
    report = streamed.extra["data"]
    assert report["pinned_rows"] < 3000 and report["streamed_bytes"] > 0
    # fewer cuts kept (their budget is a share of the memory): other iterates, both certified within tol_rel
    assert streamed.converged and in_memory.converged
    assert abs(streamed.objective - in_memory.objective) <= 1e-4 * in_memory.objective


def test_only_a_solver_that_guesses_its_cuts_reserves_room_for_the_guess(tmp_path, monkeypatch):
    """The partial sums of a cut guessed in the pass for the outputs (a row of d + 1 a thread) are kept out of the
    memory only for OCAS (``guess_cuts``); cpa's streamed data leaves that room to its pinned rows and cuts, and
    refuses a guess it has no room for."""
    monkeypatch.setattr(cut_data, "PARALLEL_NNZ", 1000)
    monkeypatch.setattr(streamed_data, "BLOCK_NNZ", 4000)
    n, d = 3000, 200
    indptr, indices, data, _ = random_csr(n, d, 20, seed=2)
    mapped_indices, mapped_data = mapped(tmp_path, indices, data)
    memory = streamed_data.state_bytes(n, d, OCAS_ROW_BYTES) + 2 * 4000 * 8 + 2 * 8 * (d + 1) + 30 * 8 * (d + 1)
    plain, guessing = (
        prepare_data(indptr, mapped_indices, mapped_data, d, 1.0, 2, memory, OCAS_ROW_BYTES, guess_cuts=guess)
        for guess in (False, True)
    )
    assert isinstance(plain, streamed_data.StreamedData) and isinstance(guessing, streamed_data.StreamedData)
    assert guessing.reserved - plain.reserved == 8 * (d + 1) * guessing.n_threads
    guess = cut_data.CutGuess(np.ones(n), np.zeros(n), 0.5, 1.0, np.zeros(n), False, np.zeros(d + 1))
    with pytest.raises(ValueError, match="guess_cuts"):
        plain.outputs(np.zeros(d + 1), np.zeros(n), guess)


def test_cuts_past_the_memory_are_aggregated_and_the_optimum_is_reached(tmp_path, monkeypatch):
    """Out of core with memory for about 25 dense cuts in float64 (50 in float32) and every row on disk: past
    that, the two cuts with the smallest weights become their aggregate (a valid cut; w and the lower bound
    unchanged), and ocas still reaches the in-memory optimum, certified, more slowly (69 cuts at the end in
    memory). Stored as float32, each cut (and aggregate) has its offset lowered by its rounding times a bound on
    |w*|: the lower bound is still below the optimum at every iteration, and far fewer iterations are needed
    (here 323 against 1,298, and 113 in memory)."""
    monkeypatch.setattr(streamed_data, "BLOCK_NNZ", 20_000)
    indptr, indices, data, y = random_csr(3000, 200, 20, seed=1)
    params = OcasParams(C=10.0, tol_rel=1e-3, max_inactive=1000)
    in_memory = solve_ocas(indptr, indices, data, y, n_features=200, params=params)
    optimum = solve_ocas(indptr, indices, data, y, n_features=200, params=OcasParams(C=10.0, tol_rel=1e-9)).objective
    mapped_indices, mapped_data = mapped(tmp_path, indices, data)
    parts = 8 * 201  # a partial sum of a cut guessed in a gather, for the one thread
    memory = streamed_data.state_bytes(3000, 200, OCAS_ROW_BYTES) + 2 * 20_000 * 8 + parts + 40 * 8 * 201
    asked: list[tuple[int, int]] = []  # (bytes the cut store was to hold, what the solve may hold besides)
    make_room = streamed_data.StreamedData.make_room

    def spy(self, cut_bytes):
        asked.append((cut_bytes, self.memory_limit - self.reserved))
        make_room(self, cut_bytes)

    monkeypatch.setattr(streamed_data.StreamedData, "make_room", spy)
    runs = {}
    for rounded in (False, True):
        monkeypatch.setattr(cut_store, "ROUNDED_BELOW", 256 if rounded else 0)
        control = SolverControl()
        runs[rounded] = streamed = solve_ocas(
            indptr, mapped_indices, mapped_data, y, n_features=200, params=params, memory_bytes=memory, control=control
        )
        assert streamed.extra["data"]["pinned_rows"] == 0
        assert streamed.extra["aggregated_cuts"] > 0 and streamed.extra["n_cuts"] <= (50 if rounded else 25)
        assert streamed.converged and streamed.extra["gap_rel"] <= 1e-3
        assert abs(streamed.objective - in_memory.objective) <= 1e-3 * in_memory.objective
        assert all(point["lower_bound"] <= optimum for point in control.points)  # certified at every iteration
    # never more than the memory, the copy of a growing store included (its old and new arrays at once)
    assert asked and all(cut_bytes <= room for cut_bytes, room in asked), asked
    assert in_memory.extra["n_cuts"] > 50 and in_memory.extra["aggregated_cuts"] == 0  # it keeps more cuts
    assert runs[True].n_iter < 0.5 * runs[False].n_iter


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


@pytest.mark.parametrize("pack", [True, False], ids=["packed", "as_stored"])
@pytest.mark.parametrize("direct", [True, False], ids=["o_direct", "page_cache"])
def test_streamed_passes_give_the_in_memory_sums(tmp_path, small_blocks, monkeypatch, direct, pack):
    """Rows packed with 16-bit index gaps or read as stored, with O_DIRECT (into aligned buffers, views at the
    array's offset) or through the page cache (where the file system has no O_DIRECT): the in-memory sums bit
    for bit, pinned rows and streamed ones, whole blocks and rows read one by one."""
    indptr, indices, data, y = random_csr(800, 50, 9, seed=3)
    mapped_indices, mapped_data = mapped(tmp_path, indices, data)
    monkeypatch.setattr(streamed_data, "PACK_INDICES", pack)
    monkeypatch.setattr(streamed_data, "MIN_CUT_ROOM", 0)  # the memory below: the vectors, buffers, 9000 B of rows
    if not direct:
        monkeypatch.setattr(data_files, "open_direct", lambda filename: -1)
        monkeypatch.setattr(data_files, "set_direct", lambda fd: False)
    elif data_files.open_direct(str(tmp_path / "indices.npy")) < 0:
        pytest.skip("no O_DIRECT on this file system")
    X = prepare_data(indptr, indices, data, 50, 1.0, 1)
    block_nnz = [990] * 7 + [270]  # blocks of 110 rows (997 non-zeros at most), the last of 30
    gap_ptrs = streamed_data.GAP_PTR_BYTES * (800 + 8) if pack else 0  # 8 blocks of 110 rows or fewer
    parts = 8 * 51  # a partial sum of a cut guessed in a gather, for the one thread
    memory = streamed_data.state_bytes(800, 50) + 2 * 990 * 8 + gap_ptrs + parts + 9000  # one block, two cuts of slack
    S = prepare_data(indptr, mapped_indices, mapped_data, 50, 1.0, 1, memory_bytes=memory)
    try:
        assert S.kind == "streamed" and S._indices.from_file  # read from the file, not through the map
        assert (S._indices.direct is not None) == direct and (S._data.direct is not None) == direct
        assert (S.packed is not None) == pack and S.n_blocks == 8
        if pack:
            assert S.packed.direct == direct and S.describe()["packed"]
        sizes = S.block_bytes  # packed: 2 bytes a gap (random_csr's rows are not sorted: some escape) + values
        if pack:
            expected_sizes = [2 * S.packed.n_gaps[b] + 4 * nnz for b, nnz in enumerate(block_nnz)]
            assert sum(expected_sizes) < 0.9 * 8 * 800 * 9
        else:
            expected_sizes = [8 * nnz for nnz in block_nnz]
        assert sizes == expected_sizes
        assert len(S.pinned) == 1 and S.pinned_rows == 110 and S.memory_bytes == sizes[0]
        w = np.random.default_rng(0).normal(size=51)
        expected, got = np.zeros(800), np.zeros(800)
        X.outputs(w, expected)
        for _ in range(3):  # forward, backward, forward: the same sums
            got[:] = 0.0
            S.outputs(w, got)
            assert np.array_equal(got, expected)
        # blocks 1-7 streamed a pass; the two still in the buffers are not read again (7 and 6 before the
        # backward pass, 1 and 2 before the forward one)
        assert S.read_bytes == 3 * sum(sizes[1:]) - sizes[7] - sizes[6] - sizes[1] - sizes[2]
        coef = np.zeros(800)
        coef[[5, 6, 400, 401, 799]] = [1.0, -1.0, 0.5, 2.0, -3.0]  # few rows: read one by one
        before = S.read_bytes
        assert np.array_equal(S.weights(coef), X.weights(coef))
        assert 0 < S.read_bytes - before < sizes[3]  # rows 400, 401 (block 3) alone; 5, 6 pinned; 799 held
        coef = np.random.default_rng(1).normal(size=800)  # every row: whole blocks
        assert np.array_equal(S.weights(coef), X.weights(coef))
        S.make_room(S.memory_limit)  # cuts that need every byte: the pinned rows go back to disk
        assert S.pinned == [] and S.released_blocks == 1 and S.streamed_bytes == sum(sizes)
        S.outputs(w, got)
        assert np.array_equal(got, expected)
        assert np.array_equal(S.weights(coef), X.weights(coef))
        S.make_room(0)  # the cuts gone: the first block is pinned again the next time a pass reads it
        for _ in range(2):
            S.outputs(w, got)
            assert np.array_equal(got, expected)
        assert S.repinned_blocks == 1 and S.pinned_rows == 110
        assert np.array_equal(S.weights(coef), X.weights(coef))
        with pytest.raises(ValueError, match="increasing order"):
            S.scatter(coef, np.array([700, 600], dtype=np.int64), 2, np.zeros(51))
        # no fallback to the page cache on the way
        assert (S._indices.direct is not None) == direct and (S._data.direct is not None) == direct
    finally:
        S.close()


def test_rows_pack_with_escapes_for_far_apart_features():
    """Gaps of 65,536 and more, a feature 0 first and indices out of order are written with the escape (the
    index itself in two 16-bit halves) and read back exactly."""
    rows = [[0, 1, 65_535, 65_536 + 65_535, 200_000], [5], [], [150_000, 2, 1]]
    indptr = np.array([0, *np.cumsum([len(r) for r in rows])], dtype=np.int64)
    indices = np.array([j for r in rows for j in r], dtype=np.int64)
    gap_ptr = np.empty(5, dtype=np.int64)
    gaps = np.empty(3 * indices.shape[0], dtype=np.uint16)
    n_gaps = data_passes.pack_rows(indptr, indices, gap_ptr, gaps)
    # row 0: gaps 1, 1, 65534, then 65536 and 68929 escaped (3 each); row 1: 6; row 3: three escapes (a gap
    # of 150001, then two going back)
    assert n_gaps == 3 + 6 + 1 + 9 and list(gap_ptr) == [0, 9, 10, 10, 19]
    values = np.arange(1.0, indices.shape[0] + 1)
    coef = np.array([1.0, 2.0, 3.0, -1.0])
    z_packed, z_plain = np.zeros(200_001), np.zeros(200_001)
    all_rows = np.arange(4)
    data_passes.scatter_packed(indptr, gap_ptr, gaps, values, coef, all_rows, 4, z_packed)
    data_passes.scatter_rows(indptr, indices, values, coef, all_rows, 4, z_plain)
    assert np.array_equal(z_packed, z_plain)


def test_rows_whose_indices_do_not_pack_smaller_stream_as_stored(tmp_path, small_blocks):
    """Features far apart (gaps past 65,535: an escape of 3 gaps each, 6 bytes against 4) are read from the data
    set's own files, the scratch file dropped; the sums are the same."""
    indptr, indices, data, y = random_csr(300, 50_000_000, 4, seed=5)
    mapped_indices, mapped_data = mapped(tmp_path, indices, data)
    S = prepare_data(indptr, mapped_indices, mapped_data, 50_000_000, 1.0, 1, memory_bytes=0)
    try:
        assert S.packed is None and not S.describe()["packed"] and S.streamed_bytes == 300 * 4 * 8
        w = np.zeros(50_000_001)
        w[indices] = np.linspace(-1.0, 1.0, indices.shape[0])
        out, expected = np.zeros(300), np.zeros(300)
        S.outputs(w, out)
        prepare_data(indptr, indices, data, 50_000_000, 1.0, 1).outputs(w, expected)
        assert np.array_equal(out, expected)
    finally:
        S.close()


def test_arrays_in_memory_stream_by_copies(small_blocks):
    """Arrays that are no file's map (a subset made in memory) stream too, copied block by block (not packed)."""
    indptr, indices, data, y = random_csr(400, 30, 5, seed=4)
    S = prepare_data(indptr, indices, data, 30, 0.0, 1, memory_bytes=0)
    try:
        assert not S._indices.from_file and S.packed is None
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


def test_dcd_does_not_stream_and_gets_memory_bytes_only_to_size_its_renumbered_copy():
    """dcd needs its data in memory (no ``streams``); it is given ``memory_bytes`` because it is ``memory_bound``: its
    copy of wide data with the features renumbered is made only when data and copy fit (tests/test_dcd.py)."""
    from core.solvers import spec_of
    from worker.training.registry import solve_arguments

    spec = spec_of("dcd")
    assert not spec.streams and spec.memory_bound
    arguments = solve_arguments(spec, DcdParams(), class_weight=(1.0, 1.0), parallel=None, memory_bytes=10)
    assert arguments["memory_bytes"] == 10
    assert (
        solve_arguments(spec_of("ocas"), OcasParams(), class_weight=(1.0, 1.0), parallel=None, memory_bytes=10)[
            "memory_bytes"
        ]
        == 10
    )
