"""The job runtime: what runs a job on a machine, whatever it trains.

RQ's worker and its work horses (``main``, ``jobs``, ``runs``), the heartbeat that proves a worker alive
and reaps its dead jobs (``heartbeat``), the machine's core budget (``core_budget``), numba warm-up
(``warmup``), models staged ahead of their record (``model_staging``), progress and trace sinks
(``progress``), the parallel subtask runner (``subtasks``) and the search spread over workers
(``search_dist``). The machine learning itself is in ``worker.training``.
"""
