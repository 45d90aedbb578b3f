"""ONNX export: the model's scoring function as a graph of standard ONNX operators (opset 17).

Input ``X``: float32 [N, n_features], dense rows (feature column j is index j + 1 of a one-based upload,
j of a zero-based one). Outputs:

- ``label`` [N]: the predicted label (int64 when every label is an integer, else double; ordinal models:
  the rank; regression models: the predicted value, double; absent for models that only score);
- ``scores``: float32, [N] for two labels and for pairwise models (positive means the larger label),
  [N, k] for one-vs-rest models (one column per label, ascending) and one-vs-one models (votes plus
  squashed confidences, as ``core.scoring.models``);
- ``probabilities`` float32 [N, n_classes], for calibrated models with the ``platt_ovr`` or ``multinomial``
  method (a softmax over the scores).

Inside, the input is cast to double and every step runs in double, so the scores equal the service's
up to the float32 rounding of the input and the output. Linear models are one MatMul; kernel models
hold their support vectors as a dense double matrix (rbf distances as |x|^2 + |s|^2 - 2<x,s>,
clipped at 0, as the service computes them), so a model whose support vectors times features exceed
``MAX_DENSE_VALUES`` is refused (the libsvm and json exports have no such limit).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from core.schemas.enums import ModelKind, Task
from core.schemas.model_files import ModelKernel
from core.storage.documents import ModelRecord
from service.interchange.common import ExportRefused

OPSET = 17
MAX_DENSE_VALUES = 1 << 26
"""Most dense double values (support vectors times features, or weights) an ONNX export holds: 512 MiB."""


def write_onnx(model: ModelRecord, arrays: dict) -> bytes:
    """The serialized ONNX model (ExportRefused when it would be too large)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    kind = model.kind
    n_features = int(model.n_features)
    nodes: list = []
    initializers: list = []
    counter = [0]

    def const(name: str, value) -> str:
        value = np.asarray(value)
        initializers.append(numpy_helper.from_array(value, name))
        return name

    def node(op: str, inputs: list[str], **attrs) -> str:
        counter[0] += 1
        out = f"{op.lower()}_{counter[0]}"
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    x = node("Cast", ["X"], to=TensorProto.DOUBLE)
    offsets = np.asarray(arrays["offsets"], dtype=np.float64)
    if kind in (ModelKind.linear, ModelKind.ranking):
        weights = np.asarray(arrays["weights"], dtype=np.float64)
        _check_size(weights.size, "weights")
        raw = node("MatMul", [x, const("weights_t", np.ascontiguousarray(weights.T))])
    else:
        support = sp.csr_matrix(
            (
                np.asarray(arrays["sv_data"], dtype=np.float64),
                np.asarray(arrays["sv_indices"]),
                np.asarray(arrays["sv_indptr"]),
            ),
            shape=(len(arrays["sv_indptr"]) - 1, n_features),
        )
        _check_size(support.shape[0] * n_features, "support vectors")
        kernel = model.kernel_spec
        if kernel is None:
            raise ExportRefused("this kernel model has no kernel stored")
        kernel_values = _kernel_nodes(kernel, x, support, const, node)
        raw = node(
            "MatMul",
            [kernel_values, const("coef_t", np.ascontiguousarray(np.asarray(arrays["coef"], dtype=np.float64).T))],
        )
    scores = node("Add", [raw, const("offsets", offsets)])  # [N, k]

    outputs = []
    raw_labels = model.labels
    labels: list = list(raw_labels or [])
    integral = raw_labels is not None and all(float(v).is_integer() and abs(v) < 2**62 for v in labels)
    label_type = TensorProto.INT64 if integral else TensorProto.DOUBLE

    def label_table(name: str, values) -> str:
        return const(name, np.asarray(values, dtype=np.int64 if integral else np.float64))

    one_score = scores
    if kind == ModelKind.ranking or (not model.one_vs_one and offsets.size == 1):
        one_score = node("Reshape", [scores, const("flat_shape", np.array([-1], dtype=np.int64))])
    if kind == ModelKind.ranking:
        score_out = one_score
        if model.thresholds is not None:
            thresholds = np.asarray(model.thresholds, dtype=np.float64).reshape(1, -1)
            column = node("Unsqueeze", [one_score, const("axis_1", np.array([1], dtype=np.int64))])
            above = node("Cast", [node("Greater", [column, const("thresholds", thresholds)])], to=TensorProto.INT64)
            index = node("ReduceSum", [above, const("sum_axis", np.array([1], dtype=np.int64))], keepdims=0)
            _output(nodes, node("Gather", [label_table("ranks", model.ranks), index], axis=0), "label")
            outputs.append(helper.make_tensor_value_info("label", label_type, ["N"]))
    elif model.one_vs_one:
        score_out = _one_vs_one_nodes(model.ovo_labels or [], scores, const, node, label_table, nodes)
        outputs.append(helper.make_tensor_value_info("label", label_type, ["N"]))
    elif model.task == Task.regression:  # the score is the predicted value
        score_out = one_score
        _output(nodes, node("Identity", [one_score]), "label")
        outputs.append(helper.make_tensor_value_info("label", TensorProto.DOUBLE, ["N"]))
    elif offsets.size == 1:
        score_out = one_score
        positive = node("Cast", [node("Greater", [one_score, const("zero", np.array(0.0))])], to=TensorProto.INT64)
        _output(nodes, node("Gather", [label_table("labels", labels), positive], axis=0), "label")
        outputs.append(helper.make_tensor_value_info("label", label_type, ["N"]))
    else:
        score_out = scores
        best = node("ArgMax", [scores], axis=1, keepdims=0, select_last_index=0)
        _output(nodes, node("Gather", [label_table("labels", labels), best], axis=0), "label")
        outputs.append(helper.make_tensor_value_info("label", label_type, ["N"]))
    _output(nodes, node("Cast", [score_out], to=TensorProto.FLOAT), "scores")
    score_shape: list[str | int | None] = (
        ["N"] if (kind == ModelKind.ranking or (offsets.size == 1 and not model.one_vs_one)) else ["N", len(labels)]
    )
    outputs.append(helper.make_tensor_value_info("scores", TensorProto.FLOAT, score_shape))

    calibration = model.calibration
    if calibration is not None and calibration.method == "platt_ovr" and kind != ModelKind.ranking:
        A = np.asarray(calibration.A, dtype=np.float64)
        B = np.asarray(calibration.B, dtype=np.float64)
        # 1 / (1 + exp(A f + B)) = sigmoid(-(A f + B))
        p = node(
            "Sigmoid", [node("Neg", [node("Add", [node("Mul", [scores, const("platt_a", A)]), const("platt_b", B)])])]
        )
        if offsets.size == 1:
            probabilities = node("Concat", [node("Sub", [const("one", np.array([[1.0]])), p]), p], axis=1)
        else:
            total = node("ReduceSum", [p, const("class_axis", np.array([1], dtype=np.int64))], keepdims=1)
            probabilities = node("Div", [p, total])
        _output(nodes, node("Cast", [probabilities], to=TensorProto.FLOAT), "probabilities")
        outputs.append(helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", len(labels)]))
    elif calibration is not None and calibration.method == "multinomial":
        weights = np.asarray(calibration.weights, dtype=np.float64)
        logits = node(
            "Add",
            [
                node("MatMul", [scores, const("softmax_weights", np.ascontiguousarray(weights.T))]),
                const("softmax_intercepts", np.asarray(calibration.intercepts, dtype=np.float64)),
            ],
        )
        _output(nodes, node("Cast", [node("Softmax", [logits], axis=1)], to=TensorProto.FLOAT), "probabilities")
        outputs.append(helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", len(labels)]))

    graph = helper.make_graph(
        nodes,
        "hinge_model",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", n_features])],
        outputs,
        initializer=initializers,
    )
    proto = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="hinge",
        doc_string=f"Hinge {kind} model {model.id}: input X float32 [N, {n_features}]",
    )
    proto.ir_version = 8
    helper.set_model_props(
        proto,
        {
            "hinge_model_id": str(model.id),
            "hinge_kind": kind,
            "hinge_task": str(model.task or Task.classification.value),
        },
    )
    onnx.checker.check_model(proto)
    return proto.SerializeToString()


def _check_size(values: int, what: str) -> None:
    if values > MAX_DENSE_VALUES:
        raise ExportRefused(
            f"the ONNX graph would hold {values:,} dense {what} values (limit {MAX_DENSE_VALUES:,}): ONNX has no "
            "sparse matrix product; export this model as libsvm or json"
        )


def _output(nodes: list, produced: str, name: str) -> None:
    """Rename the last node's output to a graph output name."""
    for graph_node in reversed(nodes):
        if produced in graph_node.output:
            graph_node.output[list(graph_node.output).index(produced)] = name
            return


def _kernel_nodes(kernel: ModelKernel, x: str, support: sp.csr_matrix, const, node) -> str:
    """K(x, s) for every input row and support vector: [N, m] in double (a precomputed kernel: x's columns at the
    support vectors' serial numbers, their column 0)."""
    if kernel.type == "precomputed":
        serials = np.rint(support[:, 0].toarray().reshape(-1)).astype(np.int64)
        return node("Gather", [x, const("serials", serials)], axis=1)
    dense = support.toarray()
    dots = node("MatMul", [x, const("support_t", np.ascontiguousarray(dense.T))])
    kind = kernel.type
    if kind == ModelKind.linear:
        return dots
    assert kernel.gamma is not None, "a stored kernel has gamma resolved"
    gamma = float(kernel.gamma)
    if kind == "rbf":
        x_sq = node(
            "ReduceSum", [node("Mul", [x, x]), const("feature_axis", np.array([1], dtype=np.int64))], keepdims=1
        )
        sv_sq = const("support_sq", (dense * dense).sum(axis=1).reshape(1, -1))
        distance = node("Sub", [node("Add", [x_sq, sv_sq]), node("Mul", [dots, const("two", np.array(2.0))])])
        distance = node("Max", [distance, const("zero_d", np.array(0.0))])
        return node("Exp", [node("Mul", [distance, const("minus_gamma", np.array(-gamma))])])
    inner = node(
        "Add",
        [
            node("Mul", [dots, const("gamma", np.array(gamma))]),
            const("coef0", np.array(float(kernel.coef0 if kernel.coef0 is not None else 0.0))),
        ],
    )
    if kind == "poly":
        return node("Pow", [inner, const("degree", np.array(float(kernel.degree if kernel.degree is not None else 3)))])
    return node("Tanh", [inner])


def _one_vs_one_nodes(ovo_labels: list[float], pairwise: str, const, node, label_table, nodes: list) -> str:
    """LIBSVM's vote over the pairs of ``ovo_labels`` (ties to the class listed first) and the per-class scores,
    ascending labels."""
    from onnx import TensorProto

    vote_labels = [float(v) for v in ovo_labels]
    k = len(vote_labels)
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    first = np.zeros((len(pairs), k))
    second = np.zeros((len(pairs), k))
    for p, (i, j) in enumerate(pairs):
        first[p, i] = 1.0
        second[p, j] = 1.0
    wins = node("Cast", [node("Greater", [pairwise, const("zero_p", np.array(0.0))])], to=TensorProto.DOUBLE)
    losses = node("Sub", [const("one_p", np.array(1.0)), wins])
    votes = node(
        "Add",
        [node("MatMul", [wins, const("vote_first", first)]), node("MatMul", [losses, const("vote_second", second)])],
    )
    best = node("ArgMax", [votes], axis=1, keepdims=0, select_last_index=0)
    _output(nodes, node("Gather", [label_table("vote_labels", vote_labels), best], axis=0), "label")
    confidence = node("MatMul", [pairwise, const("confidence_sign", first - second)])
    squashed = node(
        "Div",
        [
            confidence,
            node(
                "Mul",
                [
                    const("three", np.array(3.0)),
                    node("Add", [node("Abs", [confidence]), const("one_c", np.array(1.0))]),
                ],
            ),
        ],
    )
    per_class = node("Add", [votes, squashed])
    order = np.argsort(np.asarray(vote_labels), kind="stable").astype(np.int64)
    return node("Gather", [per_class, const("ascending", order)], axis=1)
