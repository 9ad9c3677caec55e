"""The compute core: cocotb on its emitted Verilog (Verilator and Icarus), fast
amaranth.sim checks of the whole core on a tiny array, and parameter checks.

Every output byte is compared with the golden model. The cocotb configurations
cover r = 1 and r > 1, one and several lanes per line, a lane pass long enough
to hit the U interlock, blocks with fewer valid rows than the array holds, and
rows split over s = 2 and 4 MACs (down to one chunk per row, s = d).
"""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from amaranth.hdl import Fragment
from amaranth.sim import Simulator

from amaranth_sim import run_clocked
from attenio.formats import format_by_name
from attenio.gen.verilog import emit
from attenio.hdl.core import AttentionCore, Kind
from attenio.hdl.formats import FloatArith
from attenio.hdl.kv_buffer import kv_order
from attenio.sim import golden_fp
from attenio.sim.golden import attention
from attenio.sim.runner import run_bench, simulator_available

ROOT = Path(__file__).resolve().parent.parent

def emit_if_changed(core, build):
    """Emit the core's Verilog into `build`; keep the build (the runner reuses it) if the
    Verilog is unchanged, else start from an empty directory (a stale precompiled
    header from other compiler flags breaks Verilator's make)."""
    path = build / "core.v"
    fresh = build.parent / f"{build.name}.v.new"
    emit(core, fresh, name="attention_core")
    if path.exists() and path.read_text() == fresh.read_text():
        fresh.unlink()
    else:
        shutil.rmtree(build, ignore_errors=True)
        build.mkdir(parents=True)
        fresh.replace(path)
    return path


# (name, core parameters, blocks [rows_valid, n_keys] for test_stream)
CONFIGS = [
    # the smallest array (p2q4r2d8e4 covers the same paths): in the slow suite only
    pytest.param("p2q2r1d8e2", dict(mac_lines=2, macs_per_line=2, rows_per_mac=1, head_dim=8,
                                    exp_units=2, max_seq_len=64), [[4, 24], [3, 5], [4, 1]],
                 marks=pytest.mark.slow, id="p2q2r1d8e2"),
    ("p2q4r2d8e4", dict(mac_lines=2, macs_per_line=4, rows_per_mac=2, head_dim=8, exp_units=4,
                        max_seq_len=64), [[16, 20], [11, 6], [16, 3]]),
    # one lane for 8 MACs and d = 4: the lane pass is longer than 2*r*d, the interlock bites
    ("p1q8r1d4e1", dict(mac_lines=1, macs_per_line=8, rows_per_mac=1, head_dim=4, exp_units=1,
                        max_seq_len=32), [[8, 16], [5, 4]]),
    # the `small` preset's array and Plan mapping (a = 32, r = 2, d = 16)
    ("p4q4r2d16e4", dict(mac_lines=4, macs_per_line=4, rows_per_mac=2, head_dim=16,
                         exp_units=4, max_seq_len=256), [[32, 16], [19, 4]]),
    # rows split over s MACs: two groups per lane; one group per lane with r = 2; s = 4 with
    # two chunks per row (the interlock bites); s = d = 4, one chunk per row
    ("p2q4r1d8e2s2", dict(mac_lines=2, macs_per_line=4, rows_per_mac=1, head_dim=8, exp_units=2,
                          max_seq_len=64, split=2), [[4, 20], [3, 5], [4, 1]]),
    ("p2q4r2d8e4s2", dict(mac_lines=2, macs_per_line=4, rows_per_mac=2, head_dim=8, exp_units=4,
                          max_seq_len=64, split=2), [[8, 12], [5, 3]]),
    ("p1q8r1d8e1s4", dict(mac_lines=1, macs_per_line=8, rows_per_mac=1, head_dim=8, exp_units=1,
                          max_seq_len=32, split=4), [[2, 16], [1, 3]]),
    ("p2q4r2d4e2s4", dict(mac_lines=2, macs_per_line=4, rows_per_mac=2, head_dim=4, exp_units=2,
                          max_seq_len=32, split=4), [[4, 10], [3, 2]]),
    # float formats (the second block holds a NaN, an infinity and subnormals): bf16 with
    # r = 2 < L_acc (idle slots in every chunk), fp16 rows split over 2 and 4 MACs (the chain)
    ("p2q4r2d8e4bf16", dict(mac_lines=2, macs_per_line=4, rows_per_mac=2, head_dim=8,
                            exp_units=4, max_seq_len=64, format="bf16"),
     [[16, 12], [11, 5], [16, 3]]),
    ("p2q4r3d8e2s2fp16", dict(mac_lines=2, macs_per_line=4, rows_per_mac=3, head_dim=8,
                              exp_units=2, max_seq_len=64, split=2, format="fp16"),
     [[12, 10], [7, 4], [12, 2]]),
    ("p1q8r1d8e1s4bf16", dict(mac_lines=1, macs_per_line=8, rows_per_mac=1, head_dim=8,
                              exp_units=1, max_seq_len=32, split=4, format="bf16"),
     [[2, 10], [2, 3], [1, 2]]),
    # fp8 in, bf16 out: E4M3 (NaN, no infinity: the planted inf reads as NaN) over 2 MACs a
    # row, E5M2 one MAC a row
    ("p2q4r3d8e2s2e4m3", dict(mac_lines=2, macs_per_line=4, rows_per_mac=3, head_dim=8,
                              exp_units=2, max_seq_len=64, split=2, format="fp8_e4m3"),
     [[12, 10], [7, 4], [12, 2]]),
    ("p2q4r2d8e4e5m2", dict(mac_lines=2, macs_per_line=4, rows_per_mac=2, head_dim=8,
                            exp_units=4, max_seq_len=64, format="fp8_e5m2"),
     [[16, 12], [11, 5], [16, 3]]),
]


