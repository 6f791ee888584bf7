"""How soon streamed content arrives: for each question, through `POST /v1/chat/completions`
with `stream: true` against a running `guardrag serve`, the time to the first content (a
verified sentence while the model writes, or the whole checked answer) and to the final
chunk (the one carrying the `guardrag` result); p50 of both over the questions whose answer
was generated, and how many showed content before the end.

    guardrag serve --port 7871   # over a KB whose questions go to the model
    python scripts/bench_streaming.py --base-url http://127.0.0.1:7871 --kb handbook

Without --questions it asks ten questions about the staff handbook of tests/real_model.py.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

HANDBOOK_QUESTIONS = [
    "How much annual leave do I get and can I carry days over?",
    "When are salaries paid and when can I see my payslip?",
    "What happens to payday when the 25th is a public holiday?",
    "What is the annual leave allowance, and how many days carry over?",
    "How far in advance must I ask for leave, and who approves it?",
    "When can I see my payslip in the staff portal?",
    "How many days of annual leave do full-time staff get?",
    "Who must approve my leave request and how early?",
    "Can I carry over all my unused leave to next year?",
    "When is salary paid each month, and what if that day is a weekend?",
]


def one(client: httpx.Client, base_url: str, kb: str, question: str) -> dict[str, Any]:
    """Times one streamed completion from the request to its first content and its end."""
    body = {"model": kb, "messages": [{"role": "user", "content": question}], "stream": True}
    started = time.monotonic()
    first: float | None = None
    final: dict[str, Any] = {}
    with client.stream("POST", f"{base_url}/v1/chat/completions", json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            delta = (chunk.get("choices") or [{}])[0].get("delta", {})
            if delta.get("content") and first is None:
                first = time.monotonic() - started
            if "guardrag" in chunk:
                final = {"final_s": time.monotonic() - started, **chunk["guardrag"]}
    return {"question": question, "first_s": first, **final}


def came_early(row: dict[str, Any]) -> bool:
    """Content arrived before the final chunk (a verified sentence while the model wrote)."""
    return row["first_s"] is not None and row["first_s"] < row["final_s"] - 0.05


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:7860")
    parser.add_argument("--kb", default="handbook")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--questions", type=Path, help="a text file, one question a line")
    args = parser.parse_args()
    questions = (
        [q for q in args.questions.read_text().splitlines() if q.strip()]
        if args.questions
        else HANDBOOK_QUESTIONS
    )
    headers = {"X-API-Key": args.api_key} if args.api_key else {}
    rows = []
    with httpx.Client(timeout=600, headers=headers) as client:
        for question in questions:
            row = one(client, args.base_url, args.kb, question)
            rows.append(row)
            early = came_early(row)
            print(
                f"{row.get('route') or row.get('outcome')!s:>10}  first {row['first_s'] or 0:6.2f} s"
                f"  final {row['final_s']:6.2f} s  {'early' if early else 'at end'}  "
                f"{'withdrawn ' if row.get('withdrawn') else ''}{question}",
                flush=True,
            )
    generated = [r for r in rows if r.get("route") == "generated"]
    early_rows = [r for r in generated if came_early(r)]
    if generated:
        first = statistics.median(float(r["first_s"]) for r in generated)
        final = statistics.median(float(r["final_s"]) for r in generated)
        print(
            f"\n{len(generated)} of {len(rows)} answers generated; p50 first content "
            f"{first:.2f} s, p50 final {final:.2f} s; content before the end in "
            f"{len(early_rows)} of {len(generated)}"
        )


if __name__ == "__main__":
    main()
