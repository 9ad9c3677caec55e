"""The board: the host script round-trips data through the simulated board top.

`attenio_board` (accelerator + block-RAM AXI memory + UART bridge) runs on
Verilator; the host code that drives the real ULX3S speaks to it through a
simulated UART peer, and O must equal the golden model bit for bit. The ULX3S
top's PLL settings and its prepared build (Yosys script, LPF) are checked
without the tools; the bitstream itself is a slow test.
"""

import json
import struct
from fractions import Fraction
from pathlib import Path

import pytest
from amaranth.hdl import Fragment
from amaranth.sim import Simulator

from amaranth_sim import run_clocked
from attenio.errors import ConfigError
from attenio.formats import FLOAT_FORMATS, FORMAT_TABLE
from attenio.gen.board import (BOARD_LUT_MUL_WIDTH, board_floorplan, build_bitstream,
                               emit_board, prepare_board)
from attenio.hdl.axi_ram import AXIRam
from attenio.hdl.board import CMD, OSC_HZ, STATUS, UARTBridge, board_memory_bytes
from attenio.hdl.ecp5_pll import ecp5_pll
from attenio.hdl.uart import UART
from attenio.plan import make_plan
from attenio.regmap import Access
from attenio.config import resolve
from attenio.sim.host import Layout
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

    run_clocked(m, bench)
    assert got == data


def test_bridge_answers_ping_and_unknown_commands(seed):
    """amaranth.sim: the bridge's command decode, byte for byte: a ping answers OK, any
    other byte that is no command answers '?', and the bridge takes the next command."""
    import random
    rng = random.Random(seed)
    unknown = rng.choice(sorted(set(range(256)) - set(CMD.values())))
    print(f"unknown command byte {unknown:#04x}")
    dut = UARTBridge(csr_addr_width=8)
    got = []

    async def bench(ctx):
        ctx.set(dut.tx.ready, 1)
        for byte in (CMD["ping"], unknown, CMD["ping"]):
            ctx.set(dut.rx.payload, byte)
            ctx.set(dut.rx.valid, 1)
            await ctx.tick().until(dut.rx.ready)
            ctx.set(dut.rx.valid, 0)
            *_, payload = await ctx.tick().sample(dut.tx.payload).until(dut.tx.valid)
            got.append(payload)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run_until(1e-6)
    assert got == [STATUS["ok"], STATUS["unknown"], STATUS["ok"]]


@pytest.mark.parametrize("mhz, divs", [(25, (1, 1, 24)), (60, (5, 12, 10)), (65, (5, 13, 9)),
                                        (100, (1, 4, 6)), (67, (3, 8, 9))])
def test_pll_settings(mhz, divs):
    """The dividers of the asked clock; the VCO inside 400..800 MHz, nearest its middle."""
    s = ecp5_pll(OSC_HZ, mhz * 1_000_000)
    assert (s.clki_div, s.clkfb_div, s.clkop_div) == divs
    assert s.fout_hz == Fraction(OSC_HZ * s.clkfb_div, s.clki_div)
    assert abs(s.fout_hz - mhz * 1_000_000) <= mhz * 10_000         # 1%: 67 -> 66.667 MHz
    assert s.fvco_hz == s.fout_hz * s.clkop_div and 400e6 <= s.fvco_hz <= 800e6
    assert OSC_HZ / s.clki_div >= 3.125e6                            # the phase detector's floor
    assert s.clkop_cphase == s.clkop_div // 2


def test_pll_refuses_what_it_cannot_make():
    with pytest.raises(ValueError, match="makes 10 to 400 MHz, not 5 MHz"):
        ecp5_pll(OSC_HZ, 5_000_000)
    with pytest.raises(ValueError, match="makes 10 to 400 MHz, not 401 MHz"):
        ecp5_pll(OSC_HZ, 401_000_000)
    with pytest.raises(ValueError, match=r"cannot make 12 MHz from 25 MHz within 1%; "
                                         r"the nearest it makes are 10\.714 and 12\.500 MHz"):
        ecp5_pll(OSC_HZ, 12_000_000)


