"""Shared test helpers: fixture cases and an in-process CLI runner."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from msprobe_compare import floattext
from msprobe_compare.cli import main

DATA = Path(__file__).parent / "data"


def extract_archive(archive: Path, root: Path) -> Path:
    """One of our own test-data archives (tar.xz) unpacked into `root`, with the "data" extraction filter where this
    Python has it."""
    import tarfile

    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(root, filter="data")
        else:  # Python without extraction filters: our own archive
            tar.extractall(root)
    return root


@pytest.fixture(autouse=True)
def _native_switch_restored() -> Iterator[None]:
    """MSPROBE_NATIVE as the run set it, again after each test (a test of the C code sets it: native_helpers)."""
    old = os.environ.get("MSPROBE_NATIVE")
    yield
    if old is None:
        os.environ.pop("MSPROBE_NATIVE", None)
    else:
        os.environ["MSPROBE_NATIVE"] = old


@pytest.fixture(autouse=True)
def _checked_fast_paths_for_any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process runs take the checked orjson fast paths however small the table, so the tests keep covering
    them; outside the tests a run smaller than the check's sample takes the exact paths (floattext.worth)."""
    monkeypatch.setattr(floattext, "BULK_MIN", 0)


@dataclass
class Run:
    code: int
    out: str
    err: str
    out_dir: Path

    def files(self, pattern: str) -> list[Path]:
        return sorted(self.out_dir.glob(pattern))

    def one(self, pattern: str) -> Path:
        found = self.files(pattern)
        assert len(found) == 1, f"expected one {pattern} in {self.out_dir}, found {found}"
        return found[0]


@pytest.fixture
def run_cli(tmp_path, capfd):
    """Run `msprobe -f FW compare -i compare.json -o OUT ...` from `cwd` (a case folder)."""

    def _run(cwd: Path, framework: str, *flags: str, out_dir: Path | None = None,
             input_name: str = "compare.json") -> Run:  # fmt: skip
        out = out_dir or (tmp_path / "out")
        old = Path.cwd()
        os.chdir(cwd)
        try:
            code = main(["-f", framework, "compare", "-i", input_name, "-o", str(out), *flags])
        finally:
            os.chdir(old)
        captured = capfd.readouterr()
        return Run(code, captured.out, captured.err, out)

    return _run


# The fast subset (`pytest -m "not slow"`, CONTRIBUTING.md): these modules are the slow ones (differential runs of
# generated inputs, real dumps of other projects, fresh virtualenvs, the browser); each module, not each test, so
# that a new test of a slow module is slow too.
SLOW_MODULES = frozenset(
    {
        "test_coexist.py",
        "test_external.py",
        "test_bench_run_all.py",
        "test_bench_limits.py",
        "test_ray.py",
        "test_rowwalk.py",
        "test_stream.py",
        "test_fuzz_parsers.py",
        "test_layouts.py",
        "test_tensorkernel.py",
        "test_tensor_metrics.py",
        "test_html_browser.py",
        "test_float_texts.py",
        "test_noise.py",
        "test_noise_wide.py",
        "test_noise_ms.py",
        "test_align_impl.py",
        "test_hostile.py",
        "test_docs.py",
        "test_legacy_parse.py",
        "test_multirank.py",
        "test_parallel.py",
        "test_fast_exit.py",
        "test_startup.py",
        "test_hostile_native.py",
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
