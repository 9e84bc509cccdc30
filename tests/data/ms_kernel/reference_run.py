"""Runs the reference `msprobe -f mindspore compare` (8.3.3) on the cases of this folder and stores what it wrote
in <case>/expected/: each xlsx as CSV (header, rows, an empty `__fill__` column; `<kind>.<rank>_<step>.csv`),
each result.csv of the single-point compare under expected/<kind>/ (its tree mirrored), and the console log with
the exit code. Absolute paths in the outputs become `./...` relative to the case folder.

Usage: python reference_run.py /path/to/reference/venv/bin/msprobe
MindSpore itself is not needed: refstub/sitecustomize.py stands in for its import (the kernel compare does not
use it).
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import openpyxl

HERE = Path(__file__).resolve().parent
RUNS = {  # case: [(kind, compare file)]
    "npy": [("plain", "compare.json"), ("filtered", "compare_filtered.json")],
    "npy_empty": [("plain", "compare.json")],
    "statistic": [("plain", "compare.json"), ("filtered", "compare_filtered.json")],
    "common": [("plain", "compare.json")],
}


def _cell(v: object) -> str:
    return "" if v is None else str(v)


def main(msprobe: str) -> None:
    for case, runs in RUNS.items():
        folder = HERE / case
        expected = folder / "expected"
        shutil.rmtree(expected, ignore_errors=True)
        expected.mkdir()
        for kind, compare in runs:
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "OUT"
                env = dict(os.environ, PYTHONPATH=str(HERE / "refstub"))
                run = subprocess.run(
                    [msprobe, "-f", "mindspore", "compare", "-i", compare, "-o", str(out)],
                    cwd=folder,
                    env=env,
                    capture_output=True,
                    text=True,
                )
                log = (run.stdout + run.stderr).replace(str(folder), ".").replace(str(out), "OUT")
                log = re.sub(r"\[rank <[^>]*>\] ", "", log)
                (expected / f"{kind}.console.log").write_text(log + f"\n# exit code {run.returncode}\n")
                for x in sorted(out.glob("*.xlsx")) if out.is_dir() else []:
                    m = re.match(r"compare_result_(\d+)_(\d+)_\d{14}\.xlsx$", x.name)
                    ws = openpyxl.load_workbook(x).worksheets[0]
                    rows = [[_cell(c.value).replace(str(folder), ".") for c in r] for r in ws.iter_rows()]
                    with open(expected / f"{kind}.{m.group(1)}_{m.group(2)}.csv", "w", newline="") as f:
                        w = csv.writer(f)
                        w.writerow(rows[0] + ["__fill__"])
                        w.writerows(r + [""] for r in rows[1:])
                for res in sorted(out.rglob("result.csv")) if out.is_dir() else []:
                    target = expected / kind / res.relative_to(out)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(res.read_text().replace(str(folder), "."))


if __name__ == "__main__":
    main(sys.argv[1])
