"""Dump folder layout: step folders with rank folders, and graph/pynative mix dumps (spec §1.4, §7.1, §7.4)."""

from __future__ import annotations

import re
from pathlib import Path

from msprobe_compare.errors import InputError
from msprobe_compare.records import dataclass

RANK_NAME = re.compile(r"^rank(0|[1-9][0-9]*)?$")
PROC_NAME = re.compile(r"^proc([0-9]+)$")
KERNEL_RANK = re.compile(
    r"^rank_[0-9]+$"
)  # MindSpore graph-mode (kernel) dumps  # single-process dumps of msprobe 26.x: proc<PID>
DUMP_NAMES = ("dump.json", "debug.json")  # a rank folder's dump file: dump.json, else debug.json (spec §7.7)
STEP_NAME = re.compile(r"^step(0|[1-9][0-9]*)$")
MIX_KINDS = ("graph", "pynative")


@dataclass(frozen=True)
class RankDir:
    number: int | None  # None for a plain "rank" folder (not distributed)
    path: Path

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def suffix(self) -> str:
        """File name suffix of this rank's results: `_rank3`, or `_rank` for a plain `rank` folder."""
        return f"_{self.name}"


@dataclass(frozen=True)
class RankPairing:
    pairs: list[tuple[RankDir, RankDir]]
    npu_only: list[RankDir]
    bench_only: list[RankDir]
    by_order: bool = False  # proc<PID> folders: paired in sorted order, not by number


def rank_dump(folder: Path) -> Path:
    """The dump file of a rank folder: its dump.json, or its debug.json when it holds only that."""
    for name in DUMP_NAMES:
        if (folder / name).is_file() or (folder / name).is_symlink():  # a link is refused when the file is checked
            return folder / name
    return folder / DUMP_NAMES[0]


def resolve_input(path: Path) -> Path:
    """What an `npu_path`/`bench_path` stands for: a rank folder (one holding dump.json) is its dump.json; a step
    folder, a mix dump root or a file is itself. A dump root of step folders is refused, naming the step to choose."""
    if not path.is_dir():
        return path
    if path.is_symlink():
        raise InputError("is a symbolic link; links are refused for safety", path)
    dump = rank_dump(path)
    if dump.is_file() or dump.is_symlink():  # a link is refused when the file is checked
        return dump
    if RANK_NAME.match(path.name) or PROC_NAME.match(path.name):
        raise InputError("is a rank folder without dump.json", path)
    steps = sorted((c.name for c in path.iterdir() if STEP_NAME.match(c.name) and c.is_dir()),
                   key=lambda name: int(name[4:]))  # fmt: skip
    if steps and not any((path / kind).is_dir() for kind in MIX_KINDS):
        shown = ", ".join(steps[:3]) + (", ..." if len(steps) > 3 else "")
        raise InputError(f"holds step folders ({shown}), not rank folders; choose a step folder, e.g. "
                         f"{path / steps[0]}", path)  # fmt: skip
    return path


def first_dump(root: Path) -> Path | None:
    """The dump.json of the first rank of a step folder (or of the first step of a mix dump); None if it has none."""
    steps = mix_steps(root, root)
    for step in [root] if steps is None else [root / s for s in steps]:
        ranks = find_ranks(step)
        for key in sorted(ranks, key=_order):
            if rank_dump(ranks[key].path).is_file():
                return rank_dump(ranks[key].path)
    return None


def find_ranks(step_dir: Path) -> dict[int | str | None, RankDir]:
    """The rank folders of a step folder (`rank`, `rank<N>`, or `proc<PID>`, keyed by the folder name).
    Anything else in it is an error naming the entry."""
    if step_dir.is_symlink():
        raise InputError("is a symbolic link; links are refused for safety", step_dir)
    ranks: dict[int | str | None, RankDir] = {}
    for child in sorted(step_dir.iterdir()):
        m = RANK_NAME.match(child.name)
        if (not m and not PROC_NAME.match(child.name)) or not child.is_dir():
            if KERNEL_RANK.match(child.name) and child.is_dir():
                raise InputError(f"contains '{child.name}': a MindSpore graph-mode kernel dump "
                                 "(rank_<N>/<net>/<graph>/<iteration>/); compare it with \"rank_id\": [] (and "
                                 "\"step_id\": []) in compare.json and -f mindspore (spec §7.5)", step_dir)  # fmt: skip
            raise InputError(
                f"contains '{child.name}'; a step folder must hold only rank folders (rank, rank0, rank1, ..., "
                "or proc<PID>)",
                step_dir,
            )
        if m:
            number = int(m.group(1)) if m.group(1) is not None else None
            ranks[number] = RankDir(number, child)
        else:
            ranks[child.name] = RankDir(None, child)
    if not ranks:
        raise InputError("holds no rank folders (rank, rank0, rank1, ..., or proc<PID>)", step_dir)
    return ranks


def _order(key: int | str | None) -> tuple[int, int]:
    if isinstance(key, str):  # proc<PID> after the rank folders, by PID
        return 1, int(key[4:])
    return 0, -1 if key is None else key


def pair_ranks(npu_step: Path, bench_step: Path) -> RankPairing:
    """Pair rank folders by rank number (decision D8), listing ranks found on one side only.

    `proc<PID>` folders (single-process 26.x dumps; the PIDs of two runs differ) are paired in sorted order when
    both sides hold as many folders; otherwise the error names them."""
    npu, bench = find_ranks(npu_step), find_ranks(bench_step)
    if any(isinstance(k, str) for k in (*npu, *bench)):
        ns, bs = (sorted(d.items(), key=lambda kv: _order(kv[0])) for d in (npu, bench))
        if len(ns) != len(bs):
            listed = "; ".join(f"{side} {step} holds {', '.join(r.name for _, r in dirs)}"
                               for side, step, dirs in (("npu", npu_step, ns), ("bench", bench_step, bs)))  # fmt: skip
            raise InputError(f"cannot pair the process folders of the two step folders ({listed}); give the "
                             "rank folders to compare as npu_path and bench_path", npu_step)  # fmt: skip
        return RankPairing(pairs=[(n, b) for (_, n), (_, b) in zip(ns, bs)], npu_only=[], bench_only=[],
                           by_order=True)  # fmt: skip
    both = sorted(set(npu) & set(bench), key=_order)
    return RankPairing(
        pairs=[(npu[k], bench[k]) for k in both],
        npu_only=[npu[k] for k in sorted(set(npu) - set(bench), key=_order)],
        bench_only=[bench[k] for k in sorted(set(bench) - set(npu), key=_order)],
    )


def mix_steps(npu_root: Path, bench_root: Path) -> list[Path] | None:
    """For mix dumps (`graph`/`pynative` children on both sides): the relative step folders to compare.

    Returns None when the dumps are not mix dumps.
    """
    kinds = [k for k in MIX_KINDS if (npu_root / k).is_dir() and (bench_root / k).is_dir()]
    if not kinds:
        return None
    steps: list[Path] = []
    for kind in kinds:
        for step in sorted(p.name for p in (npu_root / kind).iterdir() if p.is_dir()):
            if (bench_root / kind / step).is_dir():
                steps.append(Path(kind) / step)
    return steps
