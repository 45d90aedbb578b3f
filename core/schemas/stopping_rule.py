"""The stopping rule of a model: which rule ended its training, with its values, in the user's words; and how its
training read data larger than memory (``DataAccess``).

Made by each solver's spec (``core.solvers``: what its convergence rule says) and by the worker for the
reasons that are not convergence (``worker.training.stopping``); stored with the model and shown as its
``stopping_rule``.
"""

from __future__ import annotations

from pydantic import Field

from core.schemas.base import ResponseModel


class StoppingRule(ResponseModel):
    """Which rule ended training, with its values."""

    rule: str = Field(
        description="`tol`, `tol_rel`, `tol_abs` (converged by that tolerance), `max_iter`, `max_seconds`, `cancel` "
        "or `shutdown` (a worker stopped with the checkpoint policy)."
    )
    values: dict[str, float | int | None] = Field(
        description='The stopping parameters as used, e.g. {"tol": 0.1, "tol_rel": 0.01}.'
    )
    text: str = Field(description="The rule in words, with the values reached (e.g. the certified gap).")


class DataAccess(ResponseModel):
    """How a model's training read its data when not all of it was in one process's memory: out of core
    (larger than the job's memory, ``HINGE_JOB_MEMORY``), or split over the nodes of a cluster (``distributed``)."""

    form: str = Field(
        description="`streamed`: the first rows held in memory, the others read from the worker's disk on every pass. "
        "`split`: the rows held by the nodes of a Dask cluster (`params.distributed`)."
    )
    memory_bytes: int | None = Field(
        default=None, description="Streamed: indices and values held in memory, the largest over the binary problems."
    )
    streamed_bytes: int | None = Field(
        default=None, description="Streamed: indices and values read from disk on every pass over the data."
    )
    read_bytes: int | None = Field(
        default=None, description="Streamed: bytes read from disk in all, summed over the binary problems."
    )
    passes: int | None = Field(
        default=None, description="Streamed: passes over the streamed rows, summed over the binary problems."
    )
    packed: bool | None = Field(
        default=None,
        description="Streamed: whether the rows were rewritten once with 16-bit index gaps (6 bytes a non-zero "
        "instead of 8, a quarter less read every pass); false where the indices do not pack smaller.",
    )
    nodes: int | None = Field(
        default=None,
        description="Split: the nodes that held rows. A node holds whole shards, so a data set of fewer shards than "
        "the nodes asked uses fewer (a `fewer_nodes` warning says so).",
    )
    nodes_lost: int | None = Field(
        default=None,
        description="Split: nodes lost during the training, after each of which the rows were shared again over the "
        "nodes left and the training went on (`params.distributed.on_node_lost` `regroup`); `nodes` counts those "
        "at the end. Null when none was lost.",
    )
