"""The service's hints in `hingectl`'s terms: a parameter of the request that the command sets with a flag is
named by the flag, a training parameter by ``-p``, and the routes the command called are left out."""

from __future__ import annotations

import re

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
_REGRESSION_LOSS = re.compile(r"\b(dcd with )?loss: ((?:squared_)?epsilon_insensitive)\b")
_SVM_TYPE = re.compile(r"(?<!-p )\b(smo with )?svm_type:? (epsilon_svr|one_class|c_svc)\b")
_USE_PARAM = re.compile(r"\buse (loss|penalty|multiclass) (\w+)")


def flag_hints(message: str, args) -> str:
    """The service's message with its hints in this command's terms.

    A parameter of the request that the command sets with a flag is named by the flag ("send format=csv"
    reads "use --format csv", "send \"ignore_unknown_features\": true" reads "use --ignore-unknown-features"),
    a training parameter by -p ("params.C" reads "-p C", "dcd with loss: epsilon_insensitive" reads
    "--solver dcd -p loss=epsilon_insensitive", "smo with svm_type: one_class" reads "--solver smo -p
    svm_type=one_class", "use loss squared_hinge" reads "use -p loss=squared_hinge"), and the routes the command
    called are left out.
    """
    message = _ROUTE_FIRST.sub("(", _ROUTE_ALONE.sub("", message))
    message = _KERNEL_EXAMPLE.sub(r"-p \1.type=\2 -p \1.\3=...", message)
    message = _PARAM.sub(r"-p \1", _PARAM_VALUE.sub(r"-p \1=\2", message))
    message = _REGRESSION_LOSS.sub(
        lambda m: ("--solver dcd " if m.group(1) else "") + f"-p loss={m.group(2)}", message
    )  # "regression is dcd with loss: epsilon_insensitive" reads "regression is --solver dcd -p loss=..."
    message = _SVM_TYPE.sub(lambda m: ("--solver smo " if m.group(1) else "") + f"-p svm_type={m.group(2)}", message)
    message = _USE_PARAM.sub(r"use -p \1=\2", message)  # penalty l1's "use loss squared_hinge", crammer_singer's
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
