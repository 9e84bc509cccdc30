"""The Python API (msprobe_compare.compare / compare_json): files written, counts and table equal to the xlsx,
option errors, quiet by default; and the README's example, run as it is written."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import openpyxl
import pytest

import msprobe_compare
from conftest import DATA
from msprobe_compare import CompareError, InputError, OptionError
from parity import read_xlsx

README = Path(__file__).parent.parent / "README.md"


def _copy(case: str, tmp_path: Path) -> Path:
    dst = tmp_path / "case"
    shutil.copytree(DATA / case, dst, ignore=shutil.ignore_patterns("expected"))
    return dst


def _in(monkeypatch, case: str) -> str:
    """Work in a case folder (compare.json's relative paths are read against the working directory)."""
    monkeypatch.chdir(DATA / case)
    return "compare.json"


def _same_cell(ours, theirs) -> bool:
    """Our value against the coloured xlsx's cell (booleans and non-finite numbers are texts there)."""
    if isinstance(ours, bool):
        return theirs == str(ours)
    if isinstance(ours, (int, float)):
        if isinstance(theirs, str):  # "12.5%", "inf\t", "nan\t"
            theirs = float(theirs.strip().removesuffix("%"))
        return (math.isnan(ours) and math.isnan(theirs)) or ours == theirs
    return ours == ("" if theirs is None else theirs)


def assert_matches_xlsx(result: msprobe_compare.CompareResult, xlsx: Path) -> None:
    """Counts and cells of `result` are those of the workbook (read with openpyxl)."""
    header, rows, fills = read_xlsx(xlsx)
    assert list(result.columns) == header
    assert result.rows == len(rows) == len(result.columns[header[0]])
    for k, name in enumerate(header):
        for i, (ours, row) in enumerate(zip(result.columns[name], rows)):
            assert _same_cell(ours, row[k]), (name, i, ours, row[k])
    bench = header.index("Bench Name")
    assert result.matched == sum(row[bench] != "N/A" for row in rows)
    assert result.red == fills.count("red") and result.yellow == fills.count("yellow")
    verdict = header.index("Accuracy Reached or Not" if "Accuracy Reached or Not" in header else "Result")
    error = [f == "red" or row[verdict] in ("No", "Different") for f, row in zip(fills, rows)]
    # a yellow mark on a row without counterpart (its requires_grad against N/A) is not a warning: it is unmatched
    warning = [not e and row[bench] != "N/A" and (f == "yellow" or row[verdict] == "Warning")
               for e, f, row in zip(error, fills, rows)]  # fmt: skip
    # in-place inputs recorded after the write are excluded from both (judge.gate), and counted apart
    assert result.errors <= sum(error) and result.warnings <= sum(warning)
    assert result.errors + result.warnings + result.excluded == sum(error) + sum(warning)
    assert result.unmatched == result.rows - result.matched


def readme_examples() -> list[str]:
    """Every Python block of the README's "Python API" section."""
    section = README.read_text().split("## Python API", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


@pytest.mark.parametrize("case,mode", [("pytorch/mlp_bug_stat", "summary"), ("pytorch/mlp_bug_md5", "md5"),
                                       ("pytorch/mlp_bug_tensor", "all")])  # fmt: skip
def test_readme_examples_run_as_written_in_every_mode(tmp_path, monkeypatch, capfd, case, mode):
    pytest.importorskip("pandas")  # the README example makes a DataFrame
    folder = _copy(case, tmp_path)
    monkeypatch.chdir(folder)
    scope: dict = {}
    blocks = readme_examples()
    assert blocks
    for block in blocks:
        exec(compile(block, str(README), "exec"), scope)
    out, err = capfd.readouterr()
    result, df, table, numbers = scope["result"], scope["df"], scope["table"], scope["numbers"]
    assert result.rows == 103 and result.xlsx.parent == folder / "compare_result"
    assert result.csv.is_file() and result.advisor.is_file()
    assert_matches_xlsx(result, result.xlsx)
    assert [(o.call, o.kind) for o in result.origins] == [("Functional.relu.1.forward", "boundary")]
    assert f"{result.rows} {result.matched} {result.unmatched} {result.red}" in out  # the example's own prints
    relu = ["Functional.relu.1.forward.input.0", "Functional.relu.1.forward.input.inplace",
            "Functional.relu.1.forward.output.0"]  # fmt: skip
    assert str(relu) in out and df.loc[df["state"] == "origin", "NPU Name"].tolist() == relu
    assert len(df) == result.rows and str(df["level"].dtype) == "category"
    assert {"summary": "Max diff", "md5": None, "all": "Cosine"}[mode] in (numbers.columns.tolist() or [None])
    assert all(str(t) == "float64" for t in numbers.dtypes)
    assert table.files == {} and table.output_dir is None and table.xlsx is None
    assert (table.rows, table.matched) == (result.rows, result.matched)
    assert table.columns["NPU Name"] == result.columns["NPU Name"]
    assert "[INFO]" not in out + err and "[WARNING]" not in out + err  # quiet by default
    assert sorted(p.name for p in folder.iterdir()) == ["bench", "compare.json", "compare_result", "npu"]
    assert set((folder / "compare_result").iterdir()) == set(result.files.values())  # write=False added none


@pytest.mark.parametrize("case", ["pytorch/mlp_bug_tensor", "pytorch/cnn_bug_stat", "pytorch/mlp_bug_md5",
                                  "mindspore/L0_tensor_diff"])  # fmt: skip
def test_counts_and_table_equal_the_xlsx(tmp_path, monkeypatch, case):
    result = msprobe_compare.compare_json(_in(monkeypatch, case), tmp_path / "a" / "b", stack_mode=True)
    assert result.output_dir == (tmp_path / "a" / "b").resolve()  # created, parents too
    assert result.rows and result.errors  # every one of these cases has error rows
    assert_matches_xlsx(result, result.xlsx)
    assert result.first_origin
    assert result.files == {"xlsx": result.xlsx, "html": result.html, "advisor": result.advisor}
    assert all(p.is_file() and p.parent == result.output_dir for p in result.files.values())


NUMBER_TEXT = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?%?$|^-?(nan|inf)\t?$", re.I)


@pytest.mark.parametrize("case", ["pytorch/mlp_bug_stat", "pytorch/cnn_bug_stat", "pytorch/mlp_bug_tensor"])
def test_numbers_are_numeric(tmp_path, monkeypatch, case):
    columns = msprobe_compare.compare_json(_in(monkeypatch, case), tmp_path).columns
    texts = [(name, v) for name, cells in columns.items() for v in cells if isinstance(v, str) and NUMBER_TEXT.match(v)]
    assert not texts, texts[:5]  # no number is left as text ("12.5%", "inf", "nan")
    assert sum(isinstance(v, float) for v in columns["NPU max"]) > len(columns["NPU max"]) // 2
    assert all(isinstance(v, bool) for v in columns["Requires_grad Consistent"])
    if case == "pytorch/mlp_bug_stat":
        assert any(isinstance(v, float) and v > 0 for v in columns["MaxRelativeErr"])  # "x%" in the files
    if case == "pytorch/cnn_bug_stat":
        assert any(isinstance(v, float) and math.isnan(v) for v in columns["NPU max"])  # "nan\t" in the xlsx


def test_dump_json_paths_and_plain_formats(tmp_path, monkeypatch):
    case = _copy("pytorch/mlp_bug_stat", tmp_path)
    monkeypatch.chdir(case)
    result = msprobe_compare.compare("npu/step0/rank/dump.json", Path("bench/step0/rank"), "out",
                                     stack_path="npu/step0/rank/stack.json", stack_mode=True,
                                     formats="csv,jsonl", highlight=False, auto_analyze=False)  # fmt: skip
    assert result.xlsx is None and result.html is None and result.advisor is None
    assert set(result.files) == {"csv", "jsonl"}
    assert result.csv.name.startswith("compare_result_") and result.csv.stem == result.jsonl.stem
    lines = result.jsonl.read_text().splitlines()
    assert [json.loads(line)["NPU Name"] for line in lines] == result.columns["NPU Name"]
    assert len(result.csv.read_text().splitlines()) == result.rows + 1  # the header, then one line per row
    assert "NPU_Stack_Info" in result.columns and result.red == result.yellow == 0


def test_framework_from_the_dump(tmp_path, monkeypatch):
    # a MindSpore dump: -cm is allowed because the dump says mindspore
    result = msprobe_compare.compare_json(_in(monkeypatch, "cross/L0_statistics"), tmp_path, cell_mapping=True)
    assert result.matched > 0
    with pytest.raises(OptionError, match="needs framework 'mindspore', not 'pytorch'"):
        msprobe_compare.compare_json(_in(monkeypatch, "pytorch/mlp_same_stat"), tmp_path, cell_mapping=True)


def test_dump_without_framework_key_uses_its_tensor_types(tmp_path):
    case = _copy("pytorch/mlp_same_stat", tmp_path)
    dump = case / "npu/step0/rank/dump.json"
    doc = json.loads(dump.read_text())
    del doc["framework"]
    dump.write_text(json.dumps(doc))
    result = msprobe_compare.compare(dump, case / "bench/step0/rank", tmp_path / "out")  # torch.Tensor leaves
    assert result.rows == 103
    dump.write_text(json.dumps(doc).replace('"type": "torch.', '"type": "x.'))  # neither the key nor the types tell
    with pytest.raises(OptionError, match="framework not given and the dump names none; pass framework="):
        msprobe_compare.compare(dump, case / "bench/step0/rank", tmp_path / "out")
    result = msprobe_compare.compare(dump, case / "bench/step0/rank", tmp_path / "out", framework="pytorch")
    assert result.rows == 103


@pytest.mark.parametrize(
    "options,message",
    [
        ({"framework": "tensorflow"}, "unknown framework 'tensorflow'"),
        ({"formats": ("parquet",)}, "unknown format 'parquet'"),
        ({"fuzzy": True}, "unknown option 'fuzzy'; did you mean 'fuzzy_match'?"),
        ({"compare_only": True}, "unknown option 'compare_only'; use auto_analyze=False"),
        ({"stack_path": "s.json"}, "unknown option 'stack_path'; use compare(..., stack_path=...), or stack_path in"),
        ({"jobs": "4"}, "option 'jobs' must be a whole number >= 1"),
        ({"verbose": "yes"}, "option 'verbose' must be True or False"),
        ({"framework": "pytorch", "jobs": 0}, "got int 0"),
    ],
)
def test_bad_options_raise_before_writing(tmp_path, monkeypatch, options, message):
    out = tmp_path / "out"
    with pytest.raises(OptionError, match=re.escape(message)) as info:
        msprobe_compare.compare_json(_in(monkeypatch, "pytorch/mlp_same_stat"), out, **options)
    assert isinstance(info.value, ValueError)
    assert not out.exists()


def test_bad_paths_raise(tmp_path):
    with pytest.raises(InputError, match="npu_path does not exist") as info:
        msprobe_compare.compare(tmp_path / "nope.json", DATA / "pytorch/mlp_same_stat/bench/step0/rank", tmp_path)
    assert str(tmp_path / "nope.json") in str(info.value)
    with pytest.raises(OptionError, match="option 'npu_path' must be a path, got int 3"):
        msprobe_compare.compare(3, "b.json")
    with pytest.raises(CompareError, match="choose a step folder"):
        msprobe_compare.compare(DATA / "pytorch/mlp_same_stat/npu", DATA / "pytorch/mlp_same_stat/bench", tmp_path)


def test_verbose_prints_the_cli_log(tmp_path, monkeypatch, capfd):
    result = msprobe_compare.compare_json(_in(monkeypatch, "pytorch/mlp_same_stat"), tmp_path, verbose=True)
    out = capfd.readouterr().out
    assert f"Compare result is {result.xlsx}" in out and "msprobe compare ends successfully." in out


def test_diff_analyze(tmp_path, monkeypatch):
    result = msprobe_compare.compare_json(_in(monkeypatch, "pytorch/mlp_bug_stat"), tmp_path, diff_analyze=True)
    assert result.diff_analyze is not None and result.files["diff_analyze"] == result.diff_analyze
    assert list(json.loads(result.diff_analyze.read_text())) == ["rank"]
    same = msprobe_compare.compare_json(_in(monkeypatch, "pytorch/mlp_same_stat"), tmp_path, diff_analyze=True)
    assert same.diff_analyze is None and same.first_origin is None


def test_step_folders(tmp_path, capfd):
    case = DATA / "pytorch/dist_same_stat"
    result = msprobe_compare.compare(case / "npu/step0", case / "bench/step0", tmp_path, jobs=2)
    assert capfd.readouterr() == ("", "")  # quiet, the rank workers too
    assert list(result.ranks) == ["rank0", "rank1"] and result.ok
    assert result.xlsx is None and result.columns == {}
    for label, rank in result.ranks.items():
        assert rank.xlsx.name.startswith(f"compare_result_{label}_") and rank.advisor.is_file()
        assert_matches_xlsx(rank, rank.xlsx)
    for count in ("rows", "matched", "red", "yellow", "errors", "warnings"):
        assert getattr(result, count) == sum(getattr(r, count) for r in result.ranks.values())


def test_step_folders_with_a_failing_rank(tmp_path):
    case = tmp_path / "case"
    shutil.copytree(DATA / "pytorch/dist_same_stat", case, ignore=shutil.ignore_patterns("expected"))
    (case / "npu/step0/rank1/dump.json").write_text('{"task": "statistics", "data": ')
    shutil.copytree(case / "bench/step0/rank1", case / "bench/step0/rank2")
    result = msprobe_compare.compare(case / "npu/step0", case / "bench/step0", tmp_path / "out", framework="pytorch")
    assert not result.ok and list(result.ranks) == ["rank0"]
    assert list(result.failed) == ["rank1"] and "not valid JSON" in result.failed["rank1"]
    assert result.unpaired == ("bench rank2",)
    assert result.rows == result.ranks["rank0"].rows > 0


def test_mix_dump_ranks(tmp_path):
    src = DATA / "pytorch/dist_same_stat"
    for side in ("npu", "bench"):
        shutil.copytree(src / side / "step0", tmp_path / side / "graph" / "step0")
    result = msprobe_compare.compare(tmp_path / "npu", tmp_path / "bench", tmp_path / "out")
    assert list(result.ranks) == ["graph/step0/rank0", "graph/step0/rank1"]
    assert all(r.xlsx.parent == (tmp_path / "out/graph/step0").resolve() for r in result.ranks.values())


def test_to_pandas_without_pandas(tmp_path, monkeypatch):
    result = msprobe_compare.compare_json(_in(monkeypatch, "pytorch/mlp_same_stat"), tmp_path)
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now fails
    with pytest.raises(ImportError, match=r"needs pandas, which is not installed \(pip install pandas\)"):
        result.to_pandas()


def test_to_pandas(tmp_path, monkeypatch):
    pd = pytest.importorskip("pandas")
    result = msprobe_compare.compare_json(_in(monkeypatch, "pytorch/mlp_same_stat"), tmp_path)
    frame = result.to_pandas()
    assert isinstance(frame, pd.DataFrame) and frame.shape == (result.rows, len(result.columns) + 2)
    assert list(frame.columns) == [*result.columns, "level", "state"]  # "None" cells have no text column
    assert frame["NPU max"].dtype == "float64" and frame["Max diff"].dtype == "float64"
    numbers = [float(v) if isinstance(v, (int, float)) else math.nan for v in result.columns["NPU max"]]  # bool: 0, 1
    assert frame["NPU max"].tolist() == pytest.approx(numbers, nan_ok=True)
    assert set(frame["state"]) == {"ok"} and set(frame["level"]) == {"none"}
    case = DATA / "pytorch/dist_same_stat"
    per_rank = msprobe_compare.compare(case / "npu/step0", case / "bench/step0", tmp_path / "ranks")
    ranks = per_rank.to_pandas()
    assert ranks.index.names[0] == "rank" and sorted(set(ranks.index.get_level_values(0))) == ["rank0", "rank1"]
    assert len(ranks) == per_rank.rows and len(ranks.loc["rank1"]) == per_rank.ranks["rank1"].rows
    assert str(ranks["level"].dtype) == "category" and str(ranks["state"].dtype) == "category"


def test_to_pandas_is_made_for_analysis(tmp_path, monkeypatch):
    """Tensor dumps: metrics as floats (NaN for N/A and unsupported, the texts beside), sortable; level and state
    per row; the origins as records with their numbers."""
    pd = pytest.importorskip("pandas")
    result = msprobe_compare.compare_json(_in(monkeypatch, "pytorch/mlp_bug_tensor"), tmp_path, stack_mode=True)
    df = result.to_pandas()
    assert all(df[name].dtype == "float64" for name in ("Cosine", "MaxAbsErr", "One Thousandth Err Ratio"))
    cells = result.columns["Cosine"]
    texts = [c for c in cells if isinstance(c, str)]
    assert texts and set(texts) <= {"N/A", "unsupported"}  # the table's texts ...
    assert df["Cosine"].isna().sum() == len(texts)  # ... are NaN here, numbers stay numbers
    assert df["Cosine text"].tolist().count("unsupported") == texts.count("unsupported")
    assert df.loc[df["Cosine text"] == "unsupported", "Cosine"].isna().all()
    assert df.columns.tolist().index("Cosine text") == df.columns.tolist().index("Cosine") + 1
    ordered = df.sort_values("Cosine")["Cosine"]  # raised TypeError on mixed cells before
    assert ordered.dropna().is_monotonic_increasing
    assert list(df["level"].cat.categories) == ["none", "yellow", "red"] and df["level"].cat.ordered
    assert ((df["level"] == "red").sum(), (df["level"] == "yellow").sum()) == (result.red, result.yellow)
    assert set(df["state"]) <= {"origin", "suspect", "propagated", "noise", "ok", "unknown", "one-sided"}
    origin = result.origins[0]
    assert df.loc[df["state"] == "origin", "NPU Name"].str.startswith(origin.call + ".").all()
    assert (origin.call, origin.kind, origin.state, origin.phase) == ("Functional.relu.1.forward", "boundary",
                                                                      "origin", "forward")  # fmt: skip
    assert isinstance(origin.inputs, float) and isinstance(origin.threshold, float) and origin.inputs > origin.threshold
    assert origin.floor and origin.ratio == pytest.approx(origin.inputs / origin.floor)
    assert origin.row == "Functional.relu.1.forward.input.0" and origin.description in result.first_origin
    assert result.suspects == () and origin.rank is None
    assert isinstance(origin, msprobe_compare.Finding)
    records = pd.DataFrame(result.origins)  # the records tabulate as the README says
    assert records.loc[0, "call"] == origin.call and records.loc[0, "threshold"] == origin.threshold


def test_write_false_writes_nothing(tmp_path, monkeypatch):
    out = tmp_path / "out"
    result = msprobe_compare.compare_json(_in(monkeypatch, "pytorch/mlp_bug_stat"), out, write=False)
    written = msprobe_compare.compare_json("compare.json", tmp_path / "w")
    assert not out.exists() and result.output_dir is None and result.files == {}
    assert (result.rows, result.matched, result.errors, result.warnings) == (written.rows, written.matched,
                                                                            written.errors, written.warnings)  # fmt: skip
    assert result.first_origin == written.first_origin and result.origins == written.origins
    assert result.states == written.states and result.levels == written.levels
    with pytest.raises(OptionError, match="option 'write' must be True or False"):
        msprobe_compare.compare_json("compare.json", out, write="no")
    with pytest.raises(OptionError, match="'diff_analyze' writes a file; it cannot go with write=False"):
        msprobe_compare.compare_json("compare.json", out, write=False, diff_analyze=True)
    case = DATA / "pytorch/dist_same_stat"
    ranks = msprobe_compare.compare(case / "npu/step0", case / "bench/step0", out, write=False, jobs=1)
    assert not out.exists() and ranks.files == {} and list(ranks.ranks) == ["rank0", "rank1"]
    assert all(r.files == {} and r.output_dir is None and r.rows for r in ranks.ranks.values())


def test_empty_compare(tmp_path):
    case = _copy("pytorch/mlp_same_stat", tmp_path)
    for side in ("npu", "bench"):
        dump = case / side / "step0/rank/dump.json"
        dump.write_text(json.dumps({**json.loads(dump.read_text()), "data": {}}))
    result = msprobe_compare.compare(case / "npu/step0/rank", case / "bench/step0/rank", tmp_path / "out")
    assert result.rows == 0 and result.files == {} and all(v == [] for v in result.columns.values())


def test_import_stays_light():
    code = "import sys, msprobe_compare; print(sorted(m for m in ('numpy', 'msprobe_compare.api') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(Path(msprobe_compare.__file__).parent.parent)}).stdout  # fmt: skip
    assert out.strip() == "[]"
    assert "compare" in dir(msprobe_compare) and msprobe_compare.compare.__module__ == "msprobe_compare.python_api"
