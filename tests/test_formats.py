"""Int8Format widths, Int8Arith builders and twins: numpy checks, amaranth.sim, cocotb."""

import math
from pathlib import Path

import numpy as np
import pytest
from amaranth.hdl import Module, Signal

from amaranth_sim import run_clocked
from attenio import ConfigError, Int8Format
from attenio.hdl.formats import Int8Arith
from attenio.hdl.formats.dsp import np_mulshr
from attenio.sim.benches.bench_formats_dut import (OPS, FormatsHarness, emit, expected, latency,
                                                    vectors)
from attenio.sim.runner import run_bench, simulator_available

ROOT = Path(__file__).resolve().parent.parent
N_MAX, D = 16384, 128
LANES = 2          # vectors per op per cycle in the cocotb bench (more lanes: longer builds)
EXP_LANES = 8      # exp2 sweeps all 2**x_frac fractions: more lanes, fewer cycles


@pytest.fixture(scope="module")
def arith():
    return Int8Arith(max_seq_len=N_MAX, head_dim=D)


# -- configuration ----------------------------------------------------------------------------

def test_datapath_widths_follow_n_and_d():
    f = Int8Format()
    w = f.datapath(max_seq_len=16384, head_dim=128)
    assert w.score == w.m == 23                        # |S| <= 2**14 * 128 = 2**21
    assert w.p == w.alpha == f.p_frac + 1
    assert w.l == f.p_frac + 15                        # l <= N = 2**14
    assert w.o_acc == 1 + 7 + 15 + f.p_frac           # |O| <= 128 N
    w2 = f.datapath(max_seq_len=65536, head_dim=64)
    assert (w2.score, w2.l - w.l, w2.o_acc - w.o_acc) == (22, 2, 2)