def test_board_build_prepared(tmp_path):
    """The ULX3S top as the tools get it: the PLL instance, its input's constraint, the
    narrow products in LUTs before synth_ecp5, the UART divisor of the PLL's clock, the
    UART's own reset register."""
    plan, board = prepare_board(resolve(**TINY), tmp_path, clock_mhz=60)
    assert board.divisor == round(60e6 / 115200) == 521
    il = (tmp_path / "attenio_ulx3s.il").read_text()
    pll = il[il.index("cell \\EHXPLLL"):]
    pll = pll[:pll.index("end\n")]
    for line in ("parameter \\CLKI_DIV 5", "parameter \\CLKFB_DIV 12", "parameter \\CLKOP_DIV 10",
                 'parameter \\FEEDBK_PATH "CLKOP"', "connect \\CLKFB \\clk_out"):
        assert line in pll, line
    # the wide partial products are MULT18X18D instances with their registers
    dsps = il.split("cell \\MULT18X18D ")[1:]
    assert dsps and all('parameter \\REG_OUTPUT_CLK "CLK0"' in d[:d.index("end\n")]
                        for d in dsps)
    assert any('parameter \\REG_INPUTA_CLK "CLK0"' in d[:d.index("end\n")] for d in dsps)
    # the UART and its bridge take their reset from a flip-flop of their own (`host_rst`),
    # not from the register every other unit shares
    for unit in ("uart", "bridge"):
        cell = il[il.index(f"cell \\attenio_ulx3s.core.{unit} \\{unit}\n"):]
        assert "connect \\host_rst \\host_rst [0]\n" in cell[:cell.index("end\n")], unit
    assert "connect \\Q \\host_rst\n" in il
    # the shared reset leaves the PLL's synchronizer through a register of its own: in the
    # top, a flip-flop drives `rst`, and the synchronizer's domain resets it
    top = il[il.index("module \\attenio_ulx3s\n"):]
    top = top[:top.index("\nend\n")]
    assert "connect \\Q \\rst\n" in top and "switch \\sync_rst_rst [0]\n" in top
    lpf = (tmp_path / "attenio_ulx3s.lpf").read_text()
    assert 'FREQUENCY PORT "clk25_0__io" 25000000.0 HZ;' in lpf
    ys = [line.strip() for line in (tmp_path / "attenio_ulx3s.ys").read_text().splitlines()]
    booth = ys.index("booth t:$mul r:A_WIDTH<=8 %i r:B_WIDTH<=16 %i "
                     "t:$mul r:B_WIDTH<=8 %i r:A_WIDTH<=16 %i %u")
    synth = next(i for i, line in enumerate(ys) if line.startswith("synth_ecp5"))
    assert ys.index("read_rtlil attenio_ulx3s.il") < ys.index("wreduce") < booth < synth
    with pytest.raises(ConfigError, match="board: ecp5_pll: the ECP5 PLL cannot make 12 MHz"):
        prepare_board(resolve(**TINY), tmp_path, clock_mhz=12)


def test_board_builds_its_narrow_products_at_the_board_width_in_every_format(tmp_path):
    """Without a LUT width the board takes `BOARD_LUT_MUL_WIDTH` (8) in a float format too,
    not `attenio synth`'s 6: the fp16 2x2 board routes at 8 and did not at 6. A width given
    is taken."""
    def booth_line(lut_mul_width=None):
        prepare_board(resolve(**TINY, format_name="fp16"), tmp_path, clock_mhz=60,
                      lut_mul_width=lut_mul_width)
        ys = (tmp_path / "attenio_ulx3s.ys").read_text()
        return next(line.strip() for line in ys.splitlines() if line.strip().startswith("booth"))
    assert BOARD_LUT_MUL_WIDTH == 8
    assert booth_line() == ("booth t:$mul r:A_WIDTH<=8 %i r:B_WIDTH<=16 %i "
                            "t:$mul r:B_WIDTH<=8 %i r:A_WIDTH<=16 %i %u")
    assert booth_line(6) == ("booth t:$mul r:A_WIDTH<=6 %i r:B_WIDTH<=12 %i "
                             "t:$mul r:B_WIDTH<=6 %i r:A_WIDTH<=12 %i %u")


