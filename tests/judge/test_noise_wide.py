"""Root cause on the TUNE set of our own generator (tests/data/noise/make_wide.py, issue #29): model families,
noise sources and bug kinds the rule was not first made on (conv nets with BatchNorm, vision transformers,
mixture-of-experts, recurrent cells, grouped-query decoders; bf16, fp16 with masked attention, TF32-style fp32
matmuls, other conv and softmax algorithms; forward and backward-only bugs; statistics, tensor and md5; a two-rank
run with a bug on rank 1). Each case's TRUTH.json comes from a direct comparison of the bug run with its bug-free
twin, not from this tool.

The held-aside set (noise_wide_heldout.tar.xz) is not tested here: it is scored apart (`bench/rootcause_score.py
--summary-only`) and reported in docs/rootcause.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import DATA, extract_archive
from msprobe_compare.api import build_outcome
from msprobe_compare.config import Options, load_config
from msprobe_compare.judge.rootcause import OriginKind
from msprobe_compare.log import Console
from msprobe_compare.render import story

ARCHIVE = DATA / "noise" / "noise_wide.tar.xz"
MORE = DATA / "noise" / "noise_wide_more.tar.xz"  # a second TUNE batch: other seeds and sizes, mostly noise only
THIRD = DATA / "noise" / "noise_wide_third.tar.xz"  # a third: dump levels L0/L1, weight-gradient bugs, fused attention
# the two cases of MORE the rule does not get right, and why (docs/rootcause.md, Results)
KNOWN = {
    # 2 blocks: the Linear backward has one peer, too few to tell a bug from noise (backward.MIN_PEERS)
    "wide2_vit_bf16_gradlin_L0_s23_w24_n2_stat": "missed",
    # rank 0 under bf16: the first all_reduce carries rank 1's x1.1 1.55x above its own inputs' noise, under the
    # margin; the third (5.5% apart) is named
    "wide2_dist_bf16_scale_1p1_L0_s11_w48_stat": "later all_reduce",
}


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("wide")
    extract_archive(ARCHIVE, root)
    extract_archive(MORE, root)
    return extract_archive(THIRD, root)


def _units(case: Path) -> list[tuple[str, Path, list[str]]]:
    """(rank label, compare.json, acceptable first origins) per rank of the case."""
    origin = json.loads((case / "TRUTH.json").read_text())["origin"]
    if isinstance(origin, list):
        return [("", case / "compare.json", origin)]
    cmp = json.loads((case / "compare.json").read_text())
    out = []
    for rank, acceptable in sorted(origin.items()):
        per = {side: str((case / cmp[side] / rank / "dump.json").resolve()) for side in ("npu_path", "bench_path")}
        path = case / f"compare_{rank}.json"
        path.write_text(json.dumps(per))
        out.append((rank, path, acceptable))
    return out


def _rootcause(compare_json: Path, monkeypatch):
    monkeypatch.chdir(compare_json.parent)
    cfg = load_config(compare_json, Options(framework="pytorch"))
    return build_outcome(cfg, Console(stream=open("/dev/null", "w"))).rootcause


def _names(*archives: Path) -> list[str]:
    import tarfile

    out: set[str] = set()
    for archive in archives or (ARCHIVE, MORE, THIRD):
        with tarfile.open(archive) as tar:
            out |= {m.name.split("/")[0] for m in tar.getmembers() if m.name.endswith("TRUTH.json")}
    return sorted(out)


@pytest.mark.parametrize("name", [n for n in _names() if n not in KNOWN])
def test_first_origin_is_the_bug_and_noise_names_nothing(name, cases, monkeypatch):
    for rank, compare_json, truth in _units(cases / name):
        rc = _rootcause(compare_json, monkeypatch)
        origins = [o.entry for o in rc.origins]
        if not truth:
            assert origins == [], (rank, [story.origin_description(o) for o in rc.origins])
            assert rc.suspects == [], (rank, [story.suspect_description(s) for s in rc.suspects])
            continue
        assert origins and origins[0] in truth, (rank, [story.origin_description(o) for o in rc.origins])


def test_backward_only_bugs_are_backward_origins(cases, monkeypatch):
    found = {}
    for name in _names(ARCHIVE):
        truth = json.loads((cases / name / "TRUTH.json").read_text())
        if truth.get("phase") != "backward":
            continue
        [(_, compare_json, _)] = _units(cases / name)
        first = _rootcause(compare_json, monkeypatch).first
        found[name] = (first.phase, first.kind, first.evidence.floor_source.kind.value)
    assert len(found) >= 8
    assert set(found.values()) == {("backward", OriginKind.COMPUTATION, "backward peers")}, found


def test_rank0_names_the_first_all_reduce_and_the_run_names_rank1(cases, run_cli):
    case = cases / "wide_dist_tf32_scale_1p05_L0_stat"
    run = run_cli(case, "pytorch")
    line = next(x for x in (run.out + run.err).splitlines() if "Root cause across ranks" in x)
    assert "rank1: Functional.linear.1.forward" in line
    assert "rank0 first receives it at Distributed.all_reduce.0.forward" in line


def test_the_known_misses_stay_as_documented(cases, monkeypatch):
    """The two cases of the second batch not got right: no wrong op is named in either."""
    [(_, vit, _)] = _units(cases / "wide2_vit_bf16_gradlin_L0_s23_w24_n2_stat")
    rc = _rootcause(vit, monkeypatch)
    assert rc.origins == [] and rc.suspects == []
    units = dict(
        (rank, (path, truth)) for rank, path, truth in _units(cases / "wide2_dist_bf16_scale_1p1_L0_s11_w48_stat")
    )
    rank0 = _rootcause(units["rank0"][0], monkeypatch).first
    assert rank0.collective and rank0.entry.startswith("Distributed.all_reduce.")
    assert _rootcause(units["rank1"][0], monkeypatch).first.entry in units["rank1"][1]
