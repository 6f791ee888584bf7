"""Reading JSONL files line by line, with a located message for every bad line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def read_objects(path: Path) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """(line number, object) for each non-blank line, or (line number, "file:line: problem")
    for a line that is not a JSON object; the caller decides whether to stop or skip."""
    with path.open(encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                yield number, f"{path}:{number}: not valid JSON ({exc.msg})"
                continue
            except RecursionError:  # a line nested too deep for the parser
                yield number, f"{path}:{number}: JSON nested too deeply"
                continue
            if not isinstance(row, dict):
                yield number, f"{path}:{number}: expected a JSON object"
                continue
            yield number, row
