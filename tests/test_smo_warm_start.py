"""smo's warm starts, a search's path along C: a start from the previous C's alpha and gradients reaches the
cold optimum, saves steps where it should, takes none at the optimum, and bad starts are refused by name."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from core.schemas.solver_params import SmoParams
from tests import naive
from tests.helpers import breast_cancer_scaled, with_params
from worker.solvers.common import SolverInputError
from worker.solvers.smo.solve import solve_smo

pytestmark = pytest.mark.solver  # the kinds of tests: tests/conftest.py, TEST_KINDS

_csr = naive.csr_parts


@pytest.fixture(scope="module")
def breast_cancer():
    return breast_cancer_scaled()


def _warm_case(breast_cancer):
    matrix, y = breast_cancer
    indptr, indices, data = _csr(matrix)
    kwargs = dict(n_features=matrix.shape[1], kernel={"type": "rbf", "gamma": 1.0 / 30.0}, trace_every=10**9)
    return (indptr, indices, data, y), kwargs


def _digits_pair():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    pair = (y == 3) | (y == 8)
    matrix = sp.csr_matrix(X[pair])
    indptr, indices, data = _csr(matrix)
    kwargs = dict(n_features=64, kernel={"type": "rbf", "gamma": 0.01}, trace_every=10**9)
    return (indptr, indices, data, np.where(y[pair] == 3, 1.0, -1.0)), kwargs


@pytest.mark.parametrize("case", ["breast_cancer", "digits_pair"])
@pytest.mark.parametrize("C_from,C_to", [(0.1, 1.0), (1.0, 10.0), (10.0, 1.0)])
def test_warm_start_reaches_the_cold_optimum(breast_cancer, case, C_from, C_to):
    from core.solvers import solver_params
    from worker.training.registry import warm_start_arguments

    problem, kwargs = _warm_case(breast_cancer) if case == "breast_cancer" else _digits_pair()
    first = solve_smo(*problem, **with_params(SmoParams, {"C": C_from, **kwargs}))
    assert first.extra["gradient"] is not None and first.extra["gradient"].shape == problem[3].shape
    cold = solve_smo(*problem, **with_params(SmoParams, {"C": C_to, **kwargs}))
    params = solver_params("smo", {"C": C_to, "kernel": kwargs["kernel"]})
    start = warm_start_arguments("smo", first, params, C_from)
    assert set(start) == {"alpha0", "gradient0", "gradient_bar0"}
    warm = solve_smo(*problem, **with_params(SmoParams, {"C": C_to, **kwargs, **start}))
    recomputed = solve_smo(*problem, alpha0=start["alpha0"], **with_params(SmoParams, {"C": C_to, **kwargs}))
    for result in (warm, recomputed):
        assert result.converged
        assert result.extra["dual_objective"] == pytest.approx(cold.extra["dual_objective"], rel=1e-4)
        assert result.objective == pytest.approx(cold.objective, rel=5e-3)
    # the start's G and G_bar are those of its alpha: computed from the kernel rows instead, the run is the same
    # but for roundings
    assert abs(warm.n_iter - recomputed.n_iter) <= max(2, 0.01 * recomputed.n_iter)


def test_warm_start_saves_steps_on_a_separable_pair():
    """digits' pairs: at C = 1 few support vectors are at their bound, so the start is alpha as it is."""
    from core.solvers import solver_params
    from worker.training.registry import warm_start_arguments

    problem, kwargs = _digits_pair()
    first = solve_smo(*problem, **with_params(SmoParams, {"C": 1.0, **kwargs}))
    assert first.extra["n_bounded_sv"] < 0.5 * first.extra["n_sv"]
    start = warm_start_arguments("smo", first, solver_params("smo", {"C": 10.0, "kernel": kwargs["kernel"]}), 1.0)
    np.testing.assert_array_equal(start["alpha0"], first.extra["alpha"])
    np.testing.assert_allclose(start["gradient0"], first.extra["gradient"], rtol=0, atol=1e-12)
    assert not start["gradient_bar0"].any()
    cold = solve_smo(*problem, **with_params(SmoParams, {"C": 10.0, **kwargs}))
    warm = solve_smo(*problem, **with_params(SmoParams, {"C": 10.0, **kwargs, **start}))
    assert warm.n_iter < 0.7 * cold.n_iter


def test_a_start_at_the_optimum_takes_no_step(breast_cancer):
    problem, kwargs = _warm_case(breast_cancer)
    first = solve_smo(*problem, **with_params(SmoParams, {"C": 1.0, **kwargs}))
    given = {"gradient0": first.extra["gradient"], "gradient_bar0": first.extra["gradient_bar"]}
    again = solve_smo(*problem, alpha0=first.extra["alpha"], **with_params(SmoParams, {"C": 1.0, **kwargs, **given}))
    assert again.n_iter == 0 and again.converged
    assert again.extra["dual_objective"] == pytest.approx(first.extra["dual_objective"], rel=1e-12)


@pytest.mark.parametrize(
    "start,word",
    [
        ({"alpha0": "off_plane"}, "sum_i y_i alpha0_i = 0"),
        ({"alpha0": "outside"}, "[0, C * class_weight]"),
        ({"alpha0": "short"}, "one value per row"),
        ({"gradient0": "alone"}, "give alpha0 with it"),
        ({"gradient_bar0": "alone"}, "give alpha0 with it"),
        ({"alpha0": "zeros", "gradient0": "nan"}, "one finite value per row"),
    ],
)
def test_bad_starts_are_refused(breast_cancer, start, word):
    problem, kwargs = _warm_case(breast_cancer)
    y = problem[3]
    n = y.size
    values = {
        "off_plane": np.where(y > 0, 0.5, 0.0),
        "outside": np.full(n, 2.0),
        "short": np.zeros(n - 1),
        "alone": np.zeros(n),
        "zeros": np.zeros(n),
        "nan": np.full(n, np.nan),
    }
    with pytest.raises(SolverInputError, match=__import__("re").escape(word)):
        solve_smo(
            *problem,
            **with_params(SmoParams, {"C": 1.0, **kwargs, **{key: values[name] for key, name in start.items()}}),
        )
