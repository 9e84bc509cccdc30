"""Hostile and broken inputs (issue 15): each case is one [ERROR] line naming the file (or a warning when the file is
optional), no traceback, no result file or a complete result set, bounded peak memory and time.

Runs go through a subprocess wrapper that reports the peak RSS of the compare process alone."""

from __future__ import annotations

import csv
import errno
import json
import os
import shutil
import socket
import subprocess
import struct
import sys
import time
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from conftest import DATA

SRC = Path(__file__).resolve().parent.parent / "src"
CASE = DATA / "pytorch" / "mlp_bug_stat"
RSS_MB = 400  # peak RSS of any run here (the small fixture compare itself stays near 100 MB)
SECONDS = 60
RESULT_KINDS = ("compare_result_", "compare_report_", "advisor_")

# runs the command as a child and reports that child's own peak RSS (kB on Linux)
WRAPPER = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
           "print('MAXRSS', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
           "sys.exit(r.returncode)")  # fmt: skip


@dataclass
class Outcome:
    code: int
    out: str
    err: str
    rss_mb: float
    seconds: float
    out_dir: Path

    @property
    def errors(self) -> list[str]:
        return [line for line in (self.out + self.err).splitlines() if "[ERROR]" in line]

    @property
    def warnings(self) -> list[str]:
        return [line for line in (self.out + self.err).splitlines() if "[WARNING]" in line]

    def results(self) -> list[str]:
        return sorted(p.name for p in self.out_dir.iterdir()) if self.out_dir.exists() else []


def compare(case: Path, *flags: str, native: bool = True, framework: str = "pytorch", out: Path | None = None,
            input_name: str = "compare.json", timeout: float = SECONDS) -> Outcome:  # fmt: skip
    out = out or case.parent / "out"
    env = dict(os.environ, PYTHONPATH=str(SRC), MSPROBE_NATIVE="1" if native else "0")
    env.pop("MSPROBE_DEBUG", None)
    cmd = [sys.executable, "-c", WRAPPER, sys.executable, "-m", "msprobe_compare", "-f", framework, "compare",
           "-i", input_name, "-o", str(out), *flags]  # fmt: skip
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=case, env=env, capture_output=True, text=True, timeout=timeout)
    seconds = time.monotonic() - start
    rss = [line for line in proc.stderr.splitlines() if line.startswith("MAXRSS ")]
    return Outcome(proc.returncode, proc.stdout, proc.stderr, int(rss[-1].split()[1]) / 1024, seconds, out)


def assert_refused(run: Outcome, *fragments: str) -> None:
    """Exit 1, one [ERROR] line holding every fragment, no traceback, no result file, bounded RSS and time."""
    assert run.code == 1, run.out + run.err
    assert len(run.errors) == 1, run.out + run.err
    for fragment in fragments:
        assert fragment in run.errors[0], run.errors[0]
    assert "Traceback" not in run.out + run.err and "internal error" not in run.out + run.err
    assert run.results() == [], run.results()
    assert run.rss_mb < RSS_MB and run.seconds < SECONDS, (run.rss_mb, run.seconds)


def assert_complete(run: Outcome) -> None:
    """Exit 0, no traceback, the whole default result set (xlsx, html, advisor) under one stamp, bounded."""
    assert run.code == 0, run.out + run.err
    assert "Traceback" not in run.out + run.err and not run.errors, run.out + run.err
    names = run.results()
    assert len(names) == 3 and all(any(n.startswith(k) for n in names) for k in RESULT_KINDS), names
    assert len({n.rsplit("_", 1)[1].split(".")[0] for n in names}) == 1, names
    assert run.rss_mb < RSS_MB and run.seconds < SECONDS, (run.rss_mb, run.seconds)


@pytest.fixture
def case(tmp_path) -> Path:
    dst = tmp_path / "case"
    shutil.copytree(CASE, dst, ignore=shutil.ignore_patterns("expected"))
    write_config(dst)
    return dst


