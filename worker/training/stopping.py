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
from core.schemas.stopping_rule import StoppingRule
from core.solvers import fmt_value, spec_of
from worker.solvers.common import SolverResult, StopReason


def stopping_rule(solver: str, params: SolverParams, results: list[SolverResult], stop_reason: str) -> StoppingRule:
    """The rule for a model whose problems gave ``results`` and whose overall reason is
    ``stop_reason`` (see the module docstring)."""
    if stop_reason == StopReason.MAX_ITER.value:
        limit = getattr(params, "max_iter", None)
        return StoppingRule(
            rule="max_iter", values={"max_iter": limit}, text=f"iteration limit max_iter {fmt_value(limit)} reached"
        )
    if stop_reason == StopReason.DEADLINE.value:
        seconds = params.max_seconds
        return StoppingRule(
            rule="max_seconds",
            values={"max_seconds": seconds},
            text=f"deadline max_seconds {fmt_value(seconds)} reached",
        )
    if stop_reason == StopReason.CANCELED.value:
        return StoppingRule(rule="cancel", values={}, text="canceled by a request")
    if stop_reason == StopReason.INTERRUPTED.value:
        return StoppingRule(
            rule="shutdown", values={}, text="the worker was stopped (SIGTERM) and kept the best model so far"
        )
    if stop_reason == StopReason.NODE_LOST.value:
        return StoppingRule(
            rule="node_lost",
            values={},
            text="a node of the split training was lost; the model is the best point found before (a valid iterate)",
        )
    last = max(results, key=lambda r: r.n_iter) if results else None
    if last is None:
        return StoppingRule(rule="tol", values={}, text="converged")
    rule = spec_of(solver).stopping(params, last.extra)
    if len(results) > 1:
        rule = rule.model_copy(
            update={"text": f"{rule.text} (the problem that took the most iterations, of {len(results)})"}
        )
    return rule


INTERRUPTED = stopping_rule("", None, [], "interrupted")  # type: ignore[arg-type]
"""The rule of a model checkpointed at a worker's shutdown."""
