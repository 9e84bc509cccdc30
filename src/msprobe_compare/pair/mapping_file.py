"""Mapping YAML files: reading the user's (-cm, -am, -lm) with one-line errors that name the file, and
writing the data mapping that -lm derives."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

from msprobe_compare.errors import InputError
from msprobe_compare.load.dumpjson import check_input_file, read_bytes


MAX_YAML_BYTES = 256 << 20  # a data mapping of a million rows is about 100 MB
MAX_YAML_ALIASES = 100  # mapping files need none; a few lists of aliases to lists expand exponentially


@functools.cache
def _bounded_loader() -> Any:
    """yaml.SafeLoader that refuses more than MAX_YAML_ALIASES aliases in a document (yaml is imported only
    when a mapping file is read: start-up speed)."""
    import yaml

    class BoundedLoader(yaml.SafeLoader):
        def __init__(self, stream: Any) -> None:
            super().__init__(stream)
            self.aliases = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                self.aliases += 1
                if self.aliases > MAX_YAML_ALIASES:
                    raise _TooManyAliases()
            return super().compose_node(parent, index)

    return BoundedLoader


class _TooManyAliases(Exception):
    pass


def load_yaml(path: Path, what: str) -> Any:
    """A safe load of a user's YAML file; `what` names the option's file in messages ("cell mapping"). The file
    must be a regular file (no link, FIFO or device) of at most MAX_YAML_BYTES, with at most MAX_YAML_ALIASES
    aliases. The result is unchecked: callers check its shape before using (or printing) any of it."""
    check_input_file(path, f"{what} file")
    raw = read_bytes(path, f"{what} file", "a YAML file")
    if len(raw) > MAX_YAML_BYTES:
        raise InputError(f"{what} file is larger than {MAX_YAML_BYTES >> 20} MiB; refused", path)
    return parse_yaml(raw, what, path)


def parse_yaml(raw: bytes, what: str, path: Path) -> Any:
    """The one YAML reader (user files and the packaged API table): a safe load with at most MAX_YAML_ALIASES
    aliases; errors name `path`."""
    import yaml  # only when a YAML file is read (start-up speed)

    try:
        loader = _bounded_loader()(raw.decode("utf-8"))
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} file cannot be read ({exc})", path) from None
    except _TooManyAliases:
        raise InputError(f"{what} uses more than {MAX_YAML_ALIASES} YAML aliases; refused", path) from None
    except yaml.YAMLError as exc:
        raise InputError(f"{what} is not valid YAML ({' '.join(str(exc).split())[:300]})", path) from None
    except RecursionError:
        raise InputError(f"{what} is nested too deeply; refused", path) from None
    except (ValueError, OverflowError) as exc:  # e.g. an int of 5,000 digits
        raise InputError(f"{what} is not valid YAML ({type(exc).__name__})", path) from None


def shown(node: Any) -> str:
    """A short text of an unvalidated YAML node: a text or number itself (cut at 60 characters), else its kind."""
    if isinstance(node, str):
        text = repr(node)
    elif isinstance(node, (bool, float, type(None))) or (isinstance(node, int) and node.bit_length() < 64):
        text = repr(node)
    else:
        return f"a {type(node).__name__}"
    return text if len(text) <= 60 else text[:57] + "..."


def text_mapping(doc: Any, path: Path, what: str, expected: str) -> dict[str, str]:
    """`doc` checked to be a mapping of texts to texts (numbers and booleans as their text, as the reference reads
    them); nothing else of it is looked at or printed."""
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise InputError(f"{what} must be a YAML mapping of {expected}, got {shown(doc)}", path)
    out: dict[str, str] = {}
    for key, value in doc.items():
        for node in (key, value):
            if not isinstance(node, (str, int, float)) or (isinstance(node, int) and node.bit_length() >= 64):
                raise InputError(f"{what} entry {shown(key)}: {shown(value)} must map a text to a text", path)
        out[key if isinstance(key, str) else str(key)] = value if isinstance(value, str) else str(value)
    return out


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
