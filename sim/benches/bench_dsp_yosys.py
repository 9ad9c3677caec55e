"""cocotb bench: Yosys's own MULT18X18D instances, simulated with our model, multiply.

The DUT is a netlist Yosys's synth_ecp5 wrote for plain products (module `prods` of
tests/test_dsp_primitive.py: signed x signed, unsigned x unsigned, signed x unsigned
and a narrow unsigned product, no registers), each one MULT18X18D after its mapping
(techlibs/lattice/dsp_map_18x18.v). Simulated with sim/models/MULT18X18D.v, every
output must be the exact product of its inputs, so the model reads the pins (A, B,
SIGNEDA, SIGNEDB, P) as Yosys drives them. Parameters: seed, count, ports
({output: [[input, width, signed], [input, width, signed], output width, signed]}).
"""

import random

import cocotb
from cocotb.triggers import Timer

from attenio.sim.runner import bench_params


def _wrap(value, width, signed):
    value &= (1 << width) - 1
    return value - (1 << width) if signed and value >> (width - 1) else value


@cocotb.test(timeout_time=2, timeout_unit="sec")
async def yosys_products_multiply(dut):
    params = bench_params()
    rnd = random.Random(params["seed"])
    dut._log.info(f"seed {params['seed']}, {params['count']} vectors")
    bad = []
    for k in range(params["count"]):
        values = {}
        for out, ((a, wa, sa), (b, wb, sb), wy, sy) in params["ports"].items():
            for name, width, signed in ((a, wa, sa), (b, wb, sb)):
                if name not in values:
                    # extremes now and then: the corners of a signed or unsigned range
                    raw = rnd.choice([rnd.getrandbits(width), 0, (1 << width) - 1,
                                      1 << (width - 1), (1 << (width - 1)) - 1])
                    values[name] = _wrap(raw, width, signed)
                    getattr(dut, name).value = raw & ((1 << width) - 1)
        await Timer(1, "ns")
        for out, ((a, wa, sa), (b, wb, sb), wy, sy) in params["ports"].items():
            want = _wrap(values[a] * values[b], wy, sy)
            got = _wrap(int(getattr(dut, out).value), wy, sy)
            if got != want and len(bad) < 20:
                bad.append(f"vector {k}: {out} = {got}, {a} * {b} = {values[a]} * {values[b]} "
                           f"= {want}")
    assert not bad, "\n".join(bad)