#: (configuration, simulator) pairs the default suite leaves to the slow one: the float
#: configurations' Verilator builds take minutes (test_e2e's and test_rtl_timing's float
#: runs cover Verilator), s = 4 repeats s = 2's chain, and the int8 s = 2 with two lanes a
#: line repeats the Icarus-run s = 2 with one
_SLOW = {("p2q4r2d8e4bf16", "verilator"), ("p2q4r3d8e2s2fp16", "verilator"),
         ("p1q8r1d8e1s4bf16", "verilator"), ("p1q8r1d8e1s4bf16", "icarus"),
         ("p2q4r2d8e4s2", "verilator"), ("p2q4r3d8e2s2e4m3", "verilator"),
         ("p2q4r2d8e4e5m2", "verilator"), ("p2q4r2d8e4e5m2", "icarus")}
#: int8 configurations the default suite runs on Icarus only (both simulators run the
#: same Verilog; the slow suite runs every configuration on both): the suite must stay
#: well under 20 minutes on CI's 2 cores, and an int8 core bench costs 15-35 s a run
_ICARUS_ONLY = {"p1q8r1d4e1", "p2q4r1d8e2s2", "p2q4r2d4e2s4", "p4q4r2d16e4"}
_VERILATOR_ONLY = {"p2q4r2d8e4", "p2q4r2d8e4s2", "p1q8r1d8e1s4"}


def _bench_params():
    out = []
    for sim in ("verilator", "icarus"):
        for c in CONFIGS:
            name, params, blocks = c.values if hasattr(c, "values") else c
            marks = list(getattr(c, "marks", ()))
            if ((name, sim) in _SLOW or (name in _ICARUS_ONLY and sim == "verilator")
                    or (name in _VERILATOR_ONLY and sim == "icarus")):
                marks.append(pytest.mark.slow)
            out.append(pytest.param(sim, name, params, blocks, marks=marks, id=f"{sim}-{name}"))
    return out


