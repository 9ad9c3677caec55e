"""cocotb bench of `attenio_board`: the host script over a simulated UART peer.

The design under test is the whole board but its pins (`BoardCore`: the
accelerator, its block-RAM AXI memory and the UART bridge). The peer
(`attenio.sim.tb.uart.UartPeer`) drives `rx` and samples `tx` bit by bit at
`divisor` clock cycles per bit, and the very host code that talks to the real
board (`attenio.sim.host.AttenIOHost`) runs over it: it loads Q, K and V, starts
the run, polls, and reads back O and the counters.

Parameters (`bench_params`): `config` (keyword arguments of
`attenio.config.resolve`, its `format_name` the run's format), `divisor`, `seed`,
`input_kind` (of `golden.make_inputs`, default gaussian), `results` (JSON written here).
"""

import json

import cocotb
import numpy as np
from cocotb.simtime import get_sim_time

from attenio.config import resolve
from attenio.plan import make_plan
from attenio.regmap import register_map
from attenio.sim.host import AttenIOHost, HostError
from attenio.sim.run_data import RunData
from attenio.sim.runner import bench_params
from attenio.sim.tb.clock import PERIOD_NS, reset, start_clock
from attenio.sim.tb.rng import seeded
from attenio.sim.tb.uart import UartPeer

P = bench_params()


async def setup(dut):
    start_clock(dut.clk)
    dut.rx.value = 1                    # the line idles high, also through reset
    await reset(dut, cycles=5, settle=1)
    plan = make_plan(resolve(**P["config"]))
    link = UartPeer(dut, P["divisor"])
    return plan, link, AttenIOHost(link, register_map(plan))


@cocotb.test(timeout_time=2, timeout_unit="sec")
async def protocol(dut):
    """Ping, an unknown command, CSR reads and writes, memory bytes round-trip."""
    plan, link, host = await setup(dut)
    rng = seeded("bench_board", "protocol", P["seed"])
    await host.ping()
    await link.send(b"Z")
    try:
        await host._status("Z")
        raise AssertionError("an unknown command was accepted")
    except HostError as exc:
        assert "unknown command" in str(exc), exc
    await host.check_hardware()
    await host.csr_write("Q_BASE", 0x1234_5678)
    assert await host.csr_read("Q_BASE") == 0x1234_5678
    blob = bytes(rng.randrange(256) for _ in range(37))
    await host.mem_write(5, blob)
    assert await host.mem_read(5, len(blob)) == blob


@cocotb.test(timeout_time=60, timeout_unit="sec")
async def attention_run(dut):
    """Q, K, V in over the UART, a run, O and the counters out; O bit-exact to the golden
    model of the Plan's format."""
    plan, link, host = await setup(dut)
    w = plan.workload
    data = RunData.make(plan.config.format, head_dim=w.head_dim,
                        kind=P.get("input_kind", "gaussian"), seq_len=w.seq_len, heads=w.heads,
                        seed=P["seed"], head_scales=P.get("head_scales", False))
    start = get_sim_time("ns")
    o, counters = await host.run(data)
    expect = data.golden(plan)
    mismatches = int(np.count_nonzero(o != expect))
    traffic = plan.traffic_at(seq_len=w.seq_len, heads=w.heads)
    result = {"mismatches": mismatches, "counters": counters, "bytes_sent": link.bytes_sent,
              "bytes_received": link.bytes_received,
              "sim_cycles": int((get_sim_time("ns") - start) // PERIOD_NS),
              "plan_read_bytes": traffic.read_bytes, "plan_write_bytes": traffic.write_bytes,
              "format": plan.config.format.name, "head_c": list(data.head_c or [data.c]),
              "o_hex": o.tobytes().hex(),
              "expect_hex": expect.tobytes().hex()}
    with open(P["results"], "w") as f:
        json.dump(result, f)
    assert mismatches == 0, f"{mismatches} output elements differ from the golden model"
    assert counters["BYTES_READ"] == traffic.read_bytes, counters
    assert counters["BYTES_WRITTEN"] == traffic.write_bytes, counters
