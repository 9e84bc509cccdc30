"""--ray: the same result files as a local run; no Ray import without the flag; a clear error without Ray.

One local Ray instance (2 CPUs, 127.0.0.1 only) serves the whole module. Local baselines run in a subprocess, so the
process pools never fork a process that holds Ray's threads.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

from conftest import DATA
from parity import assert_same_bytes, mismatches

ROOT = Path(__file__).resolve().parents[1]
HAS_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAS_RAY, reason="ray is not installed (pip install '.[ray]')")
FORMATS = ("--format", "xlsx,csv")


@pytest.fixture(scope="module")
def ray_instance():
    """A private local Ray instance for this module, shut down at its end."""
    from msprobe_compare import distribute

    distribute.start_local(num_cpus=2)
    import ray

    yield ray
    ray.shutdown()


def _local_run(cwd: Path, out: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """The CLI without --ray, in a fresh interpreter."""
    args = [sys.executable, "-m", "msprobe_compare", "-f", "pytorch", "compare", "-i", "compare.json", "-o", str(out)]
    return subprocess.run([*args, *flags], cwd=cwd, capture_output=True, text=True, timeout=300)


def _same_outputs(a: Path, b: Path) -> list[Path]:
    """Assert both folders hold the same files (timestamps in names aside) with the same content; xlsx files are
    compared member by member (the zip headers hold the write time), timestamps aside. Returns the files of `a`."""

    def files(folder: Path) -> dict[str, Path]:
        return {re.sub(r"\d{14}", "TS", p.relative_to(folder).as_posix()): p for p in folder.rglob("*") if p.is_file()}

    fa, fb = files(a), files(b)
    assert sorted(fa) == sorted(fb)
    for name, left in fa.items():
        right = fb[name]
        if name.endswith(".xlsx"):
            with zipfile.ZipFile(left) as zl, zipfile.ZipFile(right) as zr:
                assert zl.namelist() == zr.namelist(), name
                for member in zl.namelist():  # the workbook's summary sheet names the run's (timestamped) files
                    stamped = (re.sub(rb"\d{14}", b"TS", z.read(member)) for z in (zl, zr))
                    assert next(stamped) == next(stamped), f"{name}: {member}"
        else:
            assert_same_bytes(left.read_bytes(), right.read_bytes(), name)
    return sorted(fa.values())


def _step_folder(tmp_path: Path, seeds: tuple[int, ...], entries: int) -> Path:
    """A step folder with one rank per seed, made by bench/gen_stats.py."""
    case = tmp_path / "gen"
    for rank, seed in enumerate(seeds):
        made = tmp_path / f"seed{seed}"
        generate = [sys.executable, str(ROOT / "bench" / "gen_stats.py"), "--entries", str(entries),
                    "--seed", str(seed), "--out", str(made)]  # fmt: skip
        subprocess.run(generate, check=True, capture_output=True, timeout=300)
        for side in ("npu", "bench"):
            (case / side / "step0").mkdir(parents=True, exist_ok=True)
            shutil.move(made / side / "step0" / "rank", case / side / "step0" / f"rank{rank}")
    (case / "compare.json").write_text(json.dumps({"npu_path": str(case / "npu" / "step0"),
                                                   "bench_path": str(case / "bench" / "step0"),
                                                   "is_print_compare_log": False}))  # fmt: skip
    return case


@needs_ray
def test_statistics_ranks_as_ray_tasks(ray_instance, run_cli, tmp_path):
    case = _step_folder(tmp_path, seeds=(1, 2, 3), entries=2000)
    local = _local_run(case, tmp_path / "local", *FORMATS)
    assert local.returncode == 0, local.stdout + local.stderr
    run = run_cli(case, "pytorch", *FORMATS, "--ray", out_dir=tmp_path / "ray")
    assert run.code == 0, run.out
    written = _same_outputs(tmp_path / "local", tmp_path / "ray")
    assert len([p for p in written if p.suffix == ".xlsx"]) == 3
    for rank in range(3):  # each rank's log comes back to the driver
        assert f"[rank{rank}] Compare result is" in run.out
    assert run.out.count("msprobe compare ends successfully.") == 3


@needs_ray
def test_reference_fixture_on_ray(ray_instance, run_cli):
    case = DATA / "pytorch" / "dist_same_stat"
    run = run_cli(case, "pytorch", "-s", "--ray")
    assert run.code == 0, run.out
    for rank in (0, 1):
        assert not mismatches(run.one(f"compare_result_rank{rank}_*.xlsx"), case / "expected" / f"hl.rank{rank}.csv")


@needs_ray
def test_tensor_rows_as_ray_tasks(ray_instance, run_cli, tmp_path):
    case = DATA / "pytorch" / "mlp_bug_tensor"
    local = _local_run(case, tmp_path / "local", "-s", *FORMATS)
    assert local.returncode == 0, local.stdout + local.stderr
    run = run_cli(case, "pytorch", "-s", *FORMATS, "--ray", out_dir=tmp_path / "ray")
    assert run.code == 0, run.out
    _same_outputs(tmp_path / "local", tmp_path / "ray")
    assert not mismatches(run.one("compare_result_*.xlsx"), case / "expected" / "hl.csv")
    # the per-row log lines come in row order, as in a local run
    rows = [line.split("] ", 1)[1] for line in run.out.splitlines() if "Compare result: cosine" in line]
    local_rows = [line.split("] ", 1)[1] for line in local.stdout.splitlines() if "Compare result: cosine" in line]
    assert rows == local_rows and rows


@needs_ray
def test_tensor_ranks_nest_row_tasks(ray_instance, run_cli, tmp_path):
    """Rank tasks submit their tensor rows as tasks too (more ranks than CPUs: must not deadlock)."""
    source = DATA / "pytorch" / "mlp_bug_tensor"
    case = tmp_path / "case"
    for side in ("npu", "bench"):
        for rank in range(3):
            shutil.copytree(source / side / "step0" / "rank", case / side / "step0" / f"rank{rank}")
    (case / "compare.json").write_text(json.dumps({"npu_path": str(case / "npu" / "step0"),
                                                   "bench_path": str(case / "bench" / "step0")}))  # fmt: skip
    local = _local_run(case, tmp_path / "local", *FORMATS)
    assert local.returncode == 0, local.stdout + local.stderr
    run = run_cli(case, "pytorch", *FORMATS, "--ray", out_dir=tmp_path / "ray")
    assert run.code == 0, run.out
    _same_outputs(tmp_path / "local", tmp_path / "ray")


def test_missing_ray_is_a_usage_error(run_cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    run = run_cli(DATA / "pytorch" / "dist_same_stat", "pytorch", "--ray")
    assert run.code == 2
    errors = [line for line in run.out.splitlines() if "[ERROR]" in line]
    assert len(errors) == 1 and "install it with: pip install 'ray>=2.9'" in errors[0], run.out
    assert "Traceback" not in run.out + run.err
    assert not run.files("*")  # stopped before any work


def test_no_ray_import_without_the_flag(tmp_path):
    """A compare without --ray (tensor rows and step folders) never imports Ray."""
    code = (
        "import sys\n"
        "from msprobe_compare.cli import main\n"
        "codes = [main(['-f', 'pytorch', 'compare', '-i', sys.argv[1], '-o', sys.argv[2]]),\n"
        "         main(['-f', 'pytorch', 'compare', '-i', sys.argv[3], '-o', sys.argv[2]])]\n"
        "assert codes == [0, 0], codes\n"
        "assert 'ray' not in sys.modules, 'ray was imported'\n"
        "print('NO-RAY-OK')\n"
    )
    tensor, ranks = DATA / "pytorch" / "mlp_bug_tensor", DATA / "pytorch" / "dist_same_stat"
    tensor_cfg = tmp_path / "tensor.json"
    tensor_cfg.write_text(json.dumps({"npu_path": str(tensor / "npu/step0/rank/dump.json"),
                                      "bench_path": str(tensor / "bench/step0/rank/dump.json"),
                                      "is_print_compare_log": False}))  # fmt: skip
    ranks_cfg = tmp_path / "ranks.json"
    ranks_cfg.write_text(json.dumps({"npu_path": str(ranks / "npu/step0"), "bench_path": str(ranks / "bench/step0")}))
    done = subprocess.run([sys.executable, "-c", code, str(tensor_cfg), str(tmp_path / "out"), str(ranks_cfg)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0 and "NO-RAY-OK" in done.stdout, done.stdout + done.stderr


class _FakeRay:
    """Stands in for the `ray` module to check where `connect` goes, without any Ray process or network."""

    def __init__(self, fail: bool = False) -> None:
        self.inits: list[tuple[str | None, dict]] = []
        self.up = False
        self.fail = fail
        self.util = type("util", (), {"get_node_ip_address": staticmethod(lambda: "127.0.0.1")})

    def is_initialized(self) -> bool:
        return self.up

    def init(self, address: str | None = None, **kwargs: object) -> None:
        if self.fail:
            raise ConnectionError("unreachable")
        self.inits.append((address, kwargs))
        self.up = True

    def cluster_resources(self) -> dict[str, float]:
        return {"CPU": 8.0}

    def shutdown(self) -> None:
        self.up = False


@pytest.mark.parametrize(("target", "env", "expected"), [
    ("10.1.2.3:6379", "10.9.9.9:6379", "10.1.2.3:6379"),  # an ADDRESS wins
    (True, "10.9.9.9:6379", "10.9.9.9:6379"),  # else RAY_ADDRESS
    (True, "", "local"),  # else a new local instance
    ("local", "10.9.9.9:6379", "local"),  # Ray's "local" gets our loopback-only instance too
])  # fmt: skip
def test_connect_target(monkeypatch, target, env, expected):
    from msprobe_compare import distribute
    from msprobe_compare.log import Console

    fake = _FakeRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setenv("RAY_ADDRESS", env)
    with distribute.session():
        backend = distribute.row_backend(target, Console(), jobs=3)
        assert fake.up and backend.workers == 3
        distribute.connect(target)  # already connected: no second init
    assert not fake.up  # the session closed what it opened
    ((address, kwargs),) = fake.inits
    assert address == expected
    if expected == "local":
        assert kwargs["_node_ip_address"] == "127.0.0.1" and kwargs["include_dashboard"] is False


def test_unreachable_cluster_is_one_error_line(monkeypatch, run_cli):
    monkeypatch.setitem(sys.modules, "ray", _FakeRay(fail=True))
    run = run_cli(DATA / "pytorch" / "dist_same_stat", "pytorch", "--ray", "10.1.2.3:6379")
    assert run.code == 1
    assert "cannot connect to the Ray cluster at 10.1.2.3:6379: unreachable" in run.out
    assert "Traceback" not in run.out + run.err


def test_auth_refusal_names_the_cause(monkeypatch, run_cli):
    """Ray's typed AuthenticationError (here a stand-in) gets the cause and the variables to set, without Ray."""

    class AuthenticationError(Exception):
        pass

    fake = _FakeRay()
    fake.exceptions = type("exceptions", (), {"AuthenticationError": AuthenticationError})

    def refuse(address: str | None = None, **kwargs: object) -> None:
        raise AuthenticationError("no token")

    fake.init = refuse
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", "/nonexistent")  # no ~/.ray/auth_token
    run = run_cli(DATA / "pytorch" / "dist_same_stat", "pytorch", "--ray", "10.1.2.3:6379")
    assert run.code == 1
    errors = [line for line in run.out.splitlines() if "[ERROR]" in line]
    assert len(errors) == 1 and "Traceback" not in run.out + run.err
    assert ("cannot connect to the Ray cluster at 10.1.2.3:6379: RAY_AUTH_MODE=token, but no authentication token "
            "was found; set RAY_AUTH_MODE=token and the cluster's token in RAY_AUTH_TOKEN") in errors[0]  # fmt: skip


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@needs_ray
def test_cluster_with_token_auth(tmp_path):
    """A loopback cluster started with RAY_AUTH_MODE=token (`ray start --head`): with the token in the environment the
    compare runs there; without it, or with another token, one error line names the cause and the variables to set."""
    import ray

    from msprobe_compare import distribute

    if not hasattr(ray.exceptions, "AuthenticationError"):
        pytest.skip("this Ray has no token authentication (Ray >= 2.52)")
    port, token = _free_port(), secrets.token_hex(32)
    home = tmp_path / "home"  # no ~/.ray/auth_token of the machine's user; Ray writes none here (the token is in env)
    home.mkdir()
    base = {key: value for key, value in os.environ.items() if not key.startswith(("RAY_AUTH_", "RAY_ADDRESS"))}
    # loopback only, no usage statistics, no probes of cloud metadata servers: the local instance's environment
    base.update(distribute._LOCAL_ENV, HOME=str(home))
    with_token = {**base, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
    ray_temp = tempfile.mkdtemp(prefix="ray")  # short: Ray's socket paths must fit in 107 bytes
    head = subprocess.Popen(
        [str(Path(sys.executable).with_name("ray")), "start", "--head", "--block", "--port", str(port),
         "--node-ip-address", "127.0.0.1", "--num-cpus", "2", "--include-dashboard", "false",
         "--disable-usage-stats", "--temp-dir", ray_temp],
        env=with_token, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:  # the GCS listens
            assert head.poll() is None, "ray start --head exited"
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline, "the Ray head did not start in 30 s"
            time.sleep(0.2)
        case = DATA / "pytorch" / "dist_same_stat"

        def compare(env: dict[str, str], out: str) -> subprocess.CompletedProcess[str]:
            args = [sys.executable, "-m", "msprobe_compare", "-f", "pytorch", "compare", "-i", "compare.json",
                    "-o", str(tmp_path / out), "--ray", f"127.0.0.1:{port}"]  # fmt: skip
            # RAY_gcs_server_port_wait_time_s: Ray's retries of a refused connection, 20 s by default, kept short
            env = {**env, "RAY_gcs_server_port_wait_time_s": "2"}
            return subprocess.run(args, cwd=case, env=env, capture_output=True, text=True, timeout=120)

        done = compare(with_token, "ok")
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"--ray: running on the Ray cluster at 127.0.0.1:{port}" in done.stdout
        assert len(list((tmp_path / "ok").glob("compare_result_rank*_*.xlsx"))) == 2
        refused = {
            "it requires token authentication, and RAY_AUTH_MODE is not 'token' here": base,
            "it refused this client's authentication token": {**with_token, "RAY_AUTH_TOKEN": "0" * 64},
            "RAY_AUTH_MODE=token, but no authentication token was found": {**base, "RAY_AUTH_MODE": "token"},
        }
        for why, env in refused.items():
            done = compare(env, "refused")
            assert done.returncode == 1, done.stdout + done.stderr
            errors = [line for line in done.stdout.splitlines() if "[ERROR]" in line]
            assert len(errors) == 1, done.stdout
            assert f"cannot connect to the Ray cluster at 127.0.0.1:{port}: {why}; set RAY_AUTH_MODE=token" in errors[0]
            assert "RAY_AUTH_TOKEN" in errors[0] and "Traceback" not in done.stdout + done.stderr
            assert not [path for path in (tmp_path / "refused").rglob("*") if path.is_file()]  # stopped before any work
    finally:
        os.killpg(head.pid, signal.SIGTERM)  # the head and the processes it started (its own session)
        try:
            head.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        shutil.rmtree(ray_temp, ignore_errors=True)


def test_backend_batches_reassembled_in_row_order():
    """A RowBackend may finish batches in any order; rows come back in row order."""
    from msprobe_compare.measure.tensor_rows import RowTask, _in_row_order

    tasks = [RowTask(i, f"row{i}", "-1", "-1") for i in range(7)]
    batches = [tasks[0:3], tasks[3:4], tasks[4:7]]
    finished = ((batch, [t.row for t in batch]) for batch in reversed(batches))
    assert list(_in_row_order(finished)) == list(range(7))
