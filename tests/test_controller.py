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
        ctx.set(dut.run.kv_len, run.get("kv_len", 0))
        ctx.set(dut.run.group, run.get("group", 1))
        ctx.set(dut.run.causal, run.get("causal", 0))
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
    ({"kv_len": 257}, ErrorCode.KV_LEN_TOO_LARGE),
    ({"kv_len": 63, "causal": 1}, ErrorCode.CAUSAL_KV_SHORT),
    ({"seq_len": 200, "causal": 1, "kv_len": 199}, ErrorCode.CAUSAL_KV_SHORT),
    ({"group": 0}, ErrorCode.HEAD_GROUP_ZERO),
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


@pytest.mark.parametrize("kv_len, causal, resolved", [
    (0, 0, 64), (0, 1, 64), (1, 0, 1), (256, 0, 256), (65, 1, 65)])
def test_kv_len_zero_is_seq_len_and_good_kv_lens_launch(kv_len, causal, resolved):
    """KV_LEN = 0 (its reset) is SEQ_LEN, so drivers that never write it run as before; any
    N_kv up to the maximum is served (causal: from N up)."""
    async def body(ctx, dut):
        await ctx.tick().repeat(2)                # CHECK, DECIDE
        assert ctx.get(dut.seq_start) and ctx.get(dut.error) == 0
        assert ctx.get(dut.seq_run.kv_len) == resolved
        assert ctx.get(dut.seq_run.seq_len) == 64
    simulate({**GOOD, "kv_len": kv_len, "causal": causal}, body)
