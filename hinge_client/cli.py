"""`hingectl`: Hinge from the shell. Upload, train, watch, predict, evaluate, export, list, remove.

    hingectl upload demo.svm --name demo              # prints the data set id
    hingectl train DATASET --solver ocas -p C=1 -p tol_rel=0.001 [--watch]
    hingectl train DATASET --solver smo -p kernel.gamma=0.5 -p search.C=[0.1,1,10]
    hingectl watch JOB                                 # live bar: phase, fraction, gap, ETA; prints the model id
    hingectl predict MODEL rows.svm [--scores]         # one label per line
    hingectl evaluate MODEL DATASET
    hingectl export MODEL [-o model.json]
    hingectl ls [datasets|jobs|models]  ·  hingectl rm ID...  ·  hingectl cancel JOB

The service is ``--url`` or ``HINGE_URL`` (default http://127.0.0.1:8000); an API key is
``--api-key`` or ``HINGE_API_KEY``. ``-p KEY=VALUE`` sets a solver parameter: VALUE is read as JSON
when it parses (numbers, true, null, [lists]) and as a string otherwise; dotted keys nest
(``kernel.gamma=0.5`` sets params.kernel.gamma; a kernel without ``type`` is rbf). Results go to stdout (ids, labels, JSON with
``--json``), messages and progress bars to stderr.

Exit codes, for scripts:
    0  done (a watched job succeeded)
    1  the watched job failed or was canceled
    2  bad command line
    3  the service cannot be reached
    4  not found (no such data set, job or model, or not yours; or the server lacks the route)
    5  authentication refused (missing or wrong API key)
    6  request refused (invalid parameters, a limit crossed, ...)
    7  the service failed (5xx)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from hinge_client._cli_http import (
    DEFAULT_URL,
    EXIT_JOB_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    Api,
    CliError,
)

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


def cmd_upload(api: Api, args) -> int:
    if not os.path.isfile(args.file):
        raise CliError(f"no such file: {args.file}", EXIT_USAGE)
    params = {"name": args.name or os.path.basename(args.file)}
    for name in ("format", "label_column", "zero_based"):
        if getattr(args, name):
            params[name] = getattr(args, name)
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
            record = api.upload(args.file, params, lambda sent, total: bar.update(task, completed=sent))
            bar.update(task, completed=size, description="parsing")
    else:
        record = api.upload(args.file, params)
    if args.json:
        _out(json.dumps(record))
    else:
        labels = ", ".join(f"{k}: {v}" for k, v in list(record.get("labels", {}).items())[:6])
        _err(f"uploaded {record['n_samples']} rows x {record['n_features']} features ({labels})")
        _out(record["id"])
    return EXIT_OK


# -- train and watch ---------------------------------------------------------------------------------


def cmd_train(api: Api, args) -> int:
    params = parse_params(args.param or [])
    if args.params_json:
        params = {**json.loads(args.params_json), **params}
    if isinstance(params.get("kernel"), dict):
        params["kernel"].setdefault("type", "rbf")  # the service's default kernel, so -p kernel.gamma=0.5 suffices
    job = api.json("POST", "/v1/jobs", json={"dataset_id": args.dataset, "solver": args.solver, "params": params})
    if not args.watch:
        _out(json.dumps(job) if args.json else job["id"])
        return EXIT_OK
    _err(f"job {job['id']} queued")
    return watch(api, job["id"], args)


def cmd_watch(api: Api, args) -> int:
    return watch(api, args.job, args)


def _fmt_eta(seconds) -> str:
    if seconds is None:
        return "ETA ?"
    seconds = int(round(seconds))
    return f"ETA {seconds // 60}:{seconds % 60:02d}" if seconds >= 60 else f"ETA {seconds}s"


def _fmt_gap(progress: dict) -> str:
    gap = progress.get("gap")
    return f"gap {gap:.3g}" if isinstance(gap, (int, float)) else "gap -"


def watch(api: Api, job_id: str, args) -> int:
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
        for kind, data in api.events(job_id):
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
    seconds = time.monotonic() - started
    status = final["status"]
    summary = f"job {job_id} {status}"
    if final.get("stop_reason"):
        summary += f" ({final['stop_reason']})"
    summary += f" after {seconds:.1f} s, {points} trace point(s) seen"
    if final.get("stop_reason") == "max_iter":
        summary += (
            "; the iteration limit ended training before its stopping rule held (the model's gap_rel "
            "says how far from the optimum it is; raise params.max_iter to go on)"
        )
    if status == "succeeded":
        summary += f"; model {final['model_id']}"
        _err(summary)
        _out(json.dumps(final) if args.json else final["model_id"])
        return EXIT_OK
    if final.get("error"):
        summary += f": {final['error'].get('message')}"
    _err(summary)
    if args.json:
        _out(json.dumps(final))
    return EXIT_JOB_FAILED


# -- predict, evaluate, export ---------------------------------------------------------------------------


def read_rows(path: str, fmt: str, label_column: str) -> list:
    """Rows of a local file as predict instances: svmlight rows keyed by feature index, CSV rows dense."""
    import gzip

    rows: list = []
    with gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8") as handle:
        if fmt == "csv":
            import csv

            reader = csv.reader(handle)
            header = next(reader)
            keep = [i for i, name in enumerate(header) if name.strip() != label_column]
            for record in reader:
                if record:
                    rows.append([float(record[i]) for i in keep])
            return rows
        for number, line in enumerate(handle, start=1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            fields = line.split()
            features = {}
            for token in fields[1:]:
                if token.startswith("qid:"):
                    continue
                index, sep, value = token.partition(":")
                if not sep:
                    raise CliError(f"{path} line {number}: expected index:value, got {token!r}", EXIT_USAGE)
                features[index] = float(value)
            rows.append(features)
    return rows


def cmd_predict(api: Api, args) -> int:
    rows = read_rows(args.file, args.format, args.label_column)
    if not rows:
        raise CliError(f"{args.file} has no rows", EXIT_USAGE)
    labels, scores = [], []
    for start in range(0, len(rows), PREDICT_BATCH):
        answer = api.json(
            "POST", f"/v1/models/{args.model}/predict", json={"instances": rows[start : start + PREDICT_BATCH]}
        )
        labels.extend(answer["labels"])
        scores.extend(answer["scores"])
    if args.json:
        _out(json.dumps({"labels": labels, "scores": scores}))
        return EXIT_OK
    for label, score in zip(labels, scores):
        text = f"{label:g}" if isinstance(label, float) else str(label)
        if args.scores:
            values = score if isinstance(score, list) else [score]
            text += "\t" + "\t".join(f"{v:.6g}" for v in values)
        _out(text)
    return EXIT_OK


def cmd_evaluate(api: Api, args) -> int:
    report = api.json("POST", f"/v1/models/{args.model}/evaluate", json={"dataset_id": args.dataset})
    if args.json:
        _out(json.dumps(report))
        return EXIT_OK
    for key, value in report.items():
        if isinstance(value, (int, float, str)) or value is None:
            _out(f"{key:<22}{value:.6g}" if isinstance(value, float) else f"{key:<22}{value}")
    return EXIT_OK


def cmd_export(api: Api, args) -> int:
    try:
        response = api.request("GET", f"/v1/models/{args.model}/export", params={"format": args.format})
    except CliError as exc:
        if getattr(exc, "status", None) == 405 or getattr(exc, "code", None) == "not_found":
            raise CliError(
                f"this server does not offer model export (GET /v1/models/{{id}}/export: {exc})", EXIT_NOT_FOUND
            ) from None
        raise
    if args.output:
        with open(args.output, "wb") as handle:
            handle.write(response.content)
        _err(f"wrote {args.output} ({len(response.content)} bytes)")
    else:
        sys.stdout.buffer.write(response.content)
        sys.stdout.flush()
    return EXIT_OK


# -- ls, rm, cancel ------------------------------------------------------------------------------------------

KINDS = {"datasets": "/v1/datasets", "jobs": "/v1/jobs", "models": "/v1/models"}
COLUMNS = {
    "datasets": ("id", "name", "n_samples", "n_features", "created_at"),
    "jobs": ("id", "status", "solver", "dataset_id", "model_id", "created_at"),
    "models": ("id", "solver", "stop_reason", "train_accuracy", "job_id", "created_at"),
}


def cmd_ls(api: Api, args) -> int:
    kinds = [args.kind] if args.kind else list(KINDS)
    listing = {kind: api.json("GET", KINDS[kind], params={"limit": args.limit})["items"] for kind in kinds}
    if args.json:
        _out(json.dumps(listing if len(kinds) > 1 else listing[kinds[0]]))
        return EXIT_OK
    for kind in kinds:
        if len(kinds) > 1:
            _out(f"# {kind}")
        columns = COLUMNS[kind]
        table = [[_cell(item.get(c)) for c in columns] for item in listing[kind]]
        widths = [max([len(c)] + [len(row[i]) for row in table]) for i, c in enumerate(columns)]
        _out("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip())
        for row in table:
            _out("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())
    return EXIT_OK


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def cmd_rm(api: Api, args) -> int:
    for ident in args.ids:
        if ident.startswith("ds_"):
            api.request("DELETE", f"/v1/datasets/{ident}")
        elif ident.startswith("mdl_"):
            api.request("DELETE", f"/v1/models/{ident}")
        elif ident.startswith("job_"):
            raise CliError(
                f"{ident}: jobs are kept as the record of their models; stop one with `hingectl cancel`", EXIT_REFUSED
            )
        else:
            raise CliError(f"{ident}: not a data set (ds_...) or model (mdl_...) id", EXIT_USAGE)
        _err(f"removed {ident}")
    return EXIT_OK


def cmd_cancel(api: Api, args) -> int:
    job = api.json("POST", f"/v1/jobs/{args.job}/cancel")
    _err(f"cancel requested: job {args.job} is {job['status']}")
    return EXIT_OK


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

    train = sub.add_parser("train", parents=[common], help="Submit a training job (prints its id).")
    train.add_argument("dataset")
    train.add_argument("--solver", required=True, choices=("dcd", "cpa", "ocas", "smo", "sampled_cuts"))
    train.add_argument("-p", "--param", action="append", metavar="KEY=VALUE", help="A solver parameter (repeat).")
    train.add_argument("--params-json", help="All parameters as one JSON object (-p values win).")
    train.add_argument("--watch", action="store_true", help="Follow the job to its end; print the model id.")

    watch_parser = sub.add_parser("watch", parents=[common], help="Follow a job live; prints the model id.")
    watch_parser.add_argument("job")

    predict = sub.add_parser("predict", parents=[common], help="Predict the rows of a local file.")
    predict.add_argument("model")
    predict.add_argument("file")
    predict.add_argument("--format", choices=("svmlight", "csv"), default="svmlight")
    predict.add_argument("--label-column", default="label", help="CSV: a column to leave out (default label).")
    predict.add_argument("--scores", action="store_true", help="Print the scores after each label.")

    evaluate = sub.add_parser("evaluate", parents=[common], help="Evaluate a model on an uploaded data set.")
    evaluate.add_argument("model")
    evaluate.add_argument("dataset")

    export = sub.add_parser("export", parents=[common], help="Download a model (GET /v1/models/{id}/export).")
    export.add_argument("model")
    export.add_argument("--format", default="json")
    export.add_argument("-o", "--output", help="File to write (default: stdout).")

    ls = sub.add_parser("ls", parents=[common], help="List data sets, jobs and models.")
    ls.add_argument("kind", nargs="?", choices=tuple(KINDS))
    ls.add_argument("--limit", type=int, default=20)

    rm = sub.add_parser("rm", parents=[common], help="Delete data sets (ds_...) and models (mdl_...).")
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
    "ls": cmd_ls,
    "rm": cmd_rm,
    "cancel": cmd_cancel,
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of `hingectl`; returns the exit code."""
    args = build_parser().parse_args(argv)
    api = Api(args.url, args.api_key)
    try:
        return COMMANDS[args.command](api, args)
    except CliError as exc:
        _err(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    finally:
        api.close()


if __name__ == "__main__":
    sys.exit(main())
