"""Read an uploaded model file in whichever format it is in (run in an ingest process: parsing a large
text file is CPU work that should not hold the API's event loop or its GIL)."""

from __future__ import annotations

import logging

from service.interchange.common import ModelFileError, open_text, read_all

log = logging.getLogger("hinge.ingest")

FORMATS = ("json", "liblinear", "libsvm")


def read_model_file(path: str, format: str, n_features: int | None = None) -> dict:
    """{"model", "arrays"} of the model in the file (its ``ModelDescription`` and arrays), or {"error": {"line",
    "reason"}} naming what is wrong."""
    try:
        with open(path, "rb") as raw:
            if format == "json":
                from service.interchange.json_model import read_json

                model, arrays = read_json(read_all(raw))
                if n_features is not None:
                    raise ModelFileError(
                        None, "n_features applies to libsvm files only (a JSON document states its own)"
                    )
            elif format == "liblinear":
                from service.interchange.liblinear import read_liblinear

                model, arrays = read_liblinear(open_text(raw))
                if n_features is not None:
                    raise ModelFileError(
                        None, "n_features applies to libsvm files only (LIBLINEAR files state nr_feature)"
                    )
            elif format == "libsvm":
                from service.interchange.libsvm import read_libsvm

                model, arrays = read_libsvm(open_text(raw), n_features)
            else:
                raise ModelFileError(None, f"unknown format {format!r}; one of {', '.join(FORMATS)}")
    except ModelFileError as exc:
        return {"error": {"line": exc.line, "reason": exc.reason}}
    except (OSError, EOFError) as exc:  # a damaged gzip stream met outside line reading
        return {"error": {"line": None, "reason": f"the file could not be read: {exc}"}}
    except Exception as exc:  # a reader's bug must not become a 500 for the caller's file; it is logged
        log.exception("reading a %s model file failed", format)
        return {
            "error": {"line": None, "reason": f"the file could not be read as a {format} model ({type(exc).__name__})"}
        }
    return {"model": model, "arrays": arrays}
