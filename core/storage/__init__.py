"""Redis storage of data sets, jobs, traces and models. No FastAPI here: workers import it too."""