@pytest.mark.parametrize("kwargs, message", [
    ({"p_frac": 0}, "p_frac must be an integer >= 2, not 0"),
    ({"x_frac": 4, "exp_lut_bits": 5}, r"exp_lut_bits \(5\) cannot exceed x_frac \(4\)"),
    ({"c_frac": 16, "x_frac": 16}, r"c_frac \(16\) must exceed x_frac \(16\)"),
    ({"p_frac": 31}, "p_frac must be at most 30"),
    ({"c_int": 4, "c_frac": 30}, "c_int \\+ c_frac must fit a 32-bit register"),
    ({"exp_interp": 1}, "exp_interp must be true or false"),
    ({"recip_iters": -1}, "recip_iters must be an integer from 0 to 5, not -1"),
])
def test_format_rejects_bad_fields(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        Int8Format(**kwargs)


def test_softmax_constant():
    f = Int8Format()
    raw = f.softmax_constant(scale_q=0.03, scale_k=0.02, head_dim=64)
    c = 0.03 * 0.02 * math.log2(math.e) / 8
    assert abs(raw / 2 ** f.c_frac - c) <= 2 ** -(f.c_frac + 1)
    with pytest.raises(ConfigError, match="does not fit c_int = 2 integer bits"):
        f.softmax_constant(scale_q=10.0, scale_k=10.0, head_dim=4)
    with pytest.raises(ConfigError, match="fewer than 12 significant bits"):
        f.softmax_constant(scale_q=1e-5, scale_k=1e-5, head_dim=64)
    with pytest.raises(ConfigError, match="scale_k must be a positive finite number, not -1"):
        f.softmax_constant(scale_q=0.1, scale_k=-1, head_dim=64)


def test_arith_rejects_bad_arguments():
    with pytest.raises(TypeError, match="needs an Int8Format"):
        Int8Arith("int8", max_seq_len=8, head_dim=8)
    with pytest.raises(ConfigError, match="max_seq_len must be a positive integer, not 0"):
        Int8Arith(max_seq_len=0, head_dim=8)
    a = Int8Arith(max_seq_len=8, head_dim=8)
    with pytest.raises(TypeError, match=r"exp2: z must have x_shape signed\(24\), not unsigned\(24\)"):
        a.exp2(Module(), Signal(24))
    with pytest.raises(TypeError, match=r"reciprocal: l must be unsigned of at most 28 bits"):
        a.reciprocal(Module(), Signal(29))


# -- twins against real arithmetic ------------------------------------------------------------

def test_exp2_twin_accuracy_over_its_whole_domain(arith):
    cfg = arith.cfg
    z = np.arange(arith.x_min, 1)
    p = arith.np_exp2(z)
    exact = 2.0 ** (z / 2 ** cfg.x_frac) * arith.one
    # interpolation error <= 0.12 * 2**-2T relative, plus the final rounding
    bound = 0.12 * 2.0 ** (-2 * cfg.exp_lut_bits) * exact + 0.5 + 1e-9
    assert np.all(np.abs(p - exact) <= bound)
    assert p[-1] == arith.one                        # exp2(0) == 1 exactly
    assert p[0] == 0                                 # the clamp value already rounds to 0
    assert np.all(np.diff(p) >= 0)                   # monotonic


def test_reciprocal_twin_accuracy(arith, rng):
    l = np.concatenate([np.arange(arith.one, arith.one + 5000),
                        rng.integers(arith.one, N_MAX * arith.one + 1, 200000)])
    y, e = arith.np_reciprocal(l)
    F = arith.cfg.recip_frac
    rel = y * 2.0 ** -(F + e) * (l / arith.one) - 1
    assert np.max(np.abs(rel)) < 4 * 2.0 ** -F
    assert np.all((y > 2 ** (F - 1)) & (y <= 2 ** F))
    assert np.all(arith.np_reciprocal(np.array([0, 1, arith.one]))[0] == 2 ** F)   # l < 1 reads as 1


def test_rescale_by_one_is_the_identity(arith, rng):
    # the golden model skips rescales with alpha == 1; this is why that is exact
    o = rng.integers(-128 * N_MAX * arith.one, 127 * N_MAX * arith.one, 10000)
    assert np.array_equal(arith.np_rescale(arith.one, o), o)


def test_mulshr_is_exact_beyond_int64_products(arith, rng):
    a = rng.integers(-2 ** 46, 2 ** 46, 2000)
    b = rng.integers(0, 2 ** 26, 2000)
    s = rng.integers(11, 60, 2000)             # results fit int64 from here on
    got = np_mulshr(a, b, s)
    want = [(int(x) * int(y)) >> int(k) for x, y, k in zip(a, b, s)]
    assert got.tolist() == want


def test_only_one_exp2_per_score(arith, rng):
    # alpha or P is exp2(0) == 1: the softmax unit needs one exp2 per score
    m = rng.integers(-2 ** 20, 2 ** 20, 5000)
    s = rng.integers(-2 ** 20, 2 ** 20, 5000)
    c = 1 << 18
    m_new = arith.np_max(m, s)
    alpha = arith.np_exp2(arith.np_scale(arith.np_sub(m, m_new), c))
    p = arith.np_exp2(arith.np_scale(arith.np_sub(s, m_new), c))
    assert np.all((alpha == arith.one) | (p == arith.one))


# -- amaranth.sim: the builders against the twins (quick, few vectors) --------------------------

# Other corners of the parameter space: no interpolation, a table as wide as the
# fraction (no interpolation bits), the bare seed / one Newton step, odd N and d.
OTHER_FORMATS = {
    "no-interp": (Int8Format(x_frac=10, p_frac=12, exp_lut_bits=6, exp_interp=False,
                             recip_iters=1, recip_frac=14, c_frac=20), 300, 24),
    "full-table": (Int8Format(x_frac=8, p_frac=10, exp_lut_bits=8, exp_guard=1, recip_iters=0,
                              recip_seed_bits=6, recip_frac=12), 1000, 5),
}


@pytest.mark.parametrize("variant", ["default", *OTHER_FORMATS])
def test_harness_in_amaranth_sim(variant, arith, seed):
    if variant != "default":
        fmt, n, d = OTHER_FORMATS[variant]
        arith = Int8Arith(fmt, max_seq_len=n, head_dim=d)
    lanes = 2
    dut = FormatsHarness(arith, lanes=lanes)
    plan = {}
    for op in OPS:
        vec = vectors(arith, op, seed=seed, count=64)
        if op == "exp":      # the full fraction sweep is the cocotb bench's job
            vec = {k: np.concatenate([v[:512], v[-80:]]) for k, v in vec.items()}
        plan[op] = (vec, expected(arith, op, vec))
    got = {op: {port: [] for port in exp} for op, (vec, exp) in plan.items()}
    n_max = max(len(next(iter(v.values()))) for v, _ in plan.values())
    cycles = -(-n_max // lanes)

    async def bench(ctx):
        for i in range(cycles + max(latency(arith, op) for op in plan) + 1):
            for op, (vec, exp) in plan.items():
                n = len(next(iter(vec.values())))
                lat = latency(arith, op)
                if 0 <= i - lat and (i - lat) * lanes < n:
                    for port in exp:
                        got[op][port].extend(int(ctx.get(getattr(dut, port)[k])) for k in range(lanes))
                if i * lanes < n:
                    for port, v in vec.items():
                        for k in range(lanes):
                            idx = min(i * lanes + k, n - 1)
                            ctx.set(getattr(dut, port)[k], int(v[idx]))
            await ctx.tick()

    run_clocked(dut, bench)
    for op, (vec, exp) in plan.items():
        n = len(next(iter(vec.values())))
        for port, want in exp.items():
            have = np.array(got[op][port][:n])
            assert len(have) == n
            bad = np.nonzero(have != want)[0]
            assert bad.size == 0, (f"{port}: {bad.size} mismatches (seed {seed}), first at "
                                   f"{ {p: int(v[bad[0]]) for p, v in vec.items()} }: "
                                   f"{have[bad[0]]} != {want[bad[0]]}")


# -- cocotb on the emitted Verilog --------------------------------------------------------------

@pytest.fixture(scope="module")
def harness_verilog(arith):
    return emit(arith, ROOT / "build" / "formats" / "formats_harness.v", lanes=LANES, exp_lanes=EXP_LANES)


# The default suite runs the harness on Icarus (both simulators run the same Verilog, and
# test_fp runs the float builders on both); the slow suite on Verilator too.
@pytest.mark.parametrize("simulator", [pytest.param("verilator", marks=pytest.mark.slow),
                                       "icarus"])
def test_builders_bit_exact_on_verilog(simulator, harness_verilog, seed):
    if not simulator_available(simulator):
        pytest.skip(f"{simulator} is not installed: skipping the {simulator} run of the format bench")
    # quick_build: the bench runs for seconds, an -O0 model builds about six times faster
    run_bench(quick_build=True, simulator=simulator, verilog_sources=[harness_verilog], toplevel="formats_harness",
              module="attenio.sim.benches.bench_formats",
              build_dir=ROOT / "build" / "formats" / simulator,
              params={"fmt": {}, "max_seq_len": N_MAX, "head_dim": D, "lanes": LANES,
                      "exp_lanes": EXP_LANES, "seed": seed, "count": 2000},
              seed=seed)


def test_pipelines_stall_with_en(arith, rng):
    # with en low the pipelines freeze: the k-th result appears after the k-th input has
    # been followed by `latency` enabled cycles, whatever the pattern of stalls
    m = Module()
    en = Signal(init=1)
    z = Signal(arith.x_shape)
    l = Signal(arith.l_shape)
    p = arith.exp2(m, z, en=en)
    y, e = arith.reciprocal(m, l, en=en)
    n = 60
    zs = rng.integers(arith.x_min, 1, n)
    ls = rng.integers(arith.one, N_MAX * arith.one + 1, n)
    pattern = rng.random(4 * n) < 0.6
    got_p, got_y = [], []

    async def bench(ctx):
        k = 0                                        # inputs consumed
        enabled = 0                                  # enabled cycles so far
        for cycle_en in pattern:
            ctx.set(en, int(cycle_en))
            ctx.set(z, int(zs[min(k, n - 1)]))
            ctx.set(l, int(ls[min(k, n - 1)]))
            await ctx.tick()
            if cycle_en:
                enabled += 1
                k += 1
                if enabled >= arith.exp2_latency and enabled - arith.exp2_latency < n:
                    got_p.append(ctx.get(p))
                if enabled >= arith.reciprocal_latency and enabled - arith.reciprocal_latency < n:
                    got_y.append((ctx.get(y), ctx.get(e)))

    run_clocked(m, bench)
    assert len(got_p) > 10 and len(got_y) > 10
    assert got_p == arith.np_exp2(zs)[:len(got_p)].tolist()
    wy, we = arith.np_reciprocal(ls)
    assert got_y == list(zip(wy[:len(got_y)].tolist(), we[:len(got_y)].tolist()))


# -- published latencies: measured in amaranth.sim --------------------------------------------

def _pipelines(arith):
    """op -> (input shapes, rest inputs, pulse inputs, builder(m, *inputs) -> outputs,
    twin(*inputs) -> outputs): each pipelined builder, a pulse whose result differs from
    the resting inputs' result."""
    a = arith
    one = a.one
    return {
        "scale": ((a.diff_shape, a.c_shape), (0, 1 << 18), (-12345, 1 << 18),
                  lambda m, d, c: (a.scale(m, d, c),), lambda d, c: (a.np_scale(d, c),)),
        "exp2": ((a.x_shape,), (0,), (a.x_min // 3,),
                 lambda m, z: (a.exp2(m, z),), lambda z: (a.np_exp2(z),)),
        "update": ((1, a.p_shape, a.o_shape, a.element_shape), (0, 0, 0, 0), (1, one // 3, 1000 * one, -7),
                   lambda m, up, e, o, v: (a.update(m, up, e, o, v),),
                   lambda up, e, o, v: (a.np_update_o(e, o, one, v),)),
        "finalize": ((a.o_shape, a.recip_shape, a.recip_exp_shape), (0, 1 << 24, 0), (-100 * one, 3 << 22, 1),
                     lambda m, o, y, e: (a.finalize(m, o, y, e),), lambda o, y, e: (a.np_finalize(o, y, e),)),
        "reciprocal": ((a.l_shape,), (one,), (3 * one + 12345,),
                       lambda m, l: a.reciprocal(m, l), lambda l: a.np_reciprocal(l)),
    }


def _measured_latency(arith, op):
    """Ticks from a one-cycle pulse on the inputs of `op` to the first output equal to the
    twin's result for it (the pulse must also leave again one cycle later)."""
    shapes, rest, pulse, build, twin = _pipelines(arith)[op]
    m = Module()
    ins = [Signal(shape) for shape in shapes]
    outs = build(m, *ins)
    want = [int(v) for v in twin(*pulse)]
    assert want != [int(v) for v in twin(*rest)]
    seen = []

    async def bench(ctx):
        for sig, v in zip(ins, rest):
            ctx.set(sig, v)
        for _ in range(40):                           # fill the pipeline with the resting inputs
            await ctx.tick()
        for sig, v in zip(ins, pulse):
            ctx.set(sig, v)
        await ctx.tick()
        for sig, v in zip(ins, rest):
            ctx.set(sig, v)
        for _ in range(40):
            seen.append([ctx.get(out) for out in outs])
            await ctx.tick()

    run_clocked(m, bench)
    hits = [t for t, got in enumerate(seen, start=1) if got == want]
    assert hits, f"{op}: the pulse's result {want} never appeared"
    assert hits == [hits[0]], f"{op}: the pulse's result is not a pulse: {hits}"
    return hits[0]


@pytest.mark.parametrize("op", ["scale", "exp2", "update", "finalize"])
def test_published_latency_is_measured(op, arith):
    assert _measured_latency(arith, op) == getattr(arith, f"{op}_latency")


@pytest.mark.parametrize("iters, known", [(0, 4), (1, 14), (2, 24), (3, 34)])
def test_published_reciprocal_latency_is_measured(iters, known):
    # `known`: the drain of hdl/core.py measures 15, 25, 35, 45 cycles for 0..3 Newton steps,
    # of which 11 are not the reciprocal's
    arith = Int8Arith(Int8Format(recip_iters=iters), max_seq_len=N_MAX, head_dim=D)
    assert _measured_latency(arith, "reciprocal") == arith.reciprocal_latency == known


@pytest.mark.parametrize("seed", [5])
def test_scale_rounds_and_clamps_exactly_at_its_bounds(arith, seed):
    """`scale` compares its clamp bounds on the product's sum beside the rounding: every
    difference within 48 of where the twin's result leaves x_min or reaches 0, for a few
    softmax constants, and (difference, constant) pairs whose product is each bound's sum
    and its neighbours (the bound above 0 is a guard: the lane's differences are <= 0),
    one a cycle through the pipeline."""
    rng = np.random.default_rng(seed)
    print(f"seed {seed}")
    lo, hi = -(1 << (arith.diff_shape.width - 1)), 1 << (arith.diff_shape.width - 1)
    diffs_all = np.arange(lo, 1, dtype=np.int64)
    cs = [1, 3, 1 << 18, int(rng.integers(1, 1 << 20))]
    cases = []
    for c in cs:
        z = arith.np_scale(diffs_all, np.full(diffs_all.shape, c))
        edges = [int(np.argmax(z > arith.x_min)), int(np.argmax(z == 0))]
        for edge in edges:
            for i in range(max(0, edge - 48), min(len(diffs_all), edge + 48)):
                cases.append((int(diffs_all[i]), c))
    k = arith.cfg.c_frac - arith.cfg.x_frac    # the sums on which the result leaves x_min, 0
    c_max = 1 << arith.c_shape.width
    divisors = np.arange(1, hi, dtype=np.int64)
    for bound in ((arith.x_min << k) - (1 << (k - 1)), (1 << k) - (1 << (k - 1))):
        for total in (bound - 1, bound, bound + 1):
            fits = divisors[(total % divisors == 0) & (abs(total) // divisors < c_max)]
            assert len(fits), total
            d = int(fits[0]) * (1 if total > 0 else -1)
            cases.append((d, total // d))
    assert all(lo <= d < hi for d, _ in cases)
    m = Module()
    d_in, c_in = Signal(arith.diff_shape), Signal(arith.c_shape)
    z_out = arith.scale(m, d_in, c_in)
    L = arith.scale_latency
    got = []

    async def bench(ctx):
        for i in range(len(cases) + L):
            if i < len(cases):
                ctx.set(d_in, cases[i][0])
                ctx.set(c_in, cases[i][1])
            await ctx.tick()
            if i + 1 >= L:
                got.append(ctx.get(z_out))

    run_clocked(m, bench)
    want = [int(arith.np_scale(np.int64(d), np.int64(c))) for d, c in cases]
    bad = [(d, c, g, w) for (d, c), g, w in zip(cases, got, want) if g != w]
    assert not bad, bad[:5]