def write_config(case: Path, **extra) -> None:
    doc = {"npu_path": str(case / "npu/step0/rank/dump.json"), "bench_path": str(case / "bench/step0/rank/dump.json"),
           "stack_path": str(case / "npu/step0/rank/stack.json"), "is_print_compare_log": True, **extra}  # fmt: skip
    (case / "compare.json").write_text(json.dumps(doc))


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


NATIVE = pytest.mark.parametrize("native", [True, False], ids=["native", "python"])


# -- 1. nesting depth -----------------------------------------------------------------------------------------------
@NATIVE
@pytest.mark.parametrize("depth", [600, 5000])
def test_deep_compare_json(case, native, depth):
    text = (case / "compare.json").read_text()
    (case / "compare.json").write_text(text[:-1] + f', "x": {nested(depth)}}}')
    assert_refused(compare(case, native=native), "compare.json", "nested deeper than 512 levels")


@NATIVE
def test_deep_stack_json(case, native):
    (case / "npu/step0/rank/stack.json").write_text(f'{{"x": {nested(3000)}}}')
    assert_refused(compare(case, "-s", native=native), "stack.json", "nested deeper than 512 levels")


@NATIVE
@pytest.mark.parametrize("text", [f'{{"x": {nested(3000)}}}', '{"x": ', "[1, 2]"], ids=["deep", "broken", "array"])
def test_bad_construct_json_is_a_warning(case, native, text):
    (case / "npu/step0/rank/construct.json").write_text(text)
    run = compare(case, native=native)
    assert_complete(run)
    assert any("construct.json" in w for w in run.warnings), run.out


@NATIVE
@pytest.mark.parametrize("depth", [450, 600, 5000])
@pytest.mark.parametrize("nan", [False, True], ids=["plain", "nan"])
@pytest.mark.parametrize("indent", [1, None], ids=["indent", "compact"])
def test_deep_dump_entry(case, native, depth, nan, indent):
    path = case / "npu/step0/rank/dump.json"
    doc = json.loads(path.read_text())
    text = json.dumps(doc, indent=indent)
    deep = '"Deep.0.forward": {' + ('"x": NaN, ' if nan else "") + f'"input_args": {nested(depth)}}}, '
    path.write_text(text.replace('"data": {', '"data": {' + deep, 1))
    assert_refused(compare(case, native=native), "npu/step0/rank/dump.json",
                   "entry 'Deep.0.forward' is nested deeper than 400 levels")  # fmt: skip


@NATIVE
def test_deep_dump_header_key(case, native):
    path = case / "bench/step0/rank/dump.json"
    path.write_text(path.read_text().rstrip()[:-1] + f', "extra": {nested(2000)}}}')
    assert_refused(compare(case, native=native), "bench/step0/rank/dump.json", "'extra' is nested deeper than 512")


# -- 2. special files and links -------------------------------------------------------------------------------------
def _fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def _socket(path: Path) -> socket.socket:
    path.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    return sock


@pytest.mark.parametrize("which", ["compare.json", "npu/step0/rank/dump.json", "npu/step0/rank/stack.json",
                                   "dm.yaml"])  # fmt: skip
def test_fifo_inputs_are_refused(case, which):
    flags = ("-s",)
    if which == "dm.yaml":
        flags += ("-dm", str(case / "dm.yaml"))
    _fifo(case / which)
    assert_refused(compare(case, *flags, timeout=30), which, "FIFO")


def test_socket_and_device_inputs_are_refused(case):
    sock = _socket(case / "npu/step0/rank/stack.json")
    try:
        assert_refused(compare(case, "-s"), "stack.json", "socket")
    finally:
        sock.close()
    write_config(case, npu_path="/dev/zero")
    assert_refused(compare(case), "/dev/zero", "not a regular file")


def test_fifo_construct_json_is_a_warning(case):
    _fifo(case / "npu/step0/rank/construct.json")
    run = compare(case, timeout=30)
    assert_complete(run)
    assert any("construct.json" in w and "FIFO" in w for w in run.warnings), run.out


