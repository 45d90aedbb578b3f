"""The dashboard at /ui and the API documentation at /docs and /redoc, all from files shipped in the package.

Nothing is loaded from the internet: the dashboard is plain HTML, CSS and JavaScript of our own
(service/static/dashboard), and the documentation pages use copies of Swagger UI 5.35.0
(swagger-ui-dist, Apache-2.0) and Redoc 2.5.4 (redoc, MIT) from the npm registry, with their
licence files, in service/static/vendor. These pages are not data: they need no API key; the
dashboard sends the key a person enters with every API request it makes.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).resolve().parent.parent.parent / "static"
VENDOR = "/static/vendor"

router = APIRouter(include_in_schema=False)


@router.get("/")
def root() -> RedirectResponse:
    """People who open the bare address get the dashboard."""
    return RedirectResponse("/ui/")


@router.get("/ui")
def ui_without_slash() -> RedirectResponse:
    return RedirectResponse("/ui/")


@router.get("/ui/")
def ui() -> HTMLResponse:
    """The dashboard."""
    return HTMLResponse(
        (STATIC_DIR / "dashboard" / "index.html").read_text(encoding="utf-8"), headers={"Cache-Control": "no-cache"}
    )


@router.get("/docs")
def swagger_ui() -> HTMLResponse:
    """Swagger UI over /openapi.json, from the vendored bundle."""
    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="Hinge - API (Swagger UI)",
        swagger_js_url=f"{VENDOR}/swagger-ui/swagger-ui-bundle.js",
        swagger_css_url=f"{VENDOR}/swagger-ui/swagger-ui.css",
        swagger_favicon_url=f"{VENDOR}/swagger-ui/favicon-32x32.png",
        oauth2_redirect_url="/docs/oauth2-redirect",
    )


@router.get("/docs/oauth2-redirect")
def swagger_ui_redirect() -> HTMLResponse:
    return get_swagger_ui_oauth2_redirect_html()


@router.get("/redoc")
def redoc() -> HTMLResponse:
    """Redoc over /openapi.json, from the vendored bundle, without Google Fonts."""
    return get_redoc_html(
        openapi_url="/openapi.json",
        title="Hinge - API (Redoc)",
        redoc_js_url=f"{VENDOR}/redoc/redoc.standalone.js",
        redoc_favicon_url=f"{VENDOR}/swagger-ui/favicon-32x32.png",
        with_google_fonts=False,
    )


def install_ui(app: FastAPI) -> None:
    """Serve the static files and the pages (the app is created with docs_url=None, redoc_url=None)."""
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.include_router(router)
