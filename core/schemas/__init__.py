"""Pydantic request and response schemas. No FastAPI imports: workers use these too."""
