"""CompareConfig: compare.json plus command-line options, validated once (spec §1.2-§1.4)."""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msprobe_compare.errors import InputError, OptionError
from msprobe_compare.load.dumpjson import open_regular, read_json
from msprobe_compare.load.layout import resolve_input
from msprobe_compare.runtime import POOL_KINDS
from msprobe_compare.records import dataclass

if TYPE_CHECKING:  # an annotation only: MindSpore runs import it (start-up speed)
    from msprobe_compare.load.kernel_dump import GraphRequest

FRAMEWORKS = ("pytorch", "mindspore")
POOL_ENV = "MSPROBE_COMPARE_POOL"  # the default of Options.pool
ALIGN_CHOICES = ("auto", "on", "off")


@dataclass(frozen=True)
class Options:
    """Options of a compare (command line or Python API), checked when made."""

    framework: str  # "pytorch" | "mindspore"
    output_dir: Path = Path("./output")
    stack_mode: bool = False
    auto_analyze: bool = True
    fuzzy_match: bool = False
    highlight: bool = True  # decision D1: colour marks on by default
    data_mapping: Path | None = None
    cell_mapping: Path | bool | None = None  # None: off; True: built-in rule only; Path: with a YAML
    api_mapping: Path | bool | None = None
    layer_mapping: Path | bool | None = None
    jobs: int | None = None
    formats: tuple[str, ...] = ("xlsx", "html")  # see render.report.FORMATS
    parallel_read: bool = True  # read the bench dump.json in a forked child (off inside parallel ranks)
    ray: str | bool | None = None  # None: local pools; True: RAY_ADDRESS or a local Ray; str: that cluster
    quiet: bool = False  # no console lines (the Python API's default), in rank workers too
    npu_layout: Any = None  # parallel layout of the npu run ("tp=2,pp=2,dp=2" or a dict; None: detected)
    bench_layout: Any = None
    tolerance: str | None = None  # root cause: `origin=3,suspect=1.5` over judge.noise.Tolerance (issue #13)
    pool: str | None = None  # tensor rows on "thread"s, "process"es or "auto" (None: $MSPROBE_COMPARE_POOL, else auto)
    align: str = "auto"  # module trees of different code aligned (pair/align.py): "auto" (when they differ), on, off
    alignment: Path | None = None  # a module alignment file (written by an earlier compare, maybe edited): it wins
    consistent_check: str | None = None  # 26.x --consistent_check --backend: "fsdp" | "megatron" (pair/consistent.py)
    write: bool = True  # False (Python API only): no file is written, the result holds the table and the story

    def __post_init__(self) -> None:
        """Check every option (OptionError names the option and the problem); paths may be given as str."""
        if not isinstance(self.framework, str) or self.framework not in FRAMEWORKS:
            raise OptionError(f"unknown framework {self.framework!r}; choose {' or '.join(FRAMEWORKS)}")
        for f in fields(self):
            if f.type == "bool" and not isinstance(getattr(self, f.name), bool):
                raise OptionError(f"option '{f.name}' must be True or False, got {_shown(getattr(self, f.name))}")
        self._set("output_dir", path_option("output_dir", self.output_dir))
        if self.data_mapping is not None:
            self._set("data_mapping", path_option("data_mapping", self.data_mapping))
        for name in ("cell_mapping", "api_mapping", "layer_mapping"):
            value = getattr(self, name)
            if value is not None and value is not True:
                self._set(name, None if value is False else path_option(name, value, "a YAML path, True or None"))
        mapped = [n for n in ("cell_mapping", "api_mapping", "layer_mapping") if getattr(self, n) is not None]
        if mapped and self.framework != "mindspore":
            raise OptionError(f"option '{mapped[0]}' maps MindSpore names to PyTorch ones; it needs framework "
                              f"'mindspore', not '{self.framework}'")  # fmt: skip
        if self.jobs is not None and (type(self.jobs) is not int or self.jobs < 1):
            raise OptionError(f"option 'jobs' must be a whole number >= 1 (or None: all cores), got "
                              f"{_shown(self.jobs)}")  # fmt: skip
        self._set("formats", formats_option(self.formats))
        for name in ("npu_layout", "bench_layout"):
            if getattr(self, name) is not None:
                from msprobe_compare.load.parallel_layout import parse_layout  # layouts only (start-up speed)

                self._set(name, parse_layout(getattr(self, name), f"option '{name}'"))
        self._set("pool", _pool_option(self.pool))
        if self.align not in ALIGN_CHOICES:
            raise OptionError(f"option 'align' must be one of {', '.join(ALIGN_CHOICES)}, got {_shown(self.align)}")
        if self.alignment is not None:
            self._set("alignment", path_option("alignment", self.alignment))
        if self.consistent_check is not None and self.consistent_check not in ("fsdp", "megatron"):
            raise OptionError(f"option 'consistent_check' is the training engine's backend, 'fsdp' or 'megatron', got "
                              f"{_shown(self.consistent_check)}")  # fmt: skip
        if self.consistent_check is not None and self.align == "off":
            raise OptionError("option 'consistent_check' aligns the module trees; it cannot go with align 'off'")
        if self.ray is False or (isinstance(self.ray, str) and not self.ray.strip()):
            self._set("ray", None)
        elif not (self.ray is None or self.ray is True or isinstance(self.ray, str)):
            raise OptionError(f"option 'ray' must be True, an address string or None, got {_shown(self.ray)}")

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)  # normalising a frozen instance while it is made


