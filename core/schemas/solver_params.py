"""Parameters of each solver, validated and documented one schema per solver.

The C convention is the same for every solver (LIBLINEAR's): minimize
0.5*|w|^2 + C * sum_i loss_i. Solvers whose papers use C/m or C/n convert internally.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictBool, model_validator

from core.schemas.common_params import RELATIVE_GAP, CommonParams, n_processes_field, tol_alone_when_named
from core.schemas.enums import Task
from core.schemas.kernel_params import Kernel, RbfKernel
from core.schemas.split_training import SplitTraining

PositiveFactor = Annotated[float, Field(gt=0, allow_inf_nan=False)]
"""A factor on C: a finite number > 0 (declared in the schema as exclusiveMinimum 0)."""


class DcdParams(CommonParams):
    """Dual coordinate descent (Hsieh et al., ICML 2008) for linear SVMs with L1 or L2 loss."""

    n_processes: int | None = n_processes_field("a single binary problem runs on one thread.")

    C: float = Field(
        default=1.0,
        gt=0,
        allow_inf_nan=False,
        description="Penalty of the training loss: minimize 0.5*|w|^2 + C * sum_i loss_i.",
    )
    loss: Literal[
        "hinge", "squared_hinge", "logistic", "epsilon_insensitive", "squared_epsilon_insensitive", "one_class"
    ] = Field(
        default="hinge",
        description=(
            "`hinge`: max(0, 1 - y w'x) (L1-SVM, LIBLINEAR -s 3). `squared_hinge`: its square (L2-SVM, LIBLINEAR -s 1). "
            "`logistic`: log(1 + exp(-y w'x)), logistic regression (LIBLINEAR -s 7, dual coordinate descent of Yu, "
            "Huang and Lin 2011); its models answer probabilities with no calibration (P = 1 / (1 + exp(-score))), "
            "and `tol` bounds the largest |dual gradient| of a pass (LIBLINEAR -s 7's -e). "
            "Regression (`task: regression` of the model; the labels are real-valued targets): "
            "`epsilon_insensitive`: max(0, |w'x - y| - epsilon), linear epsilon-SVR (LIBLINEAR -s 13, scikit-learn's "
            "LinearSVR); `squared_epsilon_insensitive`: its square (LIBLINEAR -s 12); dual coordinate descent of Ho "
            "and Lin 2012. Their models predict values, not labels. `one_class`: the linear one-class SVM (LIBLINEAR "
            "-s 21; `task: one_class`, labels unused, `nu` the bound on the fraction of rows left out; no C, no bias "
            "feature: its offset is rho), by dual coordinate descent on pairs of variables, certified by its duality "
            "gap; `tol` bounds the largest KKT violation (LIBSVM's -e; default 0.01, LIBLINEAR -s 21's)."
        ),
    )
    nu: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="`loss: one_class` only: an upper bound on the fraction of training rows left outside and a lower "
        "bound on the fraction of support vectors (LIBLINEAR's -n, default 0.5 as there).",
    )
    penalty: Literal["l2", "l1"] = Field(
        default="l2",
        description=(
            "The regularizer. `l2`: 0.5*|w|^2 (every loss above, by dual coordinate descent). `l1`: |w|_1, whose "
            "models are sparse: with `squared_hinge` LIBLINEAR's -s 5 (scikit-learn's LinearSVC(penalty=\"l1\", "
            "dual=False)), by newGLMNET (Yuan, Ho and Lin, JMLR 2012) with the squared hinge's generalized Hessian "
            "where the data have few features (a dense Hessian fits), else by coordinate descent with Newton steps "
            "(CDN, Yuan, Chang, Hsieh and Lin, JMLR 2010, as LIBLINEAR), with `tol` LIBLINEAR -s 5's relative rule "
            "(a pass's summed violation below tol * min(positives, negatives) / rows times the first pass's, as its "
            "usage states, a tenth of that on newGLMNET's steps; default 0.01 as its -e). Its gap_rel comes from the Fenchel dual point of w scaled to feasibility, a "
            "loose bound (0.9 on a9a at 0.03% from the optimum): `tol_rel` is not required by default then (null), "
            "only when given. With `logistic`: L1-regularized logistic regression (LIBLINEAR's -s 6, "
            'scikit-learn\'s LogisticRegression(l1_ratio=1, solver="liblinear"), penalty="l1" before 1.8) by '
            "newGLMNET (Yuan, Ho and Lin, JMLR 2012, as "
            "LIBLINEAR), with the same defaults (tol 0.01, LIBLINEAR's -e; the entropy dual's gap is as loose: 0.87 "
            "on a9a at 0.25% from the optimum). Other losses with `l1` are refused (422)."
        ),
    )
    epsilon: float = Field(
        default=0.1,
        ge=0,
        allow_inf_nan=False,
        description=(
            "Regression losses only: the half-width of the insensitive zone, in the targets' units (residuals "
            "within it cost nothing; LIBLINEAR's -p, default 0.1 as there). Any other value with a classification "
            "loss is refused (422)."
        ),
    )
    bias: float | None = Field(
        default=1.0,
        ge=0,
        allow_inf_nan=False,
        description=(
            "Value B of a constant feature appended to every row, so the model learns an offset b = B*w_B "
            "(regularized like the other weights, as LIBLINEAR's -B). Null: no offset."
        ),
    )
    class_weight: dict[str, PositiveFactor] | None = Field(
        default=None,
        description=(
            'Factor on C per label, keyed by the label as the data set lists it (e.g. {"1": 5}). '
            "Labels not listed keep factor 1."
        ),
    )
    tol: float = Field(
        default=0.1,
        gt=0,
        allow_inf_nan=False,
        description=(
            "Stop when the largest minus the smallest projected gradient of the dual is below tol (paper's rule (17); "
            "LIBLINEAR's -e). Regression losses: when the summed violation of a pass is below tol times that of the "
            "first pass (LIBLINEAR -s 12/13's -e, in the targets' own scale)."
        ),
    )
    tol_rel: float | None = Field(
        default=0.01,
        gt=0,
        lt=1,
        description=(
            "Also require the duality gap to certify the model: (primal - dual) / primal <= tol_rel when rule (17) "
            "holds (else the gradient threshold is divided by 10 and training goes on). The model is then within "
            "tol_rel of the optimum (reported as `gap_rel`). Null: rule (17) alone, as LIBLINEAR; null too when "
            f"`tol` is given and tol_rel is not (the tolerance you named rules). {RELATIVE_GAP}"
        ),
    )
    max_iter: int = Field(
        default=100000,
        ge=1,
        le=10**7,
        description=(
            "Most outer iterations (passes over the data) per binary problem. Large C needs many passes (thousands at "
            "C = 100); a model stopped here says so (`stop_reason: max_iter`)."
        ),
    )
    shrinking: StrictBool = Field(
        default=True,
        description="Drop bounded dual variables from the passes (paper's Section 3.2); always ends with a full check.",
    )
    trace_every: int = Field(
        default=1,
        ge=1,
        description="Record a convergence point every this many outer iterations (each point costs one pass over the data, not counted in training_seconds).",
    )
    trace_budget: float | None = Field(
        default=0.1,
        gt=0,
        allow_inf_nan=False,
        description=(
            "The largest share of the training time that trace points may take: a point `trace_every` makes due is skipped "
            "while the points so far took more than this share of the solver's time (the first point, the last and "
            "those the stopping check computes anyway are always recorded). A point costs a pass over every row: "
            "with a point at every pass (null here) a9a at C = 10 took 1.4 s for 0.43 s of training, and sector's "
            "105 one-vs-rest problems 6.1 s for 2.7 s. Null: every `trace_every`-th pass."
        ),
    )

    @property
    def task(self) -> Task:
        """`regression` for the epsilon-insensitive losses, `one_class` for `one_class`, else `classification`."""
        if self.loss == "one_class":
            return Task.one_class
        return Task.regression if self.loss in REGRESSION_LOSSES else Task.classification

    @model_validator(mode="after")
    def _named_tol_rules(self):
        if self.penalty == "l1" and self.loss not in ("squared_hinge", "logistic"):
            raise ValueError(
                "penalty l1 trains the squared hinge loss (LIBLINEAR -s 5) or the logistic loss (-s 6): use loss "
                f"squared_hinge or logistic, not `{self.loss}`"
            )
        if self.penalty == "l1":  # LIBLINEAR -s 5's and -s 6's -e
            if "tol" not in self.model_fields_set:
                self.tol = L1_TOL
                self.model_fields_set.discard("tol")  # a default, not the user's tol (``tol_alone_when_named``)
            if "tol_rel" not in self.model_fields_set:  # their certificates are loose (see `penalty`)
                self.tol_rel = None
        defaults = type(self).model_fields
        if self.nu != defaults["nu"].default and self.loss != "one_class":
            raise ValueError(f"nu is the parameter of `loss: one_class`, not of `{self.loss}`")
        if self.loss == "one_class":
            if self.C != defaults["C"].default:  # stored params list C = 1
                raise ValueError("`loss: one_class` has no C (its box is [0, 1]); nu sets the fraction of outliers")
            if "bias" in self.model_fields_set and self.bias is not None:
                raise ValueError("`loss: one_class` has no bias feature (its offset is rho): leave bias out or null")
            self.bias = None
            self.model_fields_set.discard("bias")
            if "tol" not in self.model_fields_set:  # LIBLINEAR -s 21's -e
                self.tol = L1_TOL
                self.model_fields_set.discard("tol")
        default_epsilon = defaults["epsilon"].default
        if self.epsilon != default_epsilon and self.loss not in REGRESSION_LOSSES:  # stored params list the default
            raise ValueError(
                f"epsilon is the insensitive zone of a regression loss; loss `{self.loss}` classifies "
                "(use loss: epsilon_insensitive or squared_epsilon_insensitive for regression)"
            )
        return tol_alone_when_named(self)


L1_TOL = 0.01
"""dcd's `tol` with `penalty: l1` when none is given: LIBLINEAR -s 5's default -e."""
REGRESSION_LOSSES = ("epsilon_insensitive", "squared_epsilon_insensitive")
"""dcd's losses that make a regression (real-valued targets, values predicted)."""


