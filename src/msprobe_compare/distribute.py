"""Distributed execution on Ray (`--ray [ADDRESS]`): ranks and batches of tensor rows become Ray tasks.

Every node reads the dumps from a shared filesystem. A rank task writes its result files into the output folder
(also shared), as the local process pool does, and returns its `RankOutcome` and its log lines, which the caller
prints. A tensor task returns the metrics of its rows; the caller assembles the rows in order (`tensor_rows`). The
results are therefore those of a local run.

Ray is imported here only, and only when asked for. Without ADDRESS we connect to the cluster named by RAY_ADDRESS,
else start a private local instance that listens on 127.0.0.1 only, without dashboard (`start_local`).

Clusters with token authentication (Ray >= 2.52, RAY_AUTH_MODE=token) need nothing from us: Ray's driver reads
RAY_AUTH_MODE and the token (RAY_AUTH_TOKEN, a file named by RAY_AUTH_TOKEN_PATH, else ~/.ray/auth_token) from this
process's environment, and the workers run in the cluster's. Ray only turns authentication on by itself for a local
instance; for an address it must be in the environment, and `connect` says so when the cluster refuses us.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from typing import Any, TypeVar

from msprobe_compare.errors import CompareError, UsageError
from msprobe_compare.log import Console
from msprobe_compare.records import dataclass

# the `ray` extra of pyproject.toml (tests/test_docs.py keeps the two equal); from a checkout: pip install '.[ray]'
INSTALL_HINT = "pip install 'ray>=2.9' (from a checkout of msprobe-compare: pip install '.[ray]')"
LOOPBACK = "127.0.0.1"
RAY_BATCH_BYTES = 32 << 20  # a tensor task reads about this much data (a few tens of ms of work) ...
RAY_BATCH_MAX = 256  # ... and measures at most this many rows
_RANK_WINDOW_PER_CPU = 2  # rank tasks submitted ahead per cluster CPU
_AUTH_PROBE_S = 5.0  # how long a failed connection's authentication probe may take (an unreachable GCS: far longer)
AUTH_HINT = ("set RAY_AUTH_MODE=token and the cluster's token in RAY_AUTH_TOKEN (or in a file named by "
             "RAY_AUTH_TOKEN_PATH, default ~/.ray/auth_token) in this command's environment")  # fmt: skip

# Environment of the processes of a local instance (set while `ray.init` starts them):
# - RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0: the node address is 127.0.0.1, not this host's outward address;
# - usage statistics off;
# - a dead HTTP proxy on the loopback (all but loopback addresses go through it): Ray's usage-stats module probes
#   cloud metadata servers (169.254.169.254, metadata.google.internal) at start even with statistics off, and the
#   probes must fail here instead of leaving the machine. Ray's own gRPC traffic is loopback, exempted by no_proxy.
_DEAD_PROXY = f"http://{LOOPBACK}:9"
_LOCAL_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    "http_proxy": _DEAD_PROXY,
    "https_proxy": _DEAD_PROXY,
    "HTTP_PROXY": _DEAD_PROXY,
    "HTTPS_PROXY": _DEAD_PROXY,
    "no_proxy": f"{LOOPBACK},localhost,::1",
    "NO_PROXY": f"{LOOPBACK},localhost,::1",
}

R = TypeVar("R")
T = TypeVar("T")
_state = {"owned": False}  # this process called ray.init (and `session` shuts it down)


def require_ray() -> Any:
    """The `ray` module, or a UsageError naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise UsageError(f"--ray needs Ray, which is not installed; install it with: {INSTALL_HINT}") from None
    return ray


@contextlib.contextmanager
def session() -> Iterator[None]:
    """For the CLI: Ray must be importable; a connection made meanwhile (`connect`) is closed at the end."""
    ray = require_ray()
    try:
        yield
    finally:
        if _state["owned"] and ray.is_initialized():
            ray.shutdown()
        _state["owned"] = False


