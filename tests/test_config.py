"""config.py: compare.json read into a CompareConfig (spec §1.3), and the pair of paths checked once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from msprobe_compare.config import Options, load_config, make_config
from msprobe_compare.errors import InputError

OPTS = Options(framework="pytorch")


def _dumps(root: Path) -> tuple[Path, Path]:
    for side in ("npu", "bench"):
        (root / side / "rank0").mkdir(parents=True)
        (root / side / "rank0" / "dump.json").write_text("{}")
    return root / "npu" / "rank0", root / "bench" / "rank0"


def _compare_json(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc))
    return path


def test_relative_paths_are_read_against_the_working_directory(tmp_path, monkeypatch):
    _dumps(tmp_path)
    monkeypatch.chdir(tmp_path)
    cfg_file = _compare_json(tmp_path / "c.json", {"npu_path": "npu/rank0", "bench_path": "bench/rank0/dump.json",
                                                  "stack_path": "npu/rank0/stack.json"})  # fmt: skip
    cfg = load_config(cfg_file, OPTS)
    assert cfg.npu_path == tmp_path / "npu/rank0/dump.json" and cfg.bench_path == tmp_path / "bench/rank0/dump.json"
    assert cfg.stack_path == tmp_path / "npu/rank0/stack.json" and cfg.print_compare_log is True  # absent: on
    assert cfg.input_path == cfg_file and not cfg.is_directory_compare


@pytest.mark.parametrize(
    "doc,message",
    [
        ([1, 2], "must be a JSON object with npu_path and bench_path"),
        ({"bench_path": "b"}, "'npu_path' is missing"),
        ({"npu_path": "", "bench_path": "b"}, "'npu_path' is missing"),
        ({"npu_path": 3, "bench_path": "b"}, "'npu_path' must be a path string, got int"),
        ({"npu_path": "npu/rank0", "bench_path": "bench/rank0", "stack_path": 1}, "'stack_path' must be a path"),
        (
            {"npu_path": "npu/rank0", "bench_path": "bench/rank0", "is_print_compare_log": "yes"},
            "'is_print_compare_log' must be true or false",
        ),
        ({"npu_path": "npu/rank0", "bench_path": "bench/rank0", "npu_parallel": "tp=0"}, "npu_parallel"),
    ],
)
def test_bad_compare_json_names_the_file(tmp_path, monkeypatch, doc, message):
    _dumps(tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=message) as info:
        load_config(_compare_json(tmp_path / "c.json", doc), OPTS)
    assert info.value.path is not None and Path(info.value.path).name == "c.json"


def test_layouts_from_compare_json_yield_to_the_options(tmp_path, monkeypatch):
    _dumps(tmp_path)
    monkeypatch.chdir(tmp_path)
    doc = {"npu_path": "npu/rank0", "bench_path": "bench/rank0", "npu_parallel": "tp=2", "bench_parallel": {"dp": 2}}
    cfg = load_config(_compare_json(tmp_path / "c.json", doc), OPTS)
    assert cfg.options.npu_layout.tp == 2 and cfg.options.bench_layout.dp == 2
    given = Options(framework="pytorch", npu_layout="pp=2")
    assert load_config(tmp_path / "c.json", given).options.npu_layout.pp == 2  # the command line wins


def test_make_config_checks_the_pair(tmp_path):
    npu, bench = _dumps(tmp_path)
    with pytest.raises(InputError, match="npu_path does not exist"):
        make_config(tmp_path / "nowhere", bench, OPTS)
    (tmp_path / "step").mkdir()
    (tmp_path / "step" / "rank0").mkdir()
    with pytest.raises(InputError, match="must be of the same type"):
        make_config(npu, tmp_path / "step", OPTS)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "debug.json").write_text("{}")
    with pytest.raises(InputError, match="must both be dump.json files or both debug.json files"):
        make_config(npu, tmp_path / "d" / "debug.json", OPTS)
    assert make_config(tmp_path / "npu", tmp_path / "bench", OPTS).is_directory_compare  # two step folders


# ---------------------------------------------------------------- paths beside compare.json, unknown keys, dump.json

DATA = Path(__file__).parent / "data"
CASE = DATA / "pytorch" / "mlp_bug_stat"


def _case_elsewhere(tmp_path: Path, **extra: object) -> Path:
    """A copy of a statistics case whose compare.json (relative paths) is run from another folder."""
    import shutil

    case = tmp_path / "case"
    shutil.copytree(CASE, case, ignore=shutil.ignore_patterns("expected"))
    _compare_json(case / "compare.json", {"npu_path": "./npu/step0/rank/dump.json",
                                          "bench_path": "./bench/step0/rank/dump.json",
                                          "stack_path": "./npu/step0/rank/stack.json", **extra})  # fmt: skip
    (tmp_path / "elsewhere").mkdir()
    return case


def _warnings(out: str) -> list[str]:
    return [line.split("[WARNING] ", 1)[1] for line in out.splitlines() if "[WARNING]" in line]


def test_paths_relative_to_compare_json_s_folder_are_used_with_a_warning(tmp_path, run_cli):
    case = _case_elsewhere(tmp_path)
    run = run_cli(tmp_path / "elsewhere", "pytorch", "-s", input_name="../case/compare.json")
    assert run.code == 0, run.out
    assert run.one("compare_result_*.xlsx")
    beside = [w for w in _warnings(run.out) if "compare.json's folder" in w]
    assert len(beside) == 3, run.out  # npu_path, bench_path and stack_path
    assert beside[0] == (f"../case/compare.json: npu_path './npu/step0/rank/dump.json' does not exist from the working "
                         f"directory ({tmp_path / 'elsewhere'}); reading it from compare.json's folder instead: "
                         f"{case / 'npu/step0/rank/dump.json'}")  # fmt: skip


def test_the_working_directory_wins_and_stays_quiet(tmp_path, run_cli):
    case = _case_elsewhere(tmp_path)
    run = run_cli(case, "pytorch", "-s")
    assert run.code == 0 and not [w for w in _warnings(run.out) if "compare.json" in w], run.out


def test_a_path_in_neither_place_names_both(tmp_path, run_cli):
    case = _case_elsewhere(tmp_path)
    (case / "bench/step0/rank/dump.json").unlink()
    run = run_cli(tmp_path / "elsewhere", "pytorch", input_name="../case/compare.json")
    assert run.code == 1
    (error,) = [line for line in run.out.splitlines() if "[ERROR]" in line]
    assert error.endswith(f"[ERROR] ../case/compare.json: bench_path './bench/step0/rank/dump.json' does not exist, "
                          f"neither from the working directory ({tmp_path / 'elsewhere/bench/step0/rank/dump.json'}) "
                          f"nor from compare.json's folder ({case / 'bench/step0/rank/dump.json'})")  # fmt: skip
    assert "Traceback" not in run.out + run.err and not run.out_dir.exists()


def test_python_api_reads_compare_json_s_folder_quietly(tmp_path, monkeypatch, capfd):
    import msprobe_compare

    _case_elsewhere(tmp_path)
    monkeypatch.chdir(tmp_path / "elsewhere")
    result = msprobe_compare.compare_json("../case/compare.json", tmp_path / "out")
    assert result.rows > 0 and result.xlsx is not None and result.xlsx.is_file()
    assert capfd.readouterr() == ("", "")  # the API prints nothing unless verbose
    assert result.columns["NPU Name"]


@pytest.mark.parametrize("key,closest", [("stack_pth", "stack_path"), ("is_print_compare_logs", "is_print_compare_log"),
                                         ("npu_paralel", "npu_parallel"), ("author", None)])  # fmt: skip
def test_unknown_keys_warn_with_the_closest_known_key(tmp_path, run_cli, key, closest):
    case = _case_elsewhere(tmp_path, **{key: "x"})
    run = run_cli(case, "pytorch")
    assert run.code == 0, run.out
    (warning,) = [w for w in _warnings(run.out) if "unknown key" in w]
    hint = f"did you mean '{closest}'?" if closest else "known keys: npu_path, bench_path, stack_path"
    assert warning.startswith(f"compare.json: unknown key '{key}' is ignored ({hint}")


def test_known_keys_raise_no_warning(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg_file = _compare_json(tmp_path / "c.json", {"npu_path": "npu/rank0", "bench_path": "bench/rank0",
                                                   "is_print_compare_log": False, "npu_parallel": None})  # fmt: skip
    _dumps(tmp_path)
    assert load_config(cfg_file, OPTS).notes == ()


@pytest.mark.parametrize("layout", ["dumper", "compact", "large"])
def test_a_dump_json_given_as_compare_json_says_so(tmp_path, run_cli, layout):
    source = CASE / "npu/step0/rank/dump.json"
    doc = json.loads(source.read_text())
    dump = tmp_path / "dump.json"
    if layout == "dumper":
        dump.write_bytes(source.read_bytes())
    elif layout == "compact":  # keys in another order: told from the parsed object
        dump.write_text(json.dumps({"data": doc["data"], "task": doc["task"], "level": doc["level"]}))
    else:  # larger than what is read to tell it: told from its first bytes
        doc["data"].update({f"Functional.x.{k}.forward": {"input_args": []} for k in range(40000)})
        dump.write_text(json.dumps(doc, indent=1))
    run = run_cli(tmp_path, "pytorch", input_name="dump.json")
    assert run.code == 1
    (error,) = [line for line in run.out.splitlines() if "[ERROR]" in line]
    assert (
        "[ERROR] dump.json: this is a dump.json, not a compare.json (which names the two dumps, e.g. "
        '{"npu_path": "dump.json", "bench_path": "<bench>/dump.json"}); or compare two dumps directly: '
        "msprobe compare -tp dump.json -gp <bench>/dump.json"
    ) in error
    assert "'npu_path' is missing" not in run.out and "Traceback" not in run.out + run.err


def test_python_api_verbose_prints_the_notes(tmp_path, monkeypatch, capfd):
    import msprobe_compare

    _case_elsewhere(tmp_path, stack_pth="x")
    monkeypatch.chdir(tmp_path / "elsewhere")
    msprobe_compare.compare_json("../case/compare.json", tmp_path / "out", verbose=True)
    warnings = _warnings(capfd.readouterr().out)
    assert "../case/compare.json: unknown key 'stack_pth' is ignored (did you mean 'stack_path'?)" in warnings
    assert sum("reading it from compare.json's folder instead" in w for w in warnings) == 3
