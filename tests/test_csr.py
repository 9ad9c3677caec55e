"""The CSR block against its register map (amaranth.sim), and the rendered maps."""

import json
import re

import pytest
from amaranth.sim import Simulator

from attenio import preset
from attenio.gen.regmap import regmap_c_header, regmap_markdown, write_regmap
from attenio.hdl.csr import READ_BANK, CSRBlock
from attenio.plan import make_plan
from attenio.regmap import Access, ErrorCode, register_map

RMAP = register_map(make_plan(preset("small")))


async def axil_write(ctx, bus, addr, value, strb=0xF):
    ctx.set(bus.awaddr, addr)
    ctx.set(bus.wdata, value)
    ctx.set(bus.wstrb, strb)
    ctx.set(bus.awvalid, 1)
    ctx.set(bus.wvalid, 1)
    ctx.set(bus.bready, 1)
    await ctx.tick().until(bus.awready)
    ctx.set(bus.awvalid, 0)
    ctx.set(bus.wvalid, 0)
    await ctx.tick().until(bus.bvalid)
    resp = ctx.get(bus.bresp)
    await ctx.tick()
    ctx.set(bus.bready, 0)
    return resp


async def axil_read_timed(ctx, bus, addr):
    """(cycles, rdata, rresp) of a read; cycles counts the AR handshake's as the first and
    R's as the last."""
    ctx.set(bus.araddr, addr)
    ctx.set(bus.arvalid, 1)
    ctx.set(bus.rready, 1)
    await ctx.tick().until(bus.arready)
    ctx.set(bus.arvalid, 0)
    cycles = 1
    while not ctx.get(bus.rvalid):
        await ctx.tick()
        cycles += 1
    value, resp = ctx.get(bus.rdata), ctx.get(bus.rresp)
    await ctx.tick()
    ctx.set(bus.rready, 0)
    return cycles, value, resp


async def axil_read(ctx, bus, addr):
    return (await axil_read_timed(ctx, bus, addr))[1:]


def run(testbench):
    dut = CSRBlock(RMAP)
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def bench(ctx):
        await testbench(ctx, dut)
    sim.add_testbench(bench)
    sim.run()


def test_rw_registers_hold_what_is_written_byte_by_byte():
    async def tb(ctx, dut):
        bus = dut.s_axil
        assert await axil_write(ctx, bus, RMAP["SEQ_LEN"].offset, 0x12345678) == 0
        assert ctx.get(dut.seq_len) == 0x12345678
        assert await axil_read(ctx, bus, RMAP["SEQ_LEN"].offset) == (0x12345678, 0)
        await axil_write(ctx, bus, RMAP["SEQ_LEN"].offset, 0xAABBCCDD, strb=0b0101)
        assert ctx.get(dut.seq_len) == 0x12BB56DD
        assert await axil_read(ctx, bus, RMAP["HEADS"].offset) == (1, 0)   # reset value
        assert await axil_read(ctx, bus, RMAP["Q_ROW_STRIDE"].offset) == (16, 0)
    run(tb)


def test_constants_counters_and_errors():
    async def tb(ctx, dut):
        bus = dut.s_axil
        assert await axil_read(ctx, bus, RMAP["HEAD_DIM"].offset) == (16, 0)
        assert await axil_read(ctx, bus, RMAP["BLOCK_ROWS"].offset) == (make_plan(preset("small")).a, 0)
        ctx.set(dut.cycles, 0x1_2345_6789)
        assert await axil_read(ctx, bus, RMAP["CYCLES"].offset) == (0x2345_6789, 0)
        ctx.set(dut.cycles, 0x2_0000_0000)   # carries between the two reads
        assert await axil_read(ctx, bus, RMAP["CYCLES"].offset + 4) == (1, 0)
        ctx.set(dut.error, ErrorCode.MISALIGNED)
        assert await axil_read(ctx, bus, RMAP["ERROR"].offset) == (ErrorCode.MISALIGNED, 0)
        assert (await axil_read(ctx, bus, 0xFFC))[1] == 0b10          # unmapped: SLVERR
        assert await axil_write(ctx, bus, 0xFFC, 1) == 0b10
        assert await axil_write(ctx, bus, RMAP["HEAD_DIM"].offset, 3) == 0b10   # constant
        assert await axil_read(ctx, bus, RMAP["HEAD_DIM"].offset) == (16, 0)
    run(tb)


