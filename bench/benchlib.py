"""Helpers shared by the benchmark scripts (run as `python3 bench/<script>.py`, so this folder is on sys.path)."""

import os
import shutil
import sys


def find_ours(ref):
    """Command for our tool: `msprobe` on PATH unless it is the reference's, else `python -m msprobe_compare`."""
    exe = shutil.which("msprobe")
    if exe and not (ref and os.path.realpath(exe) == os.path.realpath(ref)) and "refvenv" not in exe:
        return [exe]
    return [sys.executable, "-m", "msprobe_compare"]


def tail(path, n=15):
    """The last `n` non-empty lines of a log file, indented, for failure reports."""
    try:
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").replace("\r", "\n").splitlines()
    except OSError:
        return ""
    return "\n".join("    " + ln for ln in [x for x in lines if x.strip()][-n:])


def machine_info():
    """Machine description for benchmark records: CPUs, memory, CPU model, kernel, Python."""
    import platform

    info = {
        "nproc": os.cpu_count(),
        "mem_gib": None,
        "cpu_model": platform.processor() or platform.machine(),
        "kernel": platform.release(),
        "python": platform.python_version(),
    }
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    info["mem_gib"] = round(int(line.split()[1]) / 2**20, 1)
                    break
    except OSError:
        pass
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return info


def machine_line(info):
    """One-line summary of machine_info()."""
    mem = f"{info['mem_gib']:g} GiB RAM, " if info.get("mem_gib") else ""
    return f"{info['nproc']} vCPU ({info['cpu_model']}), {mem}Linux {info['kernel']}, Python {info['python']}"


def load1():
    """1-minute load average (nan where unavailable)."""
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return float("nan")
