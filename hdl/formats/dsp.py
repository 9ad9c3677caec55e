"""Datapath pieces every format family builds with, and the stage count of its pipelines.

* Multiplies split into partial products that fit one ECP5 MULT18X18D each
  (`partial_products`), registered right after the DSP and summed in a stage of
  their own (`sum_partials`), so that no logic sits between a DSP and its
  output register (docs/synthesis.md).
* Round-half-up shifts, ``(v >> (k-1)) + 1 >> 1`` (floor of v/2**k + 1/2), in
  hardware (`round_shift`) and in NumPy (`np_round_shift_mul`, exact beyond
  int64 products through `np_mulshr`).
* `Stages`: a builder registers its pipeline one stage at a time through it, so
  the stage count it reads at the end is the builder's latency by construction.
"""

from amaranth.hdl import Const, Fragment, Module, Signal, Value, signed, unsigned
import numpy as np

__all__ = ["DSP_SIGNED_BITS", "DSP_UNSIGNED_BITS", "Stages", "comb", "np_mulshr",
           "np_round_shift_mul", "partial_products", "pieces", "round_shift", "sum_partials"]

#: operand bits of one ECP5 MULT18X18D (18 x 18 signed) for an unsigned operand
DSP_UNSIGNED_BITS = 17
DSP_SIGNED_BITS = 18


class Stages:
    """The register stages of one pipelined builder, in clock domain `domain` of `m`.

    `stage(*statements)` adds one stage: its statements are registered (held while
    `en` is low, if an `en` is given) and `count` goes up by one. A builder puts
    every register of a given depth into the same `stage` call, so `count` at its
    end is the number of cycles from its inputs to its output.
    """

    def __init__(self, m, domain="sync", en=None):
        self._m = m
        self._domain = domain
        self._en = en
        self._count = 0

    @property
    def m(self):
        return self._m

    @property
    def domain(self):
        return self._domain

    @property
    def en(self):
        """The stall enable (a constant 1 if the pipeline never stalls)."""
        return Const(1) if self._en is None else self._en

    @property
    def count(self):
        return self._count

    def stage(self, *statements):
        """Register `statements` (statements or lists of them) as the next stage."""
        if self._en is None:
            self._m.d[self._domain] += list(statements)
        else:
            with self._m.If(self._en):
                self._m.d[self._domain] += list(statements)
        self._count += 1

    def delay(self, value, cycles, name):
        """`value` `cycles` later, held while the pipeline stalls, counting no stage: what
        rides alongside stages a nested builder counts on this same `Stages`."""
        cur = Value.cast(value)
        for k in range(cycles):
            nxt = Signal(cur.shape(), name=f"{name}_d{k}")
            if self._en is None:
                self._m.d[self._domain] += nxt.eq(cur)
            else:
                with self._m.If(self._en):
                    self._m.d[self._domain] += nxt.eq(cur)
            cur = nxt
        return cur

    @staticmethod
    def count_of(builder, *args):
        """The stages `builder(stages, *args)` registers, counted on a scratch Module."""
        stages = Stages(Module())
        builder(stages, *args)
        Fragment.get(stages.m, None)        # elaborated, so Amaranth does not warn it unused
        return stages.count


def round_shift(value, k):
    """Round-half-up of value / 2**k (k >= 1), hardware side."""
    return ((value >> (k - 1)) + 1) >> 1


def pieces(value):
    """`value` as [(offset, piece)] with value = sum(piece << offset): 17-bit unsigned
    low pieces and a top piece of at most 18 bits, signed if `value` is (each piece
    fits one operand of an 18 x 18 signed multiplier)."""
    value = Value.cast(value)
    shape = value.shape()
    width = shape.width
    top_bits = DSP_SIGNED_BITS if shape.signed else DSP_UNSIGNED_BITS
    out, lo = [], 0
    while width - lo > top_bits:
        out.append((lo, value[lo:lo + DSP_UNSIGNED_BITS]))
        lo += DSP_UNSIGNED_BITS
    top = value[lo:]
    out.append((lo, top.as_signed() if shape.signed else top))
    return out


def partial_products(a, b, *, name):
    """a * b as partial products, one MULT18X18D each: (parts, statements) with parts
    [(offset, Signal)], a * b = sum(p << offset). The caller registers `statements`
    as one stage (nothing between a DSP and its output register) and adds the parts
    with `sum_partials` in a stage of its own."""
    parts, statements = [], []
    for i, (oa, pa) in enumerate(pieces(a)):
        for j, (ob, pb) in enumerate(pieces(b)):
            signed_ = pa.shape().signed or pb.shape().signed
            prod = Signal(signed(len(pa) + len(pb) + 1) if signed_ else unsigned(len(pa) + len(pb)),
                          name=f"{name}_pp{i}{j}")
            statements.append(prod.eq(pa * pb))
            parts.append((oa + ob, prod))
    return parts, statements


def sum_partials(parts):
    return sum(prod << offset for offset, prod in parts)


def comb(m, value, shape, name):
    """A signal of `shape` driven by `value` (truncated: widths are chosen so nothing is lost)."""
    sig = Signal(shape, name=name)
    m.d.comb += sig.eq(value)
    return sig


def np_mulshr(a, b, s):
    """floor(a * b / 2**s), exact in int64 for |a| < 2**62 / b and 0 <= b < 2**32."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    s = np.asarray(s, dtype=np.int64)
    k = int(min(30, int(s.min()) if s.size else 30))
    lo = ((a & ((1 << k) - 1)) * b) >> k
    return ((a >> k) * b + lo) >> (s - k)


def np_round_shift_mul(a, b, s):
    """round-half-up(a * b / 2**s), s >= 1, the twin of `round_shift(a * b, s)`."""
    return (np_mulshr(a, b, np.asarray(s) - 1) + 1) >> 1
