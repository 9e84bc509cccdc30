"""Mapping YAML files: reading the user's (-cm, -am, -lm) with one-line errors that name the file, and
writing the data mapping that -lm derives."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from msprobe_compare.errors import InputError
from msprobe_compare.load.dumpjson import check_input_file


def load_yaml(path: Path, what: str) -> Any:
    """`yaml.safe_load` of a user file; `what` names the option's file in messages ("cell mapping")."""
    check_input_file(path, f"{what} file")
    try:
        return yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{what} file cannot be read ({exc})", path) from None
    except yaml.YAMLError as exc:
        raise InputError(f"{what} is not valid YAML ({' '.join(str(exc).split())})", path) from None


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-/]*\Z")
_YAML_WORDS = frozenset(
    w for base in ("yes", "no", "true", "false", "on", "off", "null") for w in (base, base.capitalize(), base.upper())
)


def _scalar(text: str) -> str:
    """A YAML scalar for `text`: plain when it cannot be read as anything else, else double-quoted."""
    if _PLAIN.match(text) and text not in _YAML_WORDS:
        return text
    return json.dumps(text)  # a JSON string is a valid YAML double-quoted scalar


def mapping_yaml(mapping: dict[str, str]) -> str:
    """`{name: name}` as block YAML, in insertion order (fast for millions of rows; `yaml.safe_load` reads it back)."""
    if not mapping:
        return "{}\n"
    return "".join(f"{_scalar(k)}: {_scalar(v)}\n" for k, v in mapping.items())
