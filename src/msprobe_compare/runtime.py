"""Process-level helpers shared by the stages."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector. A compare makes millions of acyclic objects (rows, cell texts)
    that each collection would rescan with the whole large heap (over a quarter of the reading time of a
    1M-row dump); reference counting still frees everything."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
