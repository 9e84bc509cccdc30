"""Score the module-tree aligner (pair/align.py) against TRUTH.json of implementation cases (tests/data/impl).

    python bench/align_score.py DIR [DIR ...] [--summary-only]

DIR is a case (with TRUTH.json) or a folder of cases, or an impl_cases.tar.xz archive. Per case: the truth's module
boundaries paired (merged ones as one pair), the forward tensor slots paired, and pairs that join a different tensor
(a slot pair the truth does not list, on a boundary the truth pairs). Boundaries of the same code (hf vs hf) count
when each part is paired alone.
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import tempfile
from pathlib import Path

from msprobe_compare.load.dumpjson import read_construct_json, read_json
from msprobe_compare.load.rows import flatten
from msprobe_compare.pair.align import align, module_calls


def _slot(key: str) -> str:
    return key.replace("input_args.", "input.").replace("input_kwargs.", "input.")


def load_side(case: Path, side: str) -> object:
    cfg = json.loads((case / "compare.json").read_text())
    path = (case / cfg[f"{side}_path"]).resolve()
    table = flatten(path, read_json(path)["data"])
    tree_path = path.parent / "construct.json"
    return module_calls(table, read_construct_json(tree_path) if tree_path.exists() else None)


def score_case(case: Path) -> dict[str, object]:
    truth = json.loads((case / "TRUTH.json").read_text())
    al = align(load_side(case, "npu"), load_side(case, "bench"))
    got = {(al.names("npu", p.npu), al.names("bench", p.bench)): p for p in al.pairs}
    singles = {}
    for p in al.pairs:
        if len(p.npu) == 1 and len(p.bench) == 1:
            singles[al.names("npu", p.npu)] = al.names("bench", p.bench)
    same_as = truth.get("same_as", {})
    alias = {**same_as.get("npu", {}), **same_as.get("bench", {})}
    paired = merged = merged_ok = slots = slots_ok = wrong = 0
    missing = []
    for t in truth["pairs_io"]:
        n, b = t["npu"], t["bench"]
        is_merged = ";" in n or ";" in b
        merged += is_merged
        p = got.get((n, b))
        ok = p is not None and bool(p.slots)
        split = False
        if not ok and ";" in n and ";" in b and n.count(";") == b.count(";"):
            ok = split = all(singles.get(x) == y for x, y in zip(n.split(";"), b.split(";")))
        if not ok:
            for (gn, gb), gp in got.items():
                if gn == n and alias.get(gb) == b or gb == b and alias.get(gn) == n:
                    p, ok = gp, bool(gp.slots)
        paired += ok
        merged_ok += ok and is_merged
        if not ok:
            missing.append(f"{n} <-> {b}")
        if split:  # the same code: each part paired alone carries the truth's slots
            parts = [got[(x, y)] for x, y in zip(n.split(";"), b.split(";"))]
            want = {(_slot(a), _slot(c)) for a, c, _ in t["io"]}
            slots_ok += len([w for w in want if all(w in {(s.npu, s.bench) for s in q.slots} for q in parts)])
            slots += len(want)
            continue
        want = {(_slot(a), _slot(c)) for a, c, _ in t["io"]}
        slots += len(want)
        if p is not None:
            have = {(s.npu, s.bench) for s in p.slots}
            slots_ok += len(want & have)
            want_n, want_b = dict(want), {b: a for a, b in want}
            bad = [(a, b) for a, b in have if a in want_n and want_n[a] != b or b in want_b and want_b[b] != a]
            wrong += len(bad)
            missing += [f"   slot {n}:{a} <-> {b}:{c}" for a, c in sorted(want - have)]
            missing += [f"   WRONG {n}:{a} <-> {b}:{c}" for a, c in bad]
    truth_n = {t["npu"] for t in truth["pairs_io"]}
    extra = [f"{a} <-> {b}" for a, b in got if a not in truth_n and not any(a in x.split(";") for x in truth_n)]
    return {"case": case.name, "pairs": len(truth["pairs_io"]), "paired": paired, "merged": merged,
            "merged_ok": merged_ok, "slots": slots, "slots_ok": slots_ok, "wrong": wrong, "missing": missing,
            "extra": extra}  # fmt: skip


def cases(arg: Path, tmp: Path) -> list[Path]:
    if arg.is_file():
        with tarfile.open(arg) as tar:
            tar.extractall(tmp / arg.stem, filter="data")
        arg = tmp / arg.stem
    if (arg / "TRUTH.json").exists():
        return [arg]
    return sorted(p.parent for p in arg.rglob("TRUTH.json"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--summary-only", action="store_true")
    args = ap.parse_args()
    total: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for d in args.dirs:
            for case in cases(d, Path(tmp)):
                r = score_case(case)
                for k, v in r.items():
                    if isinstance(v, int):
                        total[k] = total.get(k, 0) + v
                if not args.summary_only:
                    print(
                        f"{r['case']}: {r['paired']}/{r['pairs']} boundaries ({r['merged_ok']}/{r['merged']} "
                        f"merged), slots {r['slots_ok']}/{r['slots']}, wrong {r['wrong']}"
                    )
                    for m in r["missing"]:
                        print("   missing", m)
                    for m in r["extra"]:
                        print("   extra  ", m)
    print(
        f"total: {total.get('paired', 0)}/{total.get('pairs', 0)} boundaries ({total.get('merged_ok', 0)}/"
        f"{total.get('merged', 0)} merged), slots {total.get('slots_ok', 0)}/{total.get('slots', 0)}, "
        f"wrong {total.get('wrong', 0)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
