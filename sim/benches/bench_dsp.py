"""cocotb bench: the ECP5 primitive path equals the generic path, cycle by cycle.

The DUT is `DspEquivalence` (bench_dsp_dut): every builder with wide products, once
with ``a * b`` registers and once per ECP5 target with MULT18X18D instances (the
model, sim/models/MULT18X18D.v). Every cycle the bench drives fresh random inputs, a
random stall enable and, now and then, a reset of one or a few cycles, and on the
falling edge compares every output of every ECP5 copy with the generic copy's.
Parameters (from the pytest launcher through `bench_params`): seed, cycles, flavours,
outputs ({case: [output ports without the flavour suffix]}), inputs ({port: [width,
signed]}). An input takes a random magnitude too (a random number of low random bits,
extended), so that products neither always overflow nor always clamp downstream.
"""

import random

import cocotb
from cocotb.triggers import FallingEdge

from attenio.sim.runner import bench_params
from attenio.sim.tb.clock import start_clock


def _random_value(rnd, width, signed):
    """`width` bits (two's complement if `signed`) of a random value of random magnitude."""
    bits = rnd.randint(1, width)
    v = rnd.getrandbits(bits)
    if signed and v >> (bits - 1):
        v -= 1 << bits
    return v & ((1 << width) - 1)


@cocotb.test(timeout_time=2, timeout_unit="sec")
async def primitive_equals_generic(dut):
    params = bench_params()
    seed, cycles = params["seed"], params["cycles"]
    rnd = random.Random(seed)
    dut._log.info(f"seed {seed}, {cycles} cycles")
    start_clock(dut.clk)
    inputs = {getattr(dut, port): tuple(ws) for port, ws in params["inputs"].items()}
    outputs = [name for names in params["outputs"].values() for name in names]
    flavours = params["flavours"]
    dut.rst.value, dut.en.value = 1, 1
    for sig in inputs:
        sig.value = 0
    mismatches, seen, resets, stalls = [], {name: set() for name in outputs}, 0, 0
    rst_left = 2
    for cycle in range(cycles):
        await FallingEdge(dut.clk)
        for name in outputs:
            ref = getattr(dut, f"{name}_gen").value
            seen[name].add(int(ref))
            for flavour in flavours:
                got = getattr(dut, f"{name}_{flavour}").value
                if got != ref and len(mismatches) < 20:
                    mismatches.append(f"cycle {cycle}: {name}_{flavour} = {got} but "
                                      f"{name}_gen = {ref}")
        for sig, (width, signed) in inputs.items():
            sig.value = _random_value(rnd, width, signed)
        en = rnd.random() < 0.75
        stalls += not en
        dut.en.value = int(en)
        if rst_left == 0 and rnd.random() < 0.02:
            rst_left = rnd.choice((1, 1, 2, 5))
            resets += 1
        dut.rst.value = int(rst_left > 0)
        rst_left = max(0, rst_left - 1)
    dut._log.info(f"{resets} resets, {stalls} stalled cycles")
    assert not mismatches, "\n".join(mismatches)
    flat = [name for name, values in seen.items() if len(values) < 8]
    assert not flat, f"outputs that hardly changed (the bench would prove nothing): {flat}"
    assert resets > 0 and stalls > 0
