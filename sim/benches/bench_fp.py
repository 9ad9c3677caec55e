"""cocotb bench: the floating-point builders, on their emitted Verilog, against SoftFloat.

The DUT is `FloatHarness` (bench_fp_dut): every op side by side. Inputs change on
the falling edge and outputs are read there too, so every op takes a fresh vector
each cycle and its result shows up `latency(op)` falling edges later. Each result
must equal Berkeley SoftFloat's (any NaN for a NaN) and the twin's bit for bit (so
a NaN is the canonical one). Parameters (from the pytest launcher through
`bench_params`): ops, seed, count, exhaustive (`attenio.sim.tb.ieee.vectors`).
"""

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge

from attenio.sim.benches.bench_fp_dut import decode, expected, latency, oracle, out_spec
from attenio.sim.runner import bench_params
from attenio.sim.tb import ieee
from attenio.sim.tb.clock import start_clock
from attenio.sim.tb.rng import seeded


@cocotb.test(timeout_time=200, timeout_unit="ms")
async def every_op_against_softfloat(dut):
    """Edge values against each other, seeded random cases and (exhaustive) every 16-bit
    source and every pair of bf16 significands: SoftFloat's result and the twin's bits."""
    params = bench_params()
    ops = params["ops"]
    rng = seeded("bench_fp", "every_op_against_softfloat", params["seed"]).numpy()
    start_clock(dut.clk)
    dut.rst.value = 0
    plan = {}
    for op in ops:
        a, b = ieee.vectors(op, rng, params["count"], exhaustive=params["exhaustive"])
        ins = (a,) if b is None else (a, b)
        plan[op] = (ins, latency(op), [])
    for op, (ins, _, _) in plan.items():
        for k in range(len(ins)):
            getattr(dut, f"{op}_{'ab'[k]}").value = 0
    total = max(len(ins[0]) + lat for ins, lat, _ in plan.values())
    for i in range(total + 1):
        await FallingEdge(dut.clk)
        for op, (ins, lat, got) in plan.items():
            n = len(ins[0])
            if 0 <= i - lat < n:
                got.append(int(getattr(dut, f"{op}_y").value))
            if i < n:
                for k, x in enumerate(ins):
                    getattr(dut, f"{op}_{'ab'[k]}").value = int(x[i])
    for op, (ins, _, got) in plan.items():
        got = decode(op, got)
        assert len(got) == len(ins[0]), f"{op}: collected {len(got)} of {len(ins[0])} results"
        want, twin = oracle(op, *ins), expected(op, *ins)
        spec = out_spec(op)
        for name, ref, ok in (("SoftFloat", want,
                               ieee.same(got, want, spec) if spec is not None else got == want),
                              ("the twin", twin, got == twin)):
            if not ok.all():
                j = int(np.nonzero(~ok)[0][0])
                inputs = ", ".join(f"{'ab'[k]}={int(x[j]):#x}" for k, x in enumerate(ins))
                raise AssertionError(f"{op}: {int((~ok).sum())} of {len(got)} results differ "
                                     f"from {name} (seed {params['seed']}); first: {inputs} -> "
                                     f"RTL {int(got[j]):#x}, {name} {int(ref[j]):#x}")
        dut._log.info(f"{op}: {len(got)} results equal SoftFloat's and the twin's")
