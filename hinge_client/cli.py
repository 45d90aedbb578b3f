"""`hingectl`: Hinge from the shell. Upload, train, watch, predict, evaluate, export, import, list, remove.

    hingectl upload demo.svm --name demo              # prints the data set id
    hingectl train DATASET --solver ocas -p C=1 -p tol_rel=0.001 [--watch]
    hingectl train DATASET --solver smo -p kernel.gamma=0.5 -p search.C=[0.1,1,10]
    hingectl watch JOB                                 # live bar: phase, fraction, gap, ETA; prints the model id
    hingectl train DATASET --solver dcd -p penalty=l1 -p loss=squared_hinge --watch  # sparse weights (LIBLINEAR -s 5)
    hingectl train DATASET --solver ocas -p multiclass=crammer_singer --watch    # one problem over all classes (-s 4)
    hingectl train DATASET --solver dcd -p loss=epsilon_insensitive -p epsilon=0.1 --watch   # a regression
    hingectl train DATASET --solver smo -p svm_type=epsilon_svr -p C=10 --watch    # a regression with a kernel
    hingectl train DATASET --solver smo -p svm_type=one_class -p nu=0.1 --watch    # a one-class SVM (labels unused)
    hingectl predict MODEL rows.svm [--scores] [--probabilities] [--ignore-unknown-features]
                                                       # one label per line; accuracy on stderr for labelled rows
                                                       # (a regression: one value per line; MSE and R² on stderr;
                                                       # one-class: 1 inlier, -1 outlier; the outliers' fraction)
    hingectl evaluate MODEL DATASET|FILE               # metrics and confusion matrix (a file is uploaded, then deleted)
    hingectl export MODEL [--format json|liblinear|libsvm|onnx] [-o model.json]
    hingectl import FILE [--format json|liblinear|libsvm] [--n-features N]   # prints the model id
    hingectl ls [datasets|jobs|models]  ·  hingectl rm ID...  ·  hingectl cancel JOB

The service is ``--url`` or ``HINGE_URL`` (default http://127.0.0.1:8000); an API key is
``--api-key`` or ``HINGE_API_KEY``. ``-p KEY=VALUE`` sets a solver parameter: VALUE is read as JSON
when it parses (numbers, true, null, [lists]) and as a string otherwise; dotted keys nest
(``kernel.gamma=0.5`` sets params.kernel.gamma; a kernel without ``type`` is rbf). Results go to stdout (ids, labels, JSON with
``--json``), messages and progress bars to stderr. The service's hints name the flags that set what they
name (its "send format=csv" reads "use --format csv"; "params.C" reads "-p C").

Exit codes, for scripts:
    0  done (a watched job succeeded)
    1  the watched job failed or was canceled
    2  bad command line
    3  the service cannot be reached
    4  not found (no such data set, job or model, or not yours; or the server lacks the route)
    5  authentication refused (missing or wrong API key)
    6  request refused (invalid parameters, a limit crossed, ...)
    7  the service failed (5xx)
    8  with --strict: the watched job succeeded, but its model carries warnings (printed on stderr)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from typing import cast

import httpx

from hinge_client._cli_errors import EXIT_NOT_FOUND, EXIT_OK, EXIT_REFUSED, EXIT_USAGE, CliError, api_error, cli_error
from hinge_client._cli_files import read_rows
from hinge_client._cli_hints import flag_hints
from hinge_client._cli_jobs import cmd_cancel, cmd_train, cmd_watch, print_warnings
from hinge_client._cli_output import _cell, _console, _err, _out, _table
from hinge_client._cli_parser import KINDS, build_parser
from hinge_client.client import Client
from hinge_client.errors import HingeError
from hinge_client.types import Dataset, ImportFormat

PREDICT_BATCH = 1000
LARGE_UPLOAD = 1 << 20  # bytes; larger uploads get a progress bar on a terminal


# -- upload -----------------------------------------------------------------------------------------


def upload_file(client: Client, path: str, params: dict, on_progress=None) -> Dataset:
    """Upload a local file as a data set; an answer naming a line of the file is prefixed with the file's path."""
    with naming_the_file(path):
        return client.upload_dataset(path, on_progress=on_progress, **params)


@contextlib.contextmanager
def naming_the_file(path: str):
    """The service's error about a file sent to it as a CliError; one naming a line starts with the file's path."""
    try:
        yield
    except HingeError as exc:
        error = api_error(exc)
        if re.search(r"\bline \d+", str(error)):
            raise error.reworded(f"{path}: {error}") from None
        raise error from None


