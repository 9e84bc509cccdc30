"""Dumps written by msprobe 26.2.0 (tests/data/pytorch26, made with the shared fixtures' PyTorch dump maker on CPU,
one training step; see tests/data/README.md): single-process dumps in `step0/proc<PID>/`, parameter gradients named
`...parameters_grad.0` at backward time, xor checksums, the default risk_level; statistics, md5, xor (mix), L1
statistics, L0 tensor (without stack.json or construct.json) and two ranks.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import DATA
from parity import read_xlsx

D26 = DATA / "pytorch26"
CASES = sorted(p.name for p in D26.iterdir() if (p / "npu").is_dir())


def _write(tmp_path: Path, npu: Path, bench: Path, name: str = "compare.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"npu_path": str(npu), "bench_path": str(bench)}))
    return path


def _param_grad_rows(dump: Path) -> list[str]:
    data = json.loads(dump.read_text())["data"]
    return [f"{e}.{p}" for e, body in data.items() if ".parameters_grad" in e for p in body]


def test_cases_there():
    assert {"mlp_bug_stat", "mlp_bug_md5", "mlp_bug_xor", "mlp_bug_L1_stat", "mlp_bug_L0_tensor",
            "dist_bug_stat"} <= set(CASES)  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_step_folders_compare(run_cli, tmp_path, case):
    """Step folders of proc<PID> (or rank<N>) folders: every rank compared, every parameter gradient has its row,
    paired with the bench row of the same name, no entry without rows."""
    folder = D26 / case
    cfg = _write(tmp_path, folder / "npu/step0", folder / "bench/step0")
    run = run_cli(tmp_path, "pytorch", "-c", input_name=str(cfg))
    assert run.code == 0, run.out
    npu_ranks = sorted(p for p in (folder / "npu/step0").iterdir())
    tables = run.files("compare_result_*.xlsx")
    assert len(tables) == len(npu_ranks)
    for rank, table in zip(npu_ranks, tables):
        assert table.name.startswith(f"compare_result_{rank.name}_")  # named after the NPU folder
        _, rows, _ = read_xlsx(table)
        pairs = {r[0]: r[1] for r in rows}
        grads = _param_grad_rows(rank / "dump.json")
        assert bool(grads) == (case != "mlp_bug_L1_stat")  # L1: APIs only
        assert all(pairs[g] == g for g in grads), [g for g in grads if pairs.get(g) != g]
    assert "yields no row" not in run.out
    if npu_ranks[0].name.startswith("proc"):
        bench = next((folder / "bench/step0").iterdir()).name
        assert f"process folders paired in sorted order: npu {npu_ranks[0].name} <-> bench {bench}" in run.out


def test_modes_are_read(run_cli, tmp_path):
    """md5 (CRC-32 texts) and xor (`0x` + 16 hex digits) dumps are md5-mode compares; the bug shows as Different."""
    for case, width in (("mlp_bug_md5", 8), ("mlp_bug_xor", 18)):
        folder = D26 / case
        npu = next((folder / "npu/step0").iterdir())
        bench = next((folder / "bench/step0").iterdir())
        run = run_cli(tmp_path, "pytorch", "-c", input_name=str(_write(tmp_path, npu, bench, case + ".json")),
                      out_dir=tmp_path / case)  # a proc folder given directly: one pair  # fmt: skip
        assert run.code == 0, run.out
        header, rows, _ = read_xlsx(run.one("compare_result_*.xlsx"))
        col = {c: i for i, c in enumerate(header)}
        md5 = [r[col["NPU MD5"]] for r in rows
               if r[col["NPU Dtype"]] == "torch.float32" and r[col["NPU Tensor Shape"]] != "[]"]  # fmt: skip
        assert md5 and all(len(m) == width for m in md5)
        if case == "mlp_bug_xor":  # xor of a 0-d tensor: its value, a bare JSON number (the loss, 1.0)
            zero_d = [r[col["NPU MD5"]] for r in rows if r[0].startswith("Functional.cross_entropy.0.")]
            assert "1.0" in zero_d and any(m.startswith("2.23788") for m in zero_d), zero_d
        assert "Different" in {r[col["Result"]] for r in rows}


def test_tensor_dump_without_stack_or_construct(run_cli, tmp_path):
    folder = D26 / "mlp_bug_L0_tensor"
    npu = next((folder / "npu/step0").iterdir())
    assert not (npu / "stack.json").exists() and not (npu / "construct.json").exists()
    cfg = _write(tmp_path, npu, next((folder / "bench/step0").iterdir()))
    run = run_cli(tmp_path, "pytorch", "-s", input_name=str(cfg))
    assert run.code == 0, run.out
    header, rows, _ = read_xlsx(run.one("compare_result_*.xlsx"))
    col = {c: i for i, c in enumerate(header)}
    grads = [r for r in rows if ".parameters_grad.0." in r[0]]
    assert len(grads) == 6 and all(r[col["Cosine"]] not in (None, "unsupported") for r in grads)
    assert all(str(r[col["Data_name"]]).startswith(f"['{r[0]}.pt'") for r in grads)


def test_old_and_new_dumper_pair_parameter_gradients_and_note_the_risk_level(run_cli, tmp_path):
    """8.3.3 `parameters_grad` rows pair with 26.2.0 `parameters_grad.0` rows; 26.2.0's default risk_level left out
    Torch.ones_like, which the 8.3.3 dump has: said once."""
    npu = next((D26 / "mlp_bug_stat/npu/step0").iterdir()) / "dump.json"
    bench = DATA / "pytorch/mlp_same_stat/bench/step0/rank/dump.json"
    run = run_cli(tmp_path, "pytorch", "-c", input_name=str(_write(tmp_path, npu, bench)))
    assert run.code == 0, run.out
    _, rows, _ = read_xlsx(run.one("compare_result_*.xlsx"))
    pairs = {r[0]: r[1] for r in rows}
    assert len(rows) == 100
    for g in _param_grad_rows(npu):
        assert pairs[g] == g.replace(".parameters_grad.0.", ".parameters_grad."), g
    assert run.out.count("default risk_level") == 1
    assert "the npu dump holds no low-risk API call (Torch.ones_like: 1 on the bench side)" in run.out
    again = run_cli(tmp_path, "pytorch", "-c", input_name=str(_write(tmp_path, bench, npu, "reverse.json")),
                    out_dir=tmp_path / "reverse")  # fmt: skip
    pairs = {r[0]: r[1] for r in read_xlsx(again.one("compare_result_*.xlsx"))[1]}
    assert pairs["Module.fc1.Linear.parameters_grad.weight"] == "Module.fc1.Linear.parameters_grad.0.weight"
    assert "the bench dump holds no low-risk API call" in again.out
    same = run_cli(tmp_path, "pytorch", "-c", input_name=str(_write(tmp_path, npu, npu, "same.json")),
                   out_dir=tmp_path / "same")  # fmt: skip
    assert "risk_level" not in same.out


def _proc_step(root: Path, names: list[str]) -> Path:
    src = next((D26 / "mlp_bug_stat/npu/step0").iterdir())
    for name in names:
        shutil.copytree(src, root / "step0" / name)
    return root / "step0"


def test_several_proc_folders_pair_in_sorted_order(run_cli, tmp_path):
    npu = _proc_step(tmp_path / "npu", ["proc900", "proc1200"])
    bench = _proc_step(tmp_path / "bench", ["proc77", "proc80"])
    run = run_cli(tmp_path, "pytorch", "-c", input_name=str(_write(tmp_path, npu, bench)))
    assert run.code == 0, run.out
    assert "process folders paired in sorted order: npu proc900 <-> bench proc77, npu proc1200 <-> bench proc80" \
        in run.out  # fmt: skip
    assert [p.name.split("_")[2] for p in run.files("compare_result_*.xlsx")] == ["proc1200", "proc900"]
    uneven = _proc_step(tmp_path / "bench3", ["proc1", "proc2", "proc3"])
    run = run_cli(tmp_path, "pytorch", "-c", input_name=str(_write(tmp_path, npu, uneven, "uneven.json")),
                  out_dir=tmp_path / "uneven")  # fmt: skip
    assert run.code == 1
    assert "cannot pair the process folders" in run.out and "proc900, proc1200" in run.out
    assert "proc1, proc2, proc3" in run.out


def _dump(path: Path, data: dict) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "dump.json").write_text(json.dumps({"task": "statistics", "level": "L1", "framework": "pytorch",
                                                "dump_data_dir": None, "data": data}))  # fmt: skip
    return path / "dump.json"


def _tensor(**extra):
    return {"type": "torch.Tensor", "dtype": "torch.int64", "shape": [3], "requires_grad": False, **extra}


def test_md5_as_numbers_and_integer_statistics(run_cli, tmp_path):
    """md5 written as a JSON int or float (unit-test dumps; 26.x xor of a 0-d tensor) is the number's text;
    integer statistics, null Mean/Norm and entries without is_recompute are read."""
    npu = _dump(
        tmp_path / "n",
        {
            "Torch.a.0.forward": {
                "input_args": [_tensor(md5=123456), _tensor(md5=2.5)],
                "output": [_tensor(md5="0x00e306ac8071c97f")],
            }
        },
    )
    bench = _dump(tmp_path / "b", {"Torch.a.0.forward": {"input_args": [_tensor(md5=123456), _tensor(md5=2.25)],
                                                         "output": [_tensor(md5="0x00e306ac8071c97f")],
                                                         "is_recompute": False}})  # fmt: skip
    run = run_cli(tmp_path, "pytorch", input_name=str(_write(tmp_path, npu, bench)))
    assert run.code == 0, run.out
    header, rows, _ = read_xlsx(run.one("compare_result_*.xlsx"))
    col = {c: i for i, c in enumerate(header)}
    assert [(r[col["NPU MD5"]], r[col["BENCH MD5"]], r[col["Result"]]) for r in rows] == [
        ("123456", "123456", "pass"),
        ("2.5", "2.25", "Different"),
        ("0x00e306ac8071c97f",) * 2 + ("pass",),
    ]
    stats = {"Max": 7, "Min": -2, "Mean": None, "Norm": None}
    npu = _dump(tmp_path / "n2", {"Torch.a.0.forward": {"input_args": [_tensor(**stats)]}})
    bench = _dump(tmp_path / "b2", {"Torch.a.0.forward": {"input_args": [_tensor(**{**stats, "Max": 9})],
                                                          "is_recompute": True}})  # fmt: skip
    run = run_cli(tmp_path, "pytorch", input_name=str(_write(tmp_path, npu, bench, "s.json")), out_dir=tmp_path / "s")
    assert run.code == 0, run.out
    header, rows, _ = read_xlsx(run.one("compare_result_*.xlsx"))
    col = {c: i for i, c in enumerate(header)}
    assert rows[0][col["Max diff"]] == -2 and rows[0][col["NPU mean"]] in (None, "None")


def test_step_folder_of_each_dumper_version(run_cli, tmp_path):
    """An 8.3.3 step folder (`rank`) against a 26.2.0 one (`proc<PID>`): one pair, named after the NPU folder."""
    npu = D26 / "mlp_bug_stat/npu/step0"
    run = run_cli(
        tmp_path, "pytorch", "-c", input_name=str(_write(tmp_path, npu, DATA / "pytorch/mlp_same_stat/bench/step0"))
    )
    assert run.code == 0, run.out
    proc = next(npu.iterdir()).name
    assert f"process folders paired in sorted order: npu {proc} <-> bench rank" in run.out
    assert run.one(f"compare_result_{proc}_*.xlsx")
    assert run.out.count("default risk_level") == 1


def test_python_api_reads_proc_step_folders(tmp_path):
    import msprobe_compare

    folder = D26 / "mlp_bug_stat"
    result = msprobe_compare.compare(folder / "npu/step0", folder / "bench/step0", tmp_path)  # framework from the dump
    (label,) = result.ranks
    assert label.startswith("proc") and result.rows == 100 and result.matched == 100


def test_numbered_parameter_gradients_are_gradients_for_the_root_cause():
    from msprobe_compare.load.rows import phase_of

    assert phase_of("Module.fc1.Linear.parameters_grad.0") == phase_of("Module.fc1.Linear.parameters_grad")
    assert phase_of("Module.fc1.Linear.parameters_grad.12") == "parameters_grad"
    assert phase_of("Module.fc1.Linear.forward.0") == "forward"
