"""The training: what a job computes, given its data and parameters.

One model from the job's params (``fit``: binary problems, one-vs-rest and one-vs-one, the model's
description: ``assemble``), the call of a solver (``registry``), cross-validated search (``search``), probability
calibration (``calibration``), folds (``folds``), the binary problems of a job (``problems``) and the
stopping rule of a model (``stopping``). The solvers themselves are in ``worker.solvers``; running a
job (RQ, cores, heartbeat) is ``worker.runtime``.
"""