class CpaParams(CommonParams):
    """SVMperf's 1-slack cutting-plane algorithm (Joachims, KDD 2006, Algorithms 1 and 2)."""

    n_processes: int | None = n_processes_field("a single problem uses this many threads for its passes over the data.")

    C: float = Field(
        default=1.0,
        gt=0,
        allow_inf_nan=False,
        description=(
            "Penalty of the training loss: minimize 0.5*|w|^2 + C * sum_i loss_i (classification) or "
            "C * sum over ordered pairs (i, j) of max(0, 1 - <w, x_i - x_j>) (pairwise objectives)."
        ),
    )
    objective: Literal["classification", "ordinal", "roc_area", "ranking"] = Field(
        default="classification",
        description=(
            "`classification` (hinge loss, two labels or one-vs-rest); `ordinal` (labels are ordered ranks: every "
            "pair with y_i > y_j must be ordered); `roc_area` (two labels: maximizes the area under the ROC curve); "
            "`ranking` (pairs within each qid only, as SVMrank; the data set needs qid)."
        ),
    )
    bias: float | None = Field(
        default=1.0,
        gt=0,
        allow_inf_nan=False,
        description="Value B of the constant feature (classification only; it cancels in pairwise differences and is ignored there). Null: no offset.",
    )
    tol_rel: float | None = Field(
        default=0.01,
        gt=0,
        lt=1,
        description=(
            "Stop when the best objective found minus the lower bound (the reduced problem's dual value) is at most "
            "tol_rel times that objective: the model is then certified within tol_rel of the optimum (reported as "
            "`gap_rel`). Null: only `tol` decides; null too when `tol` is given and tol_rel is not (the tolerance "
            f"you named rules). {RELATIVE_GAP}"
        ),
    )
    tol: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description=(
            "The paper's epsilon, off when null: also stop when the most violated constraint exceeds the working "
            "set's slack by at most tol per example (per pair for pairwise objectives), i.e. the objective is within "
            "C*n*tol of the optimum. At least one of tol_rel and tol must be given."
        ),
    )
    max_iter: int = Field(default=10000, ge=1, le=10**7, description="Most cutting-plane iterations.")
    max_inactive: int = Field(
        default=50,
        ge=1,
        le=10**6,
        description="A cut inactive (zero dual weight) for this many iterations is dropped from the working set.",
    )
    distributed: SplitTraining | None = Field(
        default=None,
        description="Train with the rows split over this many nodes of the Dask cluster (HINGE_DASK_SCHEDULER): for "
        "data sets larger than a machine; each trace point then has `comm_s`, the network's share. Null: on the "
        "worker's machine. Objective `classification` only; not with `search`, `probability` or one-vs-one.",
    )

    @property
    def task(self) -> Task:
        """`classification`, or the pairwise objective (`ordinal`, `roc_area`, `ranking`): the request's
        `objective`, named as every model's task."""
        return Task(self.objective)

    @model_validator(mode="after")
    def _some_stopping_rule(self):
        tol_alone_when_named(self)
        if self.tol_rel is None and self.tol is None:
            raise ValueError(
                "tol_rel and tol are both null: give tol_rel (a certified relative gap) or the paper's tol"
            )
        return self