def cmd_upload(client: Client, args) -> int:
    if not os.path.isfile(args.file):
        raise CliError(f"no such file: {args.file}", EXIT_USAGE)
    params = {"name": args.name or os.path.basename(args.file), **upload_params(args)}
    size = os.path.getsize(args.file)
    show = args.progress or (sys.stderr.isatty() and size >= LARGE_UPLOAD)
    if show:
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

        with Progress(
            "[bold]upload",
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=_console(force=args.progress),
        ) as bar:
            task = bar.add_task("upload", total=size)
            record = upload_file(client, args.file, params, lambda sent, total: bar.update(task, completed=sent))
            bar.update(task, completed=size, description="parsing")
    else:
        record = upload_file(client, args.file, params)
    if args.json:
        _out(json.dumps(record))
    else:
        _err(f"uploaded {record['n_samples']} rows x {record['n_features']} features ({labels_text(record)})")
        base = index_base_text(record)
        if base:
            _err(base)
        _out(record["id"])
    return EXIT_OK


def _number(value) -> str:
    """A summary's number as %g, or "-" when the service left it out (a mean or spread that overflows a double)."""
    return "-" if value is None else f"{value:g}"


def labels_text(record: Dataset) -> str:
    """The upload's labels in brief: the first counts per label, or for real-valued targets (not all integers) their
    range, mean and spread, which a regression trains on."""
    targets = record.get("targets")
    if targets and not targets["integral"]:
        distinct = targets["n_distinct"]
        return (
            f"real-valued targets from {targets['min']:g} to {targets['max']:g}, mean {_number(targets['mean'])}, "
            f"std {_number(targets['std'])}, {distinct if distinct is not None else 'over 1000'} distinct values"
        )
    return ", ".join(f"{k}: {v}" for k, v in list(record.get("labels", {}).items())[:6])


def index_base_text(record: Dataset) -> str:
    """How the upload's feature indices were read: the base, and whether it was guessed (with what to do if wrong)."""
    guessed = record.get("zero_based_guessed")
    if guessed is None:  # CSV (no indices), or a service that does not say
        return ""
    base = "zero-based" if record["zero_based"] else "one-based"
    if not guessed:
        return f"feature indices: {base} (--zero-based {str(record['zero_based']).lower()}, as given)"
    if record["zero_based"]:
        return "feature indices: zero-based (guessed: index 0 appears in the file)"
    return (
        "feature indices: one-based (guessed: no index 0 appears in the file). If the file is zero-based (as "
        "scikit-learn's dump_svmlight_file writes it), upload it again with --zero-based true: "
        f"it then has {record['n_features'] + 1} features"
    )


def upload_params(args) -> dict:
    """The upload's query parameters from the command's flags (those it has and were given)."""
    names = ("format", "label_column", "zero_based", "value_dtype")
    return {name: getattr(args, name) for name in names if getattr(args, name, None)}


# -- predict, evaluate, export ---------------------------------------------------------------------------


def _fmt_label(label) -> str:
    return f"{label:g}" if isinstance(label, (int, float)) else str(label)


def _fmt_value(value: float) -> str:
    """A regression's predicted value, to the digits that read back as the same number (LIBLINEAR prints %.17g)."""
    return repr(float(value))


def regression_metrics(predicted: list[float], truth: list[float]) -> tuple[float, float]:
    """(mean squared error, R²) of predicted values, as scikit-learn's mean_squared_error and r2_score (constant
    targets: R² 1 when predicted exactly, else 0)."""
    mean = sum(truth) / len(truth)
    sse = sum((p - t) ** 2 for p, t in zip(predicted, truth))
    sst = sum((t - mean) ** 2 for t in truth)
    r2 = 1.0 - sse / sst if sst > 0 else (1.0 if sse == 0 else 0.0)
    return sse / len(truth), r2


def one_class_summary(labels: list, truth: list[float] | None) -> str:
    """A one-class model's predictions in a line: the fraction of outliers (-1) and, for rows labelled 1 (inlier) and
    -1 (outlier), the accuracy of the labels as svm-predict prints it."""
    outliers = sum(float(label) < 0 for label in labels)
    line = f"Outliers = {100.0 * outliers / len(labels):g}% ({outliers}/{len(labels)}) (one-class)"
    if truth is not None and set(truth) <= {-1.0, 1.0}:
        right = sum(float(predicted) == label for predicted, label in zip(labels, truth))
        line += f", Accuracy = {100.0 * right / len(labels):g}% ({right}/{len(labels)})"
    return line


def at_lines(message: str, path: str, lines: list[int]) -> str:
    """A message naming rows of a predict request (``instances[i]``) as the lines of the file they came from."""
    return re.sub(r"instances\[(\d+)\]", lambda m: f"{path}: line {lines[int(m.group(1))]}", message)