OPTION_NAMES = tuple(f.name for f in fields(Options))


def _shown(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


def path_option(name: str, value: Any, expected: str = "a path") -> Path:
    """`value` (str or os.PathLike) as a Path, else an OptionError naming the option."""
    if isinstance(value, (str, os.PathLike)) and not isinstance(value, bytes) and str(value):
        return Path(value)
    raise OptionError(f"option '{name}' must be {expected}, got {_shown(value)}")


def _pool_option(value: Any) -> str:
    """The pool kind, lower case; None reads POOL_ENV (unset or empty: "auto")."""
    source = "option 'pool'"
    if value is None:
        value, source = os.environ.get(POOL_ENV) or "auto", f"environment variable {POOL_ENV}"
    kind = value.strip().lower() if isinstance(value, str) else None
    if kind not in POOL_KINDS:
        raise OptionError(f"{source} must be one of {', '.join(POOL_KINDS)}, got {_shown(value)}")
    return kind


def formats_option(value: Any) -> tuple[str, ...]:
    """Formats as a tuple without repeats; a string is read as a comma-separated list."""
    from msprobe_compare.render.report import FORMATS  # render is heavy; config is not

    parts = value.split(",") if isinstance(value, str) else value
    if not isinstance(parts, (tuple, list)) or not all(isinstance(p, str) for p in parts):
        raise OptionError(f"option 'formats' must be a list of format names, got {_shown(value)}")
    chosen = tuple(dict.fromkeys(p.strip() for p in parts if p.strip()))
    bad = [f for f in chosen if f not in FORMATS]
    if bad or not chosen:
        raise OptionError(f"unknown format {', '.join(map(repr, bad)) or repr(value)} in option 'formats'; choose "
                          f"from {', '.join(FORMATS)}")  # fmt: skip
    return chosen


@dataclass(frozen=True)
class CompareConfig:
    input_path: Path | None  # compare.json; None when the paths were given directly
    npu_path: Path
    bench_path: Path
    stack_path: Path | None  # from compare.json; None when absent
    print_compare_log: bool
    options: Options
    graph: GraphRequest | None = None  # the MindSpore graph-mode compare compare.json asks for, if any
    notes: tuple[str, ...] = ()  # warnings about compare.json (unknown keys, paths read from its folder), to print

    @property
    def is_directory_compare(self) -> bool:
        return self.npu_path.is_dir()


# compare.json's keys (spec §1.3; npu_parallel/bench_parallel are ours): any other is named in a warning
CONFIG_KEYS = ("npu_path", "bench_path", "stack_path", "is_print_compare_log", "rank_id", "step_id", "common",
               "map_dict", "npu_parallel", "bench_parallel")  # fmt: skip
DUMP_HEAD_BYTES = 65536  # what is read of an -i file to tell a dump.json before parsing all of it
# a dump.json (or debug.json) opens with these keys (the dumper writes "task" first)
_DUMP_HEAD = re.compile(rb'\A\s*\{\s*"(?:task|level|framework|dump_data_dir)"\s*:')


def _is_dump_json(doc: Any) -> bool:
    """Whether a parsed -i file is a dump.json (or debug.json) rather than a compare.json."""
    return (isinstance(doc, dict) and "npu_path" not in doc and "bench_path" not in doc and "data" in doc
            and ("task" in doc or "dump_data_dir" in doc))  # fmt: skip


def _dump_json_error(input_path: Path) -> InputError:
    return InputError(f"this is a dump.json, not a compare.json (which names the two dumps, e.g. "
                      f'{{"npu_path": "{input_path}", "bench_path": "<bench>/dump.json"}}); or compare two dumps '
                      f"directly: msprobe compare -tp {input_path} -gp <bench>/dump.json", input_path)  # fmt: skip


def _read_config(input_path: Path) -> Any:
    """compare.json parsed; a dump.json given instead is refused from its first bytes (it may be gigabytes)."""
    fd = open_regular(input_path)
    try:
        head = os.read(fd, DUMP_HEAD_BYTES)
    except OSError:
        head = b""  # read_json below says what is wrong with the file
    finally:
        os.close(fd)
    if _DUMP_HEAD.match(head) and b'"npu_path"' not in head:
        raise _dump_json_error(input_path)
    doc = read_json(input_path)
    if _is_dump_json(doc):
        raise _dump_json_error(input_path)
    return doc


def _unknown_keys(doc: dict[str, Any], source: Path) -> list[str]:
    """A warning for each key of compare.json that nothing reads, with the closest known key."""
    notes = []
    for key in doc:
        if key in CONFIG_KEYS:
            continue
        close = difflib.get_close_matches(key, CONFIG_KEYS, n=1, cutoff=0.6) if isinstance(key, str) else []
        hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(CONFIG_KEYS)}"
        notes.append(f"{source}: unknown key {key!r} is ignored ({hint})")
    return notes