class OcasParams(CommonParams):
    """Optimized cutting plane algorithm (Franc & Sonnenburg, ICML 2008) with parallel subtasks."""

    n_processes: int | None = n_processes_field(
        "a single binary problem uses this many threads for its passes over the data (with several problems, one each)."
    )

    model_config = {"extra": "forbid", "populate_by_name": True}

    C: float = Field(
        default=1.0,
        gt=0,
        allow_inf_nan=False,
        description="Penalty of the training loss: minimize 0.5*|w|^2 + C * sum_i hinge_i.",
    )
    bias: float | None = Field(
        default=1.0,
        gt=0,
        allow_inf_nan=False,
        description="Value B of the constant feature appended to every row (regularized). Null: no offset.",
    )
    tol_rel: float | None = Field(
        default=0.01,
        gt=0,
        lt=1,
        description="Stop when primal - lower bound <= tol_rel * |primal| (the paper's rule (9), relative part). "
        f"Null: tol_abs alone. {RELATIVE_GAP}",
    )
    tol_abs: float = Field(
        default=0.0,
        ge=0,
        allow_inf_nan=False,
        description="Stop when primal - lower bound <= tol_abs (rule (9), absolute part).",
    )
    lam: float = Field(
        default=0.1,
        alias="lambda",
        gt=0,
        le=1,
        description="Where the new cut is taken between the best-so-far and the reduced-problem solution: w_c = (1 - lambda) w_b + lambda w_t (paper's (8)).",
    )
    max_iter: int = Field(default=100000, ge=1, le=10**7, description="Most iterations.")
    max_inactive: int = Field(
        default=50, ge=1, le=10**6, description="A cut inactive for this many iterations is dropped."
    )
    distributed: SplitTraining | None = Field(
        default=None,
        description="Train with the rows split over this many nodes of the Dask cluster (HINGE_DASK_SCHEDULER): for "
        "data sets larger than a machine; each trace point then has `comm_s`, the network's share. Null: on the "
        "worker's machine. Not with `search`, `probability` or one-vs-one.",
    )
    multiclass: Literal["ovr", "crammer_singer"] = Field(
        default="ovr",
        description=(
            "More than two labels. `ovr`: one binary problem per label against the rest, predicted by the largest "
            "score. `crammer_singer`: one problem over all labels, Crammer and Singer's multi-class hinge "
            "max_k (1[k != y_i] + <w_k, x_i> - <w_{y_i}, x_i>) (LIBLINEAR's -s 4, scikit-learn's "
            'LinearSVC(multi_class="crammer_singer"), libocas\'s msvmocas), trained by the same cutting planes '
            "with one weight vector per label; predicted by the largest score too. Its cuts are dense "
            "(features + 1) x labels matrices. Two labels: one score, the difference of the two vectors. With "
            "`probability`, a softmax over its K scores fitted on cross-validated ones (a sigmoid for two labels). "
            "A `search` fits the whole problem per fold and setting (cold starts). With `distributed`, its rows are "
            "split over the nodes as one-vs-rest's are (each node holds its rows' classes)."
        ),
    )

    @model_validator(mode="after")
    def _some_stopping_rule(self):
        if self.tol_rel is None and self.tol_abs == 0:
            raise ValueError("tol_rel is null and tol_abs is 0: give tol_rel, or tol_abs > 0")
        return self


class SmoParams(CommonParams):
    """Sequential minimal optimization (Platt 1998) for kernel SVMs, with a kernel cache and shrinking."""

    n_processes: int | None = n_processes_field(
        "a single binary problem uses this many threads for its kernel rows and gradient updates (with several problems, what its process may use)."
    )

    C: float = Field(
        default=1.0,
        gt=0,
        allow_inf_nan=False,
        description=(
            "Penalty: minimize 0.5*|w|^2 + C * sum_i hinge_i (LIBSVM's C-SVC, with an unregularized offset b); "
            "with `svm_type: epsilon_svr`, C * sum_i max(0, |f(x_i) - y_i| - epsilon)."
        ),
    )
    svm_type: Literal["c_svc", "nu_svc", "epsilon_svr", "nu_svr", "one_class"] = Field(
        default="c_svc",
        description=(
            "LIBSVM's name of the problem. `c_svc`: classification (-s 0). `nu_svc`: classification with `nu` in "
            "place of C (-s 1; nu bounds the fraction of margin errors from above and of support vectors from below; "
            "no C, no class weights). `epsilon_svr`: regression with a kernel (-s 3; `task: regression` of the "
            "model, whose labels are real-valued targets and which predicts values), solved by the same SMO on its "
            "2n-variable dual. `nu_svr`: regression where `nu` sets the tube's width instead of `epsilon` (-s 4). "
            "`one_class`: novelty detection (-s 2; `task: one_class`): the labels are not used for training, the "
            "model predicts +1 (inlier) or -1 (outlier); `nu` bounds the fraction of training rows left out. The nu "
            "forms take the second-order working set only (`working_set: second_order`)."
        ),
    )
    nu: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description=(
            "`one_class`, `nu_svc` and `nu_svr`: an upper bound on the fraction of training rows outside the "
            "boundary (margin errors, rows outside the tube) and a lower bound on the fraction of support vectors "
            "(LIBSVM's -n, default 0.5 as there); `nu_svc` needs nu <= 2 min(rows of a class) / rows (a 422 says "
            "the largest for your data). Any other value with another svm_type is refused (422)."
        ),
    )
    epsilon: float = Field(
        default=0.1,
        ge=0,
        allow_inf_nan=False,
        description=(
            "`epsilon_svr` only: the half-width of the insensitive zone, in the targets' units (LIBSVM's -p, default "
            "0.1 as there). Any other value with `c_svc` is refused (422)."
        ),
    )
    kernel: Kernel = Field(
        default_factory=lambda: RbfKernel(type="rbf"), description="The kernel (default rbf with gamma `scale`)."
    )
    working_set: Literal["second_order", "platt"] = Field(
        default="second_order",
        description="`second_order`: maximal violating pair with second-order gain (as LIBSVM). `platt`: the paper's heuristics of Section 2.2.",
    )
    tol: float = Field(
        default=1e-3,
        gt=0,
        allow_inf_nan=False,
        description="Stop when the maximal KKT violation is below tol (LIBSVM's -e).",
    )
    tol_rel: float | None = Field(
        default=0.01,
        gt=0,
        lt=1,
        description=(
            "Also require the model's duality gap to be at most tol_rel of its objective ((P - D) / P, D the dual "
            "value of the returned alpha: a certified bound, reported as the model's gap_rel); while it is larger, "
            "tol is divided by 10 and the steps go on (down to 1e-9). Null: tol alone, as LIBSVM; null too when "
            f"`tol` is given and tol_rel is not (the tolerance you named rules). {RELATIVE_GAP}"
        ),
    )
    cache_mb: float = Field(
        default=200.0, ge=0, le=1_000_000, description="Memory for the least-recently-used cache of kernel rows, in MB."
    )
    shrinking: StrictBool = Field(
        default=True, description="Leave bounded variables out of the selection; always ends with a full check."
    )
    class_weight: dict[str, PositiveFactor] | None = Field(
        default=None, description="Factor on C per label, keyed by the label as the data set lists it."
    )
    multiclass: Literal["ovr", "ovo"] = Field(
        default="ovr",
        description=(
            "More than two labels. `ovr`: one problem per label against all other rows, predicted by the largest "
            "score. `ovo` (LIBSVM's scheme): one problem per pair of labels on the rows of those two labels only, "
            "predicted by vote; K(K-1)/2 smaller problems, often faster and, with kernels, often more accurate "
            "(letter: 0.970 against 0.963 test accuracy). With `probability`, `ovo` couples one sigmoid per pair "
            "(Wu, Lin and Weng, as LIBSVM's -b 1). Two labels: the same model either way. A search scores each fold by the vote of its pairs."
        ),
    )
    max_iter: int | None = Field(
        default=None,
        ge=1,
        description="Most two-variable steps per binary problem. Null: LIBSVM's cap, max(10^7, 100 n) for n rows, which guards a run without max_seconds against one that never reaches tol.",
    )
    trace_every: int = Field(default=1000, ge=1, description="Record a convergence point every this many steps.")

    @property
    def task(self) -> Task:
        """`regression` for `epsilon_svr` and `nu_svr`, `one_class` for `one_class`, else `classification`."""
        tasks = {"epsilon_svr": Task.regression, "nu_svr": Task.regression, "one_class": Task.one_class}
        return tasks.get(self.svm_type, Task.classification)

    @model_validator(mode="after")
    def _named_tol_rules(self):
        defaults = type(self).model_fields
        if self.epsilon != defaults["epsilon"].default and self.svm_type != "epsilon_svr":
            why = "; nu_svr learns epsilon, nu sets it" if self.svm_type == "nu_svr" else ""
            raise ValueError(
                f"epsilon is the insensitive zone of `svm_type: epsilon_svr`, not of `{self.svm_type}`{why}"
            )
        if self.nu != defaults["nu"].default and self.svm_type not in NU_TYPES:
            raise ValueError(f"nu is the parameter of `svm_type` {', '.join(NU_TYPES)}, not of `{self.svm_type}`")
        if self.C != defaults["C"].default and self.svm_type in ("one_class", "nu_svc"):  # stored params list C = 1
            raise ValueError(
                f"`svm_type: {self.svm_type}` has no C (its box is [0, 1]); nu sets the fraction of "
                + ("outliers" if self.svm_type == "one_class" else "margin errors")
            )
        if self.svm_type in ("nu_svc", "nu_svr") and self.working_set != "second_order":
            raise ValueError(f"`svm_type: {self.svm_type}` takes `working_set: second_order` only")
        if self.svm_type == "nu_svc" and self.class_weight:
            raise ValueError("`svm_type: nu_svc` takes no class_weight (LIBSVM's nu-SVC has none): use c_svc")
        return tol_alone_when_named(self)


