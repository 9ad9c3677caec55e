"""The checks every constructor makes on its parameters, written once.

Each check names its owner and the bad value in one line, so a wrong parameter
deep in an elaboration reads like a wrong option on the command line. The
`error` argument picks the exception: hardware constructors raise `ValueError`
(a programming error), configuration objects raise `ConfigError` (a user's
input, which the CLI turns into one line and exit status 2).

The structural rules the hardware imposes on a budget (how EXP units map onto
MAC lines, which s MACs may share a Q row) live here too, because the
configuration, the planner, the RTL and the cycle model must all refuse the same
budgets for the same reasons.
"""

import re
from math import isfinite
from numbers import Integral, Real

__all__ = ["integer", "positive", "non_negative", "power_of_two", "positive_number", "flag",
           "one_of", "index", "AXI_DATA_WIDTHS", "lanes_per_line", "split_breaks", "split",
           "build_name"]

#: The AXI data widths, in bits, the DMA and the beat/element converters are built for
#: (the budget's `axi_data_bits`).
AXI_DATA_WIDTHS = (32, 64, 128, 256, 512)


#: A build's name: one directory under build/, so no separator, no leading dot (no "..").
_BUILD_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,99}")


def build_name(owner, name, *, error=ValueError):
    """`name` names one directory under build/ (letters, digits, '_', '.', '+', '-'; not
    starting with '.'; at most 100 characters), so no name writes outside it; returns it."""
    if not isinstance(name, str) or not _BUILD_NAME.fullmatch(name):
        raise error(f"{owner}: name must be a directory name under build/ (letters, digits, "
                    f"'_', '.', '+', '-', not starting with '.'), not {name!r}")
    return name


def _is_int(value):
    # Python and NumPy integers; a bool is a flag, never a count.
    return isinstance(value, Integral) and not isinstance(value, bool)


def integer(owner, name, value, *, lo=None, hi=None, error=ValueError):
    """`value` is an int in [lo, hi] (either bound may be None); returns it."""
    if not _is_int(value) or (lo is not None and value < lo) or (hi is not None and value > hi):
        if lo is not None and hi is not None:
            want = f"an integer from {lo} to {hi}"
        elif lo == 1:
            want = "a positive integer"
        elif lo is not None:
            want = f"an integer >= {lo}"
        elif hi is not None:
            want = f"an integer <= {hi}"
        else:
            want = "an integer"
        raise error(f"{owner}: {name} must be {want}, not {value!r}")
    return value


def positive(owner, *, error=ValueError, **values):
    """Every keyword value is a positive int; raises for the first that is not."""
    for name, value in values.items():
        integer(owner, name, value, lo=1, error=error)


def non_negative(owner, *, error=ValueError, **values):
    """Every keyword value is an int >= 0."""
    for name, value in values.items():
        integer(owner, name, value, lo=0, error=error)


def power_of_two(owner, name, value, *, lo=1, hi=None, error=ValueError):
    """`value` is a power of two in [lo, hi] (hi may be None); returns it."""
    if not _is_int(value) or value < max(lo, 1) or (hi is not None and value > hi) \
            or value & (value - 1):
        within = f" from {lo} to {hi}" if hi is not None else f" >= {lo}" if lo > 1 else ""
        raise error(f"{owner}: {name} must be a power of two{within}, not {value!r}")
    return value


def positive_number(owner, name, value, *, error=ValueError):
    """`value` is a finite real number > 0 (an int or a float, not a bool)."""
    if isinstance(value, bool) or not isinstance(value, Real) or not isfinite(value) \
            or value <= 0:
        raise error(f"{owner}: {name} must be a positive finite number, not {value!r}")
    return value


def flag(owner, name, value, *, error=ValueError):
    """`value` is a bool (true or false in a TOML file)."""
    if not isinstance(value, bool):
        raise error(f"{owner}: {name} must be true or false, not {value!r}")
    return value


def one_of(owner, name, value, choices, *, error=ValueError):
    """`value` is one of `choices` (compared with ==, bools never match ints)."""
    if isinstance(value, bool) or value not in choices:
        listed = ", ".join(str(c) for c in choices)
        raise error(f"{owner}: {name} must be one of {listed}, not {value!r}")
    return value


def index(owner, name, value, count, *, error=ValueError):
    """`value` is an int in [0, count)."""
    if not _is_int(value) or not 0 <= value < count:
        raise error(f"{owner}: {name} must be an integer in [0, {count}), not {value!r}")
    return value


def lanes_per_line(*, exp_units, mac_lines, macs_per_line, owner="budget", error=ValueError):
    """L, the softmax lanes of one MAC line: the E EXP units are spread evenly over the
    p lines, and each lane serves an equal share of its line's q MACs (so a lane's rows
    are r * q / L, the same for every lane). Raises unless E = L * p and L divides q."""
    positive(owner, error=error, exp_units=exp_units, mac_lines=mac_lines,
             macs_per_line=macs_per_line)
    if exp_units % mac_lines or macs_per_line % (exp_units // mac_lines):
        raise error(f"{owner}: the softmax lanes need exp_units ({exp_units}) to be a multiple "
                    f"of the MAC lines ({mac_lines}) and exp_units / mac_lines to divide each "
                    f"line's {macs_per_line} MACs (e.g. exp_units = {mac_lines})")
    return exp_units // mac_lines


def split_breaks(s, *, head_dim, lane_macs=None, element_bytes=None, beat_bytes=None):
    """The clause of the split rule that s breaks, or None if s MACs can share a Q row.

    The rule, in the order its clauses are checked:

    * "head_dim": s divides d (each MAC of a group holds d/s of the row's columns);
    * "lane": s divides `lane_macs`, the MACs one softmax lane serves (q / L: a group
      never straddles two lanes, so each row's score reaches one lane);
    * "beat": a chunk of s elements of `element_bytes`, what the feed carries a cycle,
      divides the AXI beat of `beat_bytes`.

    A clause whose facts are not given (None) is not checked: the blocks inside the core
    never see a beat, the golden model no lane. `s` is a positive int (the caller's check).
    """
    if head_dim % s:
        return "head_dim"
    if lane_macs is not None and lane_macs % s:
        return "lane"
    if beat_bytes is not None and beat_bytes % (s * element_bytes):
        return "beat"
    return None


def split(owner, s, *, head_dim, macs_per_line, lanes=1, error=ValueError):
    """s, the MACs one Q row is split over, if it keeps the split rule (`split_breaks`) inside
    the core: a positive divisor of the head dimension and of each softmax lane's q / L MACs."""
    integer(owner, "split", s, lo=1, error=error)
    share = macs_per_line // lanes
    if split_breaks(s, head_dim=head_dim, lane_macs=share):
        raise error(f"{owner}: split = {s} must divide the head dimension ({head_dim}) and the "
                    f"{share} MACs of each softmax lane")
    return s
