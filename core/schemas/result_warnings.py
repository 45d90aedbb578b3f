"""The warning a job or a model carries when it ended as a success that deserves a second look."""

from __future__ import annotations

from pydantic import Field

from core.schemas.base import ResponseModel
from core.schemas.enums import WarningCode


class ResultWarning(ResponseModel):
    """One reason to doubt a result: a machine-readable code and a sentence."""

    code: WarningCode = Field(
        description=(
            "`max_iter` (stopped by its iteration limit before its stopping rule held), `not_converged` (stopped "
            "by its deadline, a cancel or a shutdown with a certified gap above 1%), `no_better_than_majority` "
            "(its training accuracy is no better than always answering the most frequent label), "
            "`search_incomplete` (settings of a model selection that could not be evaluated in time), "
            "`parameter_out_of_range` (a C or gamma at the edge of what the data can use numerically), "
            "`fewer_nodes` (a training split over nodes used fewer than asked: the data set has fewer shards), "
            "`nodes_lost` (a node of a split training was lost and the training went on over the nodes left)."
        )
    )
    message: str = Field(description="What happened, with the figures, and what to change, in a sentence or two.")
