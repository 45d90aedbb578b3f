"""`hingectl`: Hinge from the shell. Upload, train, watch, predict, evaluate, export, import, list, remove.

    hingectl upload demo.svm --name demo              # prints the data set id
    hingectl train DATASET --solver ocas -p C=1 -p tol_rel=0.001 [--watch]
    hingectl train DATASET --solver smo -p kernel.gamma=0.5 -p search.C=[0.1,1,10]
    hingectl watch JOB                                 # live bar: phase, fraction, gap, ETA; prints the model id
    hingectl predict MODEL rows.svm [--scores] [--probabilities] [--ignore-unknown-features]
                                                       # one label per line; accuracy on stderr for labelled rows
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

import argparse
import contextlib
import json
import os
import re
import sys
import time
from typing import cast, get_args

import httpx

from hinge_client._cli_errors import (
    EXIT_JOB_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    EXIT_WARNINGS,
    CliError,
    api_error,
    cli_error,
)
from hinge_client._cli_files import read_rows
from hinge_client.client import DEFAULT_URL, Client
from hinge_client.errors import HingeError
from hinge_client.types import Dataset, ImportFormat, Solver

PREDICT_BATCH = 1000
LARGE_UPLOAD = 1 << 20  # bytes; larger uploads get a progress bar on a terminal


def _err(message: str) -> None:
    print(f"hingectl: {message}", file=sys.stderr, flush=True)


def _out(text: str) -> None:
    print(text, flush=True)


def _console(force: bool = False):
    from rich.console import Console

    return Console(stderr=True, force_terminal=True if force else None)


def parse_value(text: str):
    """A -p value: JSON when it parses, else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_params(pairs: list[str]) -> dict:
    """``["C=1", "kernel.gamma=0.5"]`` -> ``{"C": 1, "kernel": {"gamma": 0.5}}``."""
    params: dict = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"-p {pair!r}: expected KEY=VALUE (e.g. -p C=1 or -p kernel.gamma=0.5)", EXIT_USAGE)
        target = params
        parts = key.split(".")
        for part in parts[:-1]:
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                raise CliError(f"-p {pair!r}: {part} was given a value and cannot hold fields too", EXIT_USAGE)
        target[parts[-1]] = parse_value(value)
    return params


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
        labels = ", ".join(f"{k}: {v}" for k, v in list(record.get("labels", {}).items())[:6])
        _err(f"uploaded {record['n_samples']} rows x {record['n_features']} features ({labels})")
        base = index_base_text(record)
        if base:
            _err(base)
        _out(record["id"])
    return EXIT_OK


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


# -- train and watch ---------------------------------------------------------------------------------


def cmd_train(client: Client, args) -> int:
    params = parse_params(args.param or [])
    if args.params_json:
        params = {**json.loads(args.params_json), **params}
    if isinstance(params.get("kernel"), dict):
        params["kernel"].setdefault("type", "rbf")  # the service's default kernel, so -p kernel.gamma=0.5 suffices
    job = client.submit_job(args.dataset, args.solver, params)
    if not args.watch:
        _out(json.dumps(job) if args.json else job["id"])
        return EXIT_OK
    _err(f"job {job['id']} queued")
    return watch(client, job["id"], args)


def print_warnings(model_id: str, warnings: list) -> None:
    """The model's warnings (``warnings`` of the job and the model), one line each on stderr."""
    for item in warnings:
        _err(f"warning: model {model_id}: {item.get('code')}: {item.get('message')}")


def cmd_watch(client: Client, args) -> int:
    return watch(client, args.job, args)


def _fmt_eta(seconds) -> str:
    if seconds is None:
        return "ETA ?"
    seconds = int(round(seconds))
    return f"ETA {seconds // 60}:{seconds % 60:02d}" if seconds >= 60 else f"ETA {seconds}s"


def _fmt_gap(progress: dict) -> str:
    """The relative gap (what tol_rel is compared with), else the absolute one, else '-' (no bound yet)."""
    relative, gap = progress.get("gap_rel"), progress.get("gap")
    if isinstance(relative, (int, float)):
        return f"gap {relative:.2%}" if relative >= 1e-4 else f"gap {relative:.1e}"
    return f"gap {gap:.3g}" if isinstance(gap, (int, float)) else "gap -"


def job_events(client: Client, job_id: str):
    """The job's events (``Client.events``); a stream that keeps breaking is a CliError."""
    try:
        yield from client.events(job_id)
    except httpx.TransportError as exc:
        raise CliError(f"lost the event stream of {job_id} ({exc}) five times in a row", EXIT_UNREACHABLE) from None


