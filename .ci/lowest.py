"""Print pip constraints that pin each runtime dependency of pyproject.toml to its lower bound (`>=X` -> `==X`).

CI installs the checkout once more with these (`pip install -c FILE ...`), so the lowest versions that
pyproject.toml admits are tested, not only the newest. A runtime dependency without a `>=` bound is an
error: its lowest version would be untested.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the copy inside pip (run this with a venv's python)
    from pip._vendor import tomli as tomllib

_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*([^;]*)(;.*)?$")


def lowest(requirements: list[str]) -> list[str]:
    pins = []
    for req in requirements:
        m = _REQ.match(req)
        if not m:
            raise SystemExit(f"cannot read the requirement {req!r}")
        name, specs, marker = m.group(1), m.group(2), m.group(3) or ""
        bounds = [s.strip()[2:].strip() for s in specs.split(",") if s.strip().startswith(">=")]
        if len(bounds) != 1:
            raise SystemExit(f"{req!r}: a runtime dependency needs exactly one '>=' lower bound")
        pins.append(f"{name}=={bounds[0]}{marker}")
    return pins


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "pyproject.toml")
    project = tomllib.loads(path.read_text(encoding="utf-8"))["project"]
    print("\n".join(lowest(project["dependencies"])))


if __name__ == "__main__":
    main()
