"""`python -m worker` is `hinge worker`."""

import sys

from worker.main import main

sys.exit(main())
