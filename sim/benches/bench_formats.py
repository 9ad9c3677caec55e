"""cocotb bench: every `Int8Arith` builder, on its emitted Verilog, bit-exact to its twin.

The DUT is `FormatsHarness` (bench_formats_dut): all ops side by side, `lanes`
copies each, packed ports. Inputs change on the falling edge and outputs are
read there too (stable, half a cycle after the register stage), so every op
takes fresh vectors every cycle and its result shows up `latency(op)` falling
edges later. Parameters (from the pytest launcher through `bench_params`):
fmt (Int8Format fields), max_seq_len, head_dim, lanes, exp_lanes, seed, count.
"""

import cocotb
from cocotb.triggers import FallingEdge

from attenio.sim.benches.bench_formats_dut import (OPS, arith_from_params, expected, latency,
                                                    pack, port_layout, unpack, vectors)
from attenio.sim.runner import bench_params
from attenio.sim.tb.clock import start_clock


async def _check_ops(dut, ops):
    params = bench_params()
    arith = arith_from_params(params)
    seed, count = params["seed"], params["count"]
    dut._log.info(f"ops {', '.join(ops)}: seed {seed}, {count} random vectors per op")
    layout = port_layout(arith)
    start_clock(dut.clk)
    dut.rst.value = 0
    plan = {}
    for op in ops:
        lanes = params["exp_lanes"] if op == "exp" else params["lanes"]
        vec = vectors(arith, op, seed=seed, count=count)
        exp = expected(arith, op, vec)
        n = len(next(iter(vec.values())))
        cycles = -(-n // lanes)
        words = {}
        for port in vec:
            padded = _pad(vec[port], cycles * lanes)
            words[port] = [pack(padded[c * lanes:(c + 1) * lanes], layout[port][0])
                           for c in range(cycles)]
        plan[op] = (vec, exp, n, cycles, words, latency(arith, op), {p: [] for p in exp}, lanes)
    # park every input at a legal value (all zero is legal for every op)
    for op, (ins, _) in OPS.items():
        for name in ins:
            getattr(dut, f"{op}_{name}").value = 0
    total = max(cycles + lat for (_, _, _, cycles, _, lat, _, _) in plan.values())
    for i in range(total + 1):
        await FallingEdge(dut.clk)
        for op, (vec, exp, n, cycles, words, lat, got, lanes) in plan.items():
            if 0 <= i - lat < cycles:
                for port in got:
                    width, signed = layout[port]
                    got[port].extend(unpack(int(getattr(dut, port).value), width, lanes, signed))
            if i < cycles:
                for port, w in words.items():
                    getattr(dut, port).value = w[i]
    for op, (vec, exp, n, cycles, words, lat, got, lanes) in plan.items():
        for port, want in exp.items():
            have = got[port][:n]
            assert len(have) == n, f"{port}: collected {len(have)} of {n} outputs"
            bad = [i for i in range(n) if have[i] != int(want[i])]
            if bad:
                i = bad[0]
                inputs = ", ".join(f"{p}={int(vec[p][i])}" for p in vec)
                raise AssertionError(f"{port}: {len(bad)} of {n} mismatches (seed {seed}); first at "
                                     f"vector {i}: {inputs} -> RTL {have[i]}, twin {int(want[i])}")
        dut._log.info(f"{op}: {n} vectors bit-exact")


def _pad(values, n):
    values = [int(v) for v in values]
    return values + [values[-1]] * (n - len(values))


@cocotb.test(timeout_time=20, timeout_unit="ms")
async def exp2_fraction_path_exhaustive(dut):
    """exp2: every x_frac-bit fraction once, every integer part, random arguments."""
    await _check_ops(dut, ["exp"])


@cocotb.test(timeout_time=20, timeout_unit="ms")
async def reciprocal_every_seed(dut):
    """reciprocal: every seed interval at both ends and inside, l = 0, 1, N, all ones."""
    await _check_ops(dut, ["rcp"])


@cocotb.test(timeout_time=20, timeout_unit="ms")
async def datapath_ops_random_and_edges(dut):
    """mac, max/sub, scale, rescale, l/O update, finalize: edge cases, then seeded random."""
    await _check_ops(dut, ["mac", "cmp", "scale", "upd", "fin"])
