"""Vector store: the protocol, its two Qdrant adapters and the factory that picks one."""

from __future__ import annotations

from pathlib import Path

from guardrag.store.base import Hit, IndexUnavailable, KBInfo, Point, SparseVector, VectorStore

__all__ = [
    "Hit",
    "IndexUnavailable",
    "KBInfo",
    "Point",
    "SparseVector",
    "VectorStore",
    "open_store",
]


def open_store(
    data_dir: Path, qdrant_url: str | None = None, qdrant_api_key: str | None = None
) -> VectorStore:
    """A Qdrant server store when a URL is configured, else embedded Qdrant Edge under data_dir."""
    if qdrant_url:
        from guardrag.store.server import ServerStore  # qdrant-client is only needed here

        return ServerStore(url=qdrant_url, api_key=qdrant_api_key)
    from guardrag.store.edge import EdgeStore

    return EdgeStore(data_dir)