def test_every_word_reads_three_cycles_after_its_ar():
    """Every mapped word through both levels of the read multiplexer (each READ_BANK bank,
    every slot of it), written with a distinct value where it is RW, answers OKAY with that
    value on the third cycle counting its AR's as the first; an unmapped word inside a mapped bank and one
    past every bank answer SLVERR with zeros, on the same cycle."""
    words = {r.offset // 4 + w: (r, w) for r in RMAP for w in range(r.words)}
    assert len({i // READ_BANK for i in words}) > 1                 # several banks
    gap = next(i for i in range(max(words)) if i not in words)      # unmapped, in a bank
    names = {i: f"{r.name}[{w}]" for i, (r, w) in words.items()}

    async def tb(ctx, dut):
        bus = dut.s_axil
        expect = {}
        for i, (r, w) in words.items():
            if r.access is Access.RW:
                assert await axil_write(ctx, bus, 4 * i, 0x0101_0000 * i + 7) == 0
                expect[i] = 0x0101_0000 * i + 7
            elif r.access is Access.CONST:
                expect[i] = (r.value >> (32 * w)) & 0xFFFF_FFFF
        for i in words:
            cycles, value, resp = await axil_read_timed(ctx, bus, 4 * i)
            assert (cycles, resp) == (3, 0), names[i]
            if i in expect:
                assert value == expect[i], names[i]
        for i in (gap, (1 << (RMAP.addr_width - 2)) - 1):
            assert await axil_read_timed(ctx, bus, 4 * i) == (3, 0, 0b10)
    run(tb)


def test_scale_table_window_is_written_read_and_served_to_the_hardware(rng):
    """SCALE_C_TABLE: each entry written (byte strobes too) reads back OKAY on the third
    cycle, and the hardware's port gives it a cycle after its address; the word past the
    window is unmapped."""
    w = RMAP.window("SCALE_C_TABLE")
    picks = sorted({0, w.entries - 1, *map(int, rng.integers(0, w.entries, 6))})
    values = {i: int(rng.integers(0, 2 ** 32)) for i in picks}

    async def tb(ctx, dut):
        bus = dut.s_axil
        for i, v in values.items():
            assert await axil_write(ctx, bus, RMAP.offset(f"SCALE_C_TABLE[{i}]"), v) == 0
        assert await axil_write(ctx, bus, w.offset + 4 * picks[0], 0xAABBCCDD, strb=0b1010) == 0
        values[picks[0]] = values[picks[0]] & 0x00FF00FF | 0xAA00CC00
        for i, v in values.items():
            assert await axil_read_timed(ctx, bus, w.offset + 4 * i) == (3, v, 0), i
            ctx.set(dut.scale_c_table_addr, i)
            await ctx.tick()
            assert ctx.get(dut.scale_c_table_data) == v, i
        end = w.offset + 4 * w.entries
        assert await axil_read_timed(ctx, bus, end) == (3, 0, 0b10)
        assert await axil_write(ctx, bus, end, 1) == 0b10
    run(tb)


def test_window_entries_are_named_and_bounded():
    w = RMAP.window("SCALE_C_TABLE")
    assert RMAP.offset("SCALE_C_TABLE[3]") == w.offset + 12
    assert RMAP.offset("SCALE_C") == RMAP["SCALE_C"].offset
    with pytest.raises(KeyError, match=f"SCALE_C_TABLE\\[{w.entries}\\]: SCALE_C_TABLE has "
                                       f"{w.entries} entries"):
        RMAP.offset(f"SCALE_C_TABLE[{w.entries}]")
    from attenio.regmap import Window
    with pytest.raises(ValueError, match="^window T: 8 entries at 0x404 are not a power of two "
                                         "aligned to their size$"):
        Window("T", 0x404, 8, "t")


@pytest.mark.parametrize("offset, entries", [(0x400, READ_BANK // 2), (0x020, READ_BANK),
                                             (0x0C0, 2 * READ_BANK)])
def test_a_window_must_fill_read_banks_of_its_own(offset, entries):
    """A window answers as whole banks of the read multiplexer: half a bank, a bank
    misaligned, or a bank shared with registers is refused."""
    from attenio.regmap import RegisterMap, Window
    import gc
    import warnings

    from amaranth.hdl import UnusedElaboratable
    rmap = RegisterMap(registers=RMAP.registers, windows=(Window("T", offset, entries, "t"),))
    with warnings.catch_warnings():     # the refused block is never elaborated
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ValueError, match=f"^CSRBlock: window T must fill whole read banks "
                                             f"of {READ_BANK} words of its own$") as info:
            CSRBlock(rmap)
        del info
        gc.collect()


def test_start_is_a_one_cycle_pulse():
    async def tb(ctx, dut):
        bus = dut.s_axil
        seen = 0
        ctx.set(bus.awaddr, RMAP["CTRL"].offset)
        ctx.set(bus.wdata, 1)
        ctx.set(bus.wstrb, 0xF)
        ctx.set(bus.awvalid, 1)
        ctx.set(bus.wvalid, 1)
        ctx.set(bus.bready, 1)
        for _ in range(6):
            await ctx.tick()
            ctx.set(bus.awvalid, 0)
            ctx.set(bus.wvalid, 0)
            seen += ctx.get(dut.ctrl)
        assert seen == 1
        assert await axil_read(ctx, bus, RMAP["CTRL"].offset) == (0, 0)
    run(tb)


def test_register_map_is_consistent():
    offsets = [(r.offset, r.offset + 4 * r.words) for r in RMAP]
    for (a0, a1), (b0, _) in zip(sorted(offsets), sorted(offsets)[1:]):
        assert a1 <= b0, "registers overlap"
    assert all(r.offset % 4 == 0 for r in RMAP)
    assert all(r.offset % 8 == 0 for r in RMAP if r.width == 64)
    names = [r.name for r in RMAP]
    for needed in ("CTRL", "STATUS", "ERROR", "SEQ_LEN", "HEADS", "SCALE_C", "Q_BASE", "O_HEAD_STRIDE",
                   "CYCLES", "PE_BUSY", "EXP_BUSY", "MEM_STALL", "BYTES_READ", "BYTES_WRITTEN"):
        assert needed in names


def test_rendered_maps_carry_every_register(tmp_path):
    paths = write_regmap(RMAP, tmp_path)
    data = json.loads(paths["json"].read_text())
    assert [r["name"] for r in data["registers"]] == [r.name for r in RMAP]
    header = regmap_c_header(RMAP)
    for r in RMAP:
        m = re.search(rf"#define ATTENIO_{r.name}_OFFSET 0x([0-9A-F]+)u", header)
        assert m and int(m.group(1), 16) == r.offset
        if r.access is Access.CONST:
            assert f"#define ATTENIO_{r.name}_VALUE {r.value}u" in header
    assert [w["name"] for w in data["windows"]] == ["SCALE_C_TABLE"]
    w = RMAP.window("SCALE_C_TABLE")
    assert f"#define ATTENIO_SCALE_C_TABLE_OFFSET 0x{w.offset:03X}u" in header
    assert f"#define ATTENIO_SCALE_C_TABLE_ENTRIES {w.entries}u" in header
    md = regmap_markdown(RMAP)
    assert md.count("\n| 0x") == len(RMAP.registers) + len(RMAP.windows)
    assert f"| 0x{w.offset:03X} | SCALE_C_TABLE[0..{w.entries - 1}] | rw |" in md


def test_header_compiles(tmp_path):
    import shutil
    import subprocess
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler on this machine to compile the generated header")
    (tmp_path / "attenio_regs.h").write_text(regmap_c_header(RMAP))
    (tmp_path / "t.c").write_text('#include "attenio_regs.h"\n'
                                  "int main(void) { return ATTENIO_CYCLES_HI_OFFSET == 0x104u && "
                                  "ATTENIO_SCALE_C_TABLE_ENTRY_OFFSET(3) == 0x40Cu ? 0 : 1; }\n")
    subprocess.run([cc, "-Wall", "-Werror", "-o", str(tmp_path / "t"), str(tmp_path / "t.c")],
                   check=True)
    assert subprocess.run([str(tmp_path / "t")]).returncode == 0
