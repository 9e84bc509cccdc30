"""The MindSpore graph-mode compares (spec §7.5, §7.6): kernel dumps by (rank, step), and the static-graph
single-point compare (`"common": true`). Wiring only: load/kernel_dump.py finds the files, pair/kernel_pair.py
pairs them, measure/kernel_metrics.py computes, render/kernel_table.py writes.

Streamed: one pair of arrays is open at a time per worker thread (the tensor kernel and numpy's reductions
release the GIL), and only the row's numbers are kept.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from msprobe_compare.errors import InputError
from msprobe_compare.load.kernel_dump import (GraphRequest, KernelFile, KernelMode, StatRow, folder_mode,
                                              npy_files, rank_step_folders, statistic_rows, utf8_name)  # fmt: skip
from msprobe_compare.log import Console
from msprobe_compare.measure.kernel_metrics import measure_common, measure_npy, measure_statistic
from msprobe_compare.pair.kernel_pair import pair_kernel
from msprobe_compare.render import kernel_table as kt
from msprobe_compare.render.files import atomic_output, new_output
from msprobe_compare.render.progress import Progress

T = TypeVar("T")
R = TypeVar("R")
COMMON_MAX_DEPTH = 10  # folder levels of the single-point compare, as the reference


def _threads(jobs: int | None) -> int:
    return max(1, jobs if jobs is not None else min(4, os.cpu_count() or 1))


def _in_order(func: Callable[[T], R], items: Sequence[T], jobs: int | None, label: str, console: Console) -> list[R]:
    """func over items on worker threads, results in item order; a progress bar `label` on a terminal."""
    n = _threads(jobs)
    progress = Progress(label, len(items), enabled=not console.quiet)
    try:
        if n == 1 or len(items) < 2:
            return [_advanced(func(x), progress) for x in items]
        with ThreadPoolExecutor(n) as pool:
            return [_advanced(r, progress) for r in pool.map(func, items)]
    finally:
        progress.close()


def _advanced(result: R, progress: Progress) -> R:
    progress.advance()
    return result


# ------------------------------------------------------------------------------------------- kernel dumps


def _side_mode(folders: Iterable[Path]) -> set[KernelMode]:
    return {m for m in (folder_mode(f) for f in folders) if m is not None}


def _npy_order(files: list[KernelFile]) -> list[KernelFile]:
    """Execution order (timestamp), then file name: the reference keeps the file system's listing order."""
    return sorted(files, key=lambda f: (f.timestamp, str(f.path)))


def _npy_rows(npu_dirs: list[Path], bench_dirs: list[Path], jobs: int | None, label: str,
              console: Console) -> list[list[Any]]:  # fmt: skip
    npu = _npy_order([f for d in npu_dirs for f in npy_files(d)])
    bench = _npy_order([f for d in bench_dirs for f in npy_files(d)])
    pairs = pair_kernel([f.key for f in npu], [f.timestamp for f in npu], [f.key for f in bench],
                        [f.timestamp for f in bench])  # fmt: skip

    def one(pair: tuple[int, int]) -> list[Any]:
        n = npu[pair[0]].path if pair[0] >= 0 else None
        b = bench[pair[1]].path if pair[1] >= 0 else None
        return kt.npy_cells(str(n) if n else "", str(b) if b else "", measure_npy(n, b))

    return _in_order(one, pairs, jobs, label, console)


def _stat_rows(npu_dirs: list[Path], bench_dirs: list[Path], console: Console) -> list[list[Any]]:
    def read(dirs: list[Path]) -> list[StatRow]:
        rows: list[StatRow] = []
        for d in dirs:
            found, missing = statistic_rows(d)
            for name in missing:
                console.warning(f"{d / 'statistic.csv'} has no column {name!r}")
            rows.extend(found)
        return rows

    npu, bench = read(npu_dirs), read(bench_dirs)
    pairs = pair_kernel([r.key for r in npu], [r.timestamp for r in npu], [r.key for r in bench],
                        [r.timestamp for r in bench])  # fmt: skip
    return [kt.stat_cells(measure_statistic(npu[i] if i >= 0 else None, bench[j] if j >= 0 else None))
            for i, j in pairs]  # fmt: skip


