"""USD prices per million tokens by model name; unknown and local models cost 0 (tokens still counted)."""

from __future__ import annotations

PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    # model: (prompt, completion)
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
}


def estimate_cost(model: str, prompt_tokens: int, completion_tokens: int) -> float:
    prompt_price, completion_price = PRICES_PER_MTOK.get(model, (0.0, 0.0))
    return round((prompt_tokens * prompt_price + completion_tokens * completion_price) / 1e6, 8)
