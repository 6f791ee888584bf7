"""What checking one draft sentence costs while the model writes (guardrag/faces/sentences.py).

    python scripts/bench_sentence_gate.py [--sentences 15]

Over the sample KB, takes the passages rerank gives a question that needs generation and
checks `--sentences` different sentences drawn from the top passage, each with a fresh gate
(the passages' sentences embedded again) and with one gate (the passages embedded once, as
for the second and later sentences of a draft). Prints medians and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from functools import partial
from pathlib import Path

from _bench import SAMPLE_FAQ, machine, ratio, summary, time_ms

from guardrag.config.settings import Settings
from guardrag.core.embedder import load_embedder
from guardrag.core.kb.ingest import ingest
from guardrag.core.store.server import ServerStore
from guardrag.faces.sentences import SentenceGate
from guardrag.faces.service import Guardrag, build_services

QUESTION = "Can I pay my electricity bill?"
KINDS = ["electricity", "water", "telco", "broadband", "insurance", "gas", "internet", "TV"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=15)
    args = parser.parse_args()
    embedder = load_embedder()
    store = ServerStore(location=":memory:")
    ingest(store, embedder, "kinetic", [SAMPLE_FAQ], description="Kinetic Wallet")
    settings = Settings(data_dir=Path(tempfile.mkdtemp()), default_kb="kinetic", llm_local=False)
    bot = Guardrag(build_services(settings, store=store, embedder=embedder), settings)
    _, state = bot.run(QUESTION, "kinetic", knobs={"use_llm": False})
    passages = state["candidates"][:5]
    sentences = [
        f"Tap Bills, choose {KINDS[n % len(KINDS)]} as category {n}, select your biller and "
        "confirm with your PIN [1]."
        for n in range(args.sentences)
    ]

    def gate() -> SentenceGate:
        fresh = SentenceGate(bot.services, QUESTION, lambda _: None)
        fresh.passages = passages
        return fresh

    def timed(checker: SentenceGate, sentence: str) -> float:
        return time_ms(partial(checker._verified, sentence), repeat=1, warmup=0)[0]

    shared = gate()
    shared._verified("Bill payments are free [1].")  # the draft's first sentence
    remembered = [timed(shared, s) for s in sentences]
    fresh = [timed(gate(), s) for s in sentences]
    print(machine())
    print(f"{len(passages)} passages, {len(sentences)} sentences")
    print(f"passages embedded for each sentence: {summary(fresh)}")
    print(f"passages remembered by the gate:     {summary(remembered)}")
    median = statistics.median
    print(f"remembered / fresh: {ratio(median(remembered), median(fresh), 'of the fresh time')}")


if __name__ == "__main__":
    main()
