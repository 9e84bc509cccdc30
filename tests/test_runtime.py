"""runtime: process-level helpers."""

from __future__ import annotations

import gc
import platform
import sys

from msprobe_compare.runtime import gc_paused, tune_malloc


def test_tune_malloc_takes_effect_on_glibc_only() -> None:
    expected = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert tune_malloc() is expected


def test_gc_paused_restores_the_collector() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
