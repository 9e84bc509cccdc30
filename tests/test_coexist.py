"""Living beside mindstudio-probe: `msprobe-compare` is always ours; `msprobe` runs compare and merge_result and hands
every other subcommand to the installed mindstudio-probe (its entry point read from its metadata, never imported
here); without it, one line and exit code 2.

The fast tests use a stand-in mindstudio-probe (a package and its dist-info in a folder on PYTHONPATH). The last
test installs both for real, in both orders, into a fresh virtualenv (skipped when pip cannot get the wheels).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import msprobe_compare
from msprobe_compare import cli, launch

SRC = Path(msprobe_compare.__file__).resolve().parent.parent
ROOT = SRC.parent
REFERENCE_VERSION = "26.2.0"  # a release whose `-h` needs no torch
# what mindstudio-probe 26.2.0's `msprobe parse -h` imports (its other requirements are not needed for help)
REFERENCE_HELP_DEPS = ("numpy", "pandas", "pyyaml", "tqdm", "packaging", "protobuf", "psutil")

FAKE_CLI = """\
import sys


def main():
    print("reference argv:", sys.argv)
    return 7
"""


def _fake_reference(root: Path, *, metadata: bool = True) -> Path:
    """A stand-in mindstudio-probe under `root`: package `msprobe` with `msprobe.py`, and (with `metadata`) its
    dist-info naming `msprobe.msprobe:main` as its `msprobe` command."""
    pkg = root / "msprobe"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "msprobe.py").write_text(FAKE_CLI)
    if metadata:
        info = root / "mindstudio_probe-8.3.3.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mindstudio-probe\nVersion: 8.3.3\n")
        (info / "entry_points.txt").write_text("[console_scripts]\nmsprobe = msprobe.msprobe:main\n")
    return root


def _run(code: str, *paths: Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in (*paths, SRC))}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=120)  # fmt: skip


def _msprobe(*argv: str) -> str:
    return f"import sys; from msprobe_compare.launch import msprobe; sys.exit(msprobe({list(argv)!r}))"


def test_our_subcommands_are_the_cli_s():
    assert launch.OURS == cli.COMMANDS


@pytest.mark.parametrize(
    "argv,word",
    [
        (["-f", "pytorch", "run_ut", "-api_info", "x.json"], "run_ut"),  # 8.3.x: the framework first
        (["parse", "-d", "x"], "parse"),  # 26.x: no framework
        (["--framework", "mindspore", "compare", "-i", "c.json"], "compare"),
        (["-f", "compare"], None),  # `compare` is -f's (bad) value here, not the subcommand
        (["--framework=pytorch", "merge_result"], "merge_result"),
        (["-h"], None),
        ([], None),
    ],
)
def test_subcommand_is_the_first_word_not_an_option_or_the_framework(argv, word):
    assert launch.subcommand(argv) == word


@pytest.mark.parametrize("argv", [("-f", "pytorch", "run_ut", "-h"), ("acc_check", "--api_info", "a b.json")])
def test_other_subcommands_run_the_installed_reference(tmp_path, argv):
    ref = _fake_reference(tmp_path / "ref")
    done = _run(_msprobe(*argv), ref, cwd=tmp_path)
    assert done.returncode == 7, done.stderr  # its exit code
    assert f"reference argv: {['msprobe', *argv]!r}" in done.stdout  # argv as its own command gets it


def test_reference_found_by_its_package_without_metadata_and_not_imported_here(tmp_path):
    ref = _fake_reference(tmp_path / "ref", metadata=False)
    probe = ("import sys; from msprobe_compare.launch import reference_entry; print(reference_entry()); "
             "print('msprobe' in sys.modules)")  # fmt: skip
    done = _run(probe, ref)
    assert done.stdout.split() == ["('msprobe.msprobe',", "'main')", "False"], done.stderr


def test_the_working_directory_does_not_shadow_the_reference(tmp_path):
    """A folder named `msprobe` where the command runs is not the reference's package."""
    ref = _fake_reference(tmp_path / "ref")
    (tmp_path / "work" / "msprobe").mkdir(parents=True)
    (tmp_path / "work" / "msprobe" / "msprobe.py").write_text("def main():\n    print('shadow')\n")
    done = _run(_msprobe("parse", "-h"), ref, cwd=tmp_path / "work")
    assert done.returncode == 7 and "shadow" not in done.stdout


def test_without_the_reference_an_unknown_subcommand_is_one_line(tmp_path):
    if launch.reference_entry() is not None:
        pytest.skip("mindstudio-probe is installed in this Python")
    done = _run(_msprobe("-f", "pytorch", "run_ut", "-h"), cwd=tmp_path)
    assert done.returncode == 2 and not done.stdout
    (line,) = done.stderr.splitlines()
    assert line.startswith("msprobe: 'run_ut' is not a subcommand of msprobe-compare's msprobe (compare, "
                           "merge_result), and mindstudio-probe, which runs the others, is not installed")  # fmt: skip
    assert line.endswith("pip install mindstudio-probe")