def connect(target: str | bool, console: Console | None = None) -> Any:
    """Connect this process to Ray unless it is already (a Ray worker, or the caller's own `ray.init`).

    `target`: a cluster address, or True for the cluster named by RAY_ADDRESS, else (or for "local") a new local
    instance (`start_local`)."""
    ray = require_ray()
    if ray.is_initialized():
        return ray
    address = target if isinstance(target, str) else (os.environ.get("RAY_ADDRESS") or None)
    if address in (None, "local"):  # Ray's own "local" would not be confined to the loopback
        start_local()
        where = f"a local Ray instance on {LOOPBACK}"
    else:
        try:
            ray.init(address=address, configure_logging=False)
        except Exception as exc:  # ConnectionError, ValueError, timeouts, ...: all mean "not reachable as given"
            raise CompareError(_connect_error(ray, address, exc)) from None
        where = f"the Ray cluster at {address}"
    _state["owned"] = True
    if console is not None:
        console.info(f"--ray: running on {where} ({cluster_cpus(ray)} CPUs)")
    return ray


def _connect_error(ray: Any, address: str, exc: Exception) -> str:
    """The one-line message for a failed `ray.init(address=...)`; it names token authentication when that is why.

    Ray raises its typed AuthenticationError itself only when RAY_AUTH_MODE=token finds no token here; a cluster that
    rejects us surfaces as a ConnectionError after Ray's retries, so the GCS is asked once more (`_refuses_us`)."""
    auth_error = getattr(getattr(ray, "exceptions", None), "AuthenticationError", None)  # Ray >= 2.52
    if not (isinstance(auth_error, type) and (isinstance(exc, auth_error) or _refuses_us(address, auth_error))):
        return f"cannot connect to the Ray cluster at {address}: {exc}"
    if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
        why = "it requires token authentication, and RAY_AUTH_MODE is not 'token' here"
    elif _token_configured():
        why = "it refused this client's authentication token"
    else:
        why = "RAY_AUTH_MODE=token, but no authentication token was found"
    return f"cannot connect to the Ray cluster at {address}: {why}; {AUTH_HINT}"


def _token_configured() -> bool:
    """Whether Ray would find a token here (the sources of Ray's token authentication, in its order)."""
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return True
    return os.path.isfile(os.path.join(os.path.expanduser("~"), ".ray", "auth_token"))


def _refuses_us(address: str, auth_error: type) -> bool:
    """Whether the GCS at `address` answers but rejects this client's authentication: a standalone GCS client raises
    Ray's AuthenticationError at once then. Asked in a daemon thread, at most `_AUTH_PROBE_S` (an unreachable GCS
    makes the client wait far longer); False for Ray client addresses (ray://) and whenever the probe is unavailable."""
    if "://" in address or address == "auto":
        return False
    try:
        from ray._raylet import GcsClient  # private API: absent or changed in a Ray version means "cannot tell"
    except ImportError:
        return False
    raised: list[Exception] = []

    def probe() -> None:
        try:
            GcsClient(address=address)
        except Exception as exc:  # only looked at, by type
            raised.append(exc)

    thread = threading.Thread(target=probe, name="msprobe-ray-auth-probe", daemon=True)
    thread.start()
    thread.join(_AUTH_PROBE_S)
    return bool(raised) and isinstance(raised[0], auth_error)


def start_local(num_cpus: int | None = None) -> None:
    """Start a private Ray instance on this machine: 127.0.0.1 only, no dashboard, no usage statistics."""
    saved = {key: os.environ.get(key) for key in _LOCAL_ENV}
    os.environ.update(_LOCAL_ENV)
    try:
        ray = require_ray()
        try:  # the loopback choice is read when Ray is imported; apply it if Ray was imported before us
            from ray._private import ray_constants

            if getattr(ray_constants, "ENABLE_RAY_CLUSTER", False):
                ray_constants.ENABLE_RAY_CLUSTER = False
        except ImportError:
            pass
        try:
            ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, _node_ip_address=LOOPBACK,
                     configure_logging=False)  # fmt: skip
        except Exception as exc:
            raise CompareError(f"cannot start a local Ray instance: {exc}") from None
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    node_ip = ray.util.get_node_ip_address()
    if node_ip != LOOPBACK:
        ray.shutdown()
        raise CompareError(f"the local Ray instance would use the address {node_ip}, not {LOOPBACK}; stopped it")


