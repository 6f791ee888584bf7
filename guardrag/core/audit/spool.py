"""The spool: records the store refused (locked, disk full, unreachable), kept on disk until
it takes them. Only redacted records ever get here.

Each process appends to its own JSONL file and holds an exclusive `flock` on it while it
lives, so any process can tell a live spool from the orphan of a crashed one (the kernel
drops the lock of a killed process) and flush orphans without racing their writer. Flushing
is idempotent: the store ignores a request id it already has.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from guardrag.core.audit.record import AuditRecord, FeedbackRecord

log = logging.getLogger("guardrag.audit")

Writer = Callable[[Sequence[AuditRecord], Sequence[FeedbackRecord]], None]

#: Records per store transaction while flushing a spool.
FLUSH_CHUNK = 500


@dataclass
class Loaded:
    records: list[AuditRecord] = field(default_factory=list)
    feedback: list[FeedbackRecord] = field(default_factory=list)
    torn: int = 0  # lines cut short by a crash in the middle of an append


def _line(kind: str, item: AuditRecord | FeedbackRecord) -> str:
    # ASCII with escapes: any string a record holds can be written, and read back as it was.
    return json.dumps({"kind": kind, "data": item.model_dump()}, ensure_ascii=True) + "\n"


def _load(handle: IO[str]) -> Loaded:
    handle.seek(0)
    loaded = Loaded()
    for text in handle:
        try:
            line: dict[str, Any] = json.loads(text)
            if line["kind"] == "feedback":
                loaded.feedback.append(FeedbackRecord.model_validate(line["data"]))
            else:
                loaded.records.append(AuditRecord.model_validate(line["data"]))
        except (ValueError, KeyError, TypeError):
            loaded.torn += 1
    return loaded


def _write_all(loaded: Loaded, write: Writer) -> None:
    for start in range(0, max(len(loaded.records), len(loaded.feedback)), FLUSH_CHUNK):
        stop = start + FLUSH_CHUNK
        write(loaded.records[start:stop], loaded.feedback[start:stop])


class Spool:
    """This process's spool file in `directory`, and the orphans of dead processes there."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / f"{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"
        self._handle: IO[str] | None = None
        self.pending = 0  # records in this process's file

    def append(
        self, records: Sequence[AuditRecord], feedback: Sequence[FeedbackRecord] = ()
    ) -> None:
        """Append durably (fsync) or raise OSError: the caller must then keep them itself."""
        handle = self._open()
        text = "".join(
            [*(_line("request", r) for r in records), *(_line("feedback", f) for f in feedback)]
        )
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
        self.pending += len(records) + len(feedback)

    def _open(self) -> IO[str]:
        if self._handle is None:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            handle = self.path.open("a+", encoding="utf-8")
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._handle = handle
        return self._handle

    def orphans(self) -> list[Path]:
        """Spool files of other processes (flushable only once their owner has gone)."""
        if not self.directory.is_dir():
            return []
        return sorted(p for p in self.directory.glob("*.jsonl") if p != self.path)

    def flush(self, write: Writer) -> int:
        """Hand every spooled record to `write` (a store transaction); returns how many.

        Stops at the first failure of `write`, leaving what is left spooled.
        """
        flushed = 0
        if self._handle is not None and self.pending:
            loaded = _load(self._handle)
            _write_all(loaded, write)
            self._handle.truncate(0)
            flushed += self.pending
            self.pending = 0
        for path in self.orphans():
            flushed += self._flush_orphan(path, write)
        return flushed

    def _flush_orphan(self, path: Path, write: Writer) -> int:
        try:
            handle = path.open("r+", encoding="utf-8")
        except FileNotFoundError:
            return 0  # another process flushed it first
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return 0  # its process is alive and will flush it
            loaded = _load(handle)
            _write_all(loaded, write)
            if loaded.torn:
                log.warning(
                    "audit: %d torn line(s) in %s (a process died mid-append) were unreadable",
                    loaded.torn,
                    path,
                )
            path.unlink()
        return len(loaded.records) + len(loaded.feedback)

    def close(self) -> None:
        """Release the file; an empty one is removed, a non-empty one waits for a later flush."""
        if self._handle is None:
            return
        if self.pending:
            log.warning(
                "audit: %d record(s) stay spooled in %s; the next guardrag process flushes them",
                self.pending,
                self.path,
            )
        else:
            self.path.unlink(missing_ok=True)
        self._handle.close()
        self._handle = None
