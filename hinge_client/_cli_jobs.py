"""`hingectl train`, `watch` and `cancel`: a job's parameters from ``-p KEY=VALUE``, its submission, and its event
stream followed to the end (a progress bar on a terminal, else a line per phase and 10%), with the model's warnings.
"""

from __future__ import annotations

import json
import sys
import time

import httpx

from hinge_client._cli_errors import EXIT_JOB_FAILED, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE, EXIT_WARNINGS, CliError
from hinge_client._cli_output import _console, _err, _out
from hinge_client.client import Client


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


def cmd_cancel(client: Client, args) -> int:
    job = client.cancel_job(args.job)
    _err(f"cancel requested: job {args.job} is {job['status']}")
    return EXIT_OK
