"""What replicas add per request and per publish, beside the throughput of scripts/load_api.py.

    python scripts/bench_replicas.py [--followers 3] [--rounds 5] [--calls 2000]

1. Following a publish: the sample KB is ingested into a source dir that `--followers`
   FollowingEdgeStores follow (one a replica); then it is re-published `--rounds` times and
   the time until every follower answers from the new snapshot is taken (their poll is 1 s,
   so this is the poll's phase plus the copy), with the copy alone (`sync()` after publish).
2. A rate-limit decision: `acquire()` of the per-process limiter and of the Redis one.
3. A conversation turn's bookkeeping on each thread store: the turn lock and the pruning of
   older checkpoints (`ThreadStore.turn` around nothing), SQLite and Postgres.
4. A Redis outage: what rate-limit decisions cost while Redis hangs (SIGSTOP) and once it is
   dead (SIGKILL): one timeout, then per-process limits for the cooldown.

Throwaway Postgres and Redis servers come from tests/servers.py (Debian's packages).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

from _bench import REPO, SAMPLE_FAQ, machine, summary

sys.path.insert(0, str(REPO))

from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.kb.ingest import ingest
from guardrag.core.store.edge import EdgeStore
from guardrag.core.store.follow import FollowingEdgeStore
from guardrag.faces.ratelimit import RateLimiter, SharedRateLimiter
from guardrag.faces.threads import open_thread_store
from tests.servers import TempPostgres, TempRedis, postgres_bindir, redis_binary


def _wait_for(store: FollowingEdgeStore, snapshot: str, began: float, out: list[float]) -> None:
    while (info := store.kb_info("kinetic")) is None or info.snapshot_id != snapshot:
        time.sleep(0.005)
    out.append(time.perf_counter() - began)


def _publish(published: Path, embedder: OnnxEmbedder, faq: Path) -> str:
    """What `guardrag ingest` does: publish, read it back (calibration), close. A store left
    open pins the live shard, which no follower can copy until it is let go."""
    source = EdgeStore(published)
    try:
        return ingest(source, embedder, "kinetic", [faq]).snapshot_id
    finally:
        source.close()


def follow(root: Path, followers: int, rounds: int) -> None:
    embedder = OnnxEmbedder()
    faq = root / "faq.jsonl"
    lines = SAMPLE_FAQ.read_text().splitlines(keepends=True)
    faq.write_text("".join(lines))
    _publish(root / "published", embedder, faq)
    stores = [FollowingEdgeStore(root / "published", root / "copies") for _ in range(followers)]
    picked, copies = [], []
    for n in range(rounds):
        faq.write_text("".join(lines[: len(lines) - 1 - n]))  # a new snapshot each round
        snapshot = _publish(root / "published", embedder, faq)
        began = time.perf_counter()
        seen: list[float] = []
        threads = [
            threading.Thread(target=_wait_for, args=(s, snapshot, began, seen)) for s in stores
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        picked.append(1000 * max(seen))
    for store in stores:
        store.close()
    # The copy alone: a follower that polls never, synced by hand right after each publish.
    manual = FollowingEdgeStore(root / "published", root / "copies", poll_s=3600)
    for n in range(rounds):
        faq.write_text("".join(lines[: len(lines) - n % 2]))  # one row in or out: cheap
        _publish(root / "published", embedder, faq)
        began = time.perf_counter()
        manual.sync()
        copies.append(1000 * (time.perf_counter() - began))
    size = sum(f.stat().st_blocks * 512 for f in manual.copy_dir.rglob("*") if f.is_file())
    manual.close()
    print(f"publish -> all {followers} followers serve it: {summary(picked)}")
    print(
        f"copy of the sample KB's shard ({len(lines)} entries, {size / 2**20:.1f} MiB on disk): "
        f"{summary(copies)}"
    )


def limiter(redis_url: str, calls: int) -> None:
    local = RateLimiter(1e9, 10**9)
    shared = SharedRateLimiter(redis_url, 1e9, 10**9)
    for name, one in (("per process", local), ("Redis", shared)):
        times = []
        for n in range(calls):
            began = time.perf_counter()
            one.acquire(f"10.0.0.{n % 50}")
            times.append(1000 * (time.perf_counter() - began))
        print(f"rate-limit decision, {name:11}: {summary(times)}")
    shared.close()


def outage(redis: TempRedis, calls: int = 100) -> None:
    """What `calls` decisions cost while Redis hangs (SIGSTOP), then once it is dead."""
    for name, fail in (("hung (SIGSTOP)", redis.freeze), ("dead (SIGKILL)", redis.kill)):
        shared = SharedRateLimiter(redis.url, 1e9, 10**9)
        shared.acquire("warm")  # connected while Redis answers
        fail()
        began = time.perf_counter()
        for n in range(calls):
            shared.acquire(f"10.0.1.{n % 50}")
        spent = 1000 * (time.perf_counter() - began)
        if fail == redis.freeze:
            redis.thaw()
        shared.close()
        print(
            f"{calls} decisions while Redis is {name}: {spent:.0f} ms in all "
            f"({shared.errors} Redis error, then per-process limits for the 5 s cooldown)"
        )


def turns(urls: dict[str, str], calls: int) -> None:
    for name, url in urls.items():
        store = open_thread_store(url)
        times = []
        for n in range(calls):
            began = time.perf_counter()
            with store.turn(f"bench-{n % 20}"):
                pass
            times.append(1000 * (time.perf_counter() - began))
        store.close()
        print(f"turn lock + prune, {name:8}: {summary(times)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--followers", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    print(machine())
    bindir, binary = postgres_bindir(), redis_binary()
    if bindir is None or binary is None:
        raise SystemExit("PostgreSQL or redis-server not found: run `make services`")
    postgres, redis = TempPostgres(bindir).start(), TempRedis(binary).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            follow(Path(tmp), args.followers, args.rounds)
            limiter(redis.url, args.calls)
            turns(
                {"SQLite": str(Path(tmp) / "threads.sqlite"), "Postgres": postgres.url()},
                args.calls // 4,
            )
            outage(redis)  # last: it kills this Redis
    finally:
        postgres.stop()
        redis.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
