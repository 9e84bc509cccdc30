"""Optional C accelerators: built when a C compiler is present, pure-Python fallbacks otherwise.

Every native module has a pure-Python twin that gives the same results (tests run both). A build failure is not
fatal (`optional=True`); `msprobe_compare.native.status()` tells which modules are in use, and CI sets
MSPROBE_REQUIRE_NATIVE=1 so a missing module fails the tests there instead of silently running the slow path.
"""

from pathlib import Path

from setuptools import Extension, setup

_FLAGS = ["-O3", "-std=c99", "-fno-strict-aliasing", "-ffp-contract=off", "-Wall"]
_NATIVE = ("_rowwalk", "_tensorkernel", "_legacyparse", "_csvrows", "_sharednames", "_noise")

setup(
    ext_modules=[
        Extension(f"msprobe_compare.{name}", [f"src/msprobe_compare/{name}.c"], extra_compile_args=_FLAGS,
                  optional=True)  # fmt: skip
        for name in _NATIVE
        if Path(f"src/msprobe_compare/{name}.c").is_file()
    ],
)
