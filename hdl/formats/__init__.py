"""Number formats: one module per format family, each with its hardware builders and
their bit-exact NumPy twins side by side (DESIGN.md section 5).

* `int8`: `Int8Arith`, the int8 datapath (exact scores, base-2 fixed-point softmax).
* `fp`: IEEE 754 binary floating point (fp16, bf16, fp32): multiply, add and convert,
  round to nearest even with subnormals, checked against Berkeley SoftFloat; the
  pieces of the fp16 and bf16 formats.
* `dsp`: what every family builds with: multiplies split for the ECP5 DSPs,
  round-half-up shifts and their twins, and `Stages`, the stage count from which
  each pipelined builder publishes its latency.

A new family (fp16, bf16) is a new module here, exported below.
"""

from .int8 import Int8Arith

__all__ = ["Int8Arith"]
