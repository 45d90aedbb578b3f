"""The original C programs as anchors: how to call them, read their time and score their models.

Built by ``../shared/tools/build-anchors.sh`` into ``$HINGE_ANCHORS_BIN`` (default
``$TMPDIR/hinge-anchors/bin``): LIBLINEAR ``liblinear-train``, LIBSVM ``svm-train``, libocas ``svmocas``, SVMperf
``svm_perf_learn``. Nothing of their code is in this repository; this module only runs them.

Every runner takes an svmlight file with labels +1/-1 and returns the program's own solver seconds
(``ocas_time`` for svmocas, "Runtime in cpu-seconds" for SVMperf; LIBLINEAR prints no time, so its
solver time is read from the system calls: from closing the input file to opening the model file,
by strace with microsecond stamps) and the model's weights (w, w_B) for the bias feature of value 1,
so that the caller scores every model with the same objective 0.5 (|w|^2 + w_B^2) + C sum hinge.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np

BIN = Path(os.environ.get("HINGE_ANCHORS_BIN", Path(tempfile.gettempdir()) / "hinge-anchors" / "bin"))


def available() -> dict[str, bool]:
    """Which anchor programs are built."""
    names = ("svmocas", "msvmocas", "svm_perf_learn", "liblinear-train", "svm-train")
    return {name: (BIN / name).exists() for name in names}


def objective(indptr, indices, data, y, w, w_bias, C) -> float:
    """0.5 (|w|^2 + w_B^2) + C sum_i max(0, 1 - y_i (<w, x_i> + w_B)), bias feature of value 1."""
    import scipy.sparse as sp

    X = sp.csr_matrix((data, indices, indptr), shape=(len(indptr) - 1, len(w)))
    margins = 1.0 - y * (X @ w + w_bias)
    return 0.5 * (float(w @ w) + w_bias * w_bias) + C * float(np.maximum(margins, 0.0).sum())


def svmocas(path: str, C: float, n_features: int, tol_rel: float = 0.01, threads: int = 1) -> dict:
    """libocas: ``svmocas -c C -b 1 -r tol_rel``; its ocas_time, iterations and per-iteration trace."""
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "model")
        out = subprocess.run(
            [
                str(BIN / "svmocas"),
                "-c",
                repr(C),
                "-b",
                "1",
                "-r",
                repr(tol_rel),
                "-p",
                str(threads),
                "-v",
                "1",
                path,
                model,
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        values = np.loadtxt(model)
    trace = [
        (int(m.group(1)), float(m.group(2)), float(m.group(3)))
        for m in re.finditer(r"^\s*(\d+): tim=([0-9.e+-]+), Q_P=([0-9.e+-]+)", out, re.M)
    ]
    seconds = float(re.search(r"ocas_time\s*:\s*([0-9.e+-]+)", out).group(1))
    w = np.zeros(n_features)
    k = min(n_features, values.size - 1)
    w[:k] = values[:k]
    return {
        "seconds": seconds,
        "iterations": trace[-1][0] if trace else None,
        "w": w,
        "w_bias": float(values[-1]),
        "trace": [{"iteration": i, "elapsed_s": t, "primal": p} for i, t, p in trace],
    }


def svm_perf_command(path: str, C: float, n_rows: int, model: str, eps: float = 0.01) -> list[str]:
    """SVMperf ``-w 9`` (its default algorithm), error-rate loss, ``-c C n / 100``, ``--b 1``, ``-e eps``."""
    return [
        str(BIN / "svm_perf_learn"),
        "-c",
        repr(C * n_rows / 100.0),
        "-w",
        "9",
        "-e",
        repr(eps),
        "--b",
        "1",
        path,
        model,
    ]


def read_svm_perf(output: str, model: str, n_features: int) -> dict:
    """SVMperf's reported seconds ("Runtime in cpu-seconds": its loop only, not the statistics it prints
    after), its iterations and the weights (w, w_B) of the model file it wrote."""
    lines = Path(model).read_text().splitlines()
    seconds = float(re.search(r"Runtime in cpu-seconds:\s*([0-9.e+-]+)", output).group(1))
    iterations = len(re.findall(r"^Iter \d+", output, re.M)) or None
    b = float(lines[10].split("#")[0])
    w_all = {}
    for token in lines[11].split("#")[0].split()[1:]:
        index, value = token.split(":")
        w_all[int(index)] = float(value)
    w = np.zeros(n_features)
    w_bias = 0.0
    for index, value in w_all.items():
        if index <= n_features:
            w[index - 1] = value
        else:  # the bias feature SVMperf appends after the data's features
            w_bias += value
    return {"seconds": seconds, "iterations": iterations, "w": w, "w_bias": w_bias - b}


def svm_perf(path: str, C: float, n_rows: int, n_features: int, eps: float = 0.01) -> dict:
    """SVMperf (``svm_perf_command``) on one file: its seconds, iterations and weights (``read_svm_perf``)."""
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "model")
        out = subprocess.run(
            svm_perf_command(path, C, n_rows, model, eps), capture_output=True, text=True, check=True
        ).stdout
        return read_svm_perf(out, model, n_features)


def _strace_solver_seconds(command: list[str], model: str):
    """Run a program that reads its input and then writes ``model``; (the run, seconds from closing the input
    to opening the model file), from strace's microsecond stamps of those two system calls."""
    run = subprocess.run(
        ["strace", "-ttt", "-e", "trace=openat,close", *command], capture_output=True, text=True, check=True
    )
    stamps = run.stderr.splitlines()
    opened = next(k for k, line in enumerate(stamps) if "openat(" in line and model in line)
    closed = max(k for k in range(opened) if re.search(r"\sclose\(", stamps[k]))
    return run, float(stamps[opened].split()[0]) - float(stamps[closed].split()[0])