def _seconds_between(start: str | None, end: str | None) -> float | None:
    """Seconds from one of the service's ISO 8601 UTC times to another (None if either is missing or unreadable)."""
    from datetime import datetime

    try:
        return (datetime.fromisoformat(str(end)) - datetime.fromisoformat(str(start))).total_seconds()
    except ValueError:
        return None


def job_duration(job: dict, watched_s: float) -> str:
    """How long an ended job ran, from its own times (a job watched after it ended ran for longer than the watch):
    "after 2.1 s" from its start to its end, "before it started, after 3.0 s in the queue", else the watch's time."""
    ran = _seconds_between(job.get("started_at"), job.get("finished_at"))
    if ran is not None:
        return f"after {ran:.1f} s"
    waited = _seconds_between(job.get("created_at"), job.get("finished_at"))
    if job.get("started_at") is None and waited is not None:
        return f"before it started, after {waited:.1f} s in the queue"
    return f"after {watched_s:.1f} s"


def watch(client: Client, job_id: str, args) -> int:
    """Follow a job's event stream with a progress bar (a terminal) or a line per phase and 10% (else)."""
    live = args.progress or sys.stderr.isatty()
    points = 0
    last: dict = {}
    final = None
    started = time.monotonic()
    if live:
        from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

        bar = Progress(
            TextColumn("[bold]{task.description:<28}"),
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[gap]}"),
            TextColumn("{task.fields[eta]}"),
            TimeElapsedColumn(),
            console=_console(force=args.progress),
        )
        task = bar.add_task(job_id, total=1.0, gap="gap -", eta="ETA ?")
        bar.start()
    printed_step, printed_phase = -1, None
    try:
        for kind, data in job_events(client, job_id):
            if kind == "trace":
                points += 1
                continue
            if kind == "end":
                final = data
                break
            job_progress = data.get("progress", {}) if kind == "status" else data
            last = job_progress or last
            fraction = float(last.get("fraction") or 0.0)
            phase = last.get("phase") or (data.get("status") if kind == "status" else None) or "queued"
            if live:
                bar.update(
                    task, completed=fraction, description=phase, gap=_fmt_gap(last), eta=_fmt_eta(last.get("eta_s"))
                )
            else:
                step = int(fraction * 10)
                if phase != printed_phase or step > printed_step:
                    _err(f"{job_id}: {phase} {fraction:5.1%}  {_fmt_gap(last)}  {_fmt_eta(last.get('eta_s'))}")
                    printed_step, printed_phase = step, phase
    finally:
        if live:
            if final is not None and final.get("status") == "succeeded":
                bar.update(task, completed=1.0, description="done", eta="")
            bar.stop()
    if final is None:
        raise CliError(f"the event stream of {job_id} ended without the job's final state", EXIT_JOB_FAILED)
    status = final["status"]
    summary = f"job {job_id} {status}"
    if final.get("stop_reason"):
        summary += f" ({final['stop_reason']})"
    summary += f" {job_duration(final, time.monotonic() - started)}, {points} trace point(s) seen"
    if status == "succeeded":
        summary += f"; model {final['model_id']}"
        _err(summary)
        warnings = final.get("warnings") or []
        print_warnings(final["model_id"], warnings)
        _out(json.dumps(final) if args.json else final["model_id"])
        return EXIT_WARNINGS if warnings and getattr(args, "strict", False) else EXIT_OK
    if final.get("error"):
        summary += f": {final['error'].get('message')}"
    _err(summary)
    if args.json:
        _out(json.dumps(final))
    return EXIT_JOB_FAILED


# -- predict, evaluate, export ---------------------------------------------------------------------------


def _fmt_label(label) -> str:
    return f"{label:g}" if isinstance(label, (int, float)) else str(label)


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
    if args.json:
        out: dict = {"labels": labels or None, "scores": scores}
        if args.probabilities:
            out["probabilities"] = probabilities
        _out(json.dumps(out))
    else:
        if args.probabilities:  # as svm-predict -b 1: the labels of the probability columns first
            model = client.get_model(args.model)
            _out("labels\t" + "\t".join(_fmt_label(label) for label in model["labels"] or []))
        for at, score in enumerate(scores):
            fields = [_fmt_label(labels[at])] if labels else []
            if args.scores or not labels:
                fields.extend(f"{v:.6g}" for v in (score if isinstance(score, list) else [score]))
            if args.probabilities:
                fields.extend(f"{p:.6g}" for p in probabilities[at])
            _out("\t".join(fields))
    if labels and local.all_labelled():  # as svm-predict: the accuracy on labelled rows, on stderr
        right = sum(float(predicted) == truth for predicted, truth in zip(labels, local.labels))
        _err(f"Accuracy = {100.0 * right / len(labels):g}% ({right}/{len(labels)})")
        # an accuracy is read as the model's worth: say when the model itself is doubtful
        print_warnings(args.model, client.get_model(args.model).get("warnings") or [])
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


