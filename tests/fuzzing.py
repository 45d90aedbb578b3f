"""Property-based fuzzing of every operation of the OpenAPI document with schemathesis.

Shared by the bounded CI test (tests/test_hostile_input.py) and the long run
(``python -m tests.benchmarks.fuzz_api``). For each operation it draws cases that follow the schema
(positive) and cases that break it (negative), sends them to the running service and checks that
no answer is a 5xx, that every documented answer matches its schema and that content types match.
"""

from __future__ import annotations

import tempfile

import httpx
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance

CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance]


def fuzz(base_url: str, examples: int, headers: dict | None = None, modes=("positive", "negative")) -> dict:
    """Fuzz every operation; returns {"cases", "status_5xx", "operations", "per_operation"}.

    A failed check raises (after hypothesis shrinks the case) with schemathesis's report.
    """
    set_hypothesis_home_dir(tempfile.mkdtemp(prefix="hinge-hypothesis-"))  # no .hypothesis/ in the work tree
    document = httpx.get(base_url + "/openapi.json", timeout=30).json()
    schema = schemathesis.openapi.from_dict(document)
    totals = {"cases": 0, "status_5xx": 0, "operations": 0, "per_operation": {}}
    for result in schema.get_all_operations():
        operation = result.ok()
        totals["operations"] += 1
        label = f"{operation.method.upper()} {operation.path}"
        counts = totals["per_operation"].setdefault(label, {"cases": 0, "status": {}})
        for mode in modes:
            strategy = operation.as_strategy(generation_mode=GenerationMode(mode))

            @settings(
                max_examples=examples,
                deadline=None,
                database=None,
                derandomize=True,
                suppress_health_check=list(HealthCheck),
                phases=[Phase.explicit, Phase.generate, Phase.shrink],
            )
            @given(case=strategy)
            def run(case):
                response = case.call(base_url=base_url, headers=headers, timeout=60)
                counts["cases"] += 1
                totals["cases"] += 1
                key = str(response.status_code)
                counts["status"][key] = counts["status"].get(key, 0) + 1
                if response.status_code >= 500:
                    totals["status_5xx"] += 1
                case.validate_response(response, checks=CHECKS, headers=headers)

            try:
                run()
            except Unsatisfiable:  # e.g. negative cases of an operation without any parameter
                counts.setdefault("unsatisfiable_modes", []).append(mode)
    return totals
