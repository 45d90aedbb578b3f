"""The argument parser of `hingectl`: its commands and their arguments, and the options (``--url``, ``--api-key``,
``--json``, ``--progress``) taken before or after the command."""

from __future__ import annotations

import argparse
import os
from typing import get_args

from hinge_client.client import DEFAULT_URL
from hinge_client.types import Solver

KINDS = ("datasets", "jobs", "models")
"""What `hingectl ls` lists."""


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
    train.add_argument(
        "-p",
        "--param",
        action="append",
        metavar="KEY=VALUE",
        help="A solver parameter (repeat), e.g. -p C=10, -p kernel.gamma=0.5, -p penalty=l1 -p loss=squared_hinge "
        "(dcd, sparse weights), -p multiclass=crammer_singer (ocas, or the sampled-cut solver with a kernel: one problem over "
        "all classes).",
    )
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
