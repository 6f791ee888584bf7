"""Audit soak: N requests through the real pipeline, `concurrency` at a time, then check the log.

    python scripts/audit_soak.py [--requests 1000] [--concurrency 8] [--pii-share 0.3]

Ingests the sample KB into a temp data dir (embedded Qdrant Edge), asks golden-set questions
and questions carrying generated card numbers, e-mails, phones, NRICs and OTPs, audits every
result, and checks: exactly one row per request, integrity_check ok, and no raw value from
the questions anywhere in the store. Prints the numbers; exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import inspect
import random
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

from guardrag.config.settings import Settings
from guardrag.contract import Result
from guardrag.core.audit import AuditSink, SQLiteAuditStore
from guardrag.core.audit.stats import compute_stats, render_stats
from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.kb.ingest import ingest
from guardrag.core.store import open_store
from guardrag.faces.eval.evaluate import load_cases
from guardrag.faces.service import Guardrag, build_services

REPO = Path(__file__).resolve().parents[1]
KB = "kinetic"


def _luhn_card(rng: random.Random) -> str:
    body = [4, *(rng.randrange(10) for _ in range(14))]
    total = sum(
        d if i % 2 else (d * 2 - 9 if d > 4 else d * 2) for i, d in enumerate(reversed(body))
    )
    digits = "".join(map(str, [*body, (10 - total % 10) % 10]))
    return " ".join(digits[i : i + 4] for i in range(0, 16, 4))


# (template, value factory): each value is what must never be stored.
_PII: list[tuple[str, Callable[[random.Random], str]]] = [
    ("my card {} was charged twice, why?", _luhn_card),
    ("please email the receipt to {}", lambda r: f"user{r.randrange(10**6)}@example.com"),
    (
        "call me at {} about my top up",
        lambda r: f"01{r.randrange(2, 9)}-{r.randrange(100, 999)} {r.randrange(1000, 9999)}",
    ),
    (
        "my IC is {}, can I register?",
        lambda r: (
            f"{r.randrange(60, 99)}0{r.randrange(1, 9)}1{r.randrange(1, 9)}-{r.randrange(1, 14):02d}-{r.randrange(1000, 9999)}"
        ),
    ),
    ("my OTP is {} but it says expired", lambda r: str(r.randrange(100000, 999999))),
]


def questions(n: int, pii_share: float, seed: int = 7) -> tuple[list[str], list[str]]:
    """`n` questions (golden set cycled, a share carrying PII) and the raw values used."""
    rng = random.Random(seed)
    golden = [c.question for c in load_cases(REPO / "datasets/ewallet/golden.jsonl", lang=None)]
    asked, raw = [], []
    for i in range(n):
        if rng.random() < pii_share:
            template, make = _PII[i % len(_PII)]
            value = make(rng)
            raw.append(value)
            asked.append(template.format(value))
        else:
            asked.append(golden[i % len(golden)])
    return asked, raw


def leaks(db: Path, raw: list[str]) -> list[str]:
    """Raw values (as typed, or as bare digits) found anywhere in the audit tables."""
    conn = sqlite3.connect(db)
    text = "\n".join(
        repr(row)
        for table in ("requests", "decisions", "feedback")
        for row in conn.execute(f"SELECT * FROM {table}")
    )
    conn.close()
    return [
        v for v in raw if v in text or ((d := "".join(c for c in v if c.isdigit())) and d in text)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--pii-share", type=float, default=0.3)
    args = parser.parse_args()
    asked, raw = questions(args.requests, args.pii_share)

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp), default_kb=KB)
        store, embedder = open_store(Path(tmp), None, None), OnnxEmbedder()
        ingest(store, embedder, KB, [REPO / "datasets/ewallet/faq.jsonl"])
        services = build_services(settings, store=store, embedder=embedder, chat_model=None)
        sink = AuditSink.from_settings(settings, source="soak")
        # Through Guardrag's own hook once it has one; until then, the same call per request.
        hooked = "audit" in inspect.signature(Guardrag.__init__).parameters
        hook = {"audit": sink} if hooked else {}
        bot: Guardrag = cast(Any, Guardrag)(services, settings, **hook)

        def ask(question: str) -> Result:
            result = bot.ask(question, KB)
            if not hooked:
                sink.record(
                    result,
                    kb=KB,
                    models=services.model_names(),
                    snapshot_id=services.snapshot_id(KB),
                )
            return result

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
            results = list(pool.map(ask, asked))
        asked_s = time.perf_counter() - started
        flushed = sink.flush()
        drained_s = time.perf_counter() - started
        stats = sink.stats
        sink.close()
        bot.close()

        db = Path(tmp) / "audit.sqlite3"
        audit = SQLiteAuditStore(db)
        rows, integrity = audit.count(), audit.integrity_check()
        report = compute_stats(audit)
        audit.close()
        leaked = leaks(db, raw)

    refused = sum(r.outcome == "refused" for r in results)
    print(
        f"{len(results)} requests ({len(raw)} with PII), concurrency {args.concurrency}: "
        f"{asked_s:.1f} s ({len(results) / asked_s:.0f} req/s); log drained after {drained_s:.1f} s"
    )
    print(f"audit rows: {rows} (expected {len(results)}); integrity_check: {integrity}")
    print(
        f"sink: written {stats.written}, spooled {stats.spooled}, flushed {stats.flushed}, "
        f"held {stats.held}, build errors {stats.build_errors}; hook: {'Guardrag' if hooked else 'script'}"
    )
    print(
        f"answered {len(results) - refused}, refused {refused}; raw PII values found in the log: {len(leaked)}"
    )
    print(render_stats(report))
    ok = flushed and rows == len(results) and integrity == "ok" and not leaked
    if leaked:
        print("LEAKED:", leaked[:10], file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