@pytest.mark.parametrize("simulator,name,params,blocks", _bench_params())
def test_core_bench(simulator, name, params, blocks, seed):
    if not simulator_available(simulator):
        pytest.skip(f"{simulator} is not installed (see attenio.sim.runner)")
    build = ROOT / "build" / "bench_core" / f"{name}_{simulator}"
    core = AttentionCore(**{k: v for k, v in params.items() if k != "format"},
                         fmt=format_by_name(params.get("format", "int8")))
    src = emit_if_changed(core, build)
    report = build / "report.json"
    bench = dict(params, blocks=blocks, seed=seed, report=str(report),
                 random_blocks=3 if simulator == "verilator" else 2)
    run_bench(simulator=simulator, verilog_sources=[src], toplevel="attention_core",
              module="attenio.sim.benches.bench_core", build_dir=build, params=bench, seed=seed,
              quick_build=True)
    figures = json.loads(report.read_text())
    r, d = params["rows_per_mac"], params["head_dim"] // params.get("split", 1)  # d: chunks
    lsm, slack = core.sm_latency, core.interlock_slack
    for f in figures["blocks"]:
        print(f"{name} {simulator}: rows {f['rows_valid']} N {f['n_keys']}: "
              f"{f['cycles_per_row']:.2f} cycles per K/V row ((P + r)*d/s = "
              f"{f['ideal_per_row']}), "
              f"{f['stall_cycles']} stall cycles (L_sm = {lsm})")
        # the schedule's promise (hdl/core.py): only U_0 and U_(N-1) wait when L_sm <= 2*r*d
        n = f["n_keys"]
        if n == 1:
            bound = lsm
        else:
            # a lane pass starts lane_busy_tail + 1 cycles after the previous one at the
            # earliest (it reads the m and l that one writes): with very short rows that binds
            per_row = max(-slack / 2, core.timing.lane_busy_tail + 2 - f["ideal_per_row"], 0)
            bound = 2 * max(0, lsm - r * d) + per_row * (n - 2) + 2
        assert f["stall_cycles"] <= bound, (f, bound)
        if slack >= 0 and lsm <= r * d:
            assert f["stall_cycles"] == 0, f


# -- amaranth.sim: the whole core on a tiny array, fast --------------------------------------

def simulate(core, blocks):
    """Feed `blocks` [(rows, q, k, v, c)] at full rate, a chunk of `core.split` elements a
    transfer, the K/V rows in `kv_order` for the core's banks; return the output elements
    and the cycles (all, and those with a word for S or U entering the array)."""
    got, stats = [], {"cycles": 0, "pe": 0}
    s = core.split
    total = sum(q.shape[0] * q.shape[1] for _, q, *_ in blocks)

    async def feed(ctx):
        for rows, q, k, v, c in blocks:
            ctx.set(core.c, c)
            ctx.set(core.start.payload, {"rows_valid": rows, "n_keys": k.shape[0]})
            ctx.set(core.start.valid, 1)
            await ctx.tick().until(core.start.ready)
            ctx.set(core.start.valid, 0)
            words = [(Kind.Q, x) for x in q.reshape(-1, s)]
            for kind, j in kv_order(k.shape[0], banks=core.banks):
                words += [(kind, x) for x in (k[j] if kind == Kind.K else v[j]).reshape(-1, s)]
            for kind, x in words:
                ctx.set(core.feed.payload, {"kind": kind, "value": [int(e) for e in x]})
                ctx.set(core.feed.valid, 1)
                await ctx.tick().until(core.feed.ready)
            ctx.set(core.feed.valid, 0)

    async def sink(ctx):
        ctx.set(core.o_out.ready, 1)
        async for _, _, valid, payload, pe, err in ctx.tick().sample(
                core.o_out.valid, core.o_out.payload, core.pe_active, core.error):
            assert not err
            stats["cycles"] += 1
            stats["pe"] += pe
            if valid:
                got.extend(int(e) for e in payload.value)

    async def until_done(ctx):
        while len(got) < total and stats["cycles"] < 100_000:
            await ctx.tick()

    sim = Simulator(core)
    sim.add_clock(1e-8)
    sim.add_testbench(feed, background=True)
    sim.add_process(sink)
    sim.add_testbench(until_done)
    sim.run()
    return np.array(got), stats