def cluster_cpus(ray: Any) -> int:
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def _call(fn: Callable[..., R], *args: Any) -> R:
    """A task body: `fn(*args)` on a worker."""
    return fn(*args)


def _call_captured(fn: Callable[..., R], *args: Any) -> tuple[R, str]:
    """A task body: `fn(*args)` on a worker, with what it printed on stdout."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = fn(*args)
    return result, out.getvalue()


@cache
def _remote(captured: bool) -> Any:
    """The Ray remote functions (made once Ray is imported). Rank tasks write files: a crashed one is not retried."""
    ray = require_ray()
    if captured:
        return ray.remote(num_cpus=1, max_retries=0)(_call_captured)
    return ray.remote(num_cpus=1)(_call)


def _as_completed(ray: Any, submit: Callable[[T], Any], items: Sequence[T], window: int) -> Iterator[tuple[int, Any]]:
    """(index, result) of every item's task as tasks finish, with at most `window` of them unfinished.

    Waits in `ray.wait`, which lends this worker's CPU to other tasks when it runs inside a task itself (a rank task
    waiting for its tensor tasks), so nested tasks cannot deadlock."""
    pending: dict[Any, int] = {}
    queue = iter(enumerate(items))
    try:
        while True:
            while len(pending) < window:
                item = next(queue, None)
                if item is None:
                    break
                pending[submit(item[1])] = item[0]
            if not pending:
                return
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                yield pending.pop(ref), ray.get(ref)
    finally:
        for ref in pending:  # stopped early (an error): do not leave work behind on the cluster
            with contextlib.suppress(Exception):
                ray.cancel(ref)


def map_ranks(
    fn: Callable[..., R], jobs: Sequence[tuple[Any, ...]], target: str | bool, console: Console,
    limit: int | None = None, on_done: Callable[[int], None] | None = None,
) -> list[R]:  # fmt: skip
    """`fn(*job)` for every job as a Ray task of one CPU, results in job order. A task's log lines are printed here
    when it finishes. `limit`: at most this many tasks unfinished (default: twice the cluster's CPUs). `on_done`:
    called with the count of finished tasks as each finishes (progress)."""
    ray = connect(target, console)
    remote = _remote(True)
    window = max(1, limit or _RANK_WINDOW_PER_CPU * cluster_cpus(ray))
    results: list[Any] = [None] * len(jobs)
    for count, (index, (result, text)) in enumerate(_as_completed(ray, lambda job: remote.remote(fn, *job), jobs,
                                                                  window), 1):  # fmt: skip
        sys.stdout.write(text)
        sys.stdout.flush()
        results[index] = result
        if on_done is not None:
            on_done(count)
    return results


@dataclass
class RayRows:
    """A `tensor_rows.RowBackend` on Ray: batches of rows as tasks, their metrics returned to the caller."""

    workers: int
    batch_bytes: int = RAY_BATCH_BYTES
    max_rows: int = RAY_BATCH_MAX

    def run(
        self, fn: Callable[[list[Any]], list[Any]], batches: list[list[Any]], window: int
    ) -> Iterator[tuple[list[Any], list[Any]]]:
        ray = require_ray()
        remote = _remote(False)
        fn_ref = ray.put(fn)  # shipped once, not with every task
        for index, results in _as_completed(ray, lambda batch: remote.remote(fn_ref, batch), batches, window):
            yield batches[index], results


def row_backend(target: str | bool, console: Console, jobs: int | None = None) -> RayRows:
    """The Ray backend for tensor rows; `jobs` caps the tasks running at once (default: the cluster's CPUs)."""
    ray = connect(target, console)
    cpus = cluster_cpus(ray)
    return RayRows(workers=max(1, min(jobs, cpus) if jobs else cpus))
