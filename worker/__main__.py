"""`python -m worker` is `hinge worker`."""

import logging
import os
import sys

from worker.runtime.main import main

code = main()
# Leave without the interpreter's finalization: with numba's kernels loaded it takes about two
# seconds, which a stopping service (hinge serve, docker stop) should not have to wait for.
# Everything the worker owns is closed by now; flush what is buffered, then go.
logging.shutdown()
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
