"""Number formats: one module per format family, each with its hardware builders and
their bit-exact NumPy twins side by side (DESIGN.md section 5).

* `int8`: `Int8Arith`, the int8 datapath (exact scores, base-2 fixed-point softmax).
* `float`: `FloatArith`, the fp16 and bf16 datapath (fp32 scores and O, the int8
  format's fixed-point softmax).
* `fp`: IEEE 754 binary floating point (fp16, bf16, fp32): multiply, add and convert,
  round to nearest even with subnormals, checked against Berkeley SoftFloat; the
  pieces of the fp16 and bf16 formats.
* `dsp`: what every family builds with: multiplies split for the ECP5 DSPs,
  round-half-up shifts and their twins, and `Stages`, the stage count from which
  each pipelined builder publishes its latency.

A new family is a new module here, exported below.
"""

from .float import FloatArith
from .int8 import Int8Arith

__all__ = ["FloatArith", "Int8Arith", "arith_of"]


def arith_of(fmt, *, max_seq_len, head_dim):
    """The datapath (`Int8Arith` or `FloatArith`) of an `attenio.formats` format object."""
    from attenio.formats import FloatFormat, Int8Format
    from . import fp
    if isinstance(fmt, Int8Format):
        return Int8Arith(fmt, max_seq_len=max_seq_len, head_dim=head_dim)
    if isinstance(fmt, FloatFormat):
        if fmt.o_acc_bits != 32:
            raise ValueError(f"{fmt.name} format: the RTL accumulates O in fp32; o_acc_bits = "
                             f"{fmt.o_acc_bits} is the paper's accounting, for analysis only")
        return FloatArith(fp.SPECS[fmt.name], max_seq_len=max_seq_len, head_dim=head_dim,
                          fixed=fmt.fixed)
    raise TypeError(f"not a format object: {fmt!r}")
