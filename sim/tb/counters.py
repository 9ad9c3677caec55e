"""The performance counters as the register map defines them (`attenio.regmap`).

A counter is a 64-bit read-only register; the map lists them in hardware order.
This module imports no cocotb: the board's host script uses it too.
"""

import functools

from attenio.regmap import Access

__all__ = ["counter_registers", "counter_names"]


def counter_registers(regmap):
    """The counter `Register`s of `regmap`, in map order."""
    return tuple(r for r in regmap if r.access is Access.RO and r.width == 64)


@functools.cache
def _default_names():
    # The counters do not depend on the Plan; any Plan's map names them.
    from attenio.config import resolve
    from attenio.plan import make_plan
    from attenio.regmap import register_map
    return tuple(r.name for r in counter_registers(register_map(make_plan(resolve()))))


def counter_names(regmap=None):
    """The counter names of `regmap` (by default of the register map every Plan shares)."""
    if regmap is None:
        return _default_names()
    return tuple(r.name for r in counter_registers(regmap))
