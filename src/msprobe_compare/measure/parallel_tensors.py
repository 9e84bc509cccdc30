"""Real data of runs split differently across cards: the combined rows' tensors in one folder per side.

For every combined row a file in a private `dump_tensor_data` folder: a split row's shards concatenated along the
split dim, a partial sum's rank tensors added (both written as .npy one shard at a time into a memory-mapped file, so
at most one shard is read at once), any other row's file taken as it is (a hard link, else a copy). The usual
tensor metrics then read that folder.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from typing import Any

import numpy as np

from msprobe_compare.errors import TensorFileError
from msprobe_compare.load.rows import names_a_file
from msprobe_compare.load.tensors import load_tensor, resolve_tensor_path
from msprobe_compare.pair import parallel as P
from msprobe_compare.pair.layout_rules import Rule


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def _take(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


INTERLEAVE_MAX = 1 << 22  # elements: split rows up to this size also try interleaved layouts (see _interleaved)


def stage_tensors(c: P.Combined, root: Path, reference: Any = None) -> Path:
    """Write the combined side's tensor folder under `root` (created); returns `root`, whose `dump_tensor_data`
    holds one file per row with a data file, and set the table's data names to them."""
    folder = root / "dump_tensor_data"
    folder.mkdir(parents=True, exist_ok=True)
    sh, t = c.shards, c.table
    for i in range(len(t)):
        present = [r for r in range(len(sh.tables)) if sh.rows[i, r] >= 0]
        names = [sh.tables[r].data_name[int(sh.rows[i, r])] for r in present]
        if not names or not all(map(names_a_file, names)):
            continue
        dirs = [Path(sh.dirs[r]) / "dump_tensor_data" for r in present]
        rule = c.rule[i]
        try:
            if rule is Rule.SPLIT or rule.partial:
                out = f"{i}.{_safe(t.names[i])}.npy"
                dim = c.split_dim[i] if rule is Rule.SPLIT else None
                if dim is not None and reference is not None and _interleaved(dirs, names, folder / out, dim,
                                                                                reference(i)):  # fmt: skip
                    c.interleaved[i] = True
                else:
                    _combine_files(dirs, names, folder / out, dim)
            else:
                k = present.index(c.shown[i]) if c.shown and c.shown[i] in present else 0
                src = resolve_tensor_path(dirs[k], names[k])
                out = f"{i}.{_safe(names[k])}"
                _take(src, folder / out)
        except TensorFileError:
            continue  # the row keeps its own data name: the metrics report the file as missing or unusable
        t.data_name[i] = out
    return root


def _interleaved(dirs: list[Path], names: list[str], out: Path, dim: int, reference: Path | None) -> bool:
    """A split dim may fuse two dims (batch x heads of a batched matmul: [B*H/k, ...] per rank): the logical tensor
    is then the shards interleaved in blocks of the inner size. For a small split row with a bench tensor, every
    block size (divisors of the shard's dim) is tried and the one closest to the bench tensor (cosine) is written;
    False (nothing written) when plain concatenation is best or the row is too large."""
    if reference is None:
        return False
    parts = [load_tensor(d, n) for d, n in zip(dirs, names)]
    if sum(p.size for p in parts) > INTERLEAVE_MAX or any(p.shape != parts[0].shape for p in parts):
        return False
    ref = load_tensor(reference.parent, reference.name)
    arrays = [p.to_float(np.asarray(p.array)).astype(np.float64) for p in parts]
    want = ref.to_float(np.asarray(ref.array)).astype(np.float64).reshape(-1)
    shape = arrays[0].shape
    m = shape[dim]
    best, best_outer, best_score = None, 1, -np.inf
    for outer in [o for o in range(1, m + 1) if m % o == 0]:
        split = [a.reshape(shape[:dim] + (outer, m // outer) + shape[dim + 1 :]) for a in arrays]
        joined = np.concatenate(split, axis=dim + 1).reshape(shape[:dim] + (m * len(arrays),) + shape[dim + 1 :])
        if joined.size != want.size:
            return False
        flat = joined.reshape(-1)
        denom = np.linalg.norm(flat) * np.linalg.norm(want)
        score = float(flat @ want / denom) if denom > 0 else -np.inf
        if score > best_score + 1e-12:
            best, best_outer, best_score = joined, outer, score
    if best is None or best_outer == 1:
        return False
    np.save(out, best.astype(parts[0].compute_dtype))
    return True


def _combine_files(dirs: list[Path], names: list[str], out: Path, dim: int | None) -> None:
    """Concatenate the shards along `dim` (None: add them) into the .npy `out`, one shard in memory at a time."""
    first = load_tensor(dirs[0], names[0])
    shape = list(first.shape)
    dtype = first.compute_dtype
    if dim is not None:
        sizes = [first.shape[dim]]
        for d, n in zip(dirs[1:], names[1:]):
            sizes.append(load_tensor(d, n).shape[dim])  # memory-mapped: reading the header only
        shape[dim] = sum(sizes)
    target = np.lib.format.open_memmap(out, mode="w+", dtype=dtype, shape=tuple(shape))
    try:
        offset = 0
        for k, (d, n) in enumerate(zip(dirs, names)):
            part = first if k == 0 else load_tensor(d, n)
            values = part.to_float(np.asarray(part.array)).astype(dtype, copy=False)
            if dim is None:
                if k == 0:
                    target[...] = values
                else:
                    target += values
            else:
                index = [slice(None)] * len(shape)
                index[dim] = slice(offset, offset + values.shape[dim])
                target[tuple(index)] = values
                offset += values.shape[dim]
            del part, values
        target.flush()
    finally:
        del target
