"""The FastAPI application: /v1 (guardrag's API and the OpenAI-compatible one) behind keys,
limits and audit; probes; offline docs; the Gradio UI at /ui. One Guardrag per process (the
embedded Qdrant shard is locked per process), shared by the API and the UI."""

from __future__ import annotations

import logging
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException

from guardrag.core import metrics
from guardrag.core.audit import AuditUnavailable
from guardrag.faces.api.ask import ask_router
from guardrag.faces.api.auth import bearer_ok, key_dependency, rate_limit_dependency
from guardrag.faces.api.bodies import ERRORS, ErrorBody, Health, InvalidBody, Problem, Readiness
from guardrag.faces.api.docs import add_offline_docs
from guardrag.faces.api.middleware import (
    API_PREFIX,
    UI_PATH,
    BodyGateMiddleware,
    NoKeysInURLMiddleware,
    RequestIdMiddleware,
    request_id,
    scrub_access_log,
)
from guardrag.faces.api.openai import openai_router
from guardrag.faces.ratelimit import RateLimiter, limiter_from_settings
from guardrag.faces.service import Guardrag
from guardrag.faces.views import RecentResults

log = logging.getLogger("guardrag.api")

#: What /metrics shows without the metrics token on an API with keys: nothing about requests
#: (their outcomes and reasons are per tenant), only the audit writer's own counters.
PUBLIC_METRICS = ["guardrag_audit_records"]


def readiness(bot: Guardrag) -> tuple[dict[str, bool], list[str]]:
    """Whether the embedding model answers and the KB this process serves first (the default
    KB when it exists, else any published KB) is loaded; and the KBs served."""
    checks: dict[str, bool] = {}
    served: list[str] = []
    try:
        checks["models"] = len(bot.services.embedder.embed(["ready?"])) == 1
    except Exception:
        log.exception("readiness check models failed")
        checks["models"] = False
    try:
        store = bot.services.store
        served = store.list_kbs()
        default = bot.settings.default_kb
        first = default if default in served else (served[0] if served else None)
        checks["index"] = first is not None and store.kb_info(first) is not None
    except Exception:
        log.exception("readiness check index failed")
        checks["index"] = False
    return checks, served


def _add_probes(app: FastAPI, bot: Guardrag) -> None:
    settings = bot.settings

    @app.get(
        "/metrics",
        summary="Prometheus metrics",
        response_class=PlainTextResponse,
        responses={401: {"model": ErrorBody, "description": "Needs the metrics token."}},
    )
    def metrics_text(request: Request) -> PlainTextResponse:
        """Everything with `Authorization: Bearer <GUARDRAG_METRICS_TOKEN>` (or on an API
        without keys and without that token); otherwise only counters of no tenant."""
        token = settings.metrics_token
        if token is not None and not bearer_ok(request, token.get_secret_value()):
            raise HTTPException(401, "/metrics needs Authorization: Bearer <metrics token>")
        text = metrics.exposition(bot.audit.stats if bot.audit else None)
        if token is None and settings.key_scopes():
            text = generate_latest(metrics.REGISTRY.restricted_registry(PUBLIC_METRICS))
        return PlainTextResponse(text, media_type=CONTENT_TYPE_LATEST)

    @app.get("/health", response_model=Health, summary="Liveness")
    def health() -> Health:
        return Health()

    @app.get(
        "/ready",
        response_model=Readiness,
        responses={503: {"model": Readiness, "description": "Not ready yet."}},
        summary="Readiness: models loaded, the served knowledge bases open",
    )
    def ready() -> JSONResponse:
        checks, served = readiness(bot)
        ok = all(checks.values())
        body = Readiness(status="ready" if ok else "not_ready", checks=checks, kbs=served)
        return JSONResponse(body.model_dump(), status_code=200 if ok else 503)


