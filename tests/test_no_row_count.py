"""Issue #14 item 2: an entry that yields no row is named in a warning and counted in the summary's Rows line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

DATA = Path(__file__).parent / "data" / "pytorch" / "mlp_same_stat"


def _with_empty_entries(tmp: Path, npu: list[str], bench: list[str]) -> Path:
    case = tmp / "case"
    shutil.copytree(DATA, case, ignore=shutil.ignore_patterns("expected"))
    for side, names in (("npu", npu), ("bench", bench)):
        path = case / side / "step0" / "rank" / "dump.json"
        doc = json.loads(path.read_text())
        for name in names:
            doc["data"][name] = {"input": [{}]}
        path.write_text(json.dumps(doc))
    return case


def _rows_line(out: str) -> str:
    return next(line for line in out.splitlines() if "Rows: " in line)


def test_rows_line_counts_entries_without_rows(run_cli, tmp_path):
    case = _with_empty_entries(tmp_path, ["Tensor.empty_a.0.forward", "Tensor.empty_b.0.forward"],
                               ["Tensor.empty_c.0.forward"])  # fmt: skip
    run = run_cli(case, "pytorch")
    assert run.code == 0, run.out
    assert "npu entry 'Tensor.empty_a.0.forward' yields no row" in run.out
    assert "bench entry 'Tensor.empty_c.0.forward' yields no row" in run.out
    assert _rows_line(run.out).endswith("; 3 dump entries yielded no row (named above).")


def test_rows_line_without_such_entries_says_nothing_of_them(run_cli, tmp_path):
    case = _with_empty_entries(tmp_path, [], [])
    run = run_cli(case, "pytorch")
    assert run.code == 0, run.out
    assert "yielded no row" not in _rows_line(run.out)
