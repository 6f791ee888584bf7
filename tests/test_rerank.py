"""Rerankers: the fused scorer's ordering, and a real cross-encoder over HTTP with fallback."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from guardrag.config.settings import Settings
from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.rerank import FusedReranker, HttpReranker, load_reranker
from guardrag.core.store import Hit, VectorStore
from tests.conftest import KB
from tests.openai_stub import QuietServer


@contextmanager
def rerank_server(scores: list[float] | None) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A /rerank endpoint in the text-embeddings-inference format; scores None answers 503."""
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body)
            if scores is None:
                self.send_response(503)
                self.end_headers()
                return
            ranked = [{"index": i, "score": s} for i, s in enumerate(scores[: len(body["texts"])])]
            data = json.dumps(ranked).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = QuietServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/rerank", seen
    finally:
        server.shutdown()
        server.server_close()


def hit(title: str, text: str, dense: float, content: float | None = None) -> Hit:
    return Hit(
        id=title, payload={"title": title, "text": text}, fused=0.0, dense=dense, content=content
    )


def test_fused_scores_prefer_the_entry_covering_the_asked_term() -> None:
    fee = hit(
        "What fees apply to top-ups?", "Credit card top-ups cost 1.5%.", dense=0.62, content=0.55
    )
    how = hit("How do I top up?", "Tap Top Up and pick FPX.", dense=0.64, content=0.50)
    scores = FusedReranker().score("what is the fee for a credit card top up", [fee, how])
    assert scores[0] > scores[1]
    assert all(0.0 <= s <= 1.0 for s in scores)


def test_settings_pick_the_reranker() -> None:
    assert isinstance(load_reranker(Settings()), FusedReranker)
    chosen = load_reranker(Settings(rerank_url="http://127.0.0.1:9/rerank"))
    assert isinstance(chosen, HttpReranker) and chosen.url == "http://127.0.0.1:9/rerank"


def test_http_cross_encoder_orders_candidates(
    tmp_path: Path, sample_store: VectorStore, embedder: OnnxEmbedder
) -> None:
    from guardrag.faces.service import Guardrag, build_services

    scores = [0.01] * 3 + [0.97] + [0.02] * 20  # the endpoint prefers the 4th candidate
    with rerank_server(scores) as (url, seen):
        settings = Settings(data_dir=tmp_path, default_kb=KB, rerank_url=url)
        bot = Guardrag(build_services(settings, store=sample_store, embedder=embedder), settings)
        result = bot.ask("I want to delete my Kinetic account", knobs={"faq_margin": 0.5})
    rerank = next(d for d in result.trail if d.node == "rerank")
    assert rerank.reason.startswith("http") and rerank.detail["top"][0]["score"] == 0.97
    assert seen and seen[0]["query"] == "I want to delete my Kinetic account"


def test_failing_cross_encoder_falls_back_to_fused_scoring(
    tmp_path: Path, sample_store: VectorStore, embedder: OnnxEmbedder
) -> None:
    from guardrag.faces.service import Guardrag, build_services

    with rerank_server(None) as (url, _):
        settings = Settings(data_dir=tmp_path, default_kb=KB, rerank_url=url)
        bot = Guardrag(build_services(settings, store=sample_store, embedder=embedder), settings)
        result = bot.ask("I want to delete my Kinetic account")
    rerank = next(d for d in result.trail if d.node == "rerank")
    assert "fallback" in rerank.reason and "503" in rerank.reason
    assert result.route == "semantic_match" and result.citations[0].source_id == "kw-closure-001"
