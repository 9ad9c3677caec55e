"""The controller's checks of a run's configuration and its end of run (amaranth.sim)."""

import pytest
from amaranth.sim import Simulator

from attenio.hdl.controller import Controller
from attenio.regmap import ErrorCode

GOOD = {"seq_len": 64, "heads": 2, "base": 0x1000, "head_stride": 1024, "row_stride": 16}


def simulate(run, body):
    dut = Controller(addr_width=32, max_seq_len=256, beat_bytes=8)

    async def tb(ctx):
        ctx.set(dut.run.seq_len, run["seq_len"])
        ctx.set(dut.run.heads, run["heads"])
        for t in ("q", "k", "v", "o"):
            for f in ("base", "head_stride", "row_stride"):
                ctx.set(getattr(getattr(dut.run, t), f), run.get(f"{t}_{f}", run[f]))
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        await body(ctx, dut)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()


@pytest.mark.parametrize("change, code", [
    ({"seq_len": 0}, ErrorCode.SEQ_LEN_ZERO),
    ({"seq_len": 257}, ErrorCode.SEQ_LEN_TOO_LARGE),
    ({"heads": 0}, ErrorCode.HEADS_ZERO),
    ({"k_base": 0x1004}, ErrorCode.MISALIGNED),
    ({"o_row_stride": 20}, ErrorCode.MISALIGNED),
    ({"v_head_stride": 1025}, ErrorCode.MISALIGNED),
])
def test_bad_runs_end_at_once_with_their_code_and_start_nothing(change, code):
    async def body(ctx, dut):
        for _ in range(5):
            assert not ctx.get(dut.seq_start) and not ctx.get(dut.dma_clear)
            await ctx.tick()
        assert ctx.get(dut.done) and not ctx.get(dut.busy)
        assert ctx.get(dut.error) == code
    simulate({**GOOD, **change}, body)


def test_good_run_counts_and_ends_when_writes_finish():
    async def body(ctx, dut):
        for _ in range(2):                # CHECK, DECIDE
            assert ctx.get(dut.busy) and not ctx.get(dut.done) and not ctx.get(dut.seq_start)
            await ctx.tick()
        assert ctx.get(dut.busy) and not ctx.get(dut.done)
        assert ctx.get(dut.seq_start)     # LAUNCH
        await ctx.tick()
        assert not ctx.get(dut.seq_start)
        for cyc in range(20):
            ctx.set(dut.pe_active, cyc % 2)
            ctx.set(dut.exp_active, cyc % 4 == 0)
            ctx.set(dut.starved, cyc % 4 in (2, 3))   # stalls only where nothing computes
            ctx.set(dut.finished, cyc == 19)
            await ctx.tick()
        ctx.set(dut.finished, 0)
        assert ctx.get(dut.done) and not ctx.get(dut.busy) and ctx.get(dut.error) == 0
        assert ctx.get(dut.pe_busy) == 10 and ctx.get(dut.exp_busy) == 5
        assert ctx.get(dut.mem_stall) == 5
        assert ctx.get(dut.cycles) == 21
    simulate(GOOD, body)


def test_axi_error_is_reported_at_the_end():
    async def body(ctx, dut):
        await ctx.tick().repeat(3)
        ctx.set(dut.dma_error.read, 1)
        ctx.set(dut.finished, 1)
        await ctx.tick()
        await ctx.tick()
        assert ctx.get(dut.done) and ctx.get(dut.error) == ErrorCode.AXI_READ
    simulate(GOOD, body)
