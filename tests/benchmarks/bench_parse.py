"""Parse rate of the upload parser against scikit-learn's ``load_svmlight_file``.

    python -m tests.benchmarks.bench_parse [--repeats 5] [--datasets a9a,w8a,ijcnn1,sector.scale]

For each data set of ../shared/data, the .svm.gz file is inflated to a temporary plain file;
both readers parse that same file (medians of ``--repeats`` runs, MB/s of text), the service
parser also parses the .gz directly. The results must agree (same CSR, labels, n_features).
JIT compile time is measured apart, in fresh processes: once with an empty numba cache (compile)
and once with that cache filled (what an ingest process pays at start). Writes
tests/benchmarks/results/bench_parse.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from tests.benchmarks.environment import DATA_DIR as SHARED_DATA  # noqa: E402
from tests.benchmarks.environment import cpu_model

DATA = SHARED_DATA
RESULTS = Path(__file__).resolve().parent / "results" / "bench_parse.json"
LIMITS = dict(max_decompressed_bytes=1 << 34, max_rows=1 << 40, max_features=1 << 30, max_nnz=1 << 40)


def _startup_seconds(cache_dir: str) -> float:
    """Seconds for a fresh interpreter to import the parser and run warm_up() with this numba cache."""
    code = (
        "import time; t = time.perf_counter(); "
        "from service.ingest import parser; parser.warm_up(); "
        "print(time.perf_counter() - t)"
    )
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def _median_time(fn, repeats: int):
    times, result = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), times, result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--datasets", default="a9a,w8a,ijcnn1,sector.scale")
    args = ap.parse_args(argv)

    import numba
    import sklearn
    from sklearn.datasets import load_svmlight_file

    from service.ingest import parser

    with tempfile.TemporaryDirectory() as cache_dir:
        compile_s = _startup_seconds(cache_dir)
        cached_start_s = _startup_seconds(cache_dir)
    t = time.perf_counter()
    parser.warm_up()  # this process: load (or compile into the default cache)
    warm_up_here_s = time.perf_counter() - t

    limits = parser.ParseLimits(**LIMITS)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets.split(","):
            gz_path = DATA / f"{name}.svm.gz"
            plain = Path(tmp) / f"{name}.svm"
            with gzip.open(gz_path, "rb") as src, open(plain, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            text_mb = plain.stat().st_size / 1e6

            n = args.repeats
            ours_s, ours_all, ours = _median_time(lambda p=plain: parser.parse_upload(p, limits=limits), n)
            gz_s, gz_all, ours_gz = _median_time(lambda p=gz_path: parser.parse_upload(p, limits=limits), n)
            sk_s, sk_all, (X, y) = _median_time(lambda p=plain: load_svmlight_file(str(p)), n)
            sk_gz_s, sk_gz_all, _ = _median_time(lambda p=gz_path: load_svmlight_file(str(p)), n)

            same = (
                np.array_equal(ours.indptr, X.indptr)
                and np.array_equal(ours.indices, X.indices)
                and np.array_equal(ours.data, X.data)
                and np.array_equal(ours.y, y)
                and ours.n_features == X.shape[1]
                and np.array_equal(ours_gz.data, ours.data)
            )
            row = dict(
                dataset=name,
                text_mb=round(text_mb, 3),
                rows=int(ours.y.size),
                nnz=int(ours.indices.size),
                n_features=int(ours.n_features),
                agrees_with_sklearn=bool(same),
                ours_plain_s=ours_s,
                ours_plain_mb_s=text_mb / ours_s,
                ours_gzip_s=gz_s,
                ours_gzip_mb_s=text_mb / gz_s,
                sklearn_plain_s=sk_s,
                sklearn_plain_mb_s=text_mb / sk_s,
                sklearn_gzip_s=sk_gz_s,
                sklearn_gzip_mb_s=text_mb / sk_gz_s,
                speedup_plain=sk_s / ours_s,
                speedup_gzip=sk_gz_s / gz_s,
                runs=dict(ours_plain=ours_all, ours_gzip=gz_all, sklearn_plain=sk_all, sklearn_gzip=sk_gz_all),
            )
            rows.append(row)
            print(
                f"{name:13s} {text_mb:7.2f} MB  ours {row['ours_plain_mb_s']:7.1f} MB/s"
                f" (gzip {row['ours_gzip_mb_s']:6.1f})  sklearn {row['sklearn_plain_mb_s']:6.1f} MB/s"
                f" (gzip {row['sklearn_gzip_mb_s']:5.1f})  x{row['speedup_plain']:.1f}  agree={same}",
                flush=True,
            )

    report = dict(
        benchmark="bench_parse",
        parameters=dict(repeats=args.repeats, chunk_bytes=parser._CHUNK_BYTES, zero_based="auto", format="svmlight"),
        reference=f"scikit-learn {sklearn.__version__} load_svmlight_file (same file, same process)",
        compile_seconds_empty_cache=compile_s,
        startup_seconds_cached=cached_start_s,
        warm_up_seconds_this_process=warm_up_here_s,
        cpu=cpu_model(),
        cpu_count=os.cpu_count(),
        numba=numba.__version__,
        numpy=np.__version__,
        python=platform.python_version(),
        numba_threading_layer="none (the parser kernels are serial)",
        numba_num_threads=int(numba.config.NUMBA_NUM_THREADS),
        results=rows,
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"compile {compile_s:.2f} s (empty cache), start with cache {cached_start_s:.2f} s; wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
