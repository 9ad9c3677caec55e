"""Number formats: one module per format family, each with its hardware builders and
their bit-exact NumPy twins side by side, so that the golden models
(`attenio.sim.golden`, `attenio.sim.golden_fp`), which call only the twins, compute
the RTL's bits.

* `int8`: `Int8Arith`, the int8 datapath (exact scores, base-2 fixed-point softmax).
* `float`: `FloatArith`, the fp16, bf16 and fp8 datapath (fp32 scores and O, the int8
  format's fixed-point softmax).
* `fp`: IEEE 754 binary floating point (fp16, bf16, fp32): multiply, add, convert,
  maximum and the conversions to and from fixed point, round to nearest even with
  subnormals, checked against Berkeley SoftFloat; the pieces of the fp16 and bf16
  formats.
* `dsp`: what every family builds with: multiplies split for the ECP5 DSPs,
  round-half-up shifts and their twins, and `Stages`, the stage count from which
  each pipelined builder publishes its latency.

A new family is a new module here, exported below.
"""

import functools

from attenio.formats import FloatFormat, Int8Format, row_of

from .float import FloatArith
from .fp import FP32, SPECS
from .int8 import Int8Arith

__all__ = ["FloatArith", "Int8Arith", "arith_of", "check_arith", "check_o_accumulator"]


def check_arith(owner, arith):
    """Raise TypeError, naming `owner`, if `arith` is not a datapath of this package."""
    if not isinstance(arith, (Int8Arith, FloatArith)):
        raise TypeError(f"{owner}: arith must be an Int8Arith or a FloatArith, not {arith!r}")


def check_o_accumulator(fmt):
    """Raise ValueError if the RTL cannot build format `fmt`'s O accumulators: a float
    format's are fp32 (`FloatArith.o_shape`), and an ``o_acc_bits`` other than that is
    the paper's accounting, which only the analysis reads."""
    if isinstance(fmt, FloatFormat) and fmt.o_acc_bits != FP32.width:
        raise ValueError(f"the {fmt.name} RTL accumulates O in fp32; o_acc_bits = "
                         f"{fmt.o_acc_bits} is the paper's accounting, for analysis only")


@functools.lru_cache(maxsize=64)
def arith_of(fmt, *, max_seq_len, head_dim):
    """The datapath (`Int8Arith` or `FloatArith`) of an `attenio.formats` format object;
    ValueError if the RTL cannot build it (`check_o_accumulator`). One object per
    (format, N, d): its latencies are counted once, not at every mapping the planner
    weighs (the datapaths hold no state of a design they are built into)."""
    if isinstance(fmt, Int8Format):
        return Int8Arith(fmt, max_seq_len=max_seq_len, head_dim=head_dim)
    if isinstance(fmt, FloatFormat):
        check_o_accumulator(fmt)
        return FloatArith(SPECS[fmt.name], max_seq_len=max_seq_len, head_dim=head_dim,
                          fixed=fmt.fixed, out=SPECS[row_of(fmt.name).out_row.name])
    raise TypeError(f"not a format object: {fmt!r}")