def test_board_pins_the_dsps_in_a_float_format_and_refuses_an_unknown_floorplan(tmp_path):
    """A float board's DSPs are pinned by default (left to HeAP, the fp16 2x2 board did not
    route), int8's left to the placer; a floorplan not in `FLOORPLANS` is refused before
    anything is built."""
    assert [board_floorplan(resolve(**TINY, format_name=f.name)) for f in FORMAT_TABLE] == [
        "dsp" if f.name in FLOAT_FORMATS else "none" for f in FORMAT_TABLE]
    with pytest.raises(ConfigError, match="board: floorplan must be one of"):
        build_bitstream(resolve(**TINY), tmp_path, floorplan="diagonal", log=lambda s: None)
    assert not any(tmp_path.iterdir())


class _RegisterFile:
    """A link that answers the protocol's CSR reads from `values` (by offset), like a board."""

    def __init__(self, values):
        self.values, self.replies = values, bytearray()

    async def send(self, data):
        assert data[0] == CMD["csr_read"] and len(data) == 3, data
        (offset,) = struct.unpack("<H", data[1:])
        self.replies += struct.pack("<IB", self.values[offset], STATUS["ok"])

    async def recv(self, n):
        out, self.replies = bytes(self.replies[:n]), self.replies[n:]
        return out


def test_host_checks_the_hardware():
    """The host script refuses a board built with another mapping, naming what differs."""
    import asyncio
    import dataclasses

    from attenio.config import preset
    from attenio.regmap import register_map
    from attenio.sim.host import AttenIOHost, HostError

    small = preset("small")
    built, asked = (register_map(make_plan(dataclasses.replace(small, split=s, rows_per_mac=r)))
                    for s, r in ((4, 8), (4, 9)))
    board = _RegisterFile({r.offset: r.value for r in built if r.access is Access.CONST})
    hw = asyncio.run(AttenIOHost(board, built).check_hardware())
    assert hw["BLOCK_ROWS"] == 32 and hw["HEAD_DIM"] == 16
    with pytest.raises(HostError, match=r"built for another configuration: BLOCK_ROWS 32 "
                                        r"\(expected 36\), ROWS_PER_MAC 8 \(expected 9\)$"):
        asyncio.run(AttenIOHost(board, asked).check_hardware())


def _host_script_run(config, name, seed, *, n, d, heads, format_name="int8", divisor=DIVISOR,
                     quick_build=False, head_scales=False):
    """The host code over the simulated UART (`divisor` cycles a bit) into `attenio_board`
    of `config` in format `format_name`; checks O bit for bit and the bytes moved, at the
    format's widths. `quick_build`: a -O0 model, for a run short enough that its build
    dominates. `head_scales`: a scale a head, each head's c in SCALE_C_TABLE."""
    config = {**config, "format_name": format_name}
    resolved = resolve(**config)
    fmt = resolved.format
    build = Path("build") / "tests" / name
    build.mkdir(parents=True, exist_ok=True)
    verilog = emit_board(resolved, build, divisor=divisor)
    results = (build / "results.json").resolve()
    results.unlink(missing_ok=True)
    run_bench(simulator="verilator", verilog_sources=[verilog], toplevel="attenio_board",
              module="attenio.sim.benches.bench_board", build_dir=build / "verilator",
              quick_build=quick_build,
              params={"config": config, "divisor": divisor, "seed": seed % 1000,
                      "results": str(results), "head_scales": head_scales})
    r = json.loads(results.read_text())
    o_bytes = heads * n * d * fmt.out_bytes
    assert r["format"] == format_name
    assert r["mismatches"] == 0 and r["o_hex"] == r["expect_hex"]
    assert len(r["o_hex"]) == 2 * o_bytes
    assert r["counters"]["BYTES_READ"] == r["plan_read_bytes"] > 0
    assert r["counters"]["BYTES_WRITTEN"] == r["plan_write_bytes"] == o_bytes
    assert r["counters"]["CYCLES"] > 0
    assert r["bytes_sent"] > 3 * heads * n * d * fmt.element_bytes
    assert r["bytes_received"] >= o_bytes
    return r


