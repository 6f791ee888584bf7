"""Per-client token buckets for the HTTP API: a burst allowance refilled at a steady rate.

`RateLimiter` keeps the buckets in this process. `SharedRateLimiter` keeps them in Redis, so
that N replicas together admit what one would; when Redis fails it falls back to this
process's own buckets (each replica then limits on its own: at most N times the rate, never
unlimited, never everyone refused) and says so on stderr.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from guardrag.config.settings import Settings

log = logging.getLogger("guardrag.ratelimit")


@dataclass
class _Bucket:
    tokens: float
    stamp: float


class RateLimiter:
    """`rate` tokens a second up to `burst` per client; one request takes one token.

    Thread-safe. At most `max_clients` buckets are kept (least recently seen dropped first), so
    a flood of client ids cannot grow memory without bound; a dropped client starts full again.
    """

    def __init__(
        self,
        rate: float,
        burst: int,
        *,
        max_clients: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("rate must be > 0 and burst >= 1")
        self.rate = rate
        self.burst = burst
        self.max_clients = max_clients
        self._clock = clock
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self._lock = threading.Lock()

    def acquire(self, client: str) -> float:
        """0.0 if `client` may go ahead (a token is taken), else seconds until a token is free."""
        now = self._clock()
        with self._lock:
            bucket = self._bucket(client, now)
            bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.stamp) * self.rate)
            bucket.stamp = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return 0.0
            return (1.0 - bucket.tokens) / self.rate

    def _bucket(self, client: str, now: float) -> _Bucket:
        bucket = self._buckets.get(client)
        if bucket is None:
            bucket = self._buckets[client] = _Bucket(float(self.burst), now)
            if len(self._buckets) > self.max_clients:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(client)
        return bucket


#: Refill, take and store one bucket in one step: Redis runs a script to completion before any
#: other command, so replicas racing for the last token cannot both get it. The clock is
#: Redis's own (TIME), so the replicas' clocks do not matter. Numbers are stored with
#: string.format: Lua 5.1's tostring keeps 14 digits and would round a microsecond timestamp
#: (16 digits) on every write, handing out extra tokens. An idle bucket expires once it would
#: be full again (a missing bucket is a full one).
TOKEN_BUCKET_LUA = """
local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil or ts == nil then
  tokens = burst
  ts = now
end
if now > ts then
  tokens = math.min(burst, tokens + (now - ts) * rate / 1000000)
  ts = now
end
local wait_ms = 0
if tokens >= 1 then
  tokens = tokens - 1
else
  wait_ms = math.ceil((1 - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ts', string.format('%.0f', ts))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
return wait_ms
"""


class SharedRateLimiter(RateLimiter):
    """The same buckets in Redis, shared by every replica that names the same Redis.

    Redis is given `timeout_s` per call (redis-py's defaults would hold a request for up to a
    minute against a hung server). After a failure this process uses its own buckets for
    `cooldown_s` before it asks Redis again, so an outage costs one timeout per cooldown, not
    one per request. Client ids are hashed before they become keys.
    """

    def __init__(
        self,
        url: str,
        rate: float,
        burst: int,
        *,
        timeout_s: float = 0.25,
        cooldown_s: float = 5.0,
        prefix: str = "guardrag:rl:",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(rate, burst, clock=clock)
        # lazy: only a configured Redis needs the client library
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        self.cooldown_s = cooldown_s
        self.prefix = prefix
        self.errors = 0  # Redis calls that failed (each one started a cooldown)
        self._redis_errors: tuple[type[Exception], ...] = (redis.RedisError, OSError)
        self._client = redis.Redis.from_url(
            url,
            socket_connect_timeout=timeout_s,
            socket_timeout=timeout_s,
            retry=Retry(NoBackoff(), 1),  # one quick retry survives a dropped idle connection
            health_check_interval=0,
        )
        # EVALSHA; on NOSCRIPT (Redis restarted, SCRIPT FLUSH) redis-py loads it again.
        self._script: Any = self._client.register_script(TOKEN_BUCKET_LUA)
        self._down_until: float | None = None
        self._state_lock = threading.Lock()

    @property
    def degraded(self) -> bool:
        """True while this process limits on its own because Redis failed."""
        return self._down_until is not None

    def acquire(self, client: str) -> float:
        now = self._clock()
        down_until = self._down_until
        if down_until is None or now >= down_until:
            key = self.prefix + hashlib.sha256(client.encode()).hexdigest()[:32]
            try:
                wait_ms = int(self._script(keys=[key], args=[self.burst, self.rate]))
            except self._redis_errors as exc:
                self._failed(now, exc)
            else:
                self._recovered()
                return wait_ms / 1000
        return super().acquire(client)

    def _failed(self, now: float, exc: Exception) -> None:
        with self._state_lock:
            self.errors += 1
            first = self._down_until is None
            self._down_until = now + self.cooldown_s
        if first:
            log.warning(
                "rate limit: Redis unavailable (%s: %s); limiting per process (each replica "
                "admits the full rate) and retrying Redis every %.0f s",
                type(exc).__name__,
                exc,
                self.cooldown_s,
            )

    def _recovered(self) -> None:
        if self._down_until is None:
            return
        with self._state_lock:
            was_down, self._down_until = self._down_until is not None, None
        if was_down:
            log.warning("rate limit: Redis reachable again; limits are shared again")

    def close(self) -> None:
        self._client.close()


def limiter_from_settings(settings: Settings) -> RateLimiter:
    """Shared through Redis when GUARDRAG_REDIS_URL is set, else this process's own."""
    rate, burst = settings.rate_limit_per_minute / 60, settings.rate_limit_burst
    if settings.redis_url:
        return SharedRateLimiter(settings.redis_url, rate, burst)
    return RateLimiter(rate, burst)
