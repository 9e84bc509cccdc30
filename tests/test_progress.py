"""Progress of long compares, on a terminal's stderr only (quiet when piped and from the Python API), and console lines
written whole: parallel workers never interleave inside a line (PYTHONUNBUFFERED=1 included)."""

from __future__ import annotations

import io
import json
import os
import re
import select
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import msprobe_compare
from conftest import DATA
from msprobe_compare import log

SRC = Path(msprobe_compare.__file__).resolve().parent.parent
LINE = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} \(\d+\) \[(DEBUG|INFO|WARNING|ERROR)\] ")
needs_pty = pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "200", **extra}


def _command(*argv: str) -> list[str]:
    return [sys.executable, "-m", "msprobe_compare", *argv]


def _on_terminal(cmd: list[str], cwd: Path, *, both: bool = False, env: dict[str, str] | None = None
                 ) -> tuple[int, str, str]:  # fmt: skip
    """Run `cmd` with stderr (and, with `both`, stdout) on a pseudo-terminal: (exit code, terminal text, stdout)."""
    master, slave = os.openpty()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=slave if both else subprocess.PIPE, stderr=slave, env=env or _env())
    os.close(slave)
    fds = [master] + ([proc.stdout.fileno()] if proc.stdout else [])
    got = {fd: b"" for fd in fds}
    while fds:
        ready, _, _ = select.select(fds, [], [], 5)
        for fd in ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # the terminal's other end closed
                data = b""
            if not data:
                fds.remove(fd)
            got[fd] += data
    proc.wait(timeout=120)
    os.close(master)
    out = got.get(proc.stdout.fileno(), b"") if proc.stdout else b""
    return proc.returncode, got[master].decode(), out.decode()


def _ranks(tmp_path: Path, count: int = 8) -> Path:
    """A step folder pair of `count` ranks (copies of dist_same_stat's two) with its compare.json."""
    case = tmp_path / "ranks"
    for side in ("npu", "bench"):
        src = DATA / "pytorch/dist_same_stat" / side / "step0"
        for rank in range(count):
            shutil.copytree(src / f"rank{rank % 2}", case / side / "step0" / f"rank{rank}")
    (case / "compare.json").write_text(json.dumps({"npu_path": "npu/step0", "bench_path": "bench/step0"}))
    return case


# ------------------------------------------------------------------------------------------------ whole lines


class _Writes(io.StringIO):
    """A text stream that records each write() call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def write(self, text: str) -> int:
        self.calls.append(text)
        return super().write(text)


def test_a_console_line_is_one_write():
    stream = _Writes()
    log.Console(stream).warning("two\nlines")
    (call,) = stream.calls
    assert LINE.match(call) and call.endswith("[WARNING] two_lines\n")


def test_rank_workers_lines_never_glue_unbuffered_through_a_pipe(tmp_path):
    """The symptom: with PYTHONUNBUFFERED=1 a line and its newline were two writes, so lines of two ranks glued."""
    case = _ranks(tmp_path)
    for run in range(2):
        done = subprocess.run(_command("-f", "pytorch", "compare", "-i", "compare.json", "-o", f"out{run}",
                                       "--format", "csv", "-j", "4"),
                              cwd=case, env=_env(PYTHONUNBUFFERED="1"), capture_output=True, text=True,
                              timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        lines = done.stdout.splitlines()
        assert sum("msprobe compare ends successfully." in line for line in lines) == 8
        glued = [line for line in lines if len(LINE.findall(line)) != 1 or not LINE.match(line)]
        assert not glued, glued[:3]


_LONG = """
import sys
from concurrent.futures import ProcessPoolExecutor
import multiprocessing
from msprobe_compare import log

def talk(worker):
    console = log.Console()
    for k in range(40):
        console.info(f"w{worker}.{k} " + chr(97 + worker) * 30000 + " end")

lock = multiprocessing.Lock()
log.share_lock(lock)
with ProcessPoolExecutor(4, initializer=log.share_lock, initargs=(lock,)) as pool:
    list(pool.map(talk, range(4)))