@pytest.mark.parametrize("which", ["compare.json", "npu/step0/rank/dump.json", "npu/step0/rank/stack.json",
                                   "npu/step0/rank/construct.json", "dm.yaml"])  # fmt: skip
def test_one_symlink_rule(case, which):
    real = case / (which + ".real")
    target = case / which
    if which == "dm.yaml":
        target.write_text("{}\n")
    target.rename(real)
    target.symlink_to(real)
    flags = ("-s", "-dm", str(case / "dm.yaml")) if which == "dm.yaml" else ("-s",)
    run = compare(case, *flags)
    if which.endswith("construct.json"):  # optional: ignored with a warning
        assert_complete(run)
        assert any("construct.json" in w and "symbolic link" in w for w in run.warnings), run.out
    else:
        assert_refused(run, which, "symbolic link")


def test_symlinked_folders_on_the_way_are_accepted(case, tmp_path):
    link = tmp_path / "linked"
    link.symlink_to(case)
    write_config(case)
    doc = json.loads((case / "compare.json").read_text())
    doc = {k: v.replace(str(case), str(link)) if isinstance(v, str) else v for k, v in doc.items()}
    (case / "compare.json").write_text(json.dumps(doc))
    assert_complete(compare(link))


# -- 3. lone surrogates -------------------------------------------------------------------------------------------
@NATIVE
def test_lone_surrogate_names_pair_and_are_written(case, native):
    for side in ("npu", "bench"):
        path = case / f"{side}/step0/rank/dump.json"
        text = path.read_text()
        path.write_text(text.replace('"Functional.linear.0.forward"', '"Functional.linear\\ud800.0.forward"', 1))
    run = compare(case, "--format", "xlsx,html,csv,jsonl", native=native)
    assert run.code == 0, run.out + run.err
    assert "Traceback" not in run.out + run.err
    csv = next(run.out_dir.glob("compare_result_*.csv")).read_text(encoding="utf-8")
    rows = [line for line in csv.splitlines() if "Functional.linear\ufffd.0.forward.input.0" in line]
    assert len(rows) == 1 and rows[0].count("Functional.linear\ufffd.0.forward.input.0") == 2, rows  # paired
    jsonl = next(run.out_dir.glob("compare_result_*.jsonl")).read_text(encoding="utf-8")
    assert "Functional.linear\ufffd.0.forward" in jsonl


# -- 4. tensor files ------------------------------------------------------------------------------------------------
TENSOR_CASE = DATA / "pytorch" / "mlp_bug_tensor"


@pytest.fixture
def tensor_case(tmp_path) -> Path:
    dst = tmp_path / "tcase"
    shutil.copytree(TENSOR_CASE, dst, ignore=shutil.ignore_patterns("expected"))
    write_config(dst)
    return dst


