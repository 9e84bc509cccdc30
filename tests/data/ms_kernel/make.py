"""Writes the synthetic MindSpore graph-mode (kernel) dump trees of this folder (deterministic; run from here).

npy/: kernel .npy files of 2 ranks x 2 steps (one step only on the NPU side), several ops with inputs and outputs,
repeated keys in timestamp order, one-sided files, mismatched shapes and dtypes, 0-d arrays, NaN/inf, ints and
bools, float16, a mapping.csv, a file whose name is not a kernel name.
npy_empty/: an empty array (the reference fails on it).
statistic/: statistic.csv of 2 ranks x 2 steps with null/True/False, nan/inf, zero maxima, one-sided rows,
repeated keys, mismatched shapes and dtypes.
common/: the static-graph single-point layout (name_dtype_N.npy files in two folders, one name mapped).
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
TS = 1721724968854000


def _npy(folder: Path, name: str, array: np.ndarray) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / name, array, allow_pickle=False)


def _name(op_type: str, op: str, task: int, ts: int, io: str, slot: int, extra: str = "") -> str:
    return f"{op_type}.{op}.{task}.2.{ts}.{io}{extra}.{slot}.DefaultFormat.npy"


def npy_case() -> None:
    root = HERE / "npy"
    for side in ("npu", "bench"):
        for rank in (0, 1):
            steps = (0, 1) if side == "npu" or rank == 0 else (0,)
            for step in steps:
                d = root / side / f"rank_{rank}" / "net" / "0" / str(step)
                r = np.random.default_rng(100 * rank + step)
                x = r.standard_normal((4, 6)).astype(np.float32)
                w = r.standard_normal((6, 3)).astype(np.float32)
                y = x @ w
                y_npu = y * np.float32(1.01) if (side == "npu" and rank == 1) else y
                _npy(d, _name("MatMul", "Default_MatMul-op1", 11, TS + 5, "input", 0), x)
                _npy(d, _name("MatMul", "Default_MatMul-op1", 11, TS + 5, "input", 1), w)
                _npy(d, _name("MatMul", "Default_MatMul-op1", 11, TS + 6, "output", 0), y_npu)
                # the same key twice: paired by occurrence in timestamp order (files written out of order)
                a = r.standard_normal(8).astype(np.float32)
                b = (a * 2).astype(np.float32)
                _npy(d, _name("Relu", "Default_Relu-op2", 12, TS + 30, "output", 0), b if side == "npu" else b)
                _npy(d, _name("Relu", "Default_Relu-op2", 12, TS + 20, "output", 0), a)
                # an Idx component after input/output
                _npy(d, _name("Add", "Default_Add-op3", 13, TS + 40, "input", 0, extra=".1"), a)
                # shape and dtype mismatches
                _npy(
                    d,
                    _name("Reshape", "Default_Reshape-op4", 14, TS + 50, "output", 0),
                    np.ones((2, 3), np.float32) if side == "npu" else np.ones((3, 2), np.float32),
                )
                _npy(
                    d,
                    _name("Cast", "Default_Cast-op5", 15, TS + 60, "output", 0),
                    np.full((3,), 0.5, np.float16) if side == "npu" else np.full((3,), 0.5, np.float32),
                )
                # 0-d
                _npy(d, _name("ReduceSum", "Default_ReduceSum-op6", 16, TS + 70, "output", 0), np.float32(3.5))
                # NaN at the same positions, and at different ones
                n1 = np.array([1.0, np.nan, 3.0, np.inf], np.float32)
                _npy(d, _name("Div", "Default_Div-op7", 17, TS + 80, "output", 0), n1)
                n2 = (
                    np.array([1.0, 2.0, np.nan], np.float32)
                    if side == "npu"
                    else np.array([np.nan, 2.0, 3.0], np.float32)
                )
                _npy(d, _name("Div", "Default_Div-op8", 18, TS + 90, "output", 0), n2)
                # ints, bools, float16, zeros
                _npy(
                    d,
                    _name("ArgMax", "Default_ArgMax-op9", 19, TS + 100, "output", 0),
                    np.array([[1, 2], [3, 4]], np.int32) + (1 if side == "npu" else 0),
                )
                _npy(d, _name("Equal", "Default_Equal-op10", 20, TS + 110, "output", 0), np.array([True, False, True]))
                _npy(
                    d,
                    _name("Mul", "Default_Mul-op11", 21, TS + 120, "output", 0),
                    np.full((5, 5), 0.25 if side == "npu" else 0.0, np.float32),
                )  # Cosine Nan (D6)
                _npy(d, _name("Sub", "Default_Sub-op12", 22, TS + 130, "output", 0), np.zeros((2, 2), np.float32))
                # one-sided files
                if side == "npu":
                    _npy(d, _name("Neg", "Default_Neg-op13", 23, TS + 140, "output", 0), a)
                else:
                    _npy(d, _name("Abs", "Default_Abs-op14", 24, TS + 150, "output", 0), a)
                # not a kernel file name: ignored
                _npy(d, "notes.npy", a)
    # mapping.csv: a short file name given its kernel name
    d = root / "npu" / "rank_0" / "net" / "0" / "0"
    _npy(d, "1.npy", np.arange(6, dtype=np.float32))
    with open(d / "mapping.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["File Name", "Kernel Name"])
        w.writerow(["1.npy", _name("Tile", "Default_Tile-op15", 25, TS + 160, "output", 0)])
    _npy(
        root / "bench" / "rank_0" / "net" / "0" / "0",
        _name("Tile", "Default_Tile-op15", 25, TS + 161, "output", 0),
        np.arange(6, dtype=np.float32),
    )
    _compare_json(root, {"rank_id": [], "step_id": []})
    _compare_json(root, {"rank_id": [1], "step_id": [0]}, "compare_filtered.json")


def npy_empty_case() -> None:
    root = HERE / "npy_empty"
    for side in ("npu", "bench"):
        d = root / side / "rank_0" / "net" / "0" / "0"
        _npy(d, _name("Slice", "Default_Slice-op1", 1, TS, "output", 0), np.zeros((0, 3), np.float32))
        _npy(d, _name("Relu", "Default_Relu-op2", 2, TS + 1, "output", 0), np.ones(3, np.float32))
    _compare_json(root, {"rank_id": [], "step_id": []})


STAT_HEADER = [
    "Op Type",
    "Op Name",
    "Task ID",
    "Stream ID",
    "Timestamp",
    "IO",
    "Slot",
    "Data Size",
    "Data Type",
    "Shape",
    "Max Value",
    "Min Value",
    "Avg Value",
    "L2Norm Value",
]


def statistic_case() -> None:
    root = HERE / "statistic"
    for side in ("npu", "bench"):
        for rank in (0, 1):
            for step in (0, 1):
                d = root / side / f"rank_{rank}" / "net" / "0" / str(step)
                d.mkdir(parents=True, exist_ok=True)
                k = 1.0 + 0.1 * rank + 0.01 * step
                npu = side == "npu"
                rows = [
                    [
                        "MatMul",
                        "Default_MatMul-op1",
                        11,
                        2,
                        TS + 5,
                        "input",
                        0,
                        96,
                        "float32",
                        "(4,6)",
                        2.5 * k,
                        -2.25 * k,
                        0.125,
                        7.5 * k,
                    ],
                    [
                        "MatMul",
                        "Default_MatMul-op1",
                        11,
                        2,
                        TS + 6,
                        "output",
                        0,
                        48,
                        "float32",
                        "(4,3)",
                        (3.0 if npu else 2.0) * k,
                        -1.0,
                        0.5 if npu else 0.25,
                        6.0,
                    ],
                    ["Relu", "Default_Relu-op2", 12, 2, TS + 30, "output", 0, 32, "float32", "(8)", 4.0, 0.0, 1.5, 5.0],
                    [
                        "Relu",
                        "Default_Relu-op2",
                        12,
                        2,
                        TS + 20,
                        "output",
                        0,
                        32,
                        "float32",
                        "(8)",
                        2.0 if npu else 2.5,
                        0.0,
                        0.75,
                        2.5,
                    ],
                    [
                        "Equal",
                        "Default_Equal-op3",
                        13,
                        2,
                        TS + 40,
                        "output",
                        0,
                        3,
                        "bool",
                        "(3)",
                        "True",
                        "False",
                        "null",
                        "null",
                    ],
                    [
                        "Reshape",
                        "Default_Reshape-op4",
                        14,
                        2,
                        TS + 50,
                        "output",
                        0,
                        24,
                        "float32",
                        "(2,3)" if npu else "(3,2)",
                        1.0,
                        1.0,
                        1.0,
                        2.449,
                    ],
                    [
                        "Cast",
                        "Default_Cast-op5",
                        15,
                        2,
                        TS + 60,
                        "output",
                        0,
                        6,
                        "float16" if npu else "float32",
                        "(3)",
                        0.5,
                        0.5,
                        0.5,
                        0.866,
                    ],
                    [
                        "Sub",
                        "Default_Sub-op6",
                        16,
                        2,
                        TS + 70,
                        "output",
                        0,
                        16,
                        "float32",
                        "(2,2)",
                        0.0 if not npu else 1e-3,
                        0.0,
                        0.0,
                        0.0,
                    ],
                    [
                        "Div",
                        "Default_Div-op7",
                        17,
                        2,
                        TS + 80,
                        "output",
                        0,
                        16,
                        "float32",
                        "(4)",
                        "nan",
                        "nan",
                        "nan",
                        "nan",
                    ],
                    [
                        "Div",
                        "Default_Div-op8",
                        18,
                        2,
                        TS + 90,
                        "output",
                        0,
                        16,
                        "float32",
                        "(4)",
                        "inf" if npu else 7.0,
                        1.0,
                        "inf" if npu else 2.0,
                        "inf" if npu else 9.0,
                    ],
                    [
                        "ReduceSum",
                        "Default_ReduceSum-op9",
                        19,
                        2,
                        TS + 100,
                        "output",
                        0,
                        4,
                        "float32",
                        "()",
                        3.5,
                        3.5,
                        3.5,
                        3.5,
                    ],
                    [
                        "Neg" if npu else "Abs",
                        "Default_Neg-op10" if npu else "Default_Abs-op11",
                        20,
                        2,
                        TS + 110,
                        "output",
                        0,
                        32,
                        "float32",
                        "(8)",
                        1.0,
                        -1.0,
                        0.0,
                        2.0,
                    ],
                    [
                        "Mul",
                        "Default_Mul-op12",
                        21,
                        2,
                        TS + 120,
                        "output",
                        0,
                        32,
                        "int32",
                        "(8)",
                        10 if npu else 4,
                        -3,
                        1.5,
                        12.25,
                    ],
                ]
                with open(d / "statistic.csv", "w", newline="") as f:
                    w = csv.writer(f)
                    w.writerow(STAT_HEADER)
                    w.writerows(rows)
    _compare_json(root, {"rank_id": [], "step_id": []})
    _compare_json(root, {"rank_id": [0], "step_id": [1]}, "compare_filtered.json")


def common_case() -> None:
    root = HERE / "common"
    base = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    for side in ("npu", "bench"):
        npu = side == "npu"
        d = root / side / "layer1"
        _npy(d, "conv_out_float32_0.npy", base * (1.02 if npu else 1))
        _npy(d, "relu_float32_0.npy", np.maximum(base - 0.5, 0))
        _npy(d, "gelu_float16_0.npy" if npu else "gelu_act_float16_0.npy", (base / 2 + 0.1).astype(np.float16))
        _npy(
            d, "cast_float16_0.npy" if npu else "cast_float32_0.npy", np.full(3, 0.5, np.float16 if npu else np.float32)
        )
        if not npu:
            _npy(d, "extra_float32_0.npy", base)  # a bench file nobody asks for
        d = root / side / "layer2"
        _npy(d, "conv_out_float32_0.npy", base + 1)
        _npy(d, "div_float32_0.npy", np.array([1.0, np.nan, 3.0], np.float32))
        _npy(d, "argmax_int32_0.npy", np.array([1, 2, 3], np.int32) + (1 if npu else 0))
    _compare_json(root, {"common": True, "map_dict": {"gelu": "gelu_act"}})


def _compare_json(root: Path, extra: dict, name: str = "compare.json") -> None:
    doc = {"npu_path": "./npu", "bench_path": "./bench", "is_print_compare_log": True, **extra}
    (root / name).write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    for name in ("npy", "npy_empty", "statistic", "common"):
        shutil.rmtree(HERE / name, ignore_errors=True)
    npy_case()
    npy_empty_case()
    statistic_case()
    common_case()