def _random_blocks(rng, core, shapes):
    """Blocks [(rows, q, k, v, c)] of `shapes` [(rows, keys)] in the core's format, and
    their golden elements: int8 uniform with a random c; a float format Gaussian."""
    arith, d = core.arith, core.head_dim
    blocks, want = [], []
    if isinstance(arith, FloatArith):
        dp = golden_fp.FloatDatapath(arith.spec, max_seq_len=core.max_seq_len, head_dim=d,
                                     split=core.split, rows_per_mac=core.rows_per_mac,
                                     out=arith.out)
        for rows, n in shapes:
            q, k, v = (dp.store(rng.normal(0, sd, shape))
                       for sd, shape in ((2.0, (rows, d)), (2.0, (n, d)), (1.0, (n, d))))
            blocks.append((rows, q, k, v, arith.c))
            want.append(golden_fp.attention(dp, q, k, v).reshape(-1).astype(int))
    else:
        for rows, n in shapes:
            q, k, v = (rng.integers(-128, 128, (x, d)) for x in (rows, n, n))
            c = int(rng.integers(1 << 22, 1 << 28))
            blocks.append((rows, q, k, v, c))
            want.append(attention(q, k, v, c=c, a=rows, arith=arith).reshape(-1))
    return blocks, np.concatenate(want)


