"""What a job asks of a training split over the nodes of a Dask cluster (``params.distributed`` of ocas and cpa)."""

from __future__ import annotations

from pydantic import Field

from core.schemas.base import StrictModel
from core.schemas.enums import NodeLoss


class SplitTraining(StrictModel):
    """One model trained with its rows split over several nodes of the deployment's Dask cluster."""

    nodes: int = Field(
        ge=1,
        le=256,
        description="Nodes that hold the rows (each a `dask worker`, consecutive shards of the data set each): the "
        "same model as on one machine, up to rounding. Needs HINGE_DASK_SCHEDULER on the workers.",
    )
    on_node_lost: NodeLoss = Field(
        default=NodeLoss.regroup,
        description="When a node is lost mid-training (dead, or no answer within HINGE_NODE_TIMEOUT): `regroup` "
        "(the default) shares the rows again over the nodes left and goes on (ocas from its best point so far, cpa "
        "from the start of the binary problem; the finished binary problems keep their models), as many times as "
        "nodes are left; `stop` ends the job with the best model so far (two labels; one-vs-rest fails with "
        "`node_lost`). Once no node is left, `regroup` ends as `stop` does.",
    )
