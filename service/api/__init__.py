"""The FastAPI application: routes, dependencies, error handlers, upload streaming."""