@pytest.mark.parametrize("split", [1, 2])
def test_core_amaranth_sim(rng, split):
    core = AttentionCore(mac_lines=2, macs_per_line=2, rows_per_mac=2, head_dim=4, exp_units=2,
                         max_seq_len=16, split=split)
    blocks, want = _random_blocks(rng, core, [(8 // split, 6), (5 // split, 2)])
    got, stats = simulate(core, blocks)
    assert got.tolist() == want.tolist()
    assert stats["pe"] == sum(2 * 2 * 4 // split * k.shape[0] for _, _, k, _, _ in blocks)


# (format, banks, split, rows_per_mac, head_dim): r*d/s above the O update's latency, since
# the last B - 1 U rows of a block follow each other (`o_update_problem`); a float run takes
# 15-20 s unloaded, so one is in the default suite
_BANKED = [
    ("int8", 3, 1, 2, 4), ("int8", 4, 1, 2, 4), ("int8", 3, 2, 2, 8), ("int8", 4, 2, 2, 8),
    pytest.param("fp16", 3, 1, 4, 8, marks=pytest.mark.slow),
    pytest.param("fp16", 4, 1, 4, 8, marks=pytest.mark.slow),
    pytest.param("fp16", 3, 2, 4, 16, marks=pytest.mark.slow),
    ("fp16", 4, 2, 4, 16),
]


@pytest.mark.parametrize("fmt,banks,split,rows_per_mac,head_dim", _BANKED)
def test_core_with_more_banks_is_exact_and_the_array_busy_two_rows_a_key(
        rng, fmt, banks, split, rows_per_mac, head_dim):
    """B > 2 score and (P, alpha) banks: the K/V rows in `kv_order` (S runs B - 1 K rows
    ahead of U), blocks of more keys than B - 1 and of fewer (1 and 2 keys), partial ones;
    the outputs equal the golden model's and the array computes 2 r d/s cycles a key."""
    core = AttentionCore(mac_lines=2, macs_per_line=2, rows_per_mac=rows_per_mac,
                         head_dim=head_dim, exp_units=2, max_seq_len=16, split=split,
                         banks=banks, fmt=format_by_name(fmt))
    a = core.rows
    blocks, want = _random_blocks(rng, core, [(a, 6), (a - 3, 2), (a, 1), (a - 1, 3)])
    got, stats = simulate(core, blocks)
    assert got.tolist() == want.tolist()
    keys = sum(k.shape[0] for _, _, k, _, _ in blocks)
    assert stats["pe"] == 2 * rows_per_mac * head_dim // split * keys


# -- parameters -----------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,match", [
    (dict(mac_lines=0), "mac_lines must be a positive integer, not 0"),
    (dict(head_dim=2.5), "head_dim must be a positive integer, not 2.5"),
    (dict(exp_units=3), r"AttentionCore: the softmax lanes need exp_units \(3\) to be a multiple "
                        r"of the MAC lines \(2\)"),
    (dict(exp_units=6), r"AttentionCore: the softmax lanes need exp_units \(6\) .* to divide each "
                        r"line's 4 MACs"),
    (dict(split=3), r"AttentionCore: split = 3 must divide the head dimension \(8\) and the 4 "
                    r"MACs of each softmax lane"),
    (dict(split=4, exp_units=4), r"AttentionCore: split = 4 must divide the head dimension \(8\) and the 2 "
                    r"MACs of each softmax lane"),
    (dict(split=0), "AttentionCore: split must be a positive integer, not 0"),
])
def test_core_rejects(kwargs, match):
    params = dict(mac_lines=2, macs_per_line=4, rows_per_mac=1, head_dim=8, exp_units=2,
                  max_seq_len=16)
    params.update(kwargs)
    with pytest.raises(ValueError, match=match):
        AttentionCore(**params)


def test_core_refuses_formats():
    from attenio.formats import FP16Format
    tiny = dict(mac_lines=1, macs_per_line=1, rows_per_mac=1, head_dim=4, exp_units=1,
                max_seq_len=8)
    with pytest.raises(ValueError, match="^the fp16 RTL accumulates O in fp32; o_acc_bits = 16 is "
                                         "the paper's accounting, for analysis only$"):
        AttentionCore(**tiny, fmt=FP16Format(o_acc_bits=16))
    with pytest.raises(ValueError, match="fmt must be an Int8Format or a FloatFormat, not 'int8'"):
        AttentionCore(**tiny, fmt="int8")


def test_core_from_plan():
    from attenio.config import preset
    from attenio.plan import make_plan
    plan = make_plan(preset("small"))
    core = AttentionCore.from_plan(plan)
    Fragment.get(core, None)                 # elaborates (and so uses) it
    assert core.rows == plan.a and core.rows_per_mac == plan.rows_per_mac


@pytest.mark.slow
def test_core_paper_converts(tmp_path):
    """The paper's array (64 x 32 MACs, E = 128, d = 64, int8, r from the Plan) converts."""
    import dataclasses
    import time

    from attenio.config import preset
    from attenio.formats import Int8Format
    from attenio.plan import make_plan
    plan = make_plan(dataclasses.replace(preset("paper"), format=Int8Format()))
    core = AttentionCore.from_plan(plan)
    t0 = time.perf_counter()
    emit(core, tmp_path / "core.v", name="attention_core")
    print(f"paper core: {time.perf_counter() - t0:.0f} s")
    assert "module attention_core" in (tmp_path / "core.v").read_text()


@pytest.mark.parametrize("case", ["bad_start", "bad_kind"])
def test_core_error_flags(case):
    """A start command out of range is dropped; a feed kind out of order is flagged."""
    core = AttentionCore(mac_lines=1, macs_per_line=2, rows_per_mac=1, head_dim=2, exp_units=1,
                         max_seq_len=4)
    seen = {}

    async def bench(ctx):
        rows = 3 if case == "bad_start" else 1                             # 3 > r*p*q = 2
        ctx.set(core.start.payload, {"rows_valid": rows, "n_keys": 1})
        ctx.set(core.start.valid, 1)
        await ctx.tick()
        ctx.set(core.start.valid, 0)
        seen["busy"] = ctx.get(core.busy)
        kind = Kind.Q if case == "bad_start" else Kind.K                    # Q expected
        ctx.set(core.feed.payload, {"kind": kind, "value": [1]})
        ctx.set(core.feed.valid, 1)
        await ctx.tick()
        seen["ready"] = ctx.get(core.feed.ready)
        ctx.set(core.feed.valid, 0)
        await ctx.tick()
        seen["error"] = ctx.get(core.error)

    run_clocked(core, bench)
    if case == "bad_start":
        assert seen == {"busy": 0, "ready": 0, "error": 1}
    else:
        assert seen == {"busy": 1, "ready": 1, "error": 1}
