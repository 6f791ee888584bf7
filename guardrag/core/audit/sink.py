"""AuditSink: the one call a request makes to be audited. It never raises and never blocks.

`record()` only enqueues the Result; a writer thread redacts, logs and appends records to
the store in batches (one transaction per batch). When the store refuses (locked, disk full,
unreachable, schema too new) the batch goes to the spool on disk, stderr says so, and the
writer retries every `retry_s`; if even the spool cannot be written the records are held in
memory and retried. Nothing is dropped without a line on stderr.

A face that must not answer an unaudited request waits for `confirm(request_id)`: the fate of
its record (written, spooled, or only held in memory).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from guardrag.contract import Result
from guardrag.core.audit.logs import log_request
from guardrag.core.audit.record import (
    AuditRecord,
    FeedbackRecord,
    build_record,
    now_iso,
    storable,
)
from guardrag.core.audit.spool import Spool
from guardrag.core.audit.store import SqlAuditStore, open_audit_store

if TYPE_CHECKING:
    from guardrag.config.settings import Settings

log = logging.getLogger("guardrag.audit")

#: How often a failing store is retried, and how often a stderr reminder repeats meanwhile.
RETRY_S = 5.0
WARN_EVERY_S = 60.0
#: Fates remembered for `confirm` (oldest forgotten first): far more than are ever waited on.
KEPT_FATES = 65_536

#: Where a record ended up: the store, the spool on disk, or only this process's memory.
Fate = Literal["written", "spooled", "held"]


@dataclass(frozen=True)
class SinkStats:
    """Counters for metrics: everything recorded is written, spooled or held."""

    recorded: int = 0  # record() and feedback() calls
    written: int = 0  # rows committed directly
    spooled: int = 0  # rows that went to the spool file
    flushed: int = 0  # spooled rows later committed (this or an orphan spool)
    held: int = 0  # rows only in memory now (store and spool both failing)
    build_errors: int = 0  # results whose full record could not be built (a stub was stored)


@dataclass(frozen=True)
class _Request:
    result: Result
    context: dict[str, Any]


_STOP = object()


def default_audit_url(settings: Settings) -> str:
    return settings.audit_url or str(Path(settings.data_dir) / "audit.sqlite3")


class AuditSink:
    """Background, batched, spooling writer in front of an audit store."""

    def __init__(
        self,
        store: SqlAuditStore | Callable[[], SqlAuditStore],
        spool_dir: Path,
        *,
        source: str = "python",
        retry_s: float = RETRY_S,
        batch_size: int = 256,
        log_requests: bool = True,
    ) -> None:
        self._open_store = store if callable(store) else (lambda: store)
        self._store: SqlAuditStore | None = None
        self.spool = Spool(spool_dir)
        self.source = source
        self.retry_s = retry_s
        self.batch_size = batch_size
        self.log_requests = log_requests
        self._queue: queue.Queue[Any] = queue.Queue()
        self._held: tuple[list[AuditRecord], list[FeedbackRecord]] = ([], [])
        self._stats = SinkStats()
        self._stats_lock = threading.Lock()
        self._failing_since: float | None = None
        self._fates: OrderedDict[str, Fate] = OrderedDict()
        self._fate_changed = threading.Condition()
        self._last_warning = 0.0
        self._next_retry = 0.0
        self._closed = False
        # Serialises the writer thread with late synchronous writes during close().
        self._write_lock = threading.RLock()
        self._thread = threading.Thread(target=self._run, name="guardrag-audit", daemon=True)
        self._thread.start()
        # A daemon thread dies with the interpreter: drain the queue on a normal exit.
        atexit.register(self.close)

    @classmethod
    def from_settings(cls, settings: Settings, **options: Any) -> AuditSink:
        """The sink the process settings name (GUARDRAG_AUDIT_URL, else data_dir/audit.sqlite3)."""
        url = default_audit_url(settings)
        return cls(
            lambda: open_audit_store(url), Path(settings.data_dir) / "audit-spool", **options
        )

    # -- the request path ------------------------------------------------------------
    def record(
        self,
        result: Result,
        *,
        kb: str,
        knobs: dict[str, Any] | None = None,
        snapshot_id: str | None = None,
        models: dict[str, str | None] | None = None,
        thread_id: str | None = None,
        source: str | None = None,
    ) -> None:
        """Queue `result` for the log; redaction and I/O happen on the writer thread."""
        try:
            context = {
                "kb": kb,
                "knobs": dict(knobs or {}),
                "snapshot_id": snapshot_id,
                "models": models,
                "thread_id": thread_id,
                "source": source or self.source,
                "ts": now_iso(),
            }
            self._count(recorded=1)
            self._put(_Request(result, context))
        except Exception:  # the request must not fail because of its audit
            log.exception("audit: could not queue request %s", result.request_id)

    def feedback(self, request_id: str, score: int, comment: str = "") -> None:
        """Append a user's verdict on an answer (the comment is redacted)."""
        try:
            self._count(recorded=1)
            self._put(FeedbackRecord(request_id=request_id, score=int(score), comment=comment))
        except Exception:
            log.exception("audit: could not queue feedback for %s", request_id)

    def confirm(self, request_id: str, timeout: float = 10.0) -> Fate | None:
        """Wait until the record of `request_id` is written, spooled or held in memory, and
        say which; None when that did not happen within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self._fate_changed:
            while (fate := self._fates.get(request_id)) is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._fate_changed.wait(left)
            return fate

    def _settle(self, records: Sequence[AuditRecord], fate: Fate) -> None:
        with self._fate_changed:
            for record in records:
                self._fates[record.request_id] = fate
                self._fates.move_to_end(record.request_id)
            while len(self._fates) > KEPT_FATES:
                self._fates.popitem(last=False)
            self._fate_changed.notify_all()

    def _put(self, item: Any) -> None:
        if self._closed:  # late callers (atexit order) are written in their own thread
            self._write_items([item])
        else:
            self._queue.put(item)

    # -- the writer thread -------------------------------------------------------------
    def _run(self) -> None:
        stop = False
        while not stop:
            wait = max(0.05, self._next_retry - time.monotonic()) if self._retry_due() else None
            try:
                items = [self._queue.get(timeout=wait)]
            except queue.Empty:
                items = []
            while len(items) < self.batch_size:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = any(item is _STOP for item in items)
            try:
                self._write_items([i for i in items if i is not _STOP and i is not _NUDGE])
                if self._retry_due() and time.monotonic() >= self._next_retry:
                    self._retry()
            except Exception:  # keep the writer alive whatever happens
                log.exception("audit: writer error")
            finally:
                for _ in items:
                    self._queue.task_done()

    def _backlog(self) -> int:
        """Records of this sink not yet in the store (spooled or held in memory)."""
        return self.spool.pending + len(self._held[0]) + len(self._held[1])

    def _retry_due(self) -> bool:
        # Orphan spools of crashed processes are adopted too; a live process's spool is
        # skipped by its lock, and retried no more often than every retry_s.
        return bool(self._backlog() or self.spool.orphans())

    def _write_items(self, items: list[Any]) -> None:
        with self._write_lock:
            self._write_batch(items)

    def _write_batch(self, items: list[Any]) -> None:
        records: list[AuditRecord] = []
        feedback: list[FeedbackRecord] = []
        for item in items:
            if isinstance(item, FeedbackRecord):
                from guardrag.core.audit.redact import redact  # lazy: see build_record

                comment = redact(storable(item.comment))
                feedback.append(item.model_copy(update={"comment": comment}))
            else:
                records.append(self._build(item))
        if records or feedback:
            self._write(records, feedback)

    def _build(self, item: _Request) -> AuditRecord:
        context = item.context
        try:
            record = build_record(item.result, **context)
        except Exception as exc:
            # Never store the raw question, never drop the request: keep what is safe.
            log.exception("audit: record of %s could not be built", item.result.request_id)
            self._count(build_errors=1)
            record = AuditRecord(
                request_id=storable(item.result.request_id),
                ts=context["ts"],
                source=context["source"],
                kb=storable(context["kb"]),
                config_hash="",
                question=f"[unrecorded: {type(exc).__name__} while redacting]",
                outcome=item.result.outcome,
                latency_ms=item.result.latency_ms,
            )
        if self.log_requests:
            log_request(record)
        return record

    def _store_or_open(self) -> SqlAuditStore:
        if self._store is None:
            self._store = self._open_store()
        return self._store

    def _write(self, records: list[AuditRecord], feedback: list[FeedbackRecord]) -> None:
        try:
            self._store_or_open().write(records, feedback)
            self._count(written=len(records) + len(feedback))
            self._settle(records, "written")
            return
        except Exception as exc:
            self._failed(exc)
        try:
            self.spool.append(records, feedback)
            self._count(spooled=len(records) + len(feedback))
            self._settle(records, "spooled")
        except Exception as exc:  # not only OSError: whatever stops the spool, keep the records
            self._held[0].extend(records)
            self._held[1].extend(feedback)
            self._count(held=len(records) + len(feedback))
            self._settle(records, "held")
            log.error(
                "audit: spool %s not writable either (%s): %d record(s) held in memory",
                self.spool.path,
                exc,
                len(self._held[0]) + len(self._held[1]),
            )

    def _failed(self, exc: Exception) -> None:
        now = time.monotonic()
        if self._failing_since is None or now - self._last_warning >= WARN_EVERY_S:
            log.warning(
                "audit: store unavailable (%s: %s); spooling to %s, retrying every %.0fs",
                type(exc).__name__,
                exc,
                self.spool.path,
                self.retry_s,
            )
            self._last_warning = now
        if self._failing_since is None:
            self._failing_since = now
        self._next_retry = now + self.retry_s
        self._close_store()  # a fresh connection on retry (server restarted, file replaced)

    def _retry(self) -> None:
        with self._write_lock:
            self._next_retry = time.monotonic() + self.retry_s
            self._retry_locked()

    def _retry_locked(self) -> None:
        held_records, held_feedback = self._held
        if held_records or held_feedback:
            self._held = ([], [])
            self._count(held=-(len(held_records) + len(held_feedback)))
            self._write(held_records, held_feedback)
        try:
            flushed = self.spool.flush(self._store_or_open().write)
        except Exception as exc:
            self._failed(exc)
            return
        if flushed:
            self._count(flushed=flushed)
            log.warning("audit: store writable again; %d spooled record(s) flushed", flushed)
        self._failing_since = None

    def _close_store(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            # Already broken, most likely; a new one is opened on retry.
            with contextlib.suppress(Exception):
                store.close()

    def _count(self, **deltas: int) -> None:
        with self._stats_lock:
            self._stats = replace(
                self._stats, **{k: getattr(self._stats, k) + v for k, v in deltas.items()}
            )

    # -- control -------------------------------------------------------------------------
    @property
    def stats(self) -> SinkStats:
        with self._stats_lock:
            return self._stats

    def flush(self, timeout: float = 30.0, retry: bool = True) -> bool:
        """Wait until every queued record is written or spooled; with `retry`, also try the
        spool once more. True when nothing is left queued, spooled or held."""
        deadline = time.monotonic() + timeout
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks:
                if not self._queue.all_tasks_done.wait(max(0.0, deadline - time.monotonic())):
                    return False
        if retry and self._retry_due():
            self._next_retry = 0.0
            self._queue.put(_NUDGE)
            return self.flush(max(0.0, deadline - time.monotonic()), retry=False)
        return not self._backlog()

    def close(self, timeout: float = 30.0) -> None:
        """Write what is queued, try the spool once more, release files. Never raises."""
        if self._closed:
            return
        try:
            self.flush(timeout)
            self._closed = True  # from now on record() writes in the caller's thread
            self._queue.put(_STOP)
            self._thread.join(timeout)
            leftovers = []
            while not self._queue.empty():
                leftovers.append(self._queue.get_nowait())
            self._write_items([i for i in leftovers if i is not _STOP and i is not _NUDGE])
            if self._held[0] or self._held[1]:
                log.error(
                    "audit: %d record(s) could not be written or spooled and are lost at exit",
                    len(self._held[0]) + len(self._held[1]),
                )
            self.spool.close()
            self._close_store()
        except Exception:
            log.exception("audit: error while closing")
        finally:
            atexit.unregister(self.close)


# Wakes the writer for a retry without writing anything.
_NUDGE = object()
