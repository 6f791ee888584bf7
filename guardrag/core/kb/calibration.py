"""Self-calibration of a knowledge base at ingest: its verbatim-answer threshold, from its own
content, with no golden set and no hand tuning.

KBs differ in how close their entries sit to each other (the best *other* entry for one of a
12-entry gym FAQ's own questions scores ~0.30, for a 68-entry health FAQ ~0.54), so one fixed
threshold is strict on small, well-separated KBs and loose on dense ones. Each FAQ entry's
question and a few LLM-free perturbations of it (content words only, a word dropped, a typo, a
random 60% of the words) are searched like a customer's question, with the entry itself (and
any entry with the same answer) held out: the best remaining score is what an in-domain question
the KB cannot answer looks like. The threshold is a fixed quantile of those held-out scores.
Why a quantile, and why only the threshold is calibrated this way: docs/RESULTS.md.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from guardrag.core.store import bm25
from guardrag.core.text import content_words

if TYPE_CHECKING:  # types only: `guardrag kbs` reads a Calibration without numpy or httpx
    from guardrag.core.embedder import Embedder
    from guardrag.core.kb.stats import KBStats
    from guardrag.core.rerank import Reranker
    from guardrag.core.store import VectorStore

#: Which held-out score becomes the threshold (0.3 / 0.4 / 0.5 / 0.7 gave 314/14, 308/13,
#: 301/13, 269/10 right/wrong summed over the tuning KBs).
QUANTILE = 0.4
#: Entries probed at most (drawn at random, seeded by the snapshot): enough for a stable
#: quantile, and a bounded cost whatever the KB's size.
MAX_PROBED_ENTRIES = 120
#: Candidates read per probe before the held-out entries are set aside.
PROBE_HITS = 12
#: Fewer probes than this and the quantile is noise: the KB keeps the default threshold.
MIN_PROBES = 8
KEY = "calibration"


@dataclass(frozen=True)
class Calibration:
    """What a KB learnt about itself; stored with the snapshot (KBInfo.extra["calibration"])."""

    faq_answer_threshold: float
    probes: int  # held-out self-probes, or golden cases
    scorer: str = "fused"  # the reranker whose scores the threshold applies to
    method: str = "held-out self-probes"  # or "golden set <file>" (guardrag eval --calibrate)
    quantile: float | None = None
    held_out_median: float | None = None
    held_out_p90: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_extra(cls, extra: dict[str, Any]) -> Calibration | None:
        data = extra.get(KEY)
        if not isinstance(data, dict):
            return None
        try:
            return cls(**data)
        except TypeError:  # written by another version: recalibrated on the next ingest
            return None


def perturbations(question: str, rng: random.Random) -> list[str]:
    """The question and four ways a customer might garble it."""
    words = question.rstrip("?.! ").split()
    found = [question]
    if content := content_words(question):
        found.append(" ".join(content))
    if len(words) > 3:
        drop = rng.randrange(len(words))
        found.append(" ".join(w for k, w in enumerate(words) if k != drop))
    if long := [k for k, w in enumerate(words) if len(w) >= 5]:
        k = rng.choice(long)
        found.append(" ".join(_typo(w, rng) if j == k else w for j, w in enumerate(words)))
    if len(words) > 4:
        keep = sorted(rng.sample(range(len(words)), max(2, int(0.6 * len(words)))))
        found.append(" ".join(words[k] for k in keep))
    return found


def _typo(word: str, rng: random.Random) -> str:
    i = rng.randrange(1, len(word) - 2)
    return word[:i] + word[i + 1] + word[i] + word[i + 2 :]


def calibrate(
    store: VectorStore,
    kb: str,
    snapshot_id: str,
    embedder: Embedder,
    reranker: Reranker,
    stats: KBStats,
    faqs: Sequence[tuple[str, str, str]],
) -> Calibration | None:
    """The KB's calibration from its FAQ entries, (point id, question, answer) each, searched
    in the published snapshot; None for a KB with too few FAQ entries (documents only)."""
    rng = random.Random(snapshot_id)
    chosen = sorted(faqs)
    if len(chosen) > MAX_PROBED_ENTRIES:
        chosen = sorted(rng.sample(chosen, MAX_PROBED_ENTRIES))
    probes = [(pid, answer, text) for pid, q, answer in chosen for text in perturbations(q, rng)]
    if len(probes) < MIN_PROBES:
        return None
    vectors = embedder.embed([text for _, _, text in probes])
    held_out = []
    for (pid, answer, text), vector in zip(probes, vectors, strict=True):
        hits = store.search(kb, vector.tolist(), bm25.encode_query(text), limit=PROBE_HITS)
        others = [h for h in hits if h.id != pid and h.payload.get("answer") != answer]
        if others:
            held_out.append(max(reranker.score(text, others, stats)))
    if len(held_out) < MIN_PROBES:
        return None
    cuts = statistics.quantiles(held_out, n=20, method="inclusive")  # 5% steps
    return Calibration(
        faq_answer_threshold=round(cuts[int(QUANTILE * 20) - 1], 4),
        quantile=QUANTILE,
        probes=len(held_out),
        held_out_median=round(statistics.median(held_out), 4),
        held_out_p90=round(cuts[17], 4),
        scorer=reranker.name,
    )