# -- ls, rm, cancel ------------------------------------------------------------------------------------------

KINDS = ("datasets", "jobs", "models")
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


def _table(columns: list[str], rows: list[list[str]]) -> None:
    """Columns padded to their widest cell, on stdout."""
    widths = [max([len(c)] + [len(row[i]) for row in rows]) for i, c in enumerate(columns)]
    _out("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip())
    for row in rows:
        _out("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


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


def cmd_cancel(client: Client, args) -> int:
    job = client.cancel_job(args.job)
    _err(f"cancel requested: job {args.job} is {job['status']}")
    return EXIT_OK


# -- hints in the command line's terms --------------------------------------------------------------------------

API_FLAGS = {
    "format": "--format",
    "zero_based": "--zero-based",
    "label_column": "--label-column",
    "value_dtype": "--value-dtype",
    "n_features": "--n-features",
    "probabilities": "--probabilities",
    "ignore_unknown_features": "--ignore-unknown-features",
}
"""API parameters that a command's flag sets (the flag's dest is the parameter's name)."""
SWITCHES = ("probabilities", "ignore_unknown_features")

_ROUTE_ALONE = re.compile(r"\s*\((?:GET|POST|PUT|DELETE) /v1/[^\s,)]*\)")
_ROUTE_FIRST = re.compile(r"\((?:GET|POST|PUT|DELETE) /v1/[^\s,)]*, ")
_KERNEL_EXAMPLE = re.compile(r'"(\w+)": \{"type": "(\w+)", "(\w+)": \.\.\.\}')
_PARAM_VALUE = re.compile(r"\bparams\.([\w.]+)(?::\s*|=)(true|false|null|-?\d[\w.+-]*)")
_PARAM = re.compile(r"\bparams\.([\w.]+)")


def flag_hints(message: str, args) -> str:
    """The service's message with its hints in this command's terms.

    A parameter of the request that the command sets with a flag is named by the flag ("send format=csv"
    reads "use --format csv", "send \"ignore_unknown_features\": true" reads "use --ignore-unknown-features"),
    a training parameter by -p ("params.C" reads "-p C"), and the routes the command called are left out.
    """
    message = _ROUTE_FIRST.sub("(", _ROUTE_ALONE.sub("", message))
    message = _KERNEL_EXAMPLE.sub(r"-p \1.type=\2 -p \1.\3=...", message)
    message = _PARAM.sub(r"-p \1", _PARAM_VALUE.sub(r"-p \1=\2", message))
    for name, flag in API_FLAGS.items():
        if not hasattr(args, name):  # this command has no such flag
            continue

        def as_flag(match: re.Match, flag: str = flag, switch: bool = name in SWITCHES) -> str:
            value = match.group(2).strip('"')
            return ("use " if match.group(1) else "") + (flag if switch else f"{flag} {value.lower()}")

        message = re.sub(rf'(\bsend\s+)?"{name}":\s*("[^"]*"|[\w.+-]+)', as_flag, message)
        message = re.sub(rf"(\bsend\s+)?\b{name}=([\w.+-]+)", as_flag, message)
        if "_" in name:
            message = re.sub(rf"\b{name}\b", flag, message)
    if not hasattr(args, "zero_based"):  # how to upload a data set again, told to another command (predict)
        message = re.sub(r"\bzero_based=(true|false|auto)\b", r"`hingectl upload --zero-based \1`", message)
    return message


# -- the parser ------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `hingectl`."""

    def options(suppress: bool) -> argparse.ArgumentParser:
        # the same options before or after the command; after it they only override (argparse would
        # otherwise reset a value given before the command to the subcommand's default)
        def default(value):
            return argparse.SUPPRESS if suppress else value

        group = argparse.ArgumentParser(add_help=False)
        group.add_argument(
            "--url",
            default=default(os.environ.get("HINGE_URL", DEFAULT_URL)),
            help="The service (default: HINGE_URL, else http://127.0.0.1:8000).",
        )
        group.add_argument(
            "--api-key", default=default(os.environ.get("HINGE_API_KEY")), help="API key (default: HINGE_API_KEY)."
        )
        group.add_argument("--json", action="store_true", default=default(False), help="Print JSON answers on stdout.")
        group.add_argument(
            "--progress",
            action="store_true",
            default=default(False),
            help="Draw progress bars even when stderr is not a terminal.",
        )
        return group

    common = options(suppress=True)
    parser = argparse.ArgumentParser(
        prog="hingectl",
        description="Hinge from the shell: train SVMs over HTTP.",
        epilog="Exit codes: 0 ok, 1 job failed or canceled, 2 usage, 3 unreachable, "
        "4 not found, 5 auth, 6 refused, 7 server error.",
        parents=[options(False)],
    )
    sub = parser.add_subparsers(dest="command", required=True)

    upload = sub.add_parser("upload", parents=[common], help="Upload a data set (svmlight or CSV, gzip or plain).")
    upload.add_argument("file")
    upload.add_argument("--name", help="Name to list it by (default: the file name).")
    upload.add_argument("--format", choices=("svmlight", "csv"), help="Default: svmlight.")
    upload.add_argument("--label-column", help="CSV: the label column's header (default label).")
    upload.add_argument("--zero-based", choices=("auto", "true", "false"), help="svmlight: feature numbering.")
    upload.add_argument("--value-dtype", choices=("auto", "float32", "float64"), help="How values are stored.")

    train = sub.add_parser("train", parents=[common], help="Submit a training job (prints its id).")
    train.add_argument("dataset")
    train.add_argument(
        "--solver",
        required=True,
        metavar="SOLVER",
        help=f"{', '.join(get_args(Solver))}, or any other solver the service registers (it names them if not).",
    )
    train.add_argument("-p", "--param", action="append", metavar="KEY=VALUE", help="A solver parameter (repeat).")
    train.add_argument("--params-json", help="All parameters as one JSON object (-p values win).")
    train.add_argument("--watch", action="store_true", help="Follow the job to its end; print the model id.")
    train.add_argument(
        "--strict", action="store_true", help="With --watch: exit 8 when the model carries warnings (see exit codes)."
    )

    watch_parser = sub.add_parser("watch", parents=[common], help="Follow a job live; prints the model id.")
    watch_parser.add_argument("job")
    watch_parser.add_argument("--strict", action="store_true", help="Exit 8 when the model carries warnings.")

    predict = sub.add_parser("predict", parents=[common], help="Predict the rows of a local file.")
    predict.add_argument("model")
    predict.add_argument("file")
    predict.add_argument("--format", choices=("svmlight", "csv"), default="svmlight")
    predict.add_argument("--label-column", default="label", help="CSV: a column to leave out (default label).")
    predict.add_argument("--scores", action="store_true", help="Print the scores after each label.")
    predict.add_argument(
        "--probabilities",
        action="store_true",
        help="Print class probabilities after each label, under a first line `labels L1 L2 ...` (calibrated models).",
    )
    predict.add_argument(
        "--ignore-unknown-features",
        action="store_true",
        help="Drop features beyond the model's (else such a row is refused).",
    )

    evaluate = sub.add_parser(
        "evaluate", parents=[common], help="Evaluate a model on a data set id or a local file (uploaded, then deleted)."
    )
    evaluate.add_argument("model")
    evaluate.add_argument("data", metavar="DATASET|FILE")
    evaluate.add_argument("--format", choices=("svmlight", "csv"), help="A local file's format (default: svmlight).")
    evaluate.add_argument("--label-column", help="CSV: the label column's header (default label).")
    evaluate.add_argument("--zero-based", choices=("auto", "true", "false"), help="svmlight: feature numbering.")

    export = sub.add_parser("export", parents=[common], help="Download a model (GET /v1/models/{id}/export).")
    export.add_argument("model")
    export.add_argument("--format", default="json", choices=("json", "liblinear", "libsvm", "onnx"))
    export.add_argument("-o", "--output", help="File to write (default: stdout).")

    import_parser = sub.add_parser("import", parents=[common], help="Import a model file; prints the model id.")
    import_parser.add_argument("file")
    import_parser.add_argument(
        "--format", choices=("json", "liblinear", "libsvm"), help="Default: told from the file's first line."
    )
    import_parser.add_argument(
        "--n-features", type=int, help="libsvm: the model's feature count (default: its largest index)."
    )

    ls = sub.add_parser("ls", parents=[common], help="List data sets, jobs and models.")
    ls.add_argument("kind", nargs="?", choices=tuple(KINDS))
    ls.add_argument("--limit", type=int, default=20)

    rm = sub.add_parser(
        "rm", parents=[common], help="Delete data sets (ds_...), finished jobs (job_...) and models (mdl_...)."
    )
    rm.add_argument("ids", nargs="+")

    cancel = sub.add_parser("cancel", parents=[common], help="Cancel a queued or running job.")
    cancel.add_argument("job")
    return parser


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
