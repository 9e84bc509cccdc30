#!/usr/bin/env python3
"""`python -m msprobe_compare ...` without the root-cause analysis, for bench/rootcause_ab.py's `off` variant: the
same command line, with `api.build_outcome(..., root_cause=False)` (no analysis, no bench construct.json read). A
benchmark's own switch lives here, not in the package."""

import functools

from msprobe_compare import api
from msprobe_compare.cli import main

api.build_outcome = functools.partial(api.build_outcome, root_cause=False)  # type: ignore[assignment]
raise SystemExit(main())
