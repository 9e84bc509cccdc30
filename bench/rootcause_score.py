#!/usr/bin/env python
"""Scores the root cause on an archive of cases with a TRUTH.json each (tests/data/noise/*.tar.xz).

    python bench/rootcause_score.py tests/data/noise/noise_wide.tar.xz
    python bench/rootcause_score.py --summary-only tests/data/noise/noise_wide_heldout.tar.xz

Unpacks the archive into a temporary folder and runs the analysis (api.build_outcome, framework from the case's
TRUTH.json, default pytorch) on every case; a step-folder case (compare.json pointing at step folders, TRUTH.json
`origin` one list per rank) is scored rank by rank. One line per case (or rank): name, truth (the first acceptable
origin and how many more), what we named (first origin, else `suspect:` first suspect, else `-`), verdict:

  right             a bug run whose first origin is in the truth
  right-as-suspect  a bug run with no origin whose first suspect is in the truth
  clean             a noise-only run with no origin and no suspect
  FALSE-ORIGIN      a noise-only run with an origin
  FALSE-SUSPECT     a noise-only run with a suspect (no origin)
  WRONG-OP          a bug run whose first origin, or (no origin) first suspect, is not in the truth
  MISSED            a bug run with neither origin nor suspect

Then a summary: first origins right (of the bug runs; right-as-suspect counted apart), noise-only runs clean, wrong
op named. `--summary-only` prints the summary alone: use it on the held-aside set, which is not to be looked at case
by case while tuning.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from msprobe_compare.api import build_outcome  # noqa: E402
from msprobe_compare.config import Options, load_config  # noqa: E402
from msprobe_compare.log import Console  # noqa: E402


def extract(archive: Path, root: Path) -> None:
    import tarfile

    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(root, filter="data")
        else:
            tar.extractall(root)


def analyse(compare_json: Path, framework: str):
    cfg = load_config(compare_json, Options(framework=framework))
    with open("/dev/null", "w") as sink:
        return build_outcome(cfg, Console(stream=sink)).rootcause


def units(case: Path) -> list[tuple[str, Path, list[str]]]:
    """(label, compare.json, truth) per rank of the case."""
    truth = json.loads((case / "TRUTH.json").read_text())
    origin = truth["origin"]
    if isinstance(origin, list):
        return [(case.name, case / "compare.json", origin)]
    cmp = json.loads((case / "compare.json").read_text())
    out = []
    for rank, acceptable in sorted(origin.items()):
        per = dict(cmp)
        for side in ("npu_path", "bench_path"):
            per[side] = str((case / cmp[side] / rank / "dump.json").resolve())
        path = case / f"compare_{rank}.json"
        path.write_text(json.dumps(per))
        out.append((f"{case.name}[{rank}]", path, acceptable))
    return out


def verdict(truth: list[str], origins: list[str], suspects: list[str], within: str | None = None) -> str:
    if not truth:
        return "FALSE-ORIGIN" if origins else ("FALSE-SUSPECT" if suspects else "clean")
    if origins:  # a boundary origin names the module its gap lies in as well; a merged row (pair/aligned.py) its parts
        return (
            "right" if origins[0] in truth or within in truth or set(origins[0].split(";")) & set(truth) else "WRONG-OP"
        )
    if suspects:
        return "right-as-suspect" if suspects[0] in truth else "WRONG-OP"
    return "MISSED"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("archive", type=Path)
    p.add_argument("--summary-only", action="store_true", help="print the summary only (held-aside sets)")
    a = p.parse_args()
    import os

    start = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        extract(a.archive, root)
        cases = sorted(d for d in root.rglob("TRUTH.json"))
        here = os.getcwd()
        for tj in cases:
            case = tj.parent
            fw = json.loads(tj.read_text()).get("framework", "pytorch")
            for label, cmp, truth in units(case):
                os.chdir(cmp.parent)
                try:
                    rc = analyse(cmp, fw)
                    origins = [o.entry for o in rc.origins]
                    suspects = [s.entry for s in rc.suspects]
                    within = rc.origins[0].within if rc.origins else None
                    said = origins[0] if origins else (f"suspect:{suspects[0]}" if suspects else "-")
                    said += f" in {within}" if within else ""
                    v = verdict(truth, origins, suspects, within)
                except Exception as exc:  # a crash is scored as a miss, and said
                    said, v = f"ERROR {type(exc).__name__}: {exc}", "MISSED" if truth else "FALSE-ORIGIN"
                finally:
                    os.chdir(here)
                rows.append((label, truth, said, v))
                if not a.summary_only:
                    t = (truth[0] + (f" (+{len(truth) - 1})" if len(truth) > 1 else "")) if truth else "(noise only)"
                    print(f"{label:52s} truth={t:48s} ours={said:48s} {v}", flush=True)
    bugs = [r for r in rows if r[1]]
    noise = [r for r in rows if not r[1]]
    right = sum(r[3] == "right" for r in bugs)
    as_suspect = sum(r[3] == "right-as-suspect" for r in bugs)
    clean = sum(r[3] == "clean" for r in noise)
    wrong = sum(r[3] == "WRONG-OP" for r in bugs)
    missed = sum(r[3] == "MISSED" for r in bugs)
    print(
        f"SUMMARY {a.archive.name}: first origins right {right}/{len(bugs)} (right as suspect {as_suspect}, "
        f"missed {missed}); noise-only clean {clean}/{len(noise)}; wrong op named {wrong}; "
        f"{len(rows)} runs in {time.perf_counter() - start:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
