"""AttenIO: a generator of I/O-optimal accelerators for exact long-sequence attention.

The package root holds the pure-Python floor: configuration, the I/O analysis,
the Plan and the baselines. `attenio.hdl`, `attenio.gen` and `attenio.sim` build
on it; `attenio.cli` is the command-line face.
"""

from .config import Budget, Config, Workload, preset, resolve
from .errors import ConfigError
from .formats import BF16Format, FloatFormat, FP16Format, Int8Format

__all__ = ["Budget", "BF16Format", "Config", "ConfigError", "FloatFormat", "FP16Format",
           "Int8Format", "Workload", "preset", "resolve"]
