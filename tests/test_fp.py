"""The floating-point builders and their twins against Berkeley SoftFloat.

The twins (`attenio.hdl.formats.fp.np_*`) against SoftFloat on every op's vectors;
the builders against SoftFloat and the twins, in Amaranth's simulator (a few
hundred vectors an op) and on the emitted Verilog under cocotb on both simulators
(edge values against each other and seeded random cases; a slow test adds every
16-bit source converted and every pair of bf16 significands multiplied); and a rounding mistake planted in
the builders, which the same check must catch.
"""

from pathlib import Path

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from amaranth_sim import run_clocked
from attenio.hdl.formats import fp
from attenio.hdl.formats.fp import BF16, FP16, FP32
from attenio.sim.benches.bench_fp_dut import (OPS, FloatHarness, check, emit, expected,
                                              latency, oracle, out_spec)
from attenio.sim.runner import SIMULATORS, run_bench, simulator_available
from attenio.sim.tb import ieee

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("op", sorted(OPS))
def test_twin_equals_softfloat(op, rng):
    a, b = ieee.vectors(op, rng, 20000, exhaustive=True)
    ins = (a,) if b is None else (a, b)
    twin, want = expected(op, *ins), oracle(op, *ins)
    spec = out_spec(op)
    ok = ieee.same(twin, want, spec) if spec is not None else twin == want
    assert ok.all(), f"{op}: {int((~ok).sum())} of {len(ok)} differ, first at {np.nonzero(~ok)[0][0]}"
    if spec is not None:
        assert not (spec.is_nan(twin) & (twin != spec.nan)).any()   # NaNs are canonical


def test_the_semantics_in_examples():
    one, half_ulp = np.uint32(0x3F800000), np.uint32(0x33800000)      # 1 and 2**-24
    assert fp.np_add([one], [half_ulp])[0] == 0x3F800000              # a tie: to even, down
    assert fp.np_add([0x3F800001], [half_ulp])[0] == 0x3F800002       # a tie: to even, up
    assert fp.np_add([0x7F800000], [0xFF800000])[0] == FP32.nan       # inf - inf
    assert fp.np_add([0x80000000], [0x80000000])[0] == 0x80000000     # -0 + -0 = -0
    assert fp.np_add([0x3F800000], [0xBF800000])[0] == 0              # 1 - 1 = +0
    assert fp.np_mul([0x7C00], [0x0000], FP16, FP16)[0] == FP32.nan   # inf * 0
    assert fp.np_mul([0x0001], [0x0001], FP16, FP16)[0] == 0x27800000  # 2**-48, exact in fp32
    assert fp.np_mul([0x0001], [0x0001], BF16, BF16)[0] == 0           # underflows to +0
    assert fp.np_convert([0x7F7FFFFF], FP32, FP16)[0] == 0x7C00        # overflow: inf
    assert fp.np_convert([0x7FC01234], FP32, BF16)[0] == BF16.nan      # payload dropped
    assert fp.np_convert([0x33000001], FP32, FP16)[0] == 0x0001        # just above half of
    assert fp.np_convert([0x33000000], FP32, FP16)[0] == 0x0000        # 2**-24: tie to even 0
    assert fp.np_maximum([0x80000000], [0x00000000])[0] == 0           # max(-0, +0) = +0
    assert fp.np_maximum([0x7FC00001], [0x3F800000])[0] == FP32.nan    # NaN wins, canonical
    # x * 2 for 0.75, 0.25, -1.25 (ties: 1.5 -> 2, 0.5 -> 0, -2.5 -> -2), inf, NaN
    assert list(fp.np_to_fixed([0x3F400000, 0x3E800000, 0xBFA00000, 0x7F800000, 0x7FC00000],
                               1, 8)) == [2, 0, -2, 127, -128]


