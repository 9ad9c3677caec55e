"""The floating-point builders side by side, for the benches: `FloatHarness` and its ops.

Every op of `OPS` gets ports ``<op>_a`` (and ``<op>_b`` for two operands) and
``<op>_y``, its builder in between; `expected` gives what the twin says and
`oracle` what SoftFloat says for the same inputs, `latency` how many cycles the
builder takes, `check` how many results disagree with either. The pytest side (tests/test_fp.py) runs the harness in Amaranth's
simulator and emits it for the cocotb bench (`bench_fp`).
"""

import numpy as np
from amaranth.back import verilog
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from attenio.hdl.formats import fp
from attenio.hdl.formats.dsp import Stages
from attenio.hdl.formats.fp import FP32, OUTPUTS, STORAGE
from attenio.sim.tb import ieee

__all__ = ["OPS", "FloatHarness", "expected", "oracle", "latency", "out_bits", "decode",
           "check", "emit"]


def _mul(sa, sb, leads=None):
    return dict(ins=(sa, sb), out=FP32,
                build=lambda m, a, b, name: fp.mul(m, a, b, sa, sb, name=name, leads=leads),
                twin=lambda a, b: fp.np_mul(a, b, sa, sb),
                oracle=lambda a, b: ieee.oracle_mul(a, b, sa, sb),
                latency=lambda: fp.mul_latency(sa, sb, leads))


def _mul_normal_b(leads):
    """fp32 x fp32 with b normalized first (`fp.normalize`) and given to the product in
    that form (`fp.staged_mul`'s b_normal), a waiting as long: the softmax lanes' scale
    by c."""
    def build(m, a, b, name):
        a = Stages(m).delay(a, fp.normalize_latency(), f"{name}_a_wait")
        return fp.mul(m, a, fp.normalize(m, b, name=f"{name}_n"), FP32, FP32, name=name,
                      leads=leads, b_normal=True)
    return dict(_mul(FP32, FP32, leads), build=build,
                latency=lambda: fp.normalize_latency() + fp.mul_latency(FP32, FP32, leads))


def _cvt(src, dst):
    return dict(ins=(src,), out=dst, build=lambda m, x, name: fp.convert(m, x, src, dst, name=name),
                twin=lambda x: fp.np_convert(x, src, dst),
                oracle=lambda x: ieee.oracle_convert(x, src, dst),
                latency=lambda: fp.convert_latency(src, dst))


#: op name (as `attenio.sim.tb.ieee.vectors` knows it) -> what it is: for every storage
#: format S the products the datapath makes (S x S for the scores, fp32 x S for P x V,
#: fp32 x fp32 with the leads the MACs and the normalizer promise) and
#: its conversion to fp32, the conversion of fp32 to every format O is written in; and
#: fp32's own product, sum, max and fixed point
OPS = {
    **{f"mul_{n}_{n}": _mul(s, s) for n, s in STORAGE.items()},
    **{f"mul_fp32_{n}": _mul(FP32, s) for n, s in STORAGE.items()},
    "mul_fp32_fp32": _mul(FP32, FP32),
    # a product whose first operand the caller promises normal (`fp.staged_mul`'s leads:
    # the MACs' q and fp32(P) in fp16 and fp8, the normalizer's factor), and one whose
    # first operand is a widened bf16 element or normal; `ieee.vectors` keeps the promise
    **{f"mul_fp32_fp32_l{lead}": _mul(FP32, FP32, (lead, None))
       for lead in (1, fp.widened_lead(STORAGE["bf16"]))},
    # the same with b normalized on its own first (`NORMAL_B`)
    f"mul_fp32_fp32_l1{ieee.NORMAL_B}": _mul_normal_b((1, None)),
    **{f"cvt_fp32_{n}": _cvt(FP32, s) for n, s in OUTPUTS.items()},
    **{f"cvt_{n}_fp32": _cvt(s, FP32) for n, s in STORAGE.items()},
    "add": dict(ins=(FP32, FP32), out=FP32, build=lambda m, a, b, name: fp.add(m, a, b, name=name),
                twin=fp.np_add, oracle=ieee.oracle_add, latency=fp.add_latency),
    "max": dict(ins=(FP32, FP32), out=FP32,
                build=lambda m, a, b, name: fp.maximum(m, a, b, name=name),
                twin=fp.np_maximum, oracle=ieee.oracle_maximum, latency=fp.maximum_latency),
    "fix": dict(ins=(FP32,), out=None, out_bits=ieee.FIX_WIDTH,
                build=lambda m, x, name: fp.to_fixed(m, x, ieee.FIX_FRAC, ieee.FIX_WIDTH,
                                                     name=name),
                twin=lambda x: fp.np_to_fixed(x, ieee.FIX_FRAC, ieee.FIX_WIDTH),
                oracle=lambda x: ieee.oracle_to_fixed(x, ieee.FIX_FRAC, ieee.FIX_WIDTH),
                latency=lambda: fp.to_fixed_latency(ieee.FIX_FRAC, ieee.FIX_WIDTH)),
}


def _ports(op):
    spec = OPS[op]
    ports = {f"{op}_{'ab'[i]}": In(s.width) for i, s in enumerate(spec["ins"])}
    ports[f"{op}_y"] = Out(out_bits(op))
    return ports


def out_bits(op):
    spec = OPS[op]
    return spec["out"].width if spec["out"] is not None else spec["out_bits"]


def decode(op, raw):
    """Results read off `<op>_y` as the twin gives them: encodings, or (fixed point) the
    two's complement integers."""
    raw = np.asarray(raw, dtype=np.uint64)
    if OPS[op]["out"] is not None:
        return raw
    bits = out_bits(op)
    return raw.astype(np.int64) - ((raw >> np.uint64(bits - 1)) << np.uint64(bits)).astype(np.int64)


def check(op, ins, got):
    """How many results differ from SoftFloat's (any NaN for a NaN) or the twin's bits."""
    got = decode(op, got)
    want, twin = oracle(op, *ins), expected(op, *ins)
    spec = OPS[op]["out"]
    oracle_ok = ieee.same(got, want, spec) if spec is not None else got == want
    return int((~oracle_ok | (got != twin)).sum())


class FloatHarness(wiring.Component):
    """Every op of `ops` (default: all of `OPS`) between its ports."""

    def __init__(self, ops=None):
        self._ops = tuple(ops or OPS)
        super().__init__({k: v for op in self._ops for k, v in _ports(op).items()})

    @property
    def ops(self):
        return self._ops

    def elaborate(self, platform):
        m = Module()
        for op in self._ops:
            spec = OPS[op]
            ins = [getattr(self, f"{op}_{'ab'[i]}") for i in range(len(spec["ins"]))]
            m.d.comb += getattr(self, f"{op}_y").eq(spec["build"](m, *ins, name=op))
        return m


def expected(op, *inputs):
    return OPS[op]["twin"](*inputs)


def oracle(op, *inputs):
    return OPS[op]["oracle"](*inputs)


def latency(op):
    return OPS[op]["latency"]()


def out_spec(op):
    return OPS[op]["out"]


def emit(path, ops=None):
    """Write the harness's Verilog (top module `fp_harness`) to `path`."""
    harness = FloatHarness(ops)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(verilog.convert(harness, name="fp_harness", emit_src=False))
    return path
