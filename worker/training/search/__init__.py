"""Model selection: cross-validate a grid of C (and gamma) values, then refit the best on all the data.

Folds are stratified by label (each label's rows shuffled with the search seed and dealt round
robin), or grouped by qid for ranking (whole queries dealt round robin), so that a fold never
splits a query.

Paths and warm starts
---------------------
The unit of work is a *path*: one binary problem (one class against the rest, or the two-label
problem, or cpa's pairwise problem) of one fold and one gamma, fitted at every C of the grid in
increasing order. For dcd, ocas and smo with ``warm_start`` (the default) each fit starts from the
previous fit of its path (dcd: the dual variables scaled by the ratio of the C values; smo: the dual
variables as they are, with their gradient, so that the start costs no kernel row; ocas: the weights),
so every fit but the first of a path is warm-started whatever the number of processes. Increasing C is
the direction that warm-starts well: on a9a (dcd, tol 0.1, C from 0.01 to 30) a fold's path took 1,410
passes upward, 2,594 downward (the cold fit at the largest C dominates) and 3,427 cold; on digits'
one-vs-one pairs (smo, rbf, C 1 -> 10) the fit at C = 10 took 30-75% fewer steps than a cold one.

The paths run as tasks of ``worker.runtime.subtasks.run_task_graph`` over the processes. A path is one task
when there are enough paths to keep the processes busy (one-vs-rest: folds x classes, 525 on
sector's 105 classes); otherwise (a two-label problem has only ``cv_folds`` paths, and 5 paths on 2
processes cannot do better than 5/3) every fit is its own task and the warm start travels with the
task to whichever process runs the next C, the paths advancing side by side (lowest C first). The
fits, their warm starts and hence the table do not depend on the number of processes. Without warm
starts every (fold, gamma, problem, C) fit is an independent task, largest C first.

Every fit of a search, the refit's included, records its last trace point only, unless
``search.trace_fits`` asks for the points its ``trace_every`` (and dcd's ``trace_budget``) give: a point of
dcd or smo costs a pass over the data (a9a, 7 C x 5 folds, one process: 0.95 s with the last points, 1.03 s
with dcd's default budget, 3.1 s with a point per pass), and the parent handles every point.

Each fit reports its decision values on the held-out fold; the parent scores a (fold, setting) cell
with the search metric once every problem of the fold has reported, and publishes the table as it
fills (throttled). A cell of one problem (two labels, or a pairwise task) is scored by the process that
ran its fit, which sends back the score instead of the decision values. The table (``table``) gives per
setting the mean and standard deviation of the fold scores, the iterations, seconds, warm-started fits and
stop reasons of its fits; with
``measure_cold`` the fits of fold 0 are repeated from a cold start and the table shows the
iterations that warm starts saved there (measured, not estimated; it costs the cold fits, which are
the expensive ones at large C, so it is off by default).

The best setting (highest mean; ties go to the smaller C, then the smaller gamma) is refitted on all
the data and becomes the job's model, with the table in its metadata as ``search_results``. With
dcd's and ocas's warm starts the refit walks the C path up to the best C on all the data (a cold fit at a
large C costs more than the whole warm path: on a9a 0.77 s cold at C = 30 against 0.2 s for the path);
smo's refit is one fit at the best C (its warm start saves steps, not the fit at the smaller C: digits'
refit took 0.23 s walked, 0.14 s cold); only
the last fit's trace reaches the job. When the fits are tasks (few paths), that path on all the data
runs among them: with several processes it goes first at every C (it is the longest chain: walked
after the search it was a serial tail of about a fifth of a two-label search on a9a, which capped 2
processes near 1.67x), as far as the best C once that is known (the fits beyond it are speculative,
counted in ``refit_path.fits_beyond_best``). Its fit at the largest C, the most expensive one, runs
with the others too unless the scores known when it could start rule that C out (``largest_c_ruled_out``:
the largest setting scored on every fold trails the best by more than two standard errors of the paired
fold differences); ruled out, it waits until every setting is scored and runs only if the largest C wins
after all. Parked always, it had been a serial tail on a9a, where the scores are flat within 1e-4 and C =
30 wins: 0.11 s on one process while the other idled (1.50x over one process through the service; run
with the others, 1.62x). With one process the path runs after the search, up to the best C only. At
each C the fold whose previous fit took longest goes first, so that the processes end together (a9a, 2
processes: 1.63x -> 1.75x over one). Its fit at the best C is the model, the same one the walk after the
search gives.
"""

from worker.training.search.cross_validation import Search
from worker.training.search.refit import refit
from worker.training.search.run import grid_values, merged, refit_best, run_search, tables_by_value
from worker.training.search.table import (
    SearchIncomplete,
    incomplete_message,
    largest_c_ruled_out,
    search_warnings,
    table,
)

__all__ = [
    "Search",
    "SearchIncomplete",
    "grid_values",
    "incomplete_message",
    "largest_c_ruled_out",
    "merged",
    "refit",
    "refit_best",
    "run_search",
    "search_warnings",
    "table",
    "tables_by_value",
]
