"""`FloatArith`: every builder against its twin in Amaranth's simulator, each result read
its published latency after its inputs (tests/test_golden_fp.py composes the twins into
the golden model and holds the fast model to them)."""

import numpy as np
import pytest
from amaranth.hdl import Module, Shape, Signal

from amaranth_sim import run_clocked
from attenio.hdl.formats import arith_of, check_o_accumulator, fp
from attenio.hdl.formats.float import FloatArith
from attenio.hdl.formats.fp import FP32


@pytest.fixture(params=[fp.FP16, fp.BF16], ids=lambda s: s.name)
def arith(request):
    return FloatArith(request.param, max_seq_len=4096, head_dim=64)


def _f32(rng, n, scale=4.0):
    return (rng.standard_normal(n) * scale).astype(np.float32).view(np.uint32)


def _stored(arith, rng, n):
    return fp.np_convert(_f32(rng, n), FP32, arith.spec)


def _cases(arith, rng, n):
    """{op: (input arrays, builder(m, *signals) -> outputs, twin(*arrays) -> outputs)}."""
    fixed = arith.fixed
    xs, ms = _f32(rng, n), _f32(rng, n)
    ms[::7] = xs[::7]                                   # ties: x == m
    ms[::11] = arith.m_init                             # the first row: m = -inf
    e = rng.integers(0, fixed.one + 1, n)
    e[::5] = fixed.one
    v = _stored(arith, rng, n)
    v[::13] = 1                                         # subnormals, which widening normalizes
    v[::9] = 0                          # alpha * O alone, where O is subnormal (below)
    y = rng.integers(1 << (fixed.cfg.recip_frac - 1), (1 << fixed.cfg.recip_frac) + 1, n)
    ey = rng.integers(0, fixed.max_seq_len.bit_length(), n)
    # O can be any fp32 (the products normalize it before multiplying: `fp.staged_mul`'s
    # leads), subnormals included; a score only where the format's products can be
    # subnormal (bf16), its scale's promise elsewhere
    o, o_fin, scores = _f32(rng, n), _f32(rng, n), _f32(rng, n)
    for x in (o, o_fin) + ((scores,) if 2 * (1 - arith.spec.bias - arith.spec.man_bits)
                           < 1 - FP32.bias else ()):
        x[::9] = rng.integers(1, 1 << FP32.man_bits, x[::9].size) | (
            rng.integers(0, 2, x[::9].size) << 31)
    cs = _f32(rng, n)
    cs[::3] = arith.c
    cs[1::9] = rng.integers(1, 1 << FP32.man_bits, cs[1::9].size)
    # the exp argument's NaN and saturating differences
    xs[::13] = FP32.nan
    xs[5::17] = np.float32(3e30).view(np.uint32)
    return {
        "product": ((_stored(arith, rng, n), _stored(arith, rng, n)),
                    lambda m, a, b: (arith.product(m, a, b),), lambda a, b: (arith.np_product(a, b),)),
        "accumulate": ((_f32(rng, n), _f32(rng, n)),
                       lambda m, a, b: (arith.accumulate(m, a, b),),
                       lambda a, b: (arith.np_accumulate(a, b),)),
        # c as the lanes take it (`lane_c`): the softmax constant, and any fp32 a host
        # may write, subnormals included
        "scale": ((scores, [arith.np_lane_c(x) for x in cs]),
                  lambda m, a, b: (arith.scale(m, a, b),),
                  lambda a, _: (arith.np_scale(a, cs),)),
        "exp_arg": ((xs, ms), lambda m, x, mo: arith.exp_arg(m, x, mo),
                    lambda x, mo: arith.np_exp_arg(x, mo)),
        "to_float": ((e,), lambda m, v: (arith.to_float(m, v),), lambda v: (arith.np_to_float(v),)),
        # the update takes V as the array's word (widened at its entry), its twin as stored
        "update": ((rng.integers(0, 2, n), arith.np_to_float(e), o,
                    fp.np_convert(v, arith.spec, FP32)),
                   lambda m, u, e32, o, v32: (arith.update(m, u, e32, o, v32),),
                   lambda u, e32, o, _: (arith.np_update(u, e32, o, v),)),
        "widen": ((v,), lambda m, x: (arith.widen(m, x),),
                  lambda x: (fp.np_convert(x, arith.spec, FP32),)),
        "finalize": ((o_fin, y, ey),
                     lambda m, o, yy, ee: (arith.finalize(m, o, yy, ee),),
                     lambda o, yy, ee: (arith.np_finalize(o, yy, ee),)),
    }


def _run(build, inputs, widths, n):
    m = Module()
    ins = [Signal(w, name=f"in{i}") for i, w in enumerate(widths)]
    outs = build(m, *ins)
    got = [[] for _ in outs]
    lat = {}

    async def bench(ctx):
        for t in range(n + lat["n"] + 1):
            if t >= lat["n"] and t - lat["n"] < n:
                for k, o in enumerate(outs):
                    got[k].append(ctx.get(o))
            if t < n:
                for s, x in zip(ins, inputs):
                    ctx.set(s, int(x[t]))
            await ctx.tick()
    return m, outs, got, lat, bench


@pytest.mark.parametrize("op", ["product", "accumulate", "scale", "exp_arg", "to_float",
                                "update", "widen", "finalize"])
def test_builder_equals_twin(arith, rng, op):
    n = 300
    inputs, build, twin = _cases(arith, rng, n)[op]
    widths = {"product": (arith.spec.width,) * 2, "accumulate": (32, 32),
              "scale": (32, Shape.cast(arith.lane_c_shape).width),
              "exp_arg": (32, 32), "to_float": (arith.p_shape.width,),
              "update": (1, 32, 32, 32), "widen": (arith.spec.width,),
              "finalize": (32, arith.fixed.recip_shape.width,
                           arith.fixed.recip_exp_shape.width)}[op]
    latency = getattr(arith, f"{op}_latency")
    m, outs, got, lat, bench = _run(build, inputs, widths, n)
    lat["n"] = latency
    run_clocked(m, bench)
    want = twin(*[np.asarray(x) for x in inputs])
    for k, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w).astype(np.int64)
        g = np.array(g, dtype=np.int64)
        if op == "exp_arg" and k == 0:                  # z is signed
            bits = arith.x_shape.width
            g = np.where(g >= 1 << (bits - 1), g - (1 << bits), g)
        bad = np.nonzero(g != w)[0]
        assert bad.size == 0, (f"{op} output {k}: {bad.size} of {n} differ; first at "
                               f"{[int(x[bad[0]]) for x in inputs]}: {g[bad[0]]} != {w[bad[0]]}")


def test_storage_must_be_a_storage_format():
    with pytest.raises(TypeError, match="storage must be one of fp16, bf16, fp8_e4m3, fp8_e5m2, not"):
        FloatArith(FP32, max_seq_len=16, head_dim=8)


def test_the_rtl_builds_only_fp32_o_accumulators():
    from attenio.formats import BF16Format, FP16Format, Int8Format
    for fmt in (Int8Format(), FP16Format(), BF16Format()):
        check_o_accumulator(fmt)                                       # buildable: no error
    assert arith_of(FP16Format(), max_seq_len=64, head_dim=16).o_shape.width \
        == FP16Format().o_acc_bits
    refused = BF16Format(o_acc_bits=16)
    message = ("^the bf16 RTL accumulates O in fp32; o_acc_bits = 16 is the paper's "
               "accounting, for analysis only$")
    with pytest.raises(ValueError, match=message):
        check_o_accumulator(refused)
    with pytest.raises(ValueError, match=message):
        arith_of(refused, max_seq_len=64, head_dim=16)