def liblinear(path: str, C: float, n_features: int, eps: float = 0.1, solver: int = 3) -> dict:
    """LIBLINEAR ``train -s 3 -c C -B 1 -e eps``; solver seconds from strace (see the module docstring).

    Two labels: ``w``/``w_bias`` for the label 1 (+1). More: ``per_class[label] = (w, w_bias)``, one-vs-rest.
    """
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "model")
        run, seconds = _strace_solver_seconds(
            [str(BIN / "liblinear-train"), "-s", str(solver), "-c", repr(C), "-B", "1", "-e", repr(eps), path, model],
            model,
        )
        iterations = re.search(r"#iter = (\d+)", run.stdout)
        text = Path(model).read_text().splitlines()
    labels = next(line for line in text if line.startswith("label")).split()[1:]
    start = text.index("w") + 1
    table = np.array([[float(v) for v in line.split()] for line in text[start:]])  # (features + 1) x columns
    result = {
        "seconds": seconds,
        "iterations": int(iterations.group(1)) if iterations else None,
        "hit_iteration_cap": "reaching max number of iterations" in run.stdout,
    }
    if len(labels) == 2:  # one column, for the first label
        values = table[:, 0] if labels[0] == "1" else -table[:, 0]
        w = np.zeros(n_features)
        w[: min(n_features, values.size - 1)] = values[: min(n_features, values.size - 1)]
        result.update(w=w, w_bias=float(values[-1]))
    else:  # one-vs-rest: a column per label
        result["per_class"] = {}
        for k, label in enumerate(labels):
            w = np.zeros(n_features)
            w[: min(n_features, table.shape[0] - 1)] = table[: min(n_features, table.shape[0] - 1), k]
            result["per_class"][label] = (w, float(table[-1, k]))
    return result


def svm_train(
    path: str,
    C: float,
    gamma: float,
    eps: float = 1e-3,
    cache_mb: int = 200,
    shrinking: bool = True,
    svm_type: int = 0,
    nu: float | None = None,
) -> dict:
    """LIBSVM ``svm-train -s svm_type -t 2`` (built without OpenMP: one thread; ``nu``: its -n for the nu types);
    solver seconds from strace as for LIBLINEAR (from closing the input file to opening the model file), its #iter,
    obj (= -dual; nu-SVC: of the problem scaled by 1 / r, which ``printed_C`` = 1 / r undoes), nSV, and the nu-SVR's
    epsilon."""
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "model")
        run, seconds = _strace_solver_seconds(
            [
                str(BIN / "svm-train"),
                "-s",
                str(svm_type),
                *(["-n", repr(nu)] if nu is not None else []),
                "-t",
                "2",
                "-c",
                repr(C),
                "-g",
                repr(gamma),
                "-e",
                repr(eps),
                "-m",
                str(cache_mb),
                "-h",
                "1" if shrinking else "0",
                path,
                model,
            ],
            model,
        )
    iterations = re.search(r"#iter = (\d+)", run.stdout)
    obj = re.search(r"obj = ([0-9.e+-]+)", run.stdout)
    n_sv = re.search(r"nSV = (\d+)", run.stdout)
    printed_C = re.search(r"^C = ([0-9.e+-]+)", run.stdout, re.M)
    epsilon = re.search(r"^epsilon = ([0-9.e+-]+)", run.stdout, re.M)
    return {
        "seconds": seconds,
        "iterations": int(iterations.group(1)) if iterations else None,
        "dual_objective": -float(obj.group(1)) if obj else None,
        "n_sv": int(n_sv.group(1)) if n_sv else None,
        "printed_C": float(printed_C.group(1)) if printed_C else None,
        "epsilon": float(epsilon.group(1)) if epsilon else None,
    }


def msvmocas(path: str, C: float, tol_rel: float = 0.01) -> dict:
    """libocas's multi-class OCAS: ``msvmocas -c C -r tol_rel`` on an svmlight file with classes 1..K (no bias
    feature: it has none); its ocas_time, iterations, last primal value and W (n_features x K, as its model file
    lists it). build-anchors.sh builds svmocas only: ``make msvmocas`` in its libocas build directory, then copy the
    program next to the others."""
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "model")
        out = subprocess.run(
            [str(BIN / "msvmocas"), "-c", repr(C), "-r", repr(tol_rel), "-v", "1", path, model],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        W = np.loadtxt(model, ndmin=2)
    trace = [
        (int(m.group(1)), float(m.group(2)), float(m.group(3)))
        for m in re.finditer(r"^\s*(\d+): tim=([0-9.e+-]+), Q_P=([0-9.e+-]+)", out, re.M)
    ]
    seconds = float(re.search(r"ocas_time\s*:\s*([0-9.e+-]+)", out).group(1))
    return {"seconds": seconds, "iterations": trace[-1][0], "primal": trace[-1][2], "W": W}