def cmd_predict(client: Client, args) -> int:
    local = read_rows(args.file, args.format, args.label_column)
    if not local.rows:
        raise CliError(f"{args.file} has no rows", EXIT_USAGE)
    labels: list = []
    scores: list = []
    probabilities: list = []
    for start in range(0, len(local.rows), PREDICT_BATCH):
        rows = local.rows[start : start + PREDICT_BATCH]
        try:
            answer = client.predict(args.model, rows, args.probabilities, args.ignore_unknown_features)
        except HingeError as exc:  # the service names rows of the batch: name the file's lines instead
            error = api_error(exc)
            raise error.reworded(at_lines(str(error), args.file, local.lines[start : start + PREDICT_BATCH])) from None
        labels.extend(answer["labels"] or [])  # none for models that only score (ranking)
        scores.extend(answer["scores"])
        probabilities.extend(answer.get("probabilities") or [])
    model = client.get_model(args.model)
    regression = model.get("task") == "regression"  # its labels are the predicted values
    if args.json:
        out: dict = {"labels": labels or None, "scores": scores}
        if args.probabilities:
            out["probabilities"] = probabilities
        _out(json.dumps(out))
    else:
        if args.probabilities:  # as svm-predict -b 1: the labels of the probability columns first
            _out("labels\t" + "\t".join(_fmt_label(label) for label in model["labels"] or []))
        for at, score in enumerate(scores):
            fields = [(_fmt_value if regression else _fmt_label)(labels[at])] if labels else []
            if args.scores or not labels:
                fields.extend(f"{v:.6g}" for v in (score if isinstance(score, list) else [score]))
            if args.probabilities:
                fields.extend(f"{p:.6g}" for p in probabilities[at])
            _out("\t".join(fields))
    labelled = local.all_labelled()
    if labels and model.get("task") == "one_class":  # the outliers found, with or without labels
        _err(one_class_summary(labels, cast(list[float], local.labels) if labelled else None))
        if labelled:
            print_warnings(args.model, model.get("warnings") or [])
    elif labels and labelled:  # as svm-predict: the accuracy (a regression's error) on labelled rows
        truth = cast(list[float], local.labels)
        if regression:
            mse, r2 = regression_metrics(labels, truth)
            _err(f"Mean squared error = {mse:g}, R² = {r2:g} (regression, {len(labels)} rows)")
        else:
            right = sum(float(predicted) == label for predicted, label in zip(labels, truth))
            _err(f"Accuracy = {100.0 * right / len(labels):g}% ({right}/{len(labels)})")
        # a score is read as the model's worth: say when the model itself is doubtful
        print_warnings(args.model, model.get("warnings") or [])
    return EXIT_OK


def cmd_evaluate(client: Client, args) -> int:
    if os.path.isfile(args.data):  # a local file: uploaded for the evaluation, deleted afterwards
        dataset = upload_file(client, args.data, {"name": os.path.basename(args.data), **upload_params(args)})["id"]
        try:
            report: dict = dict(client.evaluate(args.model, dataset))
        finally:
            try:
                client.delete_dataset(dataset)
            except (HingeError, httpx.TransportError) as exc:  # the evaluation's own error is the one to report
                _err(f"could not delete the uploaded data set {dataset}: {cli_error(exc, client.base_url)}")
    elif args.data.startswith("ds_"):
        report = dict(client.evaluate(args.model, args.data))
    else:
        raise CliError(f"{args.data}: no such file, nor a data set id (ds_...)", EXIT_USAGE)
    if args.json:
        _out(json.dumps(report))
        return EXIT_OK
    for key, value in report.items():
        if isinstance(value, (int, float, str)) or value is None:
            _out(f"{key:<22}{value:.6g}" if isinstance(value, float) else f"{key:<22}{value}")
    if report.get("per_class"):
        _out("")
        _table(
            ["label", "precision", "recall", "f1", "support"],
            [
                [_fmt_label(c["label"]), *(_cell(c[k]) for k in ("precision", "recall", "f1", "support"))]
                for c in report["per_class"]
            ],
        )
    histogram = report.get("score_histogram")
    if histogram:
        _out("")
        _out(
            f"scores from {histogram['edges'][0]:.4g} to {histogram['edges'][-1]:.4g} (negative: outliers), rows per bin:"
        )
        _out(" ".join(str(count) for count in histogram["counts"]))
    if report.get("confusion_matrix"):
        confusion = report["confusion_matrix"]
        names = [_fmt_label(label) for label in confusion["labels"]]
        _out("")
        _out("confusion matrix (rows: true label, columns: predicted label)")
        _table(["true \\ predicted", *names], [[name, *map(str, row)] for name, row in zip(names, confusion["matrix"])])
    return EXIT_OK