def test_the_named_encodings_are_the_ieee_bits():
    assert (FP32.neg_inf, FP32.neg_zero, FP32.nan) == (0xFF800000, 0x80000000, 0x7FC00000)
    assert (FP16.neg_inf, FP16.neg_zero, FP16.nan) == (0xFC00, 0x8000, 0x7E00)
    assert (BF16.neg_inf, BF16.neg_zero, BF16.nan) == (0xFF80, 0x8000, 0x7FC0)
    assert [FP32.encode(x) for x in (1.0, -2.0, 0.1, 2.0 ** -149)] == [
        0x3F800000, 0xC0000000, 0x3DCCCCCD, 0x00000001]
    assert FP16.encode(1 + 2 ** -11) == 0x3C00                          # a tie: to even, down
    assert BF16.encode(1 + 3 * 2 ** -8) == 0x3F82                       # a tie: to even, up


@pytest.mark.parametrize("spec", [FP16, BF16, FP32], ids=lambda s: s.name)
def test_the_field_helpers_read_the_encoding_as_the_twins_do(spec, rng):
    edges = [0, spec.neg_zero, spec.inf, spec.neg_inf, spec.nan, spec.nan | spec.sign_bit,
             spec.inf | 1, 1, spec.sign_bit - 1]
    xs = np.concatenate([edges, rng.integers(0, 1 << spec.width, 200)]).astype(np.uint64)
    m = Module()
    x = Signal(spec.width)
    outs = {"sign": Signal(), "magnitude": Signal(spec.width - 1), "nan": Signal(),
            "negated": Signal(spec.width), "neg_mag": Signal(spec.width)}
    builders = {"sign": fp.sign_of, "magnitude": fp.magnitude_of, "nan": fp.nan_of,
                "negated": fp.negated, "neg_mag": fp.negative_magnitude}
    m.d.comb += [outs[k].eq(build(x, spec)) for k, build in builders.items()]
    got = {k: [] for k in outs}

    async def bench(ctx):
        for v in xs:
            ctx.set(x, int(v))
            for k, sig in outs.items():
                got[k].append(ctx.get(sig))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    sign = np.uint64(spec.sign_bit)
    assert got["sign"] == list((xs & sign != 0).astype(int))
    assert got["magnitude"] == list(xs & (sign - np.uint64(1)))
    assert got["nan"] == list(spec.is_nan(xs).astype(int))
    assert got["negated"] == list(xs ^ sign)
    assert got["neg_mag"] == list(xs | sign)


def _run_harness(ops, rng, count, limit):
    """Every op of `ops` in Amaranth's simulator on at most `limit` of its vectors:
    {op: (inputs, results)}."""
    dut = FloatHarness(ops)
    plan = {}
    for op in ops:
        a, b = ieee.vectors(op, rng, count, exhaustive=False)
        pick = np.sort(rng.choice(len(a), size=min(limit, len(a)), replace=False))
        ins = (a[pick],) if b is None else (a[pick], b[pick])
        plan[op] = (ins, latency(op), [])

    async def bench(ctx):
        total = max(len(ins[0]) + lat for ins, lat, _ in plan.values())
        for i in range(total + 1):
            for op, (ins, lat, got) in plan.items():
                if 0 <= i - lat < len(ins[0]):
                    got.append(ctx.get(getattr(dut, f"{op}_y")))
                if i < len(ins[0]):
                    for k, x in enumerate(ins):
                        ctx.set(getattr(dut, f"{op}_{'ab'[k]}"), int(x[i]))
            await ctx.tick()

    run_clocked(dut, bench)
    return {op: (ins, np.array(got, dtype=np.uint64)) for op, (ins, _, got) in plan.items()}


def _mismatches(results):
    """{op: how many results differ from SoftFloat or from the twin's bits}."""
    return {op: check(op, ins, got) for op, (ins, got) in results.items()}


def test_builders_in_amaranth_sim(rng):
    results = _run_harness(sorted(OPS), rng, count=400, limit=600)
    assert _mismatches(results) == {op: 0 for op in OPS}


@pytest.mark.parametrize("mutant, caught", [
    (lambda guard, rest, lsb: guard, {"add", "mul_fp32_fp32", "mul_fp32_fp32_l1", "cvt_fp32_fp16",
                                      "fix"}),  # up
    (lambda guard, rest, lsb: guard & rest, {"add", "mul_fp32_fp32", "mul_fp32_fp32_l8",
                                             "cvt_fp32_bf16", "fix"}),
])
def test_a_wrong_rounding_is_caught(monkeypatch, rng, mutant, caught):
    monkeypatch.setattr(fp, "_round_up", mutant)
    results = _run_harness(sorted(caught), rng, count=400, limit=600)
    bad = _mismatches(results)
    assert all(bad[op] > 0 for op in caught), bad


