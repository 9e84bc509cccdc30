"""Options are checked when made (config.Options.__post_init__), for the CLI and the Python API alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from msprobe_compare.config import Options
from msprobe_compare.errors import OptionError, UsageError


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"framework": "tensorflow"}, "unknown framework 'tensorflow'; choose pytorch or mindspore"),
        ({"framework": None}, "unknown framework None"),
        ({"formats": ("parquet",)}, "unknown format 'parquet' in option 'formats'; choose from xlsx, csv, jsonl, html"),
        ({"formats": "xlsx,parquet"}, "unknown format 'parquet'"),
        ({"formats": ()}, "unknown format () in option 'formats'"),
        ({"formats": 3}, "option 'formats' must be a list of format names, got int 3"),
        ({"jobs": 0}, "option 'jobs' must be a whole number >= 1 (or None: all cores), got int 0"),
        ({"jobs": -3}, "got int -3"),
        ({"jobs": "4"}, "got str '4'"),
        ({"jobs": True}, "got bool True"),
        ({"stack_mode": "yes"}, "option 'stack_mode' must be True or False, got str 'yes'"),
        ({"highlight": 1}, "option 'highlight' must be True or False, got int 1"),
        ({"output_dir": 5}, "option 'output_dir' must be a path, got int 5"),
        ({"output_dir": ""}, "option 'output_dir' must be a path"),
        ({"data_mapping": ["a.yaml"]}, "option 'data_mapping' must be a path, got list"),
        ({"framework": "mindspore", "cell_mapping": 1.5}, "option 'cell_mapping' must be a YAML path, True or None"),
        (
            {"cell_mapping": True},
            "option 'cell_mapping' maps MindSpore names to PyTorch ones; it needs framework 'mindspore', not 'pytorch'",
        ),  # fmt: skip
        ({"layer_mapping": "lm.yaml"}, "option 'layer_mapping' maps MindSpore names"),
        ({"ray": 3}, "option 'ray' must be True, an address string or None, got int 3"),
    ],
)
def test_bad_option(kwargs, message):
    with pytest.raises(OptionError) as info:
        Options(**{"framework": "pytorch", **kwargs})
    assert message in str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, UsageError)  # CLI: exit code 2


def test_options_are_normalised():
    opts = Options(framework="mindspore", output_dir="out", data_mapping="dm.yaml", cell_mapping=False,
                   api_mapping="am.yaml", layer_mapping=True, formats="csv, jsonl,csv", jobs=2, ray="")  # fmt: skip
    assert opts.output_dir == Path("out") and opts.data_mapping == Path("dm.yaml")
    assert opts.cell_mapping is None and opts.api_mapping == Path("am.yaml") and opts.layer_mapping is True
    assert opts.formats == ("csv", "jsonl") and opts.jobs == 2 and opts.ray is None
    assert Options(framework="pytorch", formats=["html"], ray="10.0.0.5:6379").ray == "10.0.0.5:6379"


def test_defaults_are_valid():
    opts = Options(framework="pytorch")
    assert opts.formats == ("xlsx", "html") and opts.jobs is None and opts.output_dir == Path("./output")


def test_pool_option_and_its_environment_default(monkeypatch):
    monkeypatch.delenv("MSPROBE_COMPARE_POOL", raising=False)
    assert Options(framework="pytorch").pool == "auto"
    assert Options(framework="pytorch", pool=" Thread ").pool == "thread"
    monkeypatch.setenv("MSPROBE_COMPARE_POOL", "process")
    assert Options(framework="pytorch").pool == "process"  # the variable is only the default ...
    assert Options(framework="pytorch", pool="thread").pool == "thread"  # ... the option wins
    monkeypatch.setenv("MSPROBE_COMPARE_POOL", "")
    assert Options(framework="pytorch").pool == "auto"


@pytest.mark.parametrize(
    "pool,env,message",
    [
        ("fork", None, "option 'pool' must be one of auto, thread, process, got str 'fork'"),
        (2, None, "option 'pool' must be one of auto, thread, process, got int 2"),
        (
            None,
            "threads",
            "environment variable MSPROBE_COMPARE_POOL must be one of auto, thread, process, got str 'threads'",
        ),
    ],
)
def test_bad_pool(pool, env, message, monkeypatch):
    if env is None:
        monkeypatch.delenv("MSPROBE_COMPARE_POOL", raising=False)
    else:
        monkeypatch.setenv("MSPROBE_COMPARE_POOL", env)
    with pytest.raises(OptionError) as info:
        Options(framework="pytorch", pool=pool)
    assert str(info.value) == message


def test_every_format_has_a_writer():
    from msprobe_compare.render import report

    assert report.FORMATS == ("xlsx", "csv", "jsonl", "html")
    assert set(report.TABLE_WRITERS) == set(report.FORMATS) - {"html"}
    assert set(report.DEFAULT_FORMATS) <= set(report.FORMATS)


def test_write_all_refuses_a_format_it_has_no_writer_for(tmp_path):
    """A tuple made without Options (an unknown name) writes nothing, rather than JSON lines under that name."""
    from msprobe_compare.render import report

    with pytest.raises(ValueError, match="unknown format 'parquet'; choose from xlsx, csv, jsonl, html"):
        report.write_all(None, tmp_path, None, suffix="", coloured=True, formats=("csv", "parquet"))  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []
