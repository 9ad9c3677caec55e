"""cocotb bench of `attenio_board`: the host script over a simulated UART peer.

The design under test is the whole board but its pins (`BoardCore`: the
accelerator, its block-RAM AXI memory and the UART bridge). The peer drives
`rx` and samples `tx` bit by bit at `divisor` clock cycles per bit, and the
very host code that talks to the real board (`attenio.sim.host.AttenIOHost`)
runs over it: it loads Q, K and V, starts the run, polls, and reads back O and
the counters.

Parameters (`bench_params`): `config` (keyword arguments of
`attenio.config.resolve`), `divisor`, `seed`, `results` (JSON written here).
"""

import json
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.queue import Queue
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge

from attenio.config import resolve
from attenio.plan import make_plan
from attenio.regmap import register_map
from attenio.sim import golden
from attenio.sim.host import AttenIOHost, HostError
from attenio.sim.runner import bench_params

P = bench_params()


class SimUartLink:
    """A UART peer on the DUT's `rx`/`tx` pins: the link `AttenIOHost` talks through."""

    def __init__(self, dut, divisor):
        self.dut, self.div = dut, divisor
        self.rx_bytes = Queue()
        self.bytes_sent = self.bytes_received = 0
        dut.rx.value = 1
        cocotb.start_soon(self._receiver())

    async def send(self, data):
        clk = self.dut.clk
        for byte in data:
            for bit in [0] + [(byte >> i) & 1 for i in range(8)] + [1]:
                self.dut.rx.value = bit
                await ClockCycles(clk, self.div)
            self.bytes_sent += 1

    async def recv(self, n):
        out = bytearray()
        for _ in range(n):
            out.append(await self.rx_bytes.get())
        return bytes(out)

    async def _receiver(self):
        clk, tx = self.dut.clk, self.dut.tx
        while True:
            await FallingEdge(tx)
            await ClockCycles(clk, self.div // 2)
            assert int(tx.value) == 0, "start bit did not hold for half a bit"
            byte = 0
            for i in range(8):
                await ClockCycles(clk, self.div)
                byte |= int(tx.value) << i
            await ClockCycles(clk, self.div)
            assert int(tx.value) == 1, "missing stop bit"
            self.bytes_received += 1
            self.rx_bytes.put_nowait(byte)


async def setup(dut):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rx.value = 1
    dut.rst.value = 1
    await ClockCycles(dut.clk, 5)
    dut.rst.value = 0
    await RisingEdge(dut.clk)
    config = resolve(**P["config"])
    plan = make_plan(config)
    link = SimUartLink(dut, P["divisor"])
    return plan, link, AttenIOHost(link, register_map(plan))


@cocotb.test(timeout_time=2, timeout_unit="sec")
async def protocol(dut):
    """Ping, an unknown command, CSR reads and writes, memory bytes round-trip."""
    plan, link, host = await setup(dut)
    rng = random.Random(P["seed"])
    await host.ping()
    await link.send(b"Z")
    try:
        await host._status("Z")
        raise AssertionError("an unknown command was accepted")
    except HostError as exc:
        assert "unknown command" in str(exc), exc
    hw = await host.hardware()
    rmap = register_map(plan)
    for r in rmap:
        if r.name in hw:
            assert hw[r.name] == r.value, (r.name, hw[r.name], r.value)
    await host.csr_write("Q_BASE", 0x1234_5678)
    assert await host.csr_read("Q_BASE") == 0x1234_5678
    blob = bytes(rng.randrange(256) for _ in range(37))
    await host.mem_write(5, blob)
    assert await host.mem_read(5, len(blob)) == blob


@cocotb.test(timeout_time=60, timeout_unit="sec")
async def attention_run(dut):
    """Q, K, V in over the UART, a run, O and the counters out; O bit-exact to the golden model."""
    plan, link, host = await setup(dut)
    w = plan.workload
    data = golden.make_inputs(P.get("input_kind", "gaussian"), seq_len=w.seq_len,
                              head_dim=w.head_dim, heads=w.heads, seed=P["seed"])
    c = golden.softmax_constant(data["scale_q"], data["scale_k"], w.head_dim, plan.config.format)
    start = cocotb.utils.get_sim_time("ns")
    o, counters = await host.run(data["q"], data["k"], data["v"], c=c)
    expect = golden.attention(data["q"], data["k"], data["v"], c=c, a=plan.a,
                              fmt=plan.config.format, max_seq_len=w.seq_len)
    mismatches = int(np.count_nonzero(o != expect))
    traffic = plan.traffic_at(seq_len=w.seq_len, heads=w.heads)
    result = {"mismatches": mismatches, "counters": counters, "bytes_sent": link.bytes_sent,
              "bytes_received": link.bytes_received,
              "sim_cycles": int((cocotb.utils.get_sim_time("ns") - start) // 10),
              "plan_read_bytes": traffic.read_bytes, "plan_write_bytes": traffic.write_bytes,
              "o_hex": o.tobytes().hex(), "expect_hex": expect.tobytes().hex()}
    with open(P["results"], "w") as f:
        json.dump(result, f)
    assert mismatches == 0, f"{mismatches} output elements differ from the golden model"
    assert counters["BYTES_READ"] == traffic.read_bytes, counters
    assert counters["BYTES_WRITTEN"] == traffic.write_bytes, counters