NU_TYPES = ("nu_svc", "nu_svr", "one_class")
"""smo's svm_types whose parameter is nu."""


class SampledCutsParams(CommonParams):
    """Cutting-plane training of kernel SVMs with sampled cuts (Yu & Joachims, KDD 2008)."""

    n_processes: int | None = n_processes_field(
        "a single binary problem uses this many threads for its kernel evaluations (with several problems, what its process may use)."
    )

    C: float = Field(
        default=1.0, gt=0, allow_inf_nan=False, description="Penalty: minimize 0.5*|w|^2 + C * sum_i hinge_i."
    )
    kernel: Kernel = Field(
        default_factory=lambda: RbfKernel(type="rbf"), description="The kernel (default rbf with gamma `scale`)."
    )
    variant: Literal["linear", "constant", "subspace"] = Field(
        default="linear",
        description="`linear` (Algorithm 3: exact cut decides stopping, samples among the examples with non-zero loss), `constant` (Algorithm 2: r uniform samples per cut, stop after p non-violated sampled cuts) or `subspace` (the paper's Cholesky control method of Section 6: the model restricted to the span of `sample_size` rows drawn uniformly, every row projected onto it and a linear SVM trained on the projections by dual coordinate descent, stopped by that problem's duality gap; N x sample_size x 4 bytes of memory). `constant` costs the same per iteration whatever the number of rows, for sets too large for `linear`; its cuts are estimates, so its test error can trail the exact solver's. Measured with the defaults against smo: +0.0 points on ijcnn1, +0.4 on a9a, +0.3 on Yu and Joachims' Checkers (KDD 2008) at 10^6 rows and +0.8 at 50,000; +3.6 on a noisy 4 x 4 checkerboard whose boundary needs ~38% of the rows as support vectors (50,000 rows; +2.1 with `pool_size` 4000, where `linear` is within 0.1). Which to pick: smo or `linear` while their time is affordable (up to ~10^5 rows); from ~10^5 rows on a boundary that needs many support vectors, `subspace` (a noisy 10^6-row checkerboard: 2.7% test error in minutes, where `linear` ran 30 minutes and `constant` stopped at 5.3%); `constant` when the kernel's smooth boundary needs few support vectors (Checkers).",
    )
    sampling: Literal["calibrated", "uniform"] = Field(
        default="calibrated",
        description="`linear` variant: how a cut picks its r rows among those with a loss. `uniform`: the paper's draw (Algorithm 3, lines 18-19). `calibrated`: r rows at equal steps in the order of their margins, weighted so that the cut agrees with the exact cut on every cut of the working set; the same cost, and the objective and test error of the exact cutting-plane algorithm (the uniform draw's cuts overstate the loss near the optimum).",
    )
    sample_size: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="r: examples sampled per cut; the model is an expansion over the sampled basis (`subspace`: the basis itself, the rows whose span holds the model). Null: 1000 for the `linear` variant, 400 for `constant` (Yu and Joachims, KDD 2008, Table 1), 500 for `subspace`; with `multiclass: crammer_singer`, 10000 for `linear` (its cuts hold every loss row, exact, while there are no more: robust where sampled multi-class cuts converge slowly; 1000 about halves the time where the boundary needs few rows).",
    )
    pool_size: int | None = Field(
        default=None,
        ge=1,
        le=10_000_000,
        description="`constant` variant: rows drawn uniformly per iteration whose decision value is computed; the cut's value is their mean hinge loss and its r rows are taken among their losing rows at equal steps of margin. At most r is the paper's Algorithm 2. A larger pool costs more kernel values per iteration and gives cuts closer to the exact ones. Null: N / 250 rows, at least r, at most 4000 (the paper's algorithm on small sets; at 10^6 rows, 4000).",
    )
    p: int = Field(
        default=4,
        ge=1,
        le=1000,
        description="`constant` variant: stop after this many consecutive non-violated sampled cuts.",
    )
    tol: float = Field(
        default=0.001,
        gt=0,
        allow_inf_nan=False,
        description="The paper's epsilon: precision of the training loss per example (`subspace`: stop when the restricted problem's duality gap is at most tol * C * N).",
    )
    max_inactive: int = Field(
        default=20, ge=1, le=10**6, description="A cut inactive for this many iterations is dropped."
    )
    max_iter: int = Field(
        default=10000,
        ge=1,
        le=10**7,
        description="Most cutting-plane iterations (`subspace`: passes of dual coordinate descent).",
    )
    bias: float | None = Field(
        default=1.0,
        gt=0,
        allow_inf_nan=False,
        description="Value of a constant feature added to the kernel's feature space (regularized offset). Null: none.",
    )

    multiclass: Literal["ovr", "crammer_singer"] = Field(
        default="ovr",
        description=(
            "More than two labels. `ovr`: one binary problem per label. `crammer_singer`: one problem over all "
            "labels with a kernel, Crammer and Singer's hinge max_k (1[k != y_i] + f_k(x_i) - f_{y_i}(x_i)), one "
            "kernel expansion f_k per label (paper 003's structural case; LIBLINEAR's -s 4 objective in the kernel's "
            "feature space), predicted by the largest score; variants `linear` (N x K x 8 bytes a cut, OCAS's line "
            "search, a certified gap when its cuts are exact) and `constant` (estimates), not `subspace`; two labels "
            "keep one score. Linear Crammer-Singer: ocas. smo's one-vs-one is far faster at equal accuracy on sets "
            "of 10^4 rows (tests/benchmarks/README.md)."
        ),
    )

    @model_validator(mode="after")
    def _kernel_it_trains(self):
        if self.kernel.type == "precomputed":
            raise ValueError("a precomputed kernel is trained by smo (LIBSVM's -t 4); this solver computes its kernel")
        if self.multiclass == "crammer_singer" and self.variant == "subspace":
            raise ValueError(
                "multiclass crammer_singer is trained by the cutting-plane variants (linear, constant); the subspace "
                "variant has no cuts"
            )
        return self

    @model_validator(mode="after")
    def _subspace_has_no_cuts(self):
        # values other than the defaults (stored parameters come back with every field set)
        fields = type(self).model_fields
        named = sorted(
            n for n in ("sampling", "pool_size", "p", "max_inactive") if getattr(self, n) != fields[n].default
        )
        if self.variant == "subspace" and named:
            raise ValueError(
                f"{', '.join(named)}: settings of the cutting-plane variants (linear, constant); the subspace "
                "variant has no cuts (its basis is sample_size rows, its stop the duality gap at tol)"
            )
        return self


SolverParams = DcdParams | CpaParams | OcasParams | SmoParams | SampledCutsParams
"""The parameters of a job, as the schema of its built-in solver reads them (for type checking; a solver of
HINGE_SOLVER_PLUGINS has its own CommonParams subclass: ``core.solvers``)."""