def _p_str(text: str) -> bytes:
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def _p_int(value: int) -> bytes:
    """LONG4: any size, as pickle writes big ints (no digit limit applies to reading it)."""
    raw = value.to_bytes((value.bit_length() + 8) // 8 or 1, "little", signed=True)
    return b"\x8b" + struct.pack("<I", len(raw)) + raw


def _pickle(numel: int, shape: tuple[int, ...], stride: tuple[int, ...], offset: int = 0) -> bytes:
    glob = b"ctorch._utils\n_rebuild_tensor_v2\n"
    record = b"(" + _p_str("storage") + b"ctorch\nFloatStorage\n" + _p_str("0") + _p_str("cpu") + _p_int(numel) + b"t"
    hooks = b"ccollections\nOrderedDict\n)R"
    args = (b"(" + record + b"Q" + _p_int(offset) + b"(" + b"".join(map(_p_int, shape)) + b"t" + b"("
            + b"".join(map(_p_int, stride)) + b"t" + b"\x89" + hooks + b"t")  # fmt: skip
    return b"\x80\x02" + glob + args + b"R."


def _write_pt(path: Path, pkl: bytes, storage: bytes, *, deflate: bool = False, twice: str | None = None) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", pkl)
        archive.writestr("archive/byteorder", b"little")
        archive.writestr("archive/data/0", storage)
        if twice is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # zipfile warns about the duplicate name
                archive.writestr(twice, storage[::-1] if twice.endswith("data/0") else pkl)
        archive.writestr("archive/version", b"3\n")


def _rows(run: Outcome) -> dict[str, dict[str, str]]:
    path = next(run.out_dir.glob("compare_result_*.csv"))
    with open(path, newline="", encoding="utf-8") as f:
        return {row["NPU Name"]: row for row in csv.DictReader(f)}


_BASELINE: dict[str, dict[str, dict[str, str]]] = {}


def _baseline(tmp: Path) -> dict[str, dict[str, str]]:
    """The rows of the untouched tensor case (computed once per session)."""
    if "rows" not in _BASELINE:
        case = tmp / "baseline"
        shutil.copytree(TENSOR_CASE, case, ignore=shutil.ignore_patterns("expected"))
        write_config(case)
        _BASELINE["rows"] = _rows(compare(case, "--format", "csv", "-c", out=tmp / "baseline_out"))
    return _BASELINE["rows"]


def _assert_row_errors(run: Outcome, broken: dict[str, str], tmp: Path) -> None:
    """A complete result set; each broken row names its problem in Err_message; every other row is as without the
    broken files."""
    assert run.code == 0, run.out + run.err
    assert "Traceback" not in run.out + run.err and "internal error" not in run.out + run.err
    assert not run.errors, run.errors
    assert run.rss_mb < RSS_MB and run.seconds < SECONDS, (run.rss_mb, run.seconds)
    rows, before = _rows(run), _baseline(tmp)
    assert rows.keys() == before.keys()
    for row_name, fragment in broken.items():
        assert fragment in rows[row_name]["Err_message"], rows[row_name]["Err_message"]
    for name in rows.keys() - broken.keys():
        assert rows[name] == before[name], name


def _tensor_file(case: Path, side: str, row: str) -> Path:
    return case / f"{side}/step0/rank/dump_tensor_data/{row}.pt"


ROW_A, ROW_B, ROW_C = ("Functional.linear.0.forward.input.0", "Functional.linear.0.forward.output.0",
                       "Functional.relu.0.forward.input.0")  # fmt: skip


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_hostile_tensor_files_are_row_errors(tensor_case, pool, monkeypatch, tmp_path):
    monkeypatch.setenv("MSPROBE_COMPARE_POOL", pool)
    values = np.arange(1024, dtype=np.float32).tobytes()
    # a shape of a 5,000-digit integer
    _write_pt(_tensor_file(tensor_case, "bench", ROW_A), _pickle(1024, (10**5000,), (1,)), values)
    # a zero-stride 10^6 x 10^6 view over 1,024 stored elements
    _write_pt(_tensor_file(tensor_case, "npu", ROW_B), _pickle(1024, (10**6, 10**6), (0, 0)), values)
    # the storage member twice (torch would read the first, zipfile the last)
    _write_pt(_tensor_file(tensor_case, "bench", ROW_C), _pickle(1024, (1024,), (1,)), values,
              twice="archive/data/0")  # fmt: skip
    run = compare(tensor_case, "--format", "csv", "-c")
    _assert_row_errors(run, {ROW_A: "int64", ROW_B: "times over", ROW_C: "ambiguous archive"}, tmp_path)


def test_deflated_bomb_is_refused_without_inflating(tensor_case, tmp_path):
    declared = 300 << 20  # 300 MB of zeros: about 300 KB deflated
    zeros = bytes(declared)
    _write_pt(_tensor_file(tensor_case, "npu", ROW_A), _pickle(declared // 4, (declared // 4,), (1,)), zeros,
              deflate=True)  # fmt: skip
    _write_pt(_tensor_file(tensor_case, "bench", ROW_A), _pickle(declared // 4, (declared // 4,), (1,)), zeros,
              deflate=True)  # fmt: skip
    del zeros
    assert _tensor_file(tensor_case, "npu", ROW_A).stat().st_size < 2 << 20
    run = compare(tensor_case, "--format", "csv", "-c")
    _assert_row_errors(run, {ROW_A: "compressed member"}, tmp_path)
    assert run.rss_mb < 250, run.rss_mb  # nothing was inflated


def test_local_header_disagreeing_with_central_directory(tensor_case, tmp_path):
    path = _tensor_file(tensor_case, "npu", ROW_C)
    values = np.arange(1024, dtype=np.float32).tobytes()
    _write_pt(path, _pickle(1024, (1024,), (1,)), values)
    raw = bytearray(path.read_bytes())
    local = raw.find(b"archive/data/0")  # the first occurrence is the local header's name
    assert raw[local - 30 : local - 26] == b"PK\x03\x04"
    raw[local : local + 14] = b"archive/data/1"
    path.write_bytes(bytes(raw))
    run = compare(tensor_case, "--format", "csv", "-c")
    _assert_row_errors(run, {ROW_C: "ambiguous archive"}, tmp_path)


# -- 5. mapping YAMLs -----------------------------------------------------------------------------------------------
def _alias_bomb(levels: int = 10, width: int = 9) -> str:
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    for k in range(1, levels):
        lines.append(f"l{k}: &l{k} [" + ", ".join([f"*l{k - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("text, fragment", [
    (_alias_bomb(), "must map a text to a text"),  # 90 aliases: within the cap, refused by its shape, never expanded
    ("a: &a [b]\n" + "".join(f"k{i}: *a\n" for i in range(200)), "more than 100 YAML aliases"),
    ("a: " + "9" * 5000 + "\n", "not valid YAML"),
    ("a: " + "[" * 3000 + "]" * 3000 + "\n", "nested too deeply"),
    ("- a\n- b\n", "must be a YAML mapping"),
    ("a: : b\n", "not valid YAML"),
    ("a: \xff\n", ""),
], ids=["bomb", "aliases", "digits", "deep", "list", "syntax", "utf8"])  # fmt: skip
def test_bad_data_mapping_is_refused_fast(case, text, fragment):
    (case / "dm.yaml").write_bytes(text.encode("utf-8") if text != "a: \xff\n" else b"a: \xff\n")
    assert_refused(compare(case, "-dm", str(case / "dm.yaml"), timeout=30), "dm.yaml", fragment)


def test_alias_bomb_in_api_and_cell_mappings(case):
    (case / "bomb.yaml").write_text("- {ms_api: Functional.add, pt_api: Functional.add, ms_args: *l9}\n"
                                    .replace("*l9", "[[1]]"))  # fmt: skip
    run = compare(case, "-am", str(case / "bomb.yaml"), framework="mindspore", timeout=30)
    assert_refused(run, "bomb.yaml", "must be a list of indices")
    (case / "bomb.yaml").write_text(_alias_bomb())
    assert_refused(compare(case, "-cm", str(case / "bomb.yaml"), framework="mindspore", timeout=30), "bomb.yaml",
                   "must map a text to a text")  # fmt: skip


# -- 6. repeated structural keys ------------------------------------------------------------------------------------
@NATIVE
@pytest.mark.parametrize("key", ["task", "level", "framework", "dump_data_dir", "data"])
@pytest.mark.parametrize("where", ["before", "after"])
@pytest.mark.parametrize("indent", [1, None], ids=["indent", "compact"])
def test_repeated_structural_key(case, native, key, where, indent):
    path = case / "npu/step0/rank/dump.json"
    doc = json.loads(path.read_text())
    value = doc.get(key, "x") if key != "data" else {}
    text = json.dumps(doc, indent=indent)
    extra = json.dumps({key: value if key != "task" else "tensor"}, indent=indent)[1:-1].strip()
    if where == "before":
        text = "{" + extra + ", " + text.lstrip()[1:]
    else:
        text = text.rstrip()[:-1] + ", " + extra + "}"
    path.write_text(text)
    assert_refused(compare(case, native=native), "npu/step0/rank/dump.json", f"'{key}' appears more than once")


@NATIVE
def test_repeated_leaf_key_last_wins_on_every_path(case, native, tmp_path):
    """Inside an entry, JSON's rule: the last of a repeated key counts, on the native and the Python walk alike."""
    path = case / "npu/step0/rank/dump.json"
    text = path.read_text()
    first = text.index('"Max": ')
    end = text.index(",", first)
    path.write_text(text[:end] + ', "Max": 12345.5' + text[end:])
    run = compare(case, "--format", "csv", "-c", native=native)
    assert run.code == 0, run.out + run.err
    assert "12345.5" in next(run.out_dir.glob("*.csv")).read_text()


# -- 8. cell limits -------------------------------------------------------------------------------------------------
def test_long_emoji_name_fits_an_excel_cell(case):
    long = "\U0001f600" * 20000
    for side in ("npu", "bench"):
        path = case / f"{side}/step0/rank/dump.json"
        path.write_text(path.read_text().replace('"Functional.linear.0.forward"', f'"Functional.{long}.0.forward"', 1))
    run = compare(case)
    assert_complete(run)
    with zipfile.ZipFile(next(run.out_dir.glob("*.xlsx"))) as book:
        sheet = book.read("xl/worksheets/sheet1.xml").decode("utf-8")
    texts = [t for t in sheet.split('<t xml:space="preserve">')[1:] if "\U0001f600" in t]
    assert texts
    for t in texts:
        cell = t.split("</t>")[0]
        assert len(cell.encode("utf-16-le")) // 2 <= 32767 and cell.endswith("...[cut]")


# -- 7. all or nothing ----------------------------------------------------------------------------------------------
def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("where", ["html", "advisor", "publish"])
def test_a_failing_write_publishes_nothing(run_cli, case, tmp_path, monkeypatch, where):
    from msprobe_compare.render import files, report

    if where == "html":
        monkeypatch.setattr(report, "write_html", _no_space)  # the disk is full after the xlsx
    elif where == "advisor":
        monkeypatch.setattr(report.story, "advisor_note", _no_space)
    else:  # publishing fails at the second file: the first, already published, is removed again
        real, calls = files._publish, []

        def publish(tmp, final):
            calls.append(final)
            if len(calls) == 2:
                _no_space()
            real(tmp, final)

        monkeypatch.setattr(files, "_publish", publish)
    out = tmp_path / "out"
    run = run_cli(case, "pytorch", out_dir=out)
    assert run.code == 1
    errors = [line for line in run.out.splitlines() if "[ERROR]" in line]
    assert len(errors) == 1 and "No space left on device" in errors[0], run.out
    assert "Traceback" not in run.out + run.err
    assert list(out.iterdir()) == []  # no result file, no hidden part, no owner record
    monkeypatch.undo()
    assert_complete(compare(case, out=out))  # the next run into the folder is whole


def test_output_path_that_is_a_fifo_is_refused(case):
    _fifo(case / "outfifo")
    run = compare(case, out=case / "outfifo", timeout=30)
    assert run.code == 1 and len(run.errors) == 1 and "outfifo" in run.errors[0], run.out
    assert "Traceback" not in run.out + run.err


def test_npy_declaring_more_than_it_stores_is_a_row_error(tensor_case, tmp_path):
    """An .npy header declaring 10^12 float32 elements over 4 KB of data: a row error, nothing allocated."""
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000), }"
    header += " " * (63 - (len(header) + 10) % 64) + "\n"
    raw = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + bytes(4096)
    target = _tensor_file(tensor_case, "bench", ROW_A)
    target.with_suffix(".npy").write_bytes(raw)
    target.unlink()
    for side in ("npu", "bench"):  # the bench row now names the .npy file
        path = tensor_case / f"{side}/step0/rank/dump.json"
        if side == "bench":
            path.write_text(path.read_text().replace(f'"{ROW_A}.pt"', f'"{ROW_A}.npy"'))
    run = compare(tensor_case, "--format", "csv", "-c")
    _assert_row_errors(run, {ROW_A: "npy data is 4096 bytes"}, tmp_path)
