"""Vector store: the protocol, its two Qdrant adapters and the factory that picks one."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from guardrag.core.store.base import (
    Hit,
    IndexDamaged,
    IndexUnavailable,
    KBInfo,
    Point,
    SearchMode,
    SparseVector,
    VectorStore,
)

if TYPE_CHECKING:
    from guardrag.config.settings import Settings

__all__ = [
    "Hit",
    "IndexDamaged",
    "IndexUnavailable",
    "KBInfo",
    "Point",
    "SearchMode",
    "SparseVector",
    "VectorStore",
    "open_store",
    "store_from_settings",
]


def open_store(
    data_dir: Path, qdrant_url: str | None = None, qdrant_api_key: str | None = None
) -> VectorStore:
    """A Qdrant server store when a URL is configured, else embedded Qdrant Edge under data_dir."""
    if qdrant_url:
        # lazy: qdrant-client (a second to import) is only needed for a server
        from guardrag.core.store.server import ServerStore

        return ServerStore(url=qdrant_url, api_key=qdrant_api_key)
    from guardrag.core.store.edge import EdgeStore  # lazy: the embedded engine, when chosen

    return EdgeStore(data_dir)


def store_from_settings(settings: Settings) -> VectorStore:
    """The store the process settings name (GUARDRAG_QDRANT_URL / _API_KEY / _DATA_DIR, or
    GUARDRAG_EDGE_SOURCE_DIR: this process's own copies of the KBs published there)."""
    key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
    if settings.edge_source_dir is not None and not settings.qdrant_url:
        from guardrag.core.store.follow import FollowingEdgeStore, copies_dir  # lazy: as above

        return FollowingEdgeStore(settings.edge_source_dir, copies_dir(settings.data_dir))
    return open_store(settings.data_dir, settings.qdrant_url, key)
