"""Unsafe or broken tensor files affect only their own row; every other row is still compared."""

from __future__ import annotations

import io
import json
import pickle
import shutil
import zipfile
from pathlib import Path

import pytest

from conftest import DATA
from parity import mismatches, read_xlsx

CASE = DATA / "pytorch" / "mlp_bug_tensor"


@pytest.fixture
def case(tmp_path) -> Path:
    dst = tmp_path / "case"
    shutil.copytree(CASE, dst)
    return dst


class _Evil:
    def __reduce__(self):
        return (__import__("os").system, ("touch /tmp/msprobe_compare_pwned",))


def _malicious_pt(path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("archive/data.pkl", pickle.dumps(_Evil(), protocol=2))
        zf.writestr("archive/version", "3\n")
    path.write_bytes(buf.getvalue())


def _row(header, rows, name):
    col = {c: i for i, c in enumerate(header)}
    for r in rows:
        if r[0] == name:
            return {c: r[i] for c, i in col.items()}
    raise AssertionError(name)


def test_bad_tensor_files_only_touch_their_rows(run_cli, case, tmp_path):
    marker = Path("/tmp/msprobe_compare_pwned")
    marker.unlink(missing_ok=True)
    npu_dir = case / "npu/step0/rank/dump_tensor_data"
    bench_dir = case / "bench/step0/rank/dump_tensor_data"
    _malicious_pt(npu_dir / "Functional.linear.0.forward.input.0.pt")  # would run os.system
    truncated = bench_dir / "Functional.linear.0.forward.input.1.pt"
    truncated.write_bytes(truncated.read_bytes()[: truncated.stat().st_size // 2])
    (npu_dir / "Functional.linear.0.forward.output.0.pt").unlink()  # missing
    target = npu_dir / "Functional.relu.0.forward.input.0.pt"
    moved = tmp_path / "outside.pt"
    target.rename(moved)
    target.symlink_to(moved)  # symlink
    for side in ("npu", "bench"):  # the same escaping name on both sides, so the rows match
        dump = case / side / "step0/rank/dump.json"
        doc = json.loads(dump.read_text())
        doc["data"]["Functional.linear.1.forward"]["input_args"][0]["data_name"] = "../../../../evil.pt"
        dump.write_text(json.dumps(doc))

    run = run_cli(case, "pytorch", "-s")
    assert run.code == 0, run.out
    assert not marker.exists(), "pickle code was executed"
    header, rows, _ = read_xlsx(run.one("compare_result_*.xlsx"))
    expect = {
        "Functional.linear.0.forward.input.0": "unsafe tensor file",
        "Functional.linear.0.forward.input.1": "corrupt tensor file",
        "Functional.linear.0.forward.output.0": "Dump file: Functional.linear.0.forward.output.0.pt not found",
        "Functional.relu.0.forward.input.0": "unsafe tensor file",
    }
    for name, fragment in expect.items():
        row = _row(header, rows, name)
        assert fragment in row["Err_message"], (name, row["Err_message"])
        assert row["Cosine"] == "unsupported" and row["Accuracy Reached or Not"] == "None"
    escaped = [r for r in rows if r[0] == "../../../../evil"]
    assert escaped and "unsafe tensor file" in escaped[0][header.index("Err_message")]
    # every other row equals the reference
    good = _row(header, rows, "Functional.relu.1.forward.output.0")
    assert good["Accuracy Reached or Not"] in ("Yes", "No") and good["Cosine"] != "unsupported"


def test_untouched_case_still_matches(run_cli):
    run = run_cli(CASE, "pytorch", "-s")
    assert not mismatches(run.one("compare_result_*.xlsx"), CASE / "expected/hl.csv")