@pytest.mark.skipif(not simulator_available("verilator"), reason="verilator is not installed")
@pytest.mark.parametrize("head_scales", [False, True])
def test_host_script_through_simulated_board(seed, head_scales):
    """int8, one scale a tensor (SCALE_C) or a head (SCALE_C_TABLE, MODE.HEAD_SCALES)."""
    r = _host_script_run(TINY, "board_tiny", seed, n=16, d=8, heads=2, quick_build=True,
                         head_scales=head_scales)
    assert len(set(r["head_c"])) == (2 if head_scales else 1)


@pytest.mark.skipif(not simulator_available("verilator"), reason="verilator is not installed")
@pytest.mark.parametrize("format_name", [pytest.param(name, marks=() if name == "fp16" else
                                                     pytest.mark.slow)
                                         for name in FLOAT_FORMATS])
def test_host_script_through_simulated_float_board(format_name, seed):
    """The same tiny board in a float format (fp16 in the default suite): Q, K, V in its
    encoding, SCALE_C an fp32, O in its `out` format (fp8's bf16), bit for bit equal to the
    float golden model. The UART at its shortest bit (4 cycles): the simulated cycles are
    nearly all UART bits, twice int8's bytes in fp16."""
    _host_script_run(TINY, f"board_tiny_{format_name}", seed, n=16, d=8, heads=2,
                     format_name=format_name, divisor=4, quick_build=True)


@pytest.mark.parametrize("row", FORMAT_TABLE, ids=lambda row: row.name)
def test_host_layout_counts_each_tensor_at_its_width(row):
    """The host's memory layout: Q, K and V at the format's element width, O at its `out`
    format's (fp8's bf16), packed from 0 into the board's block RAM."""
    plan = make_plan(resolve(**TINY, format_name=row.name))
    fmt = plan.config.format
    lay = Layout(heads=2, seq_len=16, head_dim=8, element_bytes=fmt.element_bytes,
                 out_bytes=fmt.out_bytes)
    e, o = row.element_bits // 8, row.out_row.element_bits // 8
    assert lay.row_stride == {"Q": 8 * e, "K": 8 * e, "V": 8 * e, "O": 8 * o}
    assert lay.head_stride == {t: 16 * rs for t, rs in lay.row_stride.items()}
    assert lay.base == {"Q": 0, "K": 256 * e, "V": 512 * e, "O": 768 * e}
    assert lay.total == 256 * (3 * e + o) <= board_memory_bytes(plan)


@pytest.mark.slow
@pytest.mark.skipif(not simulator_available("verilator"), reason="verilator is not installed")
def test_host_script_through_simulated_small_board(seed):
    """The design `make bitstream` builds (the small preset, 4x4 MACs, with the planner's
    mapping as the board build plans it) under the host script; a few minutes."""
    from attenio.options import planned_config
    planned = planned_config(resolve(preset_name="small"))
    config = dict(preset_name="small", name="board_small", split=planned.split,
                  rows_per_mac=planned.rows_per_mac)
    r = _host_script_run(config, "board_small", seed, n=256, d=16, heads=1)
    assert r["counters"]["PE_BUSY"] > 0


@pytest.mark.slow
def test_bitstream_builds():
    """The whole ULX3S 85F build (Yosys, nextpnr, ecppack) of a tiny board at 50 MHz from
    the PLL; tens of minutes."""
    from attenio.gen.board import build_bitstream
    out = Path("build") / "tests" / "bitstream_tiny"
    r = build_bitstream(resolve(**TINY), out, clock_mhz=50)
    bit = Path(r["bitstream"])
    assert bit.exists() and bit.stat().st_size == r["bitstream_bytes"] > 100_000
    assert bit.read_bytes()[:4] != b"\0\0\0\0"
    assert r["clock_mhz"] == 50 and r["pll"]["clkfb_div"] * 25 == 50 * r["pll"]["clki_div"]
    # nextpnr timed the design at the PLL's clock, derived from the oscillator's 25 MHz.
    assert list(r["nextpnr"]["derived_clocks_mhz"].values()) == [50.0]
    assert r["timing_met"] and r["fmax_mhz"] >= 50
    res = r["resources"]
    assert res["DSP"] <= 156 and res["BRAM"] >= 1 and res["LUT"] > 1000
    pnr = r["nextpnr"]["utilization"]
    assert pnr["TRELLIS_IO"]["used"] >= 10      # clock, UART, eight LEDs
    assert pnr["EHXPLLL"]["used"] == 1