def test_our_subcommands_stay_ours_with_the_reference_installed(tmp_path):
    ref = _fake_reference(tmp_path / "ref")
    done = _run(_msprobe("-f", "pytorch", "compare", "-h"), ref, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("usage: msprobe compare")
    assert "reference argv" not in done.stdout


def test_msprobe_compare_never_hands_over(tmp_path):
    ref = _fake_reference(tmp_path / "ref")
    code = "import sys; from msprobe_compare.launch import msprobe_compare; sys.exit(msprobe_compare(['parse', '-h']))"
    done = _run(code, ref, cwd=tmp_path)
    assert done.returncode == 2 and "reference argv" not in done.stdout
    assert "usage: msprobe-compare" in done.stderr and "invalid choice: 'parse'" in done.stderr


def test_python_m_is_msprobe_compare(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-m", "msprobe_compare", "-h"], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)  # fmt: skip
    assert done.returncode == 0 and done.stdout.startswith("usage: msprobe-compare")
    assert "example: msprobe-compare -f pytorch compare -i" in done.stdout


def test_help_says_where_other_subcommands_go_and_how_to_run_the_reference_compare(capfd):
    with pytest.raises(SystemExit):
        launch.msprobe(["-h"])
    out = capfd.readouterr().out
    assert "handed to mindstudio-probe" in out
    assert f"its own compare: {cli.REFERENCE_COMPARE}" in out and "this compare alone: msprobe-compare" in out


# ----------------------------------------------------------------------------------------------- real install


def _pip(python: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", *args], capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def _command(venv: Path, name: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / name), *argv], capture_output=True, text=True, timeout=120,
                          cwd=venv)  # fmt: skip


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, Path]:
    """Our wheel (built from this checkout without the optional C sources: a fast build) and mindstudio-probe's,
    downloaded; skips when pip cannot get them."""
    if os.name != "posix":
        pytest.skip("the console scripts are checked under bin/")
    root = tmp_path_factory.mktemp("coexist")
    got = _pip(Path(sys.executable), "download", "--no-deps", "-d", str(root / "ref"),
               f"mindstudio-probe=={REFERENCE_VERSION}", timeout=180)  # fmt: skip
    if got.returncode != 0:
        pytest.skip(f"cannot download mindstudio-probe {REFERENCE_VERSION}: "
                    f"{(got.stderr.strip().splitlines() or ['?'])[-1]}")  # fmt: skip
    tree = root / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, tree / name)
    shutil.copytree(SRC / "msprobe_compare", tree / "src" / "msprobe_compare",
                    ignore=shutil.ignore_patterns("*.c", "*.so", "*.pyd", "__pycache__"))  # fmt: skip
    built = _pip(Path(sys.executable), "wheel", "--no-deps", "-w", str(root / "ours"), str(tree), timeout=240)
    if built.returncode != 0:
        pytest.skip(f"cannot build our wheel here: {(built.stderr.strip().splitlines() or ['?'])[-1]}")
    (ours,) = (root / "ours").glob("msprobe_compare-*.whl")
    (ref,) = (root / "ref").glob("mindstudio_probe-*.whl")
    return {"ours": ours, "ref": ref}


def test_both_installed_in_either_order(tmp_path, wheels):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    deps = _pip(python, "install", "-q", *REFERENCE_HELP_DEPS, "orjson", "openpyxl", "threadpoolctl")
    if deps.returncode != 0:
        pytest.skip(f"cannot install the dependencies: {(deps.stderr.strip().splitlines() or ['?'])[-1]}")

    def install(*names: str) -> None:
        for name in names:
            done = _pip(python, "install", "-q", "--no-deps", "--force-reinstall", str(wheels[name]))
            assert done.returncode == 0, done.stderr

    def reference_works(expected: str) -> None:
        done = _command(venv, "msprobe", "parse", "-h")
        assert done.returncode == 0 and "--dump_path" in done.stdout, (expected, done.stdout, done.stderr)

    def ours_works() -> None:
        for argv in (("-h",), ("-f", "pytorch", "compare", "-h")):
            done = _command(venv, "msprobe-compare", *argv)
            assert done.returncode == 0 and done.stdout.startswith("usage: msprobe-compare"), done.stderr

    # ours first, then the reference: its `msprobe` is the reference's own, ours stays as msprobe-compare
    install("ours", "ref")
    reference_works("the reference's own msprobe")
    assert "msprobe-compare" not in _command(venv, "msprobe", "-V").stdout
    ours_works()

    # the reference first, then ours: our `msprobe` runs compare and hands parse to the reference
    for name in ("mindstudio-probe", "msprobe-compare"):
        assert _pip(python, "uninstall", "-y", name).returncode == 0
    install("ref", "ours")
    assert _command(venv, "msprobe", "--version").stdout.strip() == f"msprobe-compare {msprobe_compare.__version__}"
    reference_works("handed over by ours")
    done = _command(venv, "msprobe", "-f", "pytorch", "compare", "-h")
    assert done.returncode == 0 and done.stdout.startswith("usage: msprobe compare")
    ours_works()

    # an uninstall takes `msprobe` with it, for both; the README's force-reinstall brings it back
    assert _pip(python, "uninstall", "-y", "mindstudio-probe").returncode == 0
    assert not (venv / "bin" / "msprobe").exists()
    ours_works()
    install("ours")
    done = _command(venv, "msprobe", "parse", "-h")
    assert done.returncode == 2 and not done.stdout
    assert done.stderr.count("\n") == 1 and "mindstudio-probe, which runs the others, is not installed" in done.stderr