@pytest.mark.parametrize("op", sorted(OPS))
def test_published_latency_is_the_pipeline(op):
    # the harness check above reads each result `latency` cycles after its inputs; a
    # latency off by one would misalign every result, so here only the counts
    kind, *formats = op.split("_", 1)
    # widening is exact: bf16's bits placed and fp8's subnormals normalized in one stage,
    # fp16's (10 mantissa bits) in two
    widening = kind == "cvt" and formats[0].endswith("_fp32")
    # a product given a lead normalizes its other operand (lead None) in two stages of its own
    normalizing = 2 * (kind == "mul" and "_l" in formats[0])
    # ...and one whose b is normalized first (`fp.normalize`) takes two stages more
    normalizing += 2 * op.endswith(ieee.NORMAL_B)
    assert latency(op) == ((2 if formats[0].startswith("fp16") else 1) if widening else
                           {"mul": 9, "add": 9, "cvt": 6, "max": 2, "fix": 6}[kind] + normalizing)


@pytest.fixture(scope="module")
def harness_verilog():
    return emit(ROOT / "build" / "fp" / "fp_harness.v")


def _verilog_bench(simulator, verilog, seed, *, count, exhaustive):
    if not simulator_available(simulator):
        pytest.skip(f"{simulator} is not installed: skipping the {simulator} run of the fp bench")
    run_bench(quick_build=True, simulator=simulator, verilog_sources=[verilog],
              toplevel="fp_harness", module="attenio.sim.benches.bench_fp",
              build_dir=ROOT / "build" / "fp" / simulator,
              params={"ops": sorted(OPS), "seed": seed, "count": count, "exhaustive": exhaustive},
              seed=seed)


@pytest.mark.parametrize("simulator", SIMULATORS)
def test_builders_equal_softfloat_on_verilog(simulator, harness_verilog, seed):
    _verilog_bench(simulator, harness_verilog, seed, count=1500, exhaustive=False)


@pytest.mark.slow
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_builders_equal_softfloat_on_verilog_exhaustively(simulator, harness_verilog, seed):
    """Every fp16 and bf16 encoding converted to fp32, every pair of bf16 significands
    multiplied at seven exponent pairs (114688 products), and 4000 random cases an op."""
    _verilog_bench(simulator, harness_verilog, seed, count=4000, exhaustive=True)


def test_normalize_equals_its_twin(rng):
    """`fp.normalize` (the lanes' c, normalized once for the array) against `np_normalize`,
    which the lane's tests drive its c with: every field, subnormals and specials included."""
    xs = [0, FP32.sign_bit, FP32.inf, FP32.neg_inf, FP32.nan, 1, 0x00400000, 0x007fffff,
          0x00800000, 0x3fb8aa3b, 0x7f7fffff]
    xs += [int(x) for x in rng.integers(0, 1 << 32, 200, dtype=np.uint64)]
    xs += [int(x) for x in rng.integers(0, 1 << 23, 100, dtype=np.uint64)]   # subnormals
    m = Module()
    x = Signal(32)
    y = fp.normalize(m, x)
    got = []

    async def bench(ctx):
        for i in range(len(xs) + fp.normalize_latency()):
            if i >= fp.normalize_latency():
                got.append(ctx.get(y.as_value()))
            if i < len(xs):
                ctx.set(x, xs[i])
            await ctx.tick()

    run_clocked(m, bench)
    assert got == [fp.np_normalize(v) for v in xs]


@pytest.mark.parametrize("src_b, leads", [(BF16, (1, None)), (FP32, None), (FP32, (1, 1))])
def test_a_b_in_normal_form_must_be_fp32_of_lead_none(src_b, leads):
    m = Module()
    m._MustUse__silence = True          # not elaborated, on purpose
    with pytest.raises(ValueError, match="a b in NORMAL form is an fp32 number of lead "
                                         "None, with a lead given for a"):
        fp.mul(m, Signal(32), Signal(fp.NORMAL), FP32, src_b, leads=leads, b_normal=True)
