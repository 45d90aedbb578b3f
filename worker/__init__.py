"""The workers, in two rooms: ``worker.runtime`` runs jobs (RQ, heartbeat, cores, warm-up, subtasks),
``worker.training`` computes them (a model, a search, calibration), with the numba solvers in
``worker.solvers``. ``worker.jobs`` only keeps the queue's older entry-point name."""
