"""Who is calling: the X-API-Key check (constant time, scoped to knowledge bases) and the
per-client rate limit, as FastAPI dependencies."""

from __future__ import annotations

import hashlib
import hmac
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from guardrag.config.settings import KeyScopes
from guardrag.faces.ratelimit import RateLimiter

API_KEY_HEADER = APIKeyHeader(name="X-API-Key", auto_error=False)
#: The same keys as `Authorization: Bearer <key>`, which OpenAI's SDKs send.
BEARER = HTTPBearer(auto_error=False)


def rate_limit_dependency(limiter: RateLimiter) -> Callable[[Request], None]:
    """A dependency that takes a token for the calling client or answers 429 + Retry-After."""

    def enforce(request: Request) -> None:
        # The peer address; uvicorn rewrites it from X-Forwarded-For only for trusted proxies.
        client = request.client.host if request.client else "unknown"
        wait = limiter.acquire(client)
        if wait > 0:
            raise HTTPException(
                429, "rate limit exceeded", headers={"Retry-After": str(math.ceil(wait))}
            )

    return enforce


@dataclass(frozen=True)
class Caller:
    """What the calling key may see: these knowledge bases, or every one (None)."""

    kbs: frozenset[str] | None = None
    keyed: bool = False  # False: no keys are configured, the API is open
    space: str = "open"  # whose conversations: a key's threads are invisible to other keys

    def allows(self, kb: str) -> bool:
        return self.kbs is None or kb in self.kbs

    def require(self, kb: str) -> None:
        """403 for a KB outside the key's scope, whether or not that KB exists."""
        if not self.allows(kb):
            raise HTTPException(403, f"this API key may not use knowledge base {kb!r}")


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def key_checker(scopes: KeyScopes) -> Callable[[str | None], Caller]:
    """Finds the sent key among `scopes` in constant time: every key is compared (as a SHA-256
    digest, so neither its length nor its position leaks through timing), and a match does
    not stop the loop. 401 for a missing or unknown key; without keys the API is open."""
    table = [(_digest(key), kbs) for key, kbs in scopes.items()]

    def check(given: str | None) -> Caller:
        if not table:
            return Caller()
        sent = _digest(given or "")
        found: Caller | None = None
        for digest, kbs in table:
            if hmac.compare_digest(sent, digest) and given is not None:
                found = Caller(kbs, keyed=True, space=f"key-{digest.hex()[:12]}")
        if found is None:
            # Never echo or log the key that was sent.
            raise HTTPException(401, "missing or invalid API key")
        return found

    return check


def key_dependency(
    scopes: KeyScopes,
) -> Callable[[Request, str | None, HTTPAuthorizationCredentials | None], None]:
    """A router dependency that authenticates the key (X-API-Key, or `Authorization: Bearer`
    as OpenAI's clients send it; headers only, never the URL; when both are sent, both must
    be right) and leaves the Caller on the request."""
    check = key_checker(scopes)

    def authenticate(
        request: Request,
        given: Annotated[str | None, Depends(API_KEY_HEADER)],
        bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
    ) -> None:
        sent = [key for key in (given, bearer.credentials if bearer else None) if key is not None]
        # Every key a request carries must be right: a wrong one is never outvoted.
        callers = [check(key) for key in sent] or [check(None)]
        request.state.caller = callers[0]

    return authenticate


def caller_of(request: Request) -> Caller:
    """The Caller the key dependency found (an open API's when no key is configured)."""
    caller = getattr(request.state, "caller", None)
    return caller if isinstance(caller, Caller) else Caller()


def bearer_ok(request: Request, token: str) -> bool:
    """Whether the request carries `Authorization: Bearer <token>` (constant-time compare)."""
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not given:
        return False
    return hmac.compare_digest(_digest(given.strip()), _digest(token))
