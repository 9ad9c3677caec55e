"""AttenIO: a generator of I/O-optimal accelerators for exact long-sequence attention.

The package root holds the pure-Python floor: configuration, the I/O analysis,
the Plan and the baselines. `attenio.hdl` (the components), `attenio.model` (the
cycle model, the planner, the comparison), `attenio.gen` (artifacts) and
`attenio.sim` (simulation of the Verilog) build on it; `attenio.cli` is the
command-line face.
"""

from .config import Budget, Config, Workload, preset, resolve
from .errors import ConfigError
from .formats import BF16Format, FloatFormat, FP16Format, Int8Format

__all__ = ["Budget", "BF16Format", "Config", "ConfigError", "FloatFormat", "FP16Format",
           "Int8Format", "Workload", "preset", "resolve"]
