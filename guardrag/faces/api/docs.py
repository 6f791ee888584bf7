"""API documentation served offline: Swagger UI at /docs and ReDoc at /redoc from the assets
bundled in the `fastapi-offline` package (no CDN, no Google fonts, no validator badge, a local
favicon), with a Content-Security-Policy that keeps the pages from reaching anything else."""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.staticfiles import StaticFiles
from starlette.responses import HTMLResponse

ASSETS = "/static/docs"
#: Both pages start from an inline script, hence 'unsafe-inline' on these two pages only;
#: `img-src` keeps ReDoc's footer logo (cdn.redoc.ly) from even being requested.
DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; font-src 'self' data:"
)
#: Swagger UI would fetch a validity badge from validator.swagger.io.
SWAGGER_PARAMETERS = {"validatorUrl": None}


def add_offline_docs(app: FastAPI) -> None:
    """Mount the bundled assets and the two doc pages (create the app with docs_url=None and
    redoc_url=None so FastAPI's CDN pages are not registered)."""
    directory = files("fastapi_offline") / "static"
    app.mount(ASSETS, StaticFiles(directory=str(directory)), name="docs-static")
    redirect = "/docs/oauth2-redirect"

    def protect(page: HTMLResponse) -> HTMLResponse:
        page.headers["Content-Security-Policy"] = DOCS_CSP
        return page

    @app.get("/docs", include_in_schema=False)
    def swagger(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return protect(
            get_swagger_ui_html(
                openapi_url=f"{root}{app.openapi_url}",
                title=f"{app.title} - API docs",
                swagger_js_url=f"{root}{ASSETS}/swagger-ui-bundle.js",
                swagger_css_url=f"{root}{ASSETS}/swagger-ui.css",
                swagger_favicon_url=f"{root}{ASSETS}/favicon.png",
                oauth2_redirect_url=f"{root}{redirect}",
                swagger_ui_parameters=SWAGGER_PARAMETERS,
            )
        )

    @app.get(redirect, include_in_schema=False)
    def swagger_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return protect(
            get_redoc_html(
                openapi_url=f"{root}{app.openapi_url}",
                title=f"{app.title} - API reference",
                redoc_js_url=f"{root}{ASSETS}/redoc.standalone.js",
                redoc_favicon_url=f"{root}{ASSETS}/favicon.png",
                with_google_fonts=False,
            )
        )
