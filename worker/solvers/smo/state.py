"""SMO's scalar state, kept in two small arrays that the numba kernels update in place.

``X.team`` (int64) holds what the row team's threads share (``worker.solvers.smo.team``).
``istate`` (int64) holds the step counter, the active-set size, the cache's bookkeeping and the counters
that end up in the result; ``fstate`` (float64) the dual value, Platt's threshold and the last violation.
Named slots instead of positional guesses; ``worker.solvers.smo.solve`` documents what they mean to the solver.
"""

from __future__ import annotations

# variable status
LOWER = 0
UPPER = 1
FREE = 2

# istate slots
IS_ITER = 0  # two-variable steps taken
IS_ACTIVE = 1  # active_size: the variables of the shrunk problem are positions [0, active_size)
IS_HITS = 2  # cache lookups that found the row
IS_MISSES = 3
IS_UNSHRUNK = 4  # 1 once the 10*tol un-shrink has been done
IS_SHRINK_COUNTER = 5  # steps until the next shrinking pass (second_order)
IS_SLOT_LEN = 6  # the cache's slot length (row length it keeps)
IS_N_SLOTS = 7
IS_LRU_HEAD = 8  # most recently used slot, -1 if none
IS_LRU_TAIL = 9  # least recently used slot, -1 if none
IS_FREE_TOP = 10  # free slots on the cache's free stack
IS_EXAMINE_ALL = 11  # platt: 1 while a pass examines every variable
IS_PASS_POS = 12  # platt: the next position the pass examines
IS_NUM_CHANGED = 13  # platt: steps taken in this pass
IS_COMPUTED = 14  # kernel values evaluated
IS_SAFETY_STEPS = 15  # platt's safety-net steps
IS_MIN_ACTIVE = 16
IS_UNCACHED = 17  # kernel values computed beyond the slot length (G_bar rows)
IS_FULL_ROWS = 18  # G_bar row updates
IS_RECONSTRUCTED = 19  # kernel values computed by gradient rebuilds
IS_THREADS = 20
IS_TEAM_MIN_ROW = 21  # shortest kernel row split over the row team (smo.team)
IS_PAR_MIN_SCAN = 22  # shortest scan or gradient update split over the threads
IS_NU = 23  # the dual's form: NU_NONE (C-SVC, epsilon-SVR, one-class), NU_SVC or NU_SVR (smo.nu's working set)
IS_SIZE = 24

# IS_NU's values
NU_NONE = 0
NU_SVC = 1
NU_SVR = 2

# X.team slots (smo.team's protocol); the three that threads write concurrently sit on their own 64-byte lines
T_ORDER = 0  # (seq << SEQ_SHIFT) | next chunk to claim
T_DONE = 8  # chunks finished for the current order
T_QUIT = 16  # 1: partners return
T_P = 24  # the order: row p over positions [lo, hi), into out[base + t], accumulate coef * Q or store Q
T_LO = 25
T_HI = 26
T_BASE = 27
T_ACCUMULATE = 28
T_OUT_ADDRESS = 29
T_OUT_LENGTH = 30
T_OUT_ITEMSIZE = 31  # 8: float64 (gradients), 4: float32 (the cache pool)
T_N_CHUNKS = 32
T_SEQ = 33  # the owner's count of orders (its own copy; partners read seq from T_ORDER)
T_KIND = 34  # what the order asks: TEAM_ROW, TEAM_AXPY or TEAM_UPDATE_G (smo.team)
T_SRC_ADDRESS = 35  # updates: the cache pool (float32) the rows are read from
T_SRC_LENGTH = 36
T_BASE_J = 37  # TEAM_UPDATE_G: the second row's offset in the pool
T_PARTNERS = 40  # partners running; 0: the owner computes every row alone
T_SIZE = 48

# fstate slots
FS_F = 0  # dual f(alpha) (minimization form)
FS_B = 1  # Platt's running threshold
FS_VIOL = 2  # m - M at the last selection
FS_SIZE = 3

# what a run loop returns
RUN_BUDGET = 0  # its work budget or step limit is used up: call again
RUN_CONVERGED = 1
RUN_RECONSTRUCT = 2  # the gradient of the shrunk variables must be rebuilt (then call again)
