"""The board: the host script round-trips data through the simulated board top.

`attenio_board` (accelerator + block-RAM AXI memory + UART bridge) runs on
Verilator; the host code that drives the real ULX3S speaks to it through a
simulated UART peer, and O must equal the golden model bit for bit.
"""

import json
from pathlib import Path

import pytest
from amaranth.hdl import Fragment
from amaranth.sim import Simulator

from attenio.gen.board import emit_board
from attenio.hdl.axi_ram import AXIRam
from attenio.hdl.board import board_memory_bytes
from attenio.hdl.uart import UART
from attenio.plan import make_plan
from attenio.config import resolve
from attenio.sim.runner import run_bench, simulator_available

TINY = dict(name="board_tiny", workload={"seq_len": 16, "head_dim": 8, "heads": 2},
            budget={"mac_lines": 1, "macs_per_line": 2, "exp_units": 1})
DIVISOR = 8


def test_axi_ram_checks_its_size():
    with pytest.raises(ValueError, match="power of two"):
        AXIRam(size_bytes=3000)
    with pytest.raises(ValueError, match="block RAM"):
        AXIRam(size_bytes=1 << 20)
    ram = AXIRam(size_bytes=4096, data_width=64)
    assert ram.depth == 512
    Fragment.get(ram, None)             # elaborated, so it is no unused design


def test_board_memory_holds_the_largest_run():
    plan = make_plan(resolve(**TINY))
    need = 4 * 2 * 16 * 8
    assert board_memory_bytes(plan) >= need and board_memory_bytes(plan) < 2 * need


def test_uart_loopback(seed):
    """amaranth.sim: bytes sent by the transmitter come out of the receiver."""
    import random
    rng = random.Random(seed)
    data = [rng.randrange(256) for _ in range(6)]
    dut = UART(divisor=5)
    from amaranth.hdl import Module
    m = Module()
    m.submodules.dut = dut
    m.d.comb += dut.rx.eq(dut.tx)
    got = []

    async def bench(ctx):
        for byte in data:
            ctx.set(dut.tx_data.payload, byte)
            ctx.set(dut.tx_data.valid, 1)
            await ctx.tick().until(dut.tx_data.ready)
            ctx.set(dut.tx_data.valid, 0)
            ctx.set(dut.rx_data.ready, 1)
            await ctx.tick().until(dut.rx_data.valid)
            got.append(ctx.get(dut.rx_data.payload))
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == data


@pytest.mark.skipif(not simulator_available("verilator"), reason="verilator is not installed")
def test_host_script_through_simulated_board(seed):
    build = Path("build") / "tests" / "board_tiny"
    build.mkdir(parents=True, exist_ok=True)
    verilog = emit_board(resolve(**TINY), build, divisor=DIVISOR)
    results = (build / "results.json").resolve()
    results.unlink(missing_ok=True)
    run_bench(simulator="verilator", verilog_sources=[verilog], toplevel="attenio_board",
              module="attenio.sim.benches.bench_board", build_dir=build / "verilator",
              params={"config": TINY, "divisor": DIVISOR, "seed": seed % 1000,
                      "results": str(results)})
    r = json.loads(results.read_text())
    assert r["mismatches"] == 0 and r["o_hex"] == r["expect_hex"]
    assert r["counters"]["BYTES_READ"] == r["plan_read_bytes"] > 0
    assert r["counters"]["BYTES_WRITTEN"] == r["plan_write_bytes"] == 2 * 16 * 8
    assert r["counters"]["CYCLES"] > 0
    assert r["bytes_sent"] > 3 * 2 * 16 * 8 and r["bytes_received"] >= 2 * 16 * 8


@pytest.mark.slow
def test_bitstream_builds():
    """The whole ULX3S 85F build (Yosys, nextpnr, ecppack) of a tiny board; tens of minutes."""
    from attenio.gen.board import build_bitstream
    out = Path("build") / "tests" / "bitstream_tiny"
    r = build_bitstream(resolve(**TINY), out)
    bit = Path(r["bitstream"])
    assert bit.exists() and bit.stat().st_size == r["bitstream_bytes"] > 100_000
    assert bit.read_bytes()[:4] != b"\0\0\0\0"
    assert r["timing_met"] and r["fmax_mhz"] >= 25
    res = r["resources"]
    assert res["DSP"] <= 156 and res["BRAM"] >= 1 and res["LUT"] > 1000
    pnr = r["nextpnr"]["utilization"]
    assert pnr["TRELLIS_IO"]["used"] >= 10      # clock, UART, eight LEDs
