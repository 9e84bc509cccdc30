"""msprobe-compare: accuracy comparison of MindStudio Probe dumps.

Pipeline: load -> pair -> measure -> judge -> render; the CLI only wires the stages.
"""

__version__ = "0.1.0"