def compare_kernel_dumps(npu_root: Path, bench_root: Path, request: GraphRequest, out_dir: Path,
                         console: Console, jobs: int | None = None) -> list[Path]:  # fmt: skip
    """One `compare_result_{rank}_{step}_{ts}.xlsx` per (rank, step) both roots hold; the files written."""
    npu = rank_step_folders(npu_root, list(request.ranks), list(request.steps))
    bench = rank_step_folders(bench_root, list(request.ranks), list(request.steps))
    common = sorted(set(npu) & set(bench))
    if not common:

        def listed(found: dict[tuple[int, int], list[Path]]) -> str:
            return ", ".join(f"rank {r} step {s}" for r, s in found) or "none"

        raise InputError(f"no rank/step folder in common with bench_path (npu: {listed(npu)}; bench: "
                         f"{listed(bench)}); a kernel dump holds rank_<R>/<net>/<graph>/<step>/ folders",
                         npu_root)  # fmt: skip
    for key in sorted(set(npu) ^ set(bench)):
        side = "npu_path" if key in npu else "bench_path"
        console.warning(f"rank {key[0]} step {key[1]} is only in {side}; not compared")
    written = []
    for rank, step in common:
        n_mode, b_mode = _side_mode(npu[(rank, step)]), _side_mode(bench[(rank, step)])
        if not n_mode or not b_mode:
            console.warning(f"rank {rank} step {step}: no .npy files or statistic.csv on the "
                            f"{'npu' if not n_mode else 'bench'} side; not compared")  # fmt: skip
            continue
        if len(n_mode) > 1 or n_mode != b_mode:
            console.warning(f"rank {rank} step {step}: npu holds {'/'.join(sorted(m.value for m in n_mode))} "
                            f"data, bench {'/'.join(sorted(m.value for m in b_mode))}; not compared")  # fmt: skip
            continue
        if KernelMode.NPY in n_mode:
            header, rows = kt.NPY_HEADER, _npy_rows(npu[(rank, step)], bench[(rank, step)], jobs,
                                                    f"rank {rank} step {step}", console)  # fmt: skip
        else:
            header, rows = kt.STAT_HEADER, _stat_rows(npu[(rank, step)], bench[(rank, step)], console)
        if not rows:
            console.warning(f"rank {rank} step {step}: no kernel data; no result file")
            continue
        with new_output(out_dir, f"compare_result_{rank}_{step}_{{ts}}.xlsx") as (final, tmp):
            kt.write_table(tmp, header, rows)
        console.info(f"Compare rank: {rank} step: {step} finish. Compare result: {final}.")
        written.append(final)
    return written


# ------------------------------------------------------------------------------------ single-point compare


def _real_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _walk(root: str, max_depth: int) -> list[tuple[str, list[str]]]:
    """(folder, sorted .npy file names) top-down in sorted order, symbolic links not followed."""
    out = []

    def visit(folder: str, depth: int) -> None:
        try:
            names = sorted(os.listdir(folder))
        except OSError as exc:
            raise InputError(f"cannot be read ({exc.strerror})", Path(folder)) from None
        files = [utf8_name(n, folder) for n in names if n.endswith(".npy") and not _real_dir(os.path.join(folder, n))]
        out.append((folder, files))
        if depth < max_depth:
            for n in names:
                if _real_dir(os.path.join(folder, n)):
                    visit(os.path.join(folder, utf8_name(n, folder)), depth + 1)

    visit(root, 0)
    return out


def _suffix_number(stem: str) -> tuple[int, str]:
    last = stem.rsplit("_", 1)[-1]
    return (int(last), stem) if last.isdigit() else (-1, stem)


def _named_files(folder: str) -> dict[str, list[str]]:
    """name -> .npy files (`name_dtype_N.npy`) in `folder` and below, each list by folder then N."""
    found: dict[str, list[str]] = {}
    for sub, files in _walk(folder, COMMON_MAX_DEPTH):
        for f in sorted(files, key=lambda n: _suffix_number(n[:-4])):
            parts = f[:-4].split("_")
            key = "_".join(parts[:-2]) if len(parts) >= 2 else ""
            if key:
                found.setdefault(key, []).append(os.path.join(sub, f))
    return found


def _shown(path: str, root: str, shown_root: str) -> str:
    """`path` (under `root`) as the reference names it: under the root as compare.json gives it, normalised."""
    return os.path.normpath(os.path.join(shown_root, os.path.relpath(path, root))) if shown_root else path


def compare_common(npu_root: Path, bench_root: Path, request: GraphRequest, out_dir: Path, console: Console,
                   jobs: int | None = None) -> list[Path]:  # fmt: skip
    """`result.csv` per NPU folder holding .npy files (and its bench twin), in a tree mirroring the NPU one."""
    npu_text, bench_text = os.fspath(npu_root), os.fspath(bench_root)
    npu_shown, bench_shown = request.shown or ("", "")

    def row(pair: tuple[str, str, str]) -> list[Any]:
        name, npu_file, bench_file = pair
        return kt.common_cells(name, _shown(npu_file, npu_text, npu_shown), _shown(bench_file, bench_text, bench_shown),
                               measure_common(Path(npu_file), Path(bench_file)))  # fmt: skip

    written = []
    for folder, files in _walk(npu_text, COMMON_MAX_DEPTH):
        if not files:
            continue
        rel = os.path.relpath(folder, npu_text)
        twin = os.path.normpath(os.path.join(bench_text, rel))
        if not _real_dir(twin):
            console.warning(f"{twin} does not exist; {folder} not compared")
            continue
        npu_named, bench_named = _named_files(folder), _named_files(twin)
        pairs: list[tuple[str, str, str]] = []
        for key, npu_list in npu_named.items():
            bench_list = bench_named.get(key) or bench_named.get(request.map_dict.get(key, ""))
            if not bench_list:
                console.warning(f"{os.path.join(rel, key)}: no bench file of that name; not compared")
                continue
            pairs.extend((f"{key}_{i}", n, b) for i, (n, b) in enumerate(zip(npu_list, bench_list)))
        target = out_dir / rel
        target.mkdir(parents=True, exist_ok=True)
        if not pairs:
            console.warning(f"No file pairs found in {rel}")
            continue
        rows = _in_order(row, pairs, jobs, rel if rel != "." else os.path.basename(npu_text), console)
        final = target / "result.csv"
        with atomic_output(final) as tmp:
            kt.write_result_csv(tmp, kt.COMMON_HEADER, rows)
        console.info(f"Results saved to {final}")
        written.append(final)
    return written
