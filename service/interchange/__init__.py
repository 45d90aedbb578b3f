"""Models that leave the service and come back: export to LIBLINEAR, LIBSVM, ONNX and JSON; import from
LIBLINEAR, LIBSVM and JSON.

One module per format, each with a writer (text written in pieces, so a large model streams) and,
where the format can be imported, a reader that turns a file into the stored form of a model (its
``ModelDescription`` and arrays, as ``core.scoring.models.Scorer`` reads them) and names the line of any
error. The writers read the stored ``ModelRecord``. numpy only (and the ``onnx`` package for ONNX): the API process runs them, never numba.
"""