def _resolved(key: str, value: str, source: Path, notes: list[str], *, required: bool = True) -> Path:
    """A compare.json path: absolute as it is; relative against the working directory (spec §1.3), else, where it
    exists only there, against compare.json's folder (with a warning in `notes`). Missing from both: an error naming
    both places when `required`, else the working directory's path."""
    here = Path(os.path.abspath(value))
    if os.path.isabs(value) or os.path.lexists(here):
        return here
    beside = Path(os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(source)), value)))
    if beside != here and os.path.lexists(beside):
        notes.append(f"{source}: {key} '{value}' does not exist from the working directory ({os.getcwd()}); "
                     f"reading it from compare.json's folder instead: {beside}")  # fmt: skip
        return beside
    if required and beside != here:  # (compare.json in the working directory: make_config names the one place)
        raise InputError(f"{key} '{value}' does not exist, neither from the working directory ({here}) nor from "
                         f"compare.json's folder ({beside})", source)  # fmt: skip
    return here


def _shown_path(value: str, used: Path) -> str:
    """A compare.json path as the reference writes it into the single-point table (spec §7.6): as given,
    normalised; the path used where it was read from compare.json's folder instead."""
    return os.path.normpath(value) if Path(os.path.abspath(value)) == used else str(used)


def _path_field(doc: dict[str, Any], key: str, source: Path, notes: list[str]) -> Path:
    value = doc.get(key)
    if value is None or value == "":
        raise InputError(f"'{key}' is missing; compare.json needs both npu_path and bench_path", source)
    if not isinstance(value, str):
        raise InputError(f"'{key}' must be a path string, got {type(value).__name__}", source)
    return _resolved(key, value, source, notes)


