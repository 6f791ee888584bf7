"""Rate limits: per process, and shared through a real Redis by every replica; a Redis outage
falls back to per-process limits (never no limit, never everyone refused)."""

from __future__ import annotations

import logging
import multiprocessing
import time
from collections.abc import Iterator

import pytest

from guardrag.config.settings import Settings
from guardrag.faces.ratelimit import RateLimiter, SharedRateLimiter, limiter_from_settings
from tests.servers import TempRedis, start_redis

SLOW = 1 / 3600  # one token an hour: nothing refills during a test


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_local_bucket_refills_at_its_rate() -> None:
    clock = Clock()
    limiter = RateLimiter(rate=2.0, burst=3, clock=clock)
    assert [limiter.acquire("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.acquire("a") == pytest.approx(0.5)
    assert limiter.acquire("b") == 0.0  # clients are separate
    clock.now = 0.5
    assert limiter.acquire("a") == 0.0


def test_settings_choose_the_limiter(redis_url: str) -> None:
    assert type(limiter_from_settings(Settings())) is RateLimiter
    shared = limiter_from_settings(Settings(redis_url=redis_url, rate_limit_burst=4))
    assert isinstance(shared, SharedRateLimiter) and shared.burst == 4
    shared.close()
    with pytest.raises(ValueError, match="GUARDRAG_REDIS_URL"):
        Settings(redis_url="http://127.0.0.1:6379")


def test_replicas_share_one_bucket(redis_url: str) -> None:
    replicas = [SharedRateLimiter(redis_url, rate=SLOW, burst=5) for _ in range(3)]
    granted = [r.acquire("10.0.0.1") == 0.0 for _ in range(4) for r in replicas]
    assert sum(granted) == 5  # 12 attempts over 3 replicas, one budget
    wait = replicas[0].acquire("10.0.0.1")
    assert 3500 < wait <= 3600  # a full token at one an hour
    assert replicas[1].acquire("10.0.0.2") == 0.0  # another client has its own bucket
    assert not any(r.degraded for r in replicas)
    for replica in replicas:
        replica.close()


def test_the_bucket_refills_on_redis_time(redis_url: str) -> None:
    limiter = SharedRateLimiter(redis_url, rate=20.0, burst=2)
    assert limiter.acquire("c") == limiter.acquire("c") == 0.0
    wait = limiter.acquire("c")
    assert 0 < wait <= 0.05
    time.sleep(wait + 0.02)
    assert limiter.acquire("c") == 0.0
    limiter.close()


def _hammer(url: str, attempts: int, start: object, out: object) -> None:
    limiter = SharedRateLimiter(url, rate=SLOW, burst=50)
    start.wait()  # type: ignore[attr-defined]
    out.put(sum(limiter.acquire("one-client") == 0.0 for _ in range(attempts)))  # type: ignore[attr-defined]


@pytest.mark.slow  # a second process
def test_processes_racing_for_the_last_tokens_never_overdraw(redis_url: str) -> None:
    context = multiprocessing.get_context("spawn")
    start, out = context.Event(), context.Queue()
    workers = [context.Process(target=_hammer, args=(redis_url, 40, start, out)) for _ in range(3)]
    for worker in workers:
        worker.start()
    time.sleep(1.0)  # let the spawned interpreters import
    start.set()
    granted = [out.get(timeout=60) for _ in workers]
    for worker in workers:
        worker.join(10)
    assert sum(granted) == 50, granted  # 120 attempts against a bucket of 50


def test_script_reloaded_after_redis_forgets_it(redis_url: str) -> None:
    import redis

    limiter = SharedRateLimiter(redis_url, rate=SLOW, burst=3)
    assert limiter.acquire("d") == 0.0
    redis.Redis.from_url(redis_url).script_flush()  # what a Redis restart does to scripts
    assert limiter.acquire("d") == 0.0 and not limiter.degraded
    limiter.close()


@pytest.fixture
def own_redis() -> Iterator[TempRedis]:
    server = start_redis()
    yield server
    server.stop()


def test_a_dead_redis_falls_back_to_per_process_limits(
    own_redis: TempRedis, caplog: pytest.LogCaptureFixture
) -> None:
    limiter = SharedRateLimiter(own_redis.url, rate=SLOW, burst=3, cooldown_s=0.2)
    assert limiter.acquire("e") == 0.0  # one token taken in Redis
    own_redis.kill()
    with caplog.at_level(logging.WARNING, logger="guardrag.ratelimit"):
        began = time.monotonic()
        results = [limiter.acquire("e") for _ in range(5)]
        spent = time.monotonic() - began
    # The local bucket starts full: 3 admitted, then refused. Not unlimited, not all refused.
    assert [r == 0.0 for r in results] == [True, True, True, False, False]
    assert limiter.degraded and limiter.errors == 1  # one failure, then the cooldown
    assert spent < 2.0  # a refused connection fails at once
    assert caplog.text.count("Redis unavailable") == 1
    assert "per process" in caplog.text


def test_a_hung_redis_costs_one_timeout_per_cooldown(
    own_redis: TempRedis, caplog: pytest.LogCaptureFixture
) -> None:
    limiter = SharedRateLimiter(own_redis.url, rate=SLOW, burst=100, cooldown_s=30)
    assert limiter.acquire("f") == 0.0
    own_redis.freeze()
    try:
        began = time.monotonic()
        for _ in range(50):
            assert limiter.acquire("f") == 0.0
        spent = time.monotonic() - began
    finally:
        own_redis.thaw()
    assert limiter.errors == 1
    assert spent < 3.0  # one 0.25 s timeout and its retry, not 50 (redis-py's defaults: 58 s)


def test_redis_back_means_shared_limits_again(
    own_redis: TempRedis, caplog: pytest.LogCaptureFixture
) -> None:
    limiter = SharedRateLimiter(own_redis.url, rate=SLOW, burst=2, cooldown_s=0.1)
    own_redis.freeze()
    with caplog.at_level(logging.WARNING, logger="guardrag.ratelimit"):
        assert limiter.acquire("g") == 0.0  # decided locally
        own_redis.thaw()
        time.sleep(0.15)
        assert limiter.acquire("g") == 0.0  # Redis again: its bucket is still full
        assert not limiter.degraded
    assert "reachable again" in caplog.text
    limiter.close()