async def _invalid_request(request: Request, exc: Exception) -> JSONResponse:
    """422 with where and why, never the input itself (it may be what could not be encoded);
    a body that is not JSON at all is 400, as documented."""
    assert isinstance(exc, RequestValidationError)
    rid = request_id(request.scope)
    errors: list[dict[str, Any]] = list(exc.errors())
    if any(e.get("type") == "json_invalid" for e in errors):
        body = ErrorBody(detail="the body is not valid JSON", request_id=rid)
        return JSONResponse(body.model_dump(), status_code=400)
    problems = [
        Problem(
            loc=[p if isinstance(p, int) else str(p)[:64] for p in e.get("loc", ())],
            msg=str(e.get("msg", ""))[:300],
            type=str(e.get("type", "")),
        )
        for e in errors
    ]
    return JSONResponse(InvalidBody(detail=problems, request_id=rid).model_dump(), 422)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's own error answer (401, 403, 404, 429 ...) with the request id, as every
    other error body carries it."""
    assert isinstance(exc, StarletteHTTPException)
    body = {"detail": exc.detail, "request_id": request_id(request.scope)}
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)


async def _audit_unavailable(request: Request, exc: Exception) -> JSONResponse:
    rid = request_id(request.scope)
    log.error("request %s not answered: %s", rid, exc)
    body = ErrorBody(detail=str(exc), request_id=rid)
    return JSONResponse(body.model_dump(), status_code=503, headers={"Retry-After": "5"})


async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    rid = request_id(request.scope)
    log.error("unhandled error (request %s)", rid, exc_info=exc)
    body = ErrorBody(detail="internal error", request_id=rid)
    return JSONResponse(body.model_dump(), status_code=500, headers={"X-Request-ID": rid})


def _either_key(app: FastAPI) -> None:
    """The spec says what the key check does: X-API-Key *or* a bearer token. FastAPI joins
    the two dependencies' schemes into one requirement (both); split it into alternatives."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            for operation in (op for path in schema["paths"].values() for op in path.values()):
                joined = operation.get("security") or []
                if len(joined) == 1 and len(joined[0]) > 1:
                    operation["security"] = [{name: scopes} for name, scopes in joined[0].items()]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _version() -> str:
    try:
        return version("guardrag")
    except PackageNotFoundError:
        return "0.0.0"


def create_app(
    bot: Guardrag,
    *,
    recent: RecentResults | None = None,
    limiter: RateLimiter | None = None,
    with_ui: bool = True,
) -> FastAPI:
    """The API over `bot` (its settings decide keys, limits and CORS), with the UI at /ui."""
    settings = bot.settings
    recent = recent or RecentResults(settings.recent_results)
    limiter = limiter or limiter_from_settings(settings)  # shared via Redis when configured
    app = FastAPI(
        title="guardrag",
        version=_version(),
        description="Answers questions only from a verified knowledge base; refuses the rest.",
        docs_url=None,
        redoc_url=None,
    )
    # Rate limit first, so guessing keys is rate limited too. Without a configured key the
    # key check is left out altogether, so the OpenAPI spec does not claim one is needed.
    dependencies = [Depends(rate_limit_dependency(limiter))]
    scopes = settings.key_scopes()
    if scopes:
        dependencies.append(Depends(key_dependency(scopes)))
    v1 = APIRouter(prefix=API_PREFIX, dependencies=dependencies, responses=ERRORS)
    v1.include_router(ask_router(bot, recent))
    v1.include_router(openai_router(bot, recent))
    app.include_router(v1)
    _either_key(app)
    _add_probes(app, bot)
    add_offline_docs(app)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(AuditUnavailable, _audit_unavailable)
    app.add_exception_handler(Exception, _internal_error)
    # add_middleware wraps: the last added runs first.
    app.add_middleware(BodyGateMiddleware, limit=settings.max_request_bytes)
    origins = [o.strip() for o in settings.cors_origins.split(",") if o.strip()]
    if origins:  # CORS stays off unless origins are configured
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Content-Type", "X-API-Key", "Authorization"],
        )
    app.add_middleware(NoKeysInURLMiddleware)
    app.add_middleware(RequestIdMiddleware)
    scrub_access_log()
    if with_ui:
        _mount_ui(app, bot, recent)
    return app


def _mount_ui(app: FastAPI, bot: Guardrag, recent: RecentResults) -> None:
    # lazy: Gradio takes seconds to import; an API without the UI never pays for it
    import gradio as gr

    from guardrag.faces.ui import CSS, build_app  # lazy: with Gradio
    from guardrag.faces.ui.uploads import NoUploadsMiddleware, upload_dir  # lazy: with Gradio

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse(f"{UI_PATH}/")

    upload_dir(bot.settings)  # before the UI is built: Gradio reads it when it starts
    gr.mount_gradio_app(
        app,
        build_app(bot, recent=recent),
        path=UI_PATH,
        max_file_size=bot.settings.upload_max_bytes,
        show_error=False,
        css=CSS,
    )
    if bot.settings.admin_token is None:
        app.add_middleware(NoUploadsMiddleware, prefix=UI_PATH)
