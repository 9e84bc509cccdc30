"""Parallel layouts of a multi-rank run: tensor (tp), pipeline (pp) and data (dp) parallel sizes and rank order.

A layout is given as text (`tp=2,pp=2,dp=2`, optionally `order=tp-dp-pp`) or as a compare.json object
(`{"tp": 2, "pp": 2, "dp": 2, "order": "tp-dp-pp"}`). The order lists the dimensions from the fastest-varying to
the slowest: Megatron's default (`tp-cp-ep-dp-pp` without cp/ep) puts consecutive ranks in one TP group, then DP,
then pipeline stages, so rank = tp_rank + tp * (dp_rank + dp * pp_rank).

When no layout is given, `detect_layouts` derives both sides' layouts from the rank counts, the shapes of rows with
the same name (a dim k times smaller on the sharded side) and the module class names of tensor-parallel wrappers.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from msprobe_compare.errors import InputError, OptionError
from msprobe_compare.records import dataclass

DIMS = ("tp", "dp", "pp")
DEFAULT_ORDER = ("tp", "dp", "pp")  # Megatron's order (tp-cp-ep-dp-pp) without context and expert parallelism

# class names of tensor-parallel wrappers (PyTorch: Megatron, fairscale, TransformerEngine; MindSpore: mindformers,
# MindSpeed) and the class of the unsharded layer they stand for
PARALLEL_CLASSES = {
    "ColumnParallelLinear": "Linear",
    "RowParallelLinear": "Linear",
    "TEColumnParallelLinear": "Linear",
    "TERowParallelLinear": "Linear",
    "VocabParallelEmbedding": "Embedding",
    "ParallelEmbedding": "Embedding",
}
PLAIN_CLASSES = {"Dense": "Linear"}  # MindSpore's nn.Dense is the unsharded linear layer of a MindSpore bench


@dataclass(frozen=True)
class ParallelLayout:
    tp: int = 1
    pp: int = 1
    dp: int = 1
    order: tuple[str, ...] = DEFAULT_ORDER
    source: str = "given"  # how it was found: "given" (option / compare.json) or the detection's reasoning

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp

    def text(self) -> str:
        order = "" if self.order == DEFAULT_ORDER else f",order={'-'.join(self.order)}"
        return f"tp={self.tp},pp={self.pp},dp={self.dp}{order}"

    def coords(self, rank: int) -> dict[str, int]:
        """{"tp": t, "dp": d, "pp": p} of a rank (0-based position among the sorted ranks)."""
        out: dict[str, int] = {}
        for dim in self.order:
            size = getattr(self, dim)
            out[dim] = rank % size
            rank //= size
        return out

    def rank_of(self, tp: int = 0, dp: int = 0, pp: int = 0) -> int:
        where = {"tp": tp, "dp": dp, "pp": pp}
        rank, stride = 0, 1
        for dim in self.order:
            rank += where[dim] * stride
            stride *= getattr(self, dim)
        return rank

    def groups(self) -> list[list[list[int]]]:
        """Rank positions per DP replica, per pipeline stage, in TP order: groups()[d][p][t]."""
        return [[[self.rank_of(t, d, p) for t in range(self.tp)] for p in range(self.pp)] for d in range(self.dp)]


_ITEM = re.compile(r"^\s*(tp|pp|dp|order)\s*=\s*([^,]+?)\s*$", re.IGNORECASE)


def parse_layout(value: Any, what: str = "layout") -> ParallelLayout:
    """A layout from its text (`tp=2,pp=2,dp=2[,order=tp-dp-pp]`) or a compare.json object; OptionError if bad."""
    if isinstance(value, ParallelLayout):
        return value
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, str):
        items = []
        for part in value.split(","):
            if not part.strip():
                continue
            m = _ITEM.match(part)
            if not m:
                raise OptionError(f"{what}: cannot read {part.strip()!r}; write e.g. tp=2,pp=2,dp=2 (and optionally "
                                  "order=tp-dp-pp)")  # fmt: skip
            items.append((m.group(1).lower(), m.group(2)))
    else:
        raise OptionError(f"{what} must be a text such as 'tp=2,pp=2' or an object such as {{\"tp\": 2}}, got "
                          f"{type(value).__name__}")  # fmt: skip
    sizes = {"tp": 1, "pp": 1, "dp": 1}
    order: tuple[str, ...] = DEFAULT_ORDER
    for key, raw in items:
        key = str(key).lower()
        if key == "order":
            parts = tuple(p.strip().lower() for p in str(raw).replace(",", "-").split("-") if p.strip())
            parts = tuple(p for p in parts if p not in ("cp", "ep"))  # not modelled: size 1
            if sorted(parts) != sorted(DIMS):
                raise OptionError(f"{what}: order must name tp, dp and pp once each (e.g. tp-dp-pp), got {raw!r}")
            order = parts
        elif key in sizes:
            try:
                size = int(str(raw).strip()) if not isinstance(raw, bool) else -1
            except ValueError:
                size = -1
            if size < 1:
                raise OptionError(f"{what}: {key} must be a whole number >= 1, got {raw!r}")
            sizes[key] = size
        else:
            raise OptionError(f"{what}: unknown key {key!r}; use tp, pp, dp and order")
    return ParallelLayout(sizes["tp"], sizes["pp"], sizes["dp"], order, "given")


def plain_class_name(name: str) -> str:
    """The row/entry name with tensor-parallel wrapper classes replaced by the unsharded layer's class:
    `Module.x.fc1.ColumnParallelLinear.forward.0` -> `Module.x.fc1.Linear.forward.0` (names of API calls unchanged)."""
    if not name.startswith(("Module.", "Cell.")):
        return name
    parts = name.split(".")
    for k in range(len(parts) - 1, 0, -1):
        if parts[k] in ("forward", "backward", "parameters_grad"):
            cls = parts[k - 1]
            plain = PARALLEL_CLASSES.get(cls) or PLAIN_CLASSES.get(cls)
            if plain is not None:
                parts[k - 1] = plain
                return ".".join(parts)
            return name
    return name


def parse_shape(text: str) -> tuple[int, ...] | None:
    """`[4, 8, 32]` -> (4, 8, 32); None when the text is not a list of whole numbers (scalars, None)."""
    if not text or text[0] not in "[(":
        return None
    inner = text.strip("[]() ")
    if not inner:
        return ()
    try:
        return tuple(int(x) for x in inner.split(",") if x.strip())
    except ValueError:
        return None


def shape_ratios(npu: dict[str, str], bench: dict[str, str]) -> Counter:
    """For rows of the same (plain) name: how many rows have a dim k times smaller on the npu side (k > 1, keyed k)
    or k times smaller on the bench side (keyed 1/k as a negative -k)."""
    found: Counter = Counter()
    for name, shape in npu.items():
        other = bench.get(name)
        if other is None or other == shape:
            continue
        a, b = parse_shape(shape), parse_shape(other)
        if a is None or b is None or len(a) != len(b):
            continue
        diff = [k for k in range(len(a)) if a[k] != b[k]]
        if len(diff) != 1:
            continue
        x, y = a[diff[0]], b[diff[0]]
        if x and y % x == 0:
            found[y // x] += 1
        elif y and x % y == 0:
            found[-(x // y)] += 1
    return found


def has_parallel_classes(names: list[str]) -> bool:
    return any(f".{cls}." in name for name in names for cls in PARALLEL_CLASSES)


def _divides(n: int, k: int) -> bool:
    return k >= 1 and n % k == 0


def detect_layouts(
    n_npu: int,
    n_bench: int,
    npu_shapes: dict[str, str],
    bench_shapes: dict[str, str],
    npu_stages: int,
    bench_stages: int,
    npu_wrapped: bool,
    bench_wrapped: bool,
) -> tuple[ParallelLayout, ParallelLayout] | None:
    """Both sides' layouts from rank counts, shapes of the first ranks' rows (plain names -> shape texts), the number
    of pipeline stages seen (distinct entry lists) and whether tensor-parallel wrapper classes appear; None when the
    dumps do not show a layout difference (the ranks are then paired by number as usual)."""
    ratios = shape_ratios(npu_shapes, bench_shapes)
    ratio = ratios.most_common(1)[0][0] if ratios else 1  # bench dim / npu dim (negative: npu dim / bench dim)
    why = []
    if ratios:
        k = abs(ratio)
        side = "npu" if ratio > 0 else "bench"
        why.append(f"{ratios[ratio]} row(s) with a dim {k} times smaller on the {side} side")
    if npu_wrapped or bench_wrapped:
        sides = " and ".join(s for s, w in (("npu", npu_wrapped), ("bench", bench_wrapped)) if w)
        why.append(f"tensor-parallel module classes on the {sides} side")
    if npu_stages > 1 or bench_stages > 1:
        why.append(f"{npu_stages} npu / {bench_stages} bench pipeline stage(s) (ranks holding different calls)")
    if ratio == 1 and npu_stages == bench_stages and n_npu == n_bench:
        return None
    if ratio == 1 and npu_stages == bench_stages:
        if not (npu_wrapped or bench_wrapped):
            return None  # only the rank counts differ: nothing says how; pair by number
        ratio = 1
    fits = []
    for tp_n, tp_b in _tp_candidates(n_npu, n_bench, npu_stages, bench_stages, ratio):
        dp_n, dp_b = n_npu // (tp_n * npu_stages), n_bench // (tp_b * bench_stages)
        if dp_n * tp_n * npu_stages != n_npu or dp_b * tp_b * bench_stages != n_bench:
            continue
        if dp_n != dp_b and dp_b != 1:
            continue
        if (npu_wrapped and tp_n == 1 and n_npu > npu_stages) or (
            bench_wrapped and tp_b == 1 and n_bench > bench_stages
        ):
            continue  # tensor-parallel wrappers: that side is sharded (unless each of its ranks is a pipeline stage of
            # its own: vLLM at TP=1 on one rank, Megatron at TP=1 split into stages)
        if (npu_wrapped or bench_wrapped) and ((not npu_wrapped and tp_n > 1) or (not bench_wrapped and tp_b > 1)):
            continue  # wrappers on one side only: the other side is not tensor-parallel
        fits.append((dp_n + dp_b, tp_n, tp_b, dp_n, dp_b))
    for _, tp_n, tp_b, dp_n, dp_b in sorted(fits)[:1]:  # the fewest data-parallel replicas
        reason = f"detected from {n_npu} npu and {n_bench} bench rank(s)" + (f": {'; '.join(why)}" if why else "")
        return (ParallelLayout(tp_n, npu_stages, dp_n, DEFAULT_ORDER, reason),
                ParallelLayout(tp_b, bench_stages, dp_b, DEFAULT_ORDER, reason))  # fmt: skip
    return None


def _tp_candidates(n_npu: int, n_bench: int, pp_n: int, pp_b: int, ratio: int) -> list[tuple[int, int]]:
    """(npu tp, bench tp) pairs consistent with the shape ratio, simplest first (the single-rank side unsharded,
    then dp = 1 on one side)."""
    out: list[tuple[int, int]] = []

    def add(tp_n: int, tp_b: int) -> None:
        if tp_n >= 1 and tp_b >= 1 and (tp_n, tp_b) not in out:
            out.append((tp_n, tp_b))

    k = abs(ratio)
    for base_n in (1, n_npu // pp_n if _divides(n_npu, pp_n) else 0):  # npu tp from dp = 1
        if ratio > 0:
            add(base_n * k, base_n)
        else:
            add(base_n, base_n * k)
    for base_b in (1, n_bench // pp_b if _divides(n_bench, pp_b) else 0):
        if ratio > 0:
            add(base_b * k, base_b)
        elif base_b % k == 0:
            add(base_b // k, base_b)
    if k == 1:  # no shape says it (runs of different code share no names): one side sharded over all its ranks
        add(n_npu // pp_n if _divides(n_npu, pp_n) else 0, 1)
        add(1, n_bench // pp_b if _divides(n_bench, pp_b) else 0)
    return out


def check_layout(layout: ParallelLayout, ranks: int, side: str) -> None:
    if layout.world != ranks:
        raise InputError(f"the {side} layout {layout.text()} needs {layout.world} rank(s), but the {side} step folder "
                         f"holds {ranks}", None)  # fmt: skip
