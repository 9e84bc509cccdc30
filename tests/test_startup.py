"""Start-up: a small statistics compare imports only what it uses and runs no fast-path self-check.

Behaviour, not timing (bench/start.py measures the time): the modules a run leaves in `sys.modules` of a fresh
interpreter, and the bytes it writes, which must be those of a run through the checked fast paths.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import DATA

CASE = DATA / "pytorch" / "mlp_bug_stat"

# Modules a csv compare of one statistics pair does not need (each costs start-up time when imported; shutil, with
# bz2 and lzma, would come with argparse's terminal width if cli.py did not measure it itself).
NOT_NEEDED = (
    "ray", "openpyxl", "yaml", "threadpoolctl", "multiprocessing", "concurrent.futures.process", "shutil", "bz2",
    "lzma", "shlex", "numpy.char", "numpy.strings",
    "concurrent.futures.thread", "socket", "tempfile", "importlib.resources", "zipfile", "logging",
    "msprobe_compare._tensorkernel", "msprobe_compare.load.tensors", "msprobe_compare.load.parallel_tensors",
    "msprobe_compare.load.pt", "msprobe_compare.load.pt_pickle", "msprobe_compare.load.zipread",
    "msprobe_compare.load.npy", "msprobe_compare.load.tensor_files",
    # our modules of other modes and options: tensor mode, MindSpore graph mode, --ray, merge_result, layouts,
    # -f/-am/-cm/-dm/-lm, xlsx and html output
    "msprobe_compare.measure.tensor_rows", "msprobe_compare.measure.tensor_compare", "msprobe_compare.measure.tensor_io",
    "msprobe_compare.render.progress", "msprobe_compare.load.kernel_dump",
    "msprobe_compare.distribute", "msprobe_compare.merge", "msprobe_compare.load.parallel_layout",
    "msprobe_compare.pair.parallel", "msprobe_compare.pair.fuzzy", "msprobe_compare.pair.api_mapping",
    "msprobe_compare.pair.cell_mapping", "msprobe_compare.pair.layer_mapping", "msprobe_compare.pair.mapping_file",
    "msprobe_compare.pair.spans", "msprobe_compare.render.xlsx", "msprobe_compare.render.html",
    "msprobe_compare.render.report_script", "html", "base64",
)  # fmt: skip

_PROBE = """
import contextlib, io, json, sys
from msprobe_compare.cli import main
from msprobe_compare import floattext
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    code = main(["-f", "pytorch", "compare", "-i", "compare.json", "-o", sys.argv[1], "-s", "--format", "csv"])
import gc
print(json.dumps({"code": code, "modules": sorted(sys.modules), "checks": sorted(floattext._VERDICTS),
                  "gc": gc.isenabled()}))
"""


def _fresh_run(out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(out)], cwd=CASE, env=env, capture_output=True,
                          text=True, timeout=120, check=True)  # fmt: skip
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _dependencies_load() -> set[str]:
    """The modules a fresh interpreter holds after importing only our runtime dependencies: not ours to avoid (numpy
    1.24 imports numpy.random, and with it base64 and hmac, where numpy 2 does so lazily)."""
    probe = "import json, sys, numpy, orjson; print(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_small_csv_compare_imports_only_what_it_needs(tmp_path: Path) -> None:
    run = _fresh_run(tmp_path / "out")
    assert run["code"] == 0
    loaded = set(run["modules"])
    assert "msprobe_compare.render.flat" in loaded  # the probe did reach the writers
    ours = loaded - _dependencies_load()
    assert sorted(m for m in NOT_NEEDED if m in ours) == []
    assert run["checks"] == []  # 103 rows: too few to pay for any fast path's check (floattext.worth)
    assert run["gc"] is True  # paused by cli.py while it imports, and on again


def test_small_compare_writes_the_bytes_of_the_checked_fast_paths(tmp_path: Path, run_cli) -> None:
    fresh = _fresh_run(tmp_path / "fresh")
    assert fresh["code"] == 0
    # in the tests, floattext.BULK_MIN is 0 (conftest): the same compare through the checked orjson paths
    inproc = run_cli(CASE, "pytorch", "-s", "--format", "csv", out_dir=tmp_path / "inproc")
    assert inproc.code == 0
    (ours,) = (tmp_path / "fresh").glob("compare_result_*.csv")
    assert ours.read_bytes() == inproc.one("compare_result_*.csv").read_bytes()


def test_the_cli_measures_the_terminal_width_as_shutil_does(monkeypatch) -> None:
    import shutil

    from msprobe_compare.cli import _terminal_columns

    for columns in ("57", "0", "-3", "wide", None):
        if columns is None:
            monkeypatch.delenv("COLUMNS", raising=False)
        else:
            monkeypatch.setenv("COLUMNS", columns)
        assert _terminal_columns() == shutil.get_terminal_size().columns


def test_the_command_writes_what_main_writes_in_process(tmp_path: Path, run_cli) -> None:
    # `python -m msprobe_compare` calls main() without argv: it freezes the collector's view of the imports first
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = tmp_path / "command"
    proc = subprocess.run([sys.executable, "-m", "msprobe_compare", "-f", "pytorch", "compare", "-i", "compare.json",
                           "-o", str(out), "-s", "--format", "csv"], cwd=CASE, env=env, capture_output=True,
                          timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    inproc = run_cli(CASE, "pytorch", "-s", "--format", "csv", out_dir=tmp_path / "inproc")
    (ours,) = out.glob("compare_result_*.csv")
    assert ours.read_bytes() == inproc.one("compare_result_*.csv").read_bytes()


def test_importing_the_cli_leaves_the_collector_as_it_was() -> None:
    probe = (
        "import gc; gc.freeze(); frozen = gc.get_freeze_count(); gc.disable(); import msprobe_compare.cli; "
        "print(gc.isenabled(), gc.get_freeze_count() > frozen // 2)"
    )  # a caller's frozen objects stay frozen
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120,
                         check=True).stdout.split()  # fmt: skip
    assert out == ["False", "True"]