def cmd_import(client: Client, args) -> int:
    if not os.path.isfile(args.file):
        raise CliError(f"no such file: {args.file}", EXIT_USAGE)
    fmt = args.format or sniff_model_format(args.file)
    with naming_the_file(args.file):
        model = client.import_model(args.file, cast(ImportFormat, fmt), args.n_features)
    if args.json:
        _out(json.dumps(model))
    else:
        labels = ", ".join(_fmt_label(label) for label in (model.get("labels") or [])[:6])
        _err(f"imported {fmt} model: {model['kind']}, {model['n_features']} features, labels {labels or '-'}")
        _out(model["id"])
    return EXIT_OK


def sniff_model_format(path: str) -> str:
    """json, liblinear or libsvm, from a model file's first line (plain or gzip); else a usage error."""
    import gzip

    try:
        with open(path, "rb") as probe:
            compressed = probe.read(2) == b"\x1f\x8b"
        with gzip.open(path, "rb") if compressed else open(path, "rb") as handle:
            head = handle.read(4096).lstrip()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc}", EXIT_REFUSED) from None
    if head.startswith(b"{"):
        return "json"
    if head.startswith(b"solver_type"):
        return "liblinear"
    if head.startswith(b"svm_type"):
        return "libsvm"
    raise CliError(f"{path}: not a model file this can tell (give --format json, liblinear or libsvm)", EXIT_USAGE)


def cmd_export(client: Client, args) -> int:
    try:
        content = client.export_model(args.model, args.format)
    except HingeError as exc:
        if exc.status == 405 or exc.code == "not_found":
            raise CliError(
                f"this server does not offer model export (GET /v1/models/{{id}}/export: {api_error(exc)})",
                EXIT_NOT_FOUND,
            ) from None
        raise
    if args.output:
        with open(args.output, "wb") as handle:
            handle.write(content)
        _err(f"wrote {args.output} ({len(content)} bytes)")
    else:
        sys.stdout.buffer.write(content)
        sys.stdout.flush()
    return EXIT_OK


# -- ls, rm --------------------------------------------------------------------------------------------------

COLUMNS = {
    "datasets": ("id", "name", "n_samples", "n_features", "created_at"),
    "jobs": ("id", "status", "solver", "dataset_id", "model_id", "created_at"),
    "models": ("id", "solver", "stop_reason", "train_accuracy", "job_id", "created_at"),
}


def cmd_ls(client: Client, args) -> int:
    kinds = [args.kind] if args.kind else list(KINDS)
    listing = {kind: getattr(client, f"list_{kind}")(limit=args.limit)["items"] for kind in kinds}
    if args.json:
        _out(json.dumps(listing if len(kinds) > 1 else listing[kinds[0]]))
        return EXIT_OK
    for kind in kinds:
        if len(kinds) > 1:
            _out(f"# {kind}")
        columns = COLUMNS[kind]
        _table(list(columns), [[_cell(item.get(c)) for c in columns] for item in listing[kind]])
    return EXIT_OK


RM_KINDS = {"ds_": "dataset", "job_": "job", "mdl_": "model"}


def cmd_rm(client: Client, args) -> int:
    for ident in args.ids:
        prefix = next((p for p in RM_KINDS if ident.startswith(p)), None)
        if prefix is None:
            raise CliError(f"{ident}: not a data set (ds_...), job (job_...) or model (mdl_...) id", EXIT_USAGE)
        try:
            getattr(client, f"delete_{RM_KINDS[prefix]}")(ident)
        except HingeError as exc:
            if prefix == "job_" and exc.status == 409:
                raise api_error(exc).reworded(
                    f"{ident} is still queued or running: cancel it first (hingectl cancel {ident}), then remove it"
                ) from None
            raise
        _err(f"removed {ident}" + (" (its model stays)" if prefix == "job_" else ""))
    return EXIT_OK


COMMANDS = {
    "upload": cmd_upload,
    "train": cmd_train,
    "watch": cmd_watch,
    "predict": cmd_predict,
    "evaluate": cmd_evaluate,
    "export": cmd_export,
    "import": cmd_import,
    "ls": cmd_ls,
    "rm": cmd_rm,
    "cancel": cmd_cancel,
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of `hingectl`; returns the exit code."""
    args = build_parser().parse_args(argv)
    # no retries: a command line says at once that the service is down or busy (exit 3 or 6), scripts decide
    client = Client(args.url, args.api_key, retries=0)
    client.http.headers["User-Agent"] = "hingectl"
    try:
        try:
            return COMMANDS[args.command](client, args)
        except (HingeError, httpx.TransportError) as exc:
            raise cli_error(exc, client.base_url) from None
    except CliError as exc:
        _err(flag_hints(str(exc), args) if exc.status is not None else str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except BrokenPipeError:  # stdout closed early (`hingectl predict ... | head`): stop quietly, as on SIGPIPE
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    finally:
        client.close()


if __name__ == "__main__":
    sys.exit(main())
