"""A command's start-up without CPython's cyclic garbage collector.

Before its first question a command builds a few hundred thousand long-lived objects (modules,
the pipeline, the guards). The collector scans them again and again while they are built, and
all of them once more at exit, and frees nothing: `guardrag ask` spent a fifth of its time
there (docs/BENCHMARKS.md), and the demo (`app.py`) a sixth of its start. So the CLI's `main`
and `app.py` call `pause()` first, and a command or the demo calls `resume()` once its
long-lived objects exist: they are set aside for good (`gc.freeze`: later collections skip
them) and collection is back on for the work itself. At exit nothing is collected; atexit
handlers still run, and the operating system takes the memory back.
"""

from __future__ import annotations

import atexit
import gc


def pause() -> None:
    """Collector off until `resume`, and no collection at exit."""
    gc.disable()
    atexit.register(gc.freeze)  # registered first, so it runs after every other handler


def resume() -> None:
    """Freeze what exists and collect again; a no-op unless `pause` turned collection off
    (under a test runner, which calls the commands without `main`, nothing changes)."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()