"""


def test_lines_longer_than_a_pipe_write_stay_whole_under_the_shared_lock(tmp_path):
    done = subprocess.run([sys.executable, "-c", _LONG], env=_env(PYTHONUNBUFFERED="1"), capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 160
    for line in lines:
        head = LINE.match(line)
        assert head, line[:80]
        worker, letters = line[head.end() :].split(" ")[0], line[head.end() :].split(" ")[1]
        assert letters == chr(97 + int(worker[1])) * 30000 and line.endswith(" end"), line[:80]


# --------------------------------------------------------------------------------------------------- progress


@needs_pty
def test_statistics_compare_shows_its_stages_on_a_terminal(tmp_path):
    case = DATA / "pytorch/mlp_bug_stat"
    code, tty, out = _on_terminal(_command("-f", "pytorch", "compare", "-i", "compare.json", "-o",
                                           str(tmp_path / "out")), case)  # fmt: skip
    assert code == 0 and "msprobe compare ends successfully." in out
    assert "compare: reading..." in tty and "compare: reading 0.0s, pairing..." in tty
    assert "measuring and judging..." in tty and "writing..." in tty
    assert not LINE.search(tty)  # the log lines go to stdout, not to the terminal's stderr


@needs_pty
@pytest.mark.parametrize("name", ["mlp_bug_stat", "mlp_bug_tensor"])  # the tensor bar takes over the stages line
def test_stages_line_keeps_log_lines_above_it_on_one_terminal(tmp_path, name):
    case = DATA / "pytorch" / name
    code, tty, _ = _on_terminal(_command("-f", "pytorch", "compare", "-i", "compare.json", "-o",
                                         str(tmp_path / "out")), case, both=True)  # fmt: skip
    assert code == 0 and "compare: reading..." in tty
    for found in LINE.finditer(tty):  # each log line starts a line of its own: after a newline or an erased line
        before = tty[: found.start()]
        assert found.start() == 0 or before.endswith("\n") or before.endswith(log.CLEAR), before[-80:]
    assert tty.rstrip().endswith("*" * log.BANNER_WIDTH)  # a quick compare leaves no stages line behind


@needs_pty
def test_ranks_progress_on_a_terminal_and_quiet_when_piped(tmp_path):
    case = _ranks(tmp_path, 4)
    argv = ("-f", "pytorch", "compare", "-i", "compare.json", "--format", "csv", "-j", "2")
    code, tty, out = _on_terminal(_command(*argv, "-o", "out1"), case)
    assert code == 0
    lines = tty.splitlines()
    assert [line.split(" (")[0] for line in lines] == [f"ranks compared: {k} of 4" for k in range(1, 5)], lines
    assert all(re.fullmatch(r"ranks compared: \d of 4 \(\d+\.\d s\)", line) for line in lines)
    piped = subprocess.run(_command(*argv, "-o", "out2"), cwd=case, env=_env(), capture_output=True, text=True,
                           timeout=300)  # fmt: skip
    assert piped.returncode == 0 and piped.stderr == ""


@needs_pty
def test_tensor_compare_bar_on_a_terminal(tmp_path):
    case = DATA / "pytorch/mlp_bug_tensor"
    code, tty, _ = _on_terminal(_command("-f", "pytorch", "compare", "-i", "compare.json", "-o",
                                         str(tmp_path / "out")), case)  # fmt: skip
    assert code == 0
    assert re.search(r"API/Module Item Compare Process: 100% \|#{30}\|", tty)


@needs_pty
def test_kernel_compare_bar_on_a_terminal(tmp_path):
    case = DATA / "ms_kernel/npy"
    code, tty, _ = _on_terminal(_command("-f", "mindspore", "compare", "-i", "compare.json", "-o",
                                         str(tmp_path / "out")), case)  # fmt: skip
    assert code == 0
    assert re.search(r"rank 0 step 0: 100% \|#{30}\| \d+/\d+", tty)


@needs_pty
def test_python_api_is_quiet_on_a_terminal(tmp_path):
    probe = f"import msprobe_compare; msprobe_compare.compare_json('compare.json', {str(tmp_path / 'out')!r})"
    code, tty, out = _on_terminal([sys.executable, "-c", probe], DATA / "pytorch/mlp_bug_tensor")
    assert code == 0 and tty == "" and out == ""


def test_stages_line_stays_after_a_long_compare_and_goes_after_a_quick_one(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for keep, stays in ((0.0, True), (3600.0, False)):
        monkeypatch.setattr(log, "KEEP_STAGES_S", keep)
        stream = Terminal()
        line = log.StatusLine(stream=stream)
        line.enter("reading")
        line.enter("writing")
        line.close()
        text = stream.getvalue()
        assert text.startswith(log.CLEAR + "compare: reading...")
        if stays:
            assert re.search(r"\x1b\[Kcompare: reading \d\.\ds, writing \d\.\ds\n\Z", text), repr(text)
        else:
            assert text.endswith("writing..." + log.CLEAR), repr(text)
        assert log._live_line() is None
        unused = Terminal()
        log.StatusLine(stream=unused).close()  # a compare that entered no stage (step folders): nothing drawn
        assert unused.getvalue() == ""
