"""The command ends without the interpreter's teardown once its compare is done (runtime.exit_now): its exit codes,
its output through a pipe and its result files stay what a normal exit gives; in-process callers keep nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import msprobe_compare
from msprobe_compare import runtime

SRC = Path(msprobe_compare.__file__).parent.parent
EXAMPLE = SRC.parent / "examples" / "pytorch_mlp_bug_stat"


def test_keep_until_exit_only_inside_the_command():
    runtime.keep_until_exit(object())  # outside the command: not kept
    assert runtime._KEPT is None
    kept = object()
    with runtime.exiting_now():
        runtime.keep_until_exit(kept)
        assert runtime._KEPT == [kept]
    with pytest.raises(RuntimeError), runtime.exiting_now():  # an exception ends the process the usual way
        raise RuntimeError("boom")
    assert runtime._KEPT is None


@pytest.mark.parametrize("fail_on, code", [(None, 0), ("warning", 3)])
def test_command_exit_code_output_and_files(tmp_path, fail_on, code):
    if not EXAMPLE.is_dir():
        pytest.skip("the example dumps are not in this checkout")
    cmd = [
        sys.executable,
        "-m",
        "msprobe_compare",
        "-f",
        "pytorch",
        "compare",
        "-i",
        str(EXAMPLE / "compare.json"),
        "-o",
        str(tmp_path),
        "-s",
        "--format",
        "csv",
    ]
    if fail_on:
        cmd += ["--fail-on", fail_on]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=EXAMPLE,
                          env={**os.environ, "PYTHONPATH": str(SRC)})  # fmt: skip
    assert done.returncode == code, done.stderr[-2000:]
    text = done.stdout + done.stderr
    assert "Compare result is" in text and "Root cause" in text and "msprobe compare ends successfully." in text
    assert text.endswith("\n") and ("--fail-on warning: failed" in text.splitlines()[-1]) == bool(fail_on), text[-500:]
    (csv,) = tmp_path.glob("compare_result_*.csv")
    lines = csv.read_bytes().split(b"\r\n")
    assert len(lines) == 105 and lines[-1] == b""  # header, 103 rows, the final line end: the file is complete
