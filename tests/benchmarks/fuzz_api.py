"""Long schemathesis run against a service of its own: `python -m tests.benchmarks.fuzz_api [--examples N]`.

Starts Redis, the API and two workers (tests/cluster.py) in a temporary directory, fuzzes every
operation of the OpenAPI document with N positive and N negative cases each (default 500), and
writes tests/benchmarks/results/fuzz_api.json: cases run, 5xx count, answers per operation. A failed
check (a 5xx, an answer that does not match its schema) stops the run with schemathesis's report and
a curl command that reproduces it. The bounded CI variant is
tests/test_hostile_input.py::test_schemathesis_every_operation_no_5xx_and_schema_conformant.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

from tests.cluster import Cluster
from tests.fuzzing import fuzz

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=500, help="cases per operation and mode")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        cluster = Cluster(Path(root)).start(workers=2)
        try:
            start = time.perf_counter()
            totals = fuzz(cluster.base_url, args.examples)
            seconds = time.perf_counter() - start
        finally:
            cluster.stop()
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = dict(
        totals,
        examples_per_operation_and_mode=args.examples,
        seconds=round(seconds, 1),
        machine=platform.processor() or platform.machine(),
    )
    (RESULTS / "fuzz_api.json").write_text(json.dumps(out, indent=2) + "\n")
    print(
        f"{totals['cases']} cases over {totals['operations']} operations in {seconds:.0f} s: "
        f"{totals['status_5xx']} answers 5xx"
    )


if __name__ == "__main__":
    main()
