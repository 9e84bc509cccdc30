#!/usr/bin/env python3
"""Same-process micro-benchmark of the real-data metrics kernel (`compare_tensors`), in GB/s of tensor bytes.

Compares the working tree's `msprobe_compare.measure.tensor_compare` with the same file at a git revision
(default HEAD; loaded from `git show`, so nothing is checked out; `tensor_metrics.py` at revisions before the
split), and within the working tree the compiled kernel
(`_tensorkernel`, "native") with the numpy path (`--paths native,numpy`; the native variant is left out when the
module is not built or MSPROBE_NATIVE=0), on large in-memory pairs: float32 and bfloat16
LLaMA-like activations, the bench side with relative noise (1e-4 for float32, 1e-3 for bfloat16) as in
gen_tensors.py, optionally with exact zeros (--zeros). The variants run round-robin, `--repeat` times each, in one
process, so a load change on a shared machine hits all of them alike; the median and the best are shown, with
the ratio of the medians to the first variant's, and each metric of the last results is compared with the first
variant's.

GB/s = bytes of both sides / CPU seconds of the calling thread (1e9 bytes). CPU time rather than wall time, so that
time slices lost to other processes on a busy machine do not count (cache and memory-bandwidth contention still
do). No file I/O: this is the kernel alone, on one core, with BLAS pinned to one thread as in the tool.

The working tree's variants count the elements beyond rounding as the tool does (`excess_units` =
EXCESS_UNITS). `--baseline-kernel FILE` gives the baseline a compiled kernel of its own (a `_tensorkernel*.so` built
from the baseline's C file and copied aside): without it the baseline's Python runs on the working tree's kernel.

Usage: python3 bench/bench_kernel.py [--elems 16777216] [--repeat 7] [--baseline HEAD] [--chunk N] [--only f32,bf16]
           [--zeros 0.001] [--paths native,numpy] [--baseline-kernel old/_tensorkernel.so]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import statistics
import subprocess
import sys
import time
import types
from typing import Any, Callable

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# compare_tensors's module: tensor_compare.py, tensor_metrics.py before the split (tried in this order)
MODULE_PATHS = ("src/msprobe_compare/measure/tensor_compare.py", "src/msprobe_compare/measure/tensor_metrics.py")


def load_revision(rev: str) -> types.ModuleType:
    """compare_tensors's module as it is at git revision `rev`, imported under a private name."""
    for path in MODULE_PATHS:
        shown = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:{path}"], capture_output=True, text=True)
        if shown.returncode == 0 and "def compare_tensors" in shown.stdout:
            source, module_path = shown.stdout, path
            break
    else:
        raise SystemExit(f"no compare_tensors at revision {rev}")
    name = f"_tensor_compare_{rev.replace('/', '_').replace('~', '_').replace('^', '_')}"
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__file__ = f"{rev}:{module_path}"
    sys.modules[name] = module  # dataclasses look their module up
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def make_pairs(elems: int, seed: int, only: set[str], zeros: float = 0.0) -> dict[str, tuple[Any, Any]]:
    from msprobe_compare.load.tensor_data import BF16, TensorData

    rng = np.random.default_rng(seed)
    base = rng.standard_normal(elems, dtype=np.float32)
    base[rng.integers(0, elems, int(elems * zeros))] = 0.0  # exact zeros on both sides (0/0 relative errors)
    pairs: dict[str, tuple[Any, Any]] = {}
    if "f32" in only:
        noise = rng.standard_normal(elems, dtype=np.float32)
        bench = base * (1 + np.float32(1e-4) * noise)
        pairs["f32"] = (TensorData(base.reshape(-1, 4096), "float32"), TensorData(bench.reshape(-1, 4096), "float32"))
    if "bf16" in only:
        noise = rng.standard_normal(elems, dtype=np.float32)
        bench = base * (1 + np.float32(1e-3) * noise)

        def bf16(x: np.ndarray) -> np.ndarray:
            bits = x.view(np.uint32)
            rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # round to nearest even
            return rounded.astype(np.uint16).reshape(-1, 4096)

        pairs["bf16"] = (TensorData(bf16(base), BF16), TensorData(bf16(bench), BF16))
    return pairs


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """CPU seconds of this thread (a shared machine's preemption does not count) and fn's result."""
    t0 = time.thread_time()
    out = fn()
    return time.thread_time() - t0, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--elems", type=int, default=1 << 24, help="elements per tensor, a multiple of 4096 (default 16 Mi)"
    )
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--baseline", default="HEAD", help="git revision of the baseline ('' = none)")
    ap.add_argument("--chunk", type=int, default=0, help="chunk_elems for the working tree (0 = its default)")
    ap.add_argument("--only", default="f32,bf16", help="comma-separated pair kinds: f32, bf16")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--zeros",
        type=float,
        default=0.0,
        help="fraction of elements that are 0 on both sides (default 0, as gen_tensors.py)",
    )
    ap.add_argument(
        "--paths",
        default="native,numpy",
        help="working-tree variants: native (compiled kernel), numpy (its fallback), or both",
    )
    ap.add_argument("--baseline-kernel", default="", help="the baseline's own compiled _tensorkernel (.so file)")
    args = ap.parse_args()
    if args.elems <= 0 or args.elems % 4096:
        ap.error("--elems must be a positive multiple of 4096 (rows of 4096 elements)")

    try:
        from msprobe_compare.measure import tensor_compare as current
    except ImportError:  # a tree before the split
        from msprobe_compare.measure import tensor_metrics as current

    variants: dict[str, Callable[[Any, Any], Any]] = {}
    if args.baseline:
        base_mod = load_revision(args.baseline)
        if args.baseline_kernel:
            import importlib.machinery

            loader = importlib.machinery.ExtensionFileLoader("_tensorkernel", args.baseline_kernel)
            spec = importlib.util.spec_from_loader("_tensorkernel", loader)
            assert spec is not None
            old_kernel = importlib.util.module_from_spec(spec)
            loader.exec_module(old_kernel)
            if hasattr(base_mod, "_native_kernel"):  # before the twins were bound once
                base_mod._native_kernel = lambda: old_kernel
            else:
                base_mod.accumulate = functools.partial(base_mod._c_accumulate, kernel=old_kernel)
        variants[f"baseline ({args.baseline})"] = base_mod.compare_tensors
    chunk = args.chunk or current.DEFAULT_CHUNK_ELEMS
    paths = set(args.paths.split(","))
    split = getattr(current, "_compare", None)  # (npu, bench, chunk_elems, kernel): kernel None = numpy path
    kernel = None
    if split is not None:
        from msprobe_compare import native

        kernel = native.load("_tensorkernel")
    units = getattr(current, "EXCESS_UNITS", None)
    extra = () if units is None else (units,)
    if split is None:
        variants["working tree"] = lambda n, b: current.compare_tensors(n, b, chunk_elems=chunk)
    else:
        if "numpy" in paths:
            variants["working tree, numpy"] = lambda n, b: split(n, b, chunk, None, *extra)
        if "native" in paths and kernel is not None:
            variants[f"working tree, native ({kernel.SIMD})"] = lambda n, b: split(n, b, chunk, kernel, *extra)
    if not variants:
        ap.error("no variant to run (is the native module built?)")
    pairs = make_pairs(args.elems, args.seed, set(args.only.split(",")), args.zeros)
    print(
        f"numpy {np.__version__}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, "
        f"{args.elems} elements per tensor, chunk {chunk}"
    )

    with _one_thread(current) as blas:
        print(f"working tree dot products: {'BLAS on one thread' if blas else 'einsum'}")
        for kind, (npu, bench) in pairs.items():
            nbytes = npu.array.nbytes + bench.array.nbytes
            times: dict[str, list[float]] = {v: [] for v in variants}
            results: dict[str, Any] = {}
            for name, fn in variants.items():  # warm-up (page faults of fresh buffers, lazy set-up)
                results[name] = fn(npu, bench)
            for _ in range(args.repeat):
                for name, fn in variants.items():
                    seconds, _ = timed(lambda: fn(npu, bench))
                    times[name].append(seconds)
            print(f"\n{kind}: {nbytes / 1e9:.3f} GB per call (both sides)")
            medians = {}
            names = list(variants)
            for name, ts in times.items():
                med = statistics.median(ts)
                medians[name] = med
                ratio = f"  x{medians[names[0]] / med:.2f}" if name != names[0] else ""
                print(
                    f"  {name:<32} median {med * 1e3:8.1f} ms = {nbytes / med / 1e9:5.2f} GB/s "
                    f"({med / args.elems * 1e9:5.2f} ns/elem); best {nbytes / min(ts) / 1e9:5.2f} GB/s{ratio}"
                )
            first = results[names[0]]
            for other in names[1:]:
                print(f"  {other} against {names[0]}:")
                for field in ("cosine", "euc_dist", "max_abs_err", "max_rel_err", "one_thousandth", "five_thousandths"):
                    x, y = getattr(first, field), getattr(results[other], field)
                    same = "same" if (x.state, x.value) == (y.state, y.value) else f"differs: {x.value!r}"
                    print(f"    {field:<17} {y.value!r:<24} {same}")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    return 0


class _one_thread:
    """The tool's BLAS pinning (if the working tree has one), so the baseline and the tree run alike."""

    def __init__(self, module: types.ModuleType) -> None:
        self.cm = getattr(module, "single_threaded_blas", None)
        self.ctx: Any = None

    def __enter__(self) -> bool:
        if self.cm is None:
            return False
        self.ctx = self.cm()
        return bool(self.ctx.__enter__())

    def __exit__(self, *exc: object) -> None:
        if self.ctx is not None:
            self.ctx.__exit__(*exc)


if __name__ == "__main__":
    sys.exit(main())
