"""Process settings: endpoints, keys and paths, from GUARDRAG_* environment variables or `.env`.

Validated once at start-up; a bad value stops the process with a message naming the variable.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings import SettingsError as UnreadableSetting

from guardrag.config.run_config import RunConfig
from guardrag.contract import GuardragError


class SettingsError(GuardragError, RuntimeError):
    """A GUARDRAG_* setting is missing or malformed."""


def _check_url(value: str | None, name: str) -> str | None:
    if value in (None, ""):
        return None
    assert value is not None
    parsed = urlparse(value)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(
            f"{name} must be an http(s) URL like http://127.0.0.1:8080/v1, got {value!r}"
        )
    return value.rstrip("/")


_AUDIT_SCHEMES = ("sqlite:///", "postgresql://", "postgres://")
MIN_SCOPED_KEY_CHARS = 16
ALL_KBS = "*"

#: A client key and the knowledge bases it may use (None: every one).
KeyScopes = dict[str, frozenset[str] | None]


def parse_api_keys(spec: str) -> KeyScopes:
    """`KEY=kb1,kb2;KEY2=*` -> {KEY: {kb1, kb2}, KEY2: None}. Errors never quote a key."""
    scopes: KeyScopes = {}
    entries = [e.strip() for e in spec.split(";")]
    for number, entry in enumerate(entries, start=1):
        if not entry:
            continue
        # rpartition: base64 keys end in '=', KB names never contain one.
        key, sep, kbs = entry.rpartition("=")
        where = f"entry {number} of GUARDRAG_API_KEYS"
        if not sep or not key.strip():
            raise ValueError(f"{where} must look like KEY=kb1,kb2 or KEY=*")
        key = key.strip()
        if len(key) < MIN_SCOPED_KEY_CHARS:
            raise ValueError(f"{where}: the key is shorter than {MIN_SCOPED_KEY_CHARS} characters")
        if key in scopes:
            raise ValueError(f"{where}: the same key is listed twice")
        names = [n.strip() for n in kbs.split(",") if n.strip()]
        if not names:
            raise ValueError(f"{where}: name its knowledge bases after '=' (or * for all)")
        if ALL_KBS in names:
            scopes[key] = None
            continue
        try:
            scopes[key] = frozenset(validate_kb_name(n) for n in names)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    return scopes


class Settings(BaseSettings):
    """Everything that differs between deployments and is not a per-question knob."""

    model_config = SettingsConfigDict(env_prefix="GUARDRAG_", env_file=".env", extra="ignore")

    data_dir: Path = Field(
        Path("./data"), description="Where embedded shards, the audit log and checkpoints live."
    )
    default_kb: str = Field("kinetic", description="Knowledge base used when none is named.")
    llm_base_url: str | None = Field(
        None, description="OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp server)."
    )
    llm_model: str = Field("gpt-4o-mini", description="Chat model name at that endpoint.")
    llm_api_key: SecretStr | None = Field(None, description="API key for the LLM endpoint.")
    llm_timeout_s: float = Field(
        30.0,
        gt=0,
        description="Per-call LLM timeout in seconds (the bundled local model: 120 unless set).",
    )
    llm_max_retries: int = Field(2, ge=0, le=10, description="LLM retries with backoff.")
    llm_local: bool = Field(
        True,
        description="Serve the bundled local model when GUARDRAG_LLM_BASE_URL is unset (make llm).",
    )
    llm_local_model: Literal["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"] = Field(
        "qwen2.5-coder-1.5b", description="Which bundled local model to serve."
    )
    llm_model_dir: Path | None = Field(
        None,
        description="Where the bundled models live (the chat model's GGUF, the second "
        "opinion); default <data_dir>/models.",
    )
    llm_threads: int | None = Field(
        None, ge=1, description="CPU threads for the local model; default all cores."
    )
    llm_ctx: int = Field(
        8192,
        ge=512,
        le=32768,
        description="Local model's KV cache in tokens, shared by its slots; also the most "
        "one request may use.",
    )
    llm_parallel: int = Field(
        4, ge=1, le=16, description="Requests the local model serves at once (slots)."
    )
    llm_cache_mib: int = Field(
        512, ge=0, description="Host RAM for the local model's prompt cache, in MiB (0: off)."
    )
    llm_start_timeout_s: float = Field(
        120.0, gt=0, description="How long to wait for the local model server to answer."
    )
    qdrant_url: str | None = Field(
        None, description="Qdrant server or cluster URL; unset means embedded Qdrant Edge."
    )
    qdrant_api_key: SecretStr | None = Field(None, description="API key for the Qdrant server.")
    pii_mode: Literal["block", "redact"] = Field(
        "block",
        description="Personal data in a question: refuse it (block) or mask it and answer (redact).",
    )
    second_opinion: bool = Field(
        True,
        description="Give rerank all-mpnet-base-v2 (installed by make llm, in the model dir) as "
        "a second opinion on close FAQ leads, asked only where the run knob second_opinion is "
        "on (off by default); off keeps every ranking decision MiniLM's whatever the knob (the "
        "input guard still asks the model about messages its injection classifier doubts).",
    )
    knobs: dict[str, Any] = Field(
        default_factory=dict,
        description="This deployment's defaults for per-question knobs (config/run_config.py), "
        'as JSON: \'{"faq_generation": "agreed"}\' lets the model write FAQ answers; knobs '
        "passed with a question win.",
    )
    rerank_url: str | None = Field(
        None,
        description="Cross-encoder at an HTTP /rerank endpoint (text-embeddings-inference "
        "format); unset means the offline fused reranker.",
    )
    api_key: SecretStr | None = Field(
        None, description="Key clients must send to the HTTP API (X-API-Key); it may use every KB."
    )
    api_keys: SecretStr | None = Field(
        None,
        description="Keys scoped to knowledge bases, `KEY=kb1,kb2;KEY2=*` (`*`: every KB; "
        f"keys of at least {MIN_SCOPED_KEY_CHARS} characters, no `;`). A key queries, lists and "
        "reads the audit of its KBs only.",
    )
    admin_token: SecretStr | None = Field(
        None,
        description="Operator sign-in for the UI's Audit and Knowledge base tabs and the Why? "
        "panel; unset, the local demo explains each visitor's own answers only.",
    )
    audit_url: str | None = Field(
        None,
        description="Audit log: a SQLite file path or sqlite:///path, or a postgresql:// URL "
        "for several replicas; unset means DATA_DIR/audit.sqlite3.",
    )
    log_json: bool = Field(
        False, description="Write guardrag's logs to stderr as JSON lines with request ids."
    )
    host: str = Field("127.0.0.1", description="Interface the app and API bind to.")
    port: int = Field(7860, ge=1, le=65535, description="Port the app and API listen on.")
    rate_limit_per_minute: float = Field(
        60.0, gt=0, description="Sustained /v1 requests per minute allowed to each client."
    )
    rate_limit_burst: int = Field(
        10, ge=1, description="Requests a client may send at once before the rate limit applies."
    )
    max_request_bytes: int = Field(
        16_384, ge=1_024, description="Largest /v1 request body accepted (bigger: HTTP 413)."
    )
    cors_origins: str = Field(
        "", description="Comma-separated origins allowed by CORS; empty (default) turns CORS off."
    )
    upload_max_bytes: int = Field(
        5_000_000, ge=1_024, description="Largest knowledge-base file the UI accepts for ingest."
    )
    recent_results: int = Field(
        200, ge=1, le=100_000, description="Recent results kept in memory for the Audit tab."
    )
    # --- faces: audit guarantee, metrics, ingest limits (issues 19 and 20) -------------------
    audit_best_effort: bool = Field(
        False,
        description="Answer a request even when its audit record could be neither stored nor "
        "spooled; by default such a request is not answered (HTTP 503).",
    )
    metrics_token: SecretStr | None = Field(
        None,
        description="Bearer token for /metrics. Without it, an API with keys shows only "
        "counters that belong to no tenant (the audit writer's).",
    )
    ingest_max_field_bytes: int = Field(
        65_536, ge=256, description="Largest field (question, answer, text...) of an ingested row."
    )
    ingest_max_row_bytes: int = Field(
        262_144, ge=1_024, description="Largest row of an ingested JSON, JSONL or CSV file."
    )
    ingest_max_file_bytes: int = Field(
        268_435_456, ge=1_024, description="Largest file ingest reads."
    )
    ingest_max_depth: int = Field(
        16, ge=2, le=200, description="Deepest nesting of objects and arrays in an ingested row."
    )
    # --- replicas: shared conversations, shared rate limits, followed KBs (issue 18) --------
    threads_url: str | None = Field(
        None,
        description="Conversation memory: a SQLite file path or sqlite:///path, or a "
        "postgresql:// URL so a conversation continues on any replica; unset means the audit "
        "URL when that is Postgres, else DATA_DIR/threads.sqlite.",
    )
    redis_url: str | None = Field(
        None,
        description="Redis (redis:// or rediss://) holding the rate limits, shared by every "
        "replica; unset means each process limits on its own. An unreachable Redis falls back "
        "to per-process limits with a warning.",
    )
    edge_source_dir: Path | None = Field(
        None,
        description="A data dir where ingest publishes knowledge bases: this process serves "
        "its own copy of each live Qdrant Edge shard (under DATA_DIR/edge-copies), refreshed "
        "when a new snapshot is published there. For several replicas or workers on Edge.",
    )

    @field_validator("knobs")
    @classmethod
    def _knobs(cls, value: dict[str, Any]) -> dict[str, Any]:
        RunConfig.checked(value)  # KnobError names an unknown knob or a bad value
        return value

    @field_validator("llm_base_url")
    @classmethod
    def _llm_url(cls, value: str | None) -> str | None:
        return _check_url(value, "GUARDRAG_LLM_BASE_URL")

    @field_validator("qdrant_url")
    @classmethod
    def _qdrant_url(cls, value: str | None) -> str | None:
        return _check_url(value, "GUARDRAG_QDRANT_URL")

    @field_validator("rerank_url")
    @classmethod
    def _rerank_url(cls, value: str | None) -> str | None:
        return _check_url(value, "GUARDRAG_RERANK_URL")

    @field_validator("audit_url")
    @classmethod
    def _audit_url(cls, value: str | None) -> str | None:
        if value and "://" in value and not value.startswith(_AUDIT_SCHEMES):
            raise ValueError(
                f"GUARDRAG_AUDIT_URL must be a file path, sqlite:///path or postgresql://..., got {value!r}"
            )
        return value or None

    @field_validator("threads_url")
    @classmethod
    def _threads_url(cls, value: str | None) -> str | None:
        if value and "://" in value and not value.startswith(_AUDIT_SCHEMES):
            raise ValueError(
                "GUARDRAG_THREADS_URL must be a file path, sqlite:///path or postgresql://..."
            )
        return value or None

    @field_validator("edge_source_dir", mode="before")
    @classmethod
    def _blank_dir_is_none(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        if value and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("GUARDRAG_REDIS_URL must be redis://host:port/db or rediss://...")
        return value or None

    @field_validator("api_keys")
    @classmethod
    def _api_keys(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            parse_api_keys(value.get_secret_value())
        return value if value is not None and value.get_secret_value().strip() else None

    @field_validator("admin_token", "metrics_token")
    @classmethod
    def _blank_token_is_none(cls, value: SecretStr | None) -> SecretStr | None:
        # An empty token would let an empty password in: treat it as not configured.
        return value if value is not None and value.get_secret_value().strip() else None

    @property
    def models_dir(self) -> Path:
        """Where the bundled models live: GUARDRAG_LLM_MODEL_DIR, else <data_dir>/models."""
        return self.llm_model_dir or self.data_dir / "models"

    def key_scopes(self) -> KeyScopes:
        """Every client key of the HTTP API with its KBs (None: every KB); empty: no key needed."""
        scopes = parse_api_keys(self.api_keys.get_secret_value()) if self.api_keys else {}
        if self.api_key is not None and self.api_key.get_secret_value():
            scopes[self.api_key.get_secret_value()] = None
        return scopes

    @field_validator("default_kb")
    @classmethod
    def _kb_name(cls, value: str) -> str:
        return validate_kb_name(value)


#: What a knowledge base name may be, everywhere (CLI, API, UI, settings).
KB_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
_KB_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class KBNameError(GuardragError, ValueError):
    """A knowledge base name that cannot name a directory and a collection."""


def validate_kb_name(name: str, where: str = "") -> str:
    """KB names become directory and collection names: keep them boring (ASCII only, so no
    engine or file system can read them differently). `where` says which input held it."""
    if not isinstance(name, str) or not _KB_NAME.fullmatch(name):
        shown = name[:70] if isinstance(name, str) else name
        raise KBNameError(
            f"{where + ': ' if where else ''}knowledge base name {shown!r} is not valid: "
            "use 1-64 ASCII letters, digits, '-' or '_'"
        )
    return name


def load_settings() -> Settings:
    """Read and validate settings, turning pydantic's error into one clear line per problem."""
    try:
        return Settings()
    except UnreadableSetting as exc:  # a JSON-valued setting that is not JSON
        raise SettingsError(f"invalid settings: {_unreadable(exc)}") from None
    except ValidationError as exc:
        problems = "; ".join(
            f"GUARDRAG_{'_'.join(str(p) for p in err['loc']).upper()}: {err['msg']}"
            for err in exc.errors()
        )
        raise SettingsError(f"invalid settings: {problems}") from None


#: pydantic_settings names the field it could not parse: 'error parsing value for field "knobs"'.
_FIELD = re.compile(r'field "(\w+)"')


def _unreadable(exc: UnreadableSetting) -> str:
    """One line for a setting whose value could not be parsed at all (not JSON where JSON is
    read), naming its variable and never echoing the value (it may hold a secret)."""
    found = _FIELD.search(str(exc))
    name = f"GUARDRAG_{found.group(1).upper()}" if found else "a GUARDRAG_* variable"
    return f"{name}: not valid JSON (this setting is read as JSON, e.g. '{{\"use_llm\": false}}')"


def describe_settings() -> list[tuple[str, str]]:
    """(variable, description) for every setting: `guardrag --help` and the README list them."""
    return [
        (f"GUARDRAG_{name.upper()}", field.description or "")
        for name, field in Settings.model_fields.items()
    ]