def load_config(input_path: Path, options: Options) -> CompareConfig:
    """The compare described by a compare.json; relative paths are read against the working directory, or against
    compare.json's folder where they exist only there (said in `notes`, with unknown keys)."""
    doc = _read_config(input_path)
    if not isinstance(doc, dict):
        raise InputError("must be a JSON object with npu_path and bench_path", input_path)
    notes = _unknown_keys(doc, input_path)
    npu = _path_field(doc, "npu_path", input_path, notes)
    bench = _path_field(doc, "bench_path", input_path, notes)
    graph = None
    if options.framework == "mindspore":
        from msprobe_compare.load.kernel_dump import graph_request  # MindSpore only (start-up speed)

        graph = graph_request(doc, input_path)
    if graph is not None:  # MindSpore graph mode (spec §7.5, §7.6): two dump folders, nothing else applies
        for key, path in (("npu_path", npu), ("bench_path", bench)):
            if not path.is_dir():
                raise InputError(f"{key} must be a folder for the MindSpore graph-mode compare ('rank_id' or "
                                 "'common' in compare.json)", path)  # fmt: skip
        shown = tuple(_shown_path(doc[key], path) for key, path in (("npu_path", npu), ("bench_path", bench)))
        return CompareConfig(input_path=input_path, npu_path=npu, bench_path=bench, stack_path=None,
                             print_compare_log=bool(doc.get("is_print_compare_log", True)), options=options,
                             graph=replace(graph, shown=shown), notes=tuple(notes))  # fmt: skip
    stack = doc.get("stack_path")
    if stack is not None and not isinstance(stack, str):
        raise InputError(f"'stack_path' must be a path string, got {type(stack).__name__}", input_path)
    stack_path = _resolved("stack_path", stack, input_path, notes, required=False) if stack else None
    print_log = doc.get("is_print_compare_log", True)  # decision D11: absent means on
    if not isinstance(print_log, bool):
        raise InputError("'is_print_compare_log' must be true or false", input_path)
    for key, name in (("npu_parallel", "npu_layout"), ("bench_parallel", "bench_layout")):
        if doc.get(key) is not None and getattr(options, name) is None:  # the command line wins
            from msprobe_compare.load.parallel_layout import parse_layout  # layouts only (start-up speed)

            try:
                layout: dict[str, Any] = {name: parse_layout(doc[key], f"'{key}'")}
                options = replace(options, **layout)
            except OptionError as exc:
                raise InputError(exc.problem, input_path) from None
    made = make_config(npu, bench, options, stack_path=stack_path, print_compare_log=print_log, input_path=input_path)
    return replace(made, notes=tuple(notes))


def make_config(
    npu_path: Path,
    bench_path: Path,
    options: Options,
    *,
    stack_path: Path | None = None,
    print_compare_log: bool = True,
    input_path: Path | None = None,
) -> CompareConfig:
    """The compare of two dumps: dump.json files, rank folders holding one (as their dump.json) or step folders.

    Relative paths are read against the working directory; `input_path` (the compare.json) is named in errors."""
    npu, bench = Path(os.path.abspath(npu_path)), Path(os.path.abspath(bench_path))
    for key, path in (("npu_path", npu), ("bench_path", bench)):
        if not path.exists():
            raise InputError(f"{key} does not exist", path)
    npu, bench = resolve_input(npu), resolve_input(bench)
    if not npu.is_dir() and not bench.is_dir() and (npu.name == "debug.json") != (bench.name == "debug.json"):
        raise InputError("npu_path and bench_path must both be dump.json files or both debug.json files (spec §7.7)",
                         input_path or npu)  # fmt: skip
    if npu.is_dir() != bench.is_dir():
        raise InputError(
            "npu_path and bench_path must be of the same type (both dump.json files or rank folders, or both step "
            "folders)",
            input_path or (npu if npu.is_dir() else bench),
        )
    return CompareConfig(
        input_path=input_path,
        npu_path=npu,
        bench_path=bench,
        stack_path=Path(os.path.abspath(stack_path)) if stack_path else None,
        print_compare_log=print_compare_log,
        options=options,
    )
