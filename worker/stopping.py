"""Which rule ended training, with its values, in the user's words: the model's ``stopping_rule``.

A model's ``stop_reason`` says converged, max_iter, deadline, canceled or interrupted. ``stopping_rule``
adds the rule behind it and the values it used and reached, read from the parameters and from what each
solver reports (``SolverResult.extra``): for a converged dcd model "projected-gradient spread below tol
0.1 (tightened to 0.01) and certified gap 0.0042 <= tol_rel 0.01"; for cpa, which of its two rules fired
first; for ocas, whether the relative or the absolute gap did. With several binary problems: the reason
that is not convergence, as ``stop_reason`` picks it, else the rule of the problem that took the most
iterations.
"""

from __future__ import annotations

from core.schemas.solver_params import SolverParams
from worker.solvers.common import SolverResult, StopReason


def _fmt(value) -> str:
    return "null" if value is None else f"{value:.3g}" if isinstance(value, float) else str(value)


def _converged_rule(solver: str, params: SolverParams, result: SolverResult) -> dict:
    extra = result.extra
    gap = extra.get("gap_rel")
    gap_text = f"certified gap {_fmt(gap)}" if gap is not None else "gap not certified"
    tol = getattr(params, "tol", None)
    tol_rel = getattr(params, "tol_rel", None)
    if solver == "dcd":
        used = extra.get("tol_used", tol)
        tightened = f" (tightened to {_fmt(used)})" if used is not None and tol and used < tol else ""
        if tol_rel:
            return {
                "rule": "tol_rel",
                "values": {"tol": tol, "tol_rel": tol_rel},
                "text": f"projected-gradient spread below tol {_fmt(tol)}{tightened} and {gap_text} <= tol_rel {_fmt(tol_rel)}",
            }
        return {
            "rule": "tol",
            "values": {"tol": tol},
            "text": f"projected-gradient spread below tol {_fmt(tol)} ({gap_text})",
        }
    if solver == "cpa":
        if tol_rel and gap is not None and gap <= tol_rel:
            return {
                "rule": "tol_rel",
                "values": {"tol_rel": tol_rel, "tol": tol},
                "text": f"{gap_text} <= tol_rel {_fmt(tol_rel)}",
            }
        return {
            "rule": "tol",
            "values": {"tol": tol, "tol_rel": tol_rel},
            "text": f"most violated constraint within tol {_fmt(tol)} per example of the working set's slack ({gap_text})",
        }
    if solver == "ocas":
        tol_abs = getattr(params, "tol_abs", 0.0)
        absolute = extra.get("gap")
        if tol_abs and absolute is not None and absolute <= tol_abs:
            return {
                "rule": "tol_abs",
                "values": {"tol_abs": tol_abs, "tol_rel": tol_rel},
                "text": f"gap {_fmt(absolute)} <= tol_abs {_fmt(tol_abs)}",
            }
        return {
            "rule": "tol_rel",
            "values": {"tol_rel": tol_rel, "tol_abs": tol_abs},
            "text": f"{gap_text} <= tol_rel {_fmt(tol_rel)}",
        }
    if solver == "smo":
        if tol_rel is not None:
            return {
                "rule": "tol_rel",
                "values": {"tol": tol, "tol_rel": tol_rel},
                "text": f"largest KKT violation below tol {_fmt(tol)} and {gap_text} <= tol_rel {_fmt(tol_rel)}",
            }
        return {
            "rule": "tol",
            "values": {"tol": tol},
            "text": f"largest KKT violation below tol {_fmt(tol)} ({gap_text})",
        }
    return {"rule": "tol", "values": {"tol": tol}, "text": f"no cut violated by more than tol {_fmt(tol)} ({gap_text})"}


def stopping_rule(solver: str, params: SolverParams, results: list[SolverResult], stop_reason: str) -> dict:
    """``{"rule", "values", "text"}`` for a model whose problems gave ``results`` and whose overall reason is
    ``stop_reason`` (see the module docstring)."""
    if stop_reason == StopReason.MAX_ITER.value:
        limit = getattr(params, "max_iter", None)
        return {
            "rule": "max_iter",
            "values": {"max_iter": limit},
            "text": f"iteration limit max_iter {_fmt(limit)} reached",
        }
    if stop_reason == StopReason.DEADLINE.value:
        seconds = params.max_seconds
        return {
            "rule": "max_seconds",
            "values": {"max_seconds": seconds},
            "text": f"deadline max_seconds {_fmt(seconds)} reached",
        }
    if stop_reason == StopReason.CANCELED.value:
        return {"rule": "cancel", "values": {}, "text": "canceled by a request"}
    if stop_reason == StopReason.INTERRUPTED.value:
        return {
            "rule": "shutdown",
            "values": {},
            "text": "the worker was stopped (SIGTERM) and kept the best model so far",
        }
    last = max(results, key=lambda r: r.n_iter) if results else None
    if last is None:
        return {"rule": "tol", "values": {}, "text": "converged"}
    rule = _converged_rule(solver, params, last)
    if len(results) > 1:
        rule["text"] += f" (the problem that took the most iterations, of {len(results)})"
    return rule


INTERRUPTED = stopping_rule("", None, [], "interrupted")  # type: ignore[arg-type]
"""The rule of a model checkpointed at a worker's shutdown."""
