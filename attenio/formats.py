"""Number-format configurations: widths only, no hardware.

A format decides how many bytes each stored element takes (and therefore how many
rows a of the Q block fit in the cache) and how wide the datapath registers are.
The hardware builders and their bit-exact NumPy twins live in `attenio.hdl.formats`
and are parameterized by these objects; this module stays pure Python so that the
I/O analysis can use it without importing Amaranth.
"""

from dataclasses import dataclass, field
from math import ceil, log2

from .errors import ConfigError

__all__ = ["DatapathWidths", "Int8Format", "FP16Format", "FORMATS", "format_by_name"]


@dataclass(frozen=True)
class DatapathWidths:
    """Bit widths of every on-chip value the planner must reserve space for.

    Per row of the Q block: ``score`` (S or x = S*c), ``m`` (running max), ``l``
    (running sum), ``p`` (a probability), ``alpha`` (the rescale factor); per
    element of the O block: ``o_acc``; per element of Q, K and V: ``element``.
    """

    element: int
    score: int
    m: int
    l: int
    p: int
    alpha: int
    o_acc: int


def _clog2(n):
    return max(0, ceil(log2(n))) if n > 1 else 0


@dataclass(frozen=True)
class Int8Format:
    """int8 Q/K/V, exact int32-class scores, base-2 fixed-point softmax.

    Fields are the fractional widths of the fixed-point values; the integer
    widths follow from the largest N and d the hardware is generated for (see
    `datapath`). The error analysis behind the defaults is in
    `attenio.hdl.formats`.
    """

    name: str = field(default="int8", init=False)
    element_bits: int = field(default=8, init=False)
    c_frac: int = 16        # fractional bits of the softmax constant c
    x_frac: int = 8         # fractional bits of x = S*c and of the max m
    x_int: int = 15         # integer bits of x (signed): |x| < 2**x_int
    p_frac: int = 15        # fractional bits of P = exp2(x - m) and alpha, in [0, 1]
    exp_lut_bits: int = 6   # table index bits of the exp2 fraction path
    recip_frac: int = 16    # fractional bits of the reciprocal of l

    def __post_init__(self):
        for name in ("c_frac", "x_frac", "x_int", "p_frac", "exp_lut_bits", "recip_frac"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ConfigError(f"int8 format: {name} must be a positive integer, not {value!r}")
        if self.exp_lut_bits > self.x_frac:
            raise ConfigError(
                f"int8 format: exp_lut_bits ({self.exp_lut_bits}) cannot exceed x_frac ({self.x_frac})")

    @property
    def element_bytes(self):
        return self.element_bits // 8

    def datapath(self, *, max_seq_len, head_dim):
        """Register widths for hardware generated for up to `max_seq_len` keys."""
        score = 2 * self.element_bits + _clog2(head_dim) + 1   # exact int8 dot products
        x = 1 + self.x_int + self.x_frac
        p = self.p_frac + 1                                      # [0, 1] inclusive
        l = self.p_frac + 1 + _clog2(max_seq_len + 1)             # sum of up to N values <= 1
        o_acc = self.element_bits + self.p_frac + 1 + _clog2(max_seq_len + 1)
        return DatapathWidths(element=self.element_bits, score=max(score, x), m=x, l=l, p=p,
                              alpha=p, o_acc=o_acc)


@dataclass(frozen=True)
class FP16Format:
    """fp16 storage with fp32 scores and accumulators (the paper's evaluation).

    Analysis only: the planner and the cycle model use its widths; there are no
    hardware builders for it yet.
    """

    name: str = field(default="fp16", init=False)
    element_bits: int = field(default=16, init=False)

    @property
    def element_bytes(self):
        return self.element_bits // 8

    def datapath(self, *, max_seq_len, head_dim):
        return DatapathWidths(element=16, score=32, m=32, l=32, p=16, alpha=16, o_acc=32)


FORMATS = {"int8": Int8Format, "fp16": FP16Format}


def format_by_name(name, **params):
    try:
        cls = FORMATS[name]
    except KeyError:
        raise ConfigError(
            f"unknown format {name!r}; choose one of {', '.join(sorted(FORMATS))}") from None
    try:
        return cls(**params)
    except TypeError as exc:
        raise ConfigError(f"format {name!r}: {exc}") from None
