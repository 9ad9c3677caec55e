"""The controller's checks of a run's configuration and its end of run (amaranth.sim)."""

import pytest

from amaranth_sim import run_clocked
from attenio.analysis import block_count, block_range
from attenio.hdl.controller import Controller
from attenio.hdl.sequencer import run_setup
from attenio.regmap import SCALE_TABLE_ENTRIES, ErrorCode, pack_descriptor

GOOD = {"seq_len": 64, "heads": 2, "base": 0x1000, "head_stride": 1024, "row_stride": 16}


def simulate(run, body, block_rows=32):
    dut = Controller(addr_width=32, max_seq_len=256, beat_bytes=8, block_rows=block_rows)

    async def tb(ctx):
        ctx.set(dut.run.seq_len, run["seq_len"])
        ctx.set(dut.run.heads, run["heads"])
        ctx.set(dut.run.kv_len, run.get("kv_len", 0))
        ctx.set(dut.run.group, run.get("group", 1))
        ctx.set(dut.run.causal, run.get("causal", 0))
        ctx.set(dut.run.grouped, run.get("grouped", 0))
        ctx.set(dut.run.head_scales, run.get("head_scales", 0))
        ctx.set(dut.run.scale_c, run.get("scale_c", 0x3E00_0000))
        ctx.set(dut.block_first, run.get("block_first", 0))
        ctx.set(dut.block_count, run.get("block_count", 0))
        for t in ("q", "k", "v", "o"):
            for f in ("base", "head_stride", "row_stride"):
                ctx.set(getattr(getattr(dut.run, t), f), run.get(f"{t}_{f}", run[f]))
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        await body(ctx, dut)

    run_clocked(dut, tb)


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
    ({"group": 256}, ErrorCode.HEAD_GROUP_TOO_LARGE),
    ({"group": 256, "grouped": 1}, ErrorCode.HEAD_GROUP_TOO_LARGE),
    ({"group": 33, "grouped": 1}, ErrorCode.GROUP_OVER_BLOCK),
    ({"heads": SCALE_TABLE_ENTRIES + 1, "head_scales": 1}, ErrorCode.SCALE_TABLE_SHORT),
    ({"heads": 2 * SCALE_TABLE_ENTRIES, "group": 2, "grouped": 1, "head_scales": 1},
     ErrorCode.SCALE_TABLE_SHORT),
])
def test_bad_runs_end_at_once_with_their_code_and_start_nothing(change, code):
    async def body(ctx, dut):
        for _ in range(dut.check_cycles):       # LATCH, CHECK, DECIDE
            assert ctx.get(dut.busy) and not ctx.get(dut.done)
            assert not ctx.get(dut.seq_start) and not ctx.get(dut.dma_clear)
            await ctx.tick()
        for _ in range(3):
            assert ctx.get(dut.done) and not ctx.get(dut.busy)
            assert not ctx.get(dut.seq_start) and not ctx.get(dut.dma_clear)
            assert ctx.get(dut.error) == code
            await ctx.tick()
    simulate({**GOOD, **change}, body)


async def until_launch(ctx, dut):
    """LATCH, CHECK, DECIDE and the setup: busy, and nothing started or counted."""
    for _ in range(dut.check_cycles + dut.setup_cycles()):
        assert ctx.get(dut.busy) and not ctx.get(dut.done) and not ctx.get(dut.seq_start)
        assert ctx.get(dut.cycles) == 0
        await ctx.tick()


def test_good_run_counts_and_ends_when_writes_finish():
    async def body(ctx, dut):
        await until_launch(ctx, dut)
        assert ctx.get(dut.busy) and not ctx.get(dut.done)
        assert ctx.get(dut.seq_start) and ctx.get(dut.seq_start_w)     # LAUNCH, both copies
        await ctx.tick()
        assert not ctx.get(dut.seq_start) and not ctx.get(dut.seq_start_w)
        for cyc in range(20):       # the strobes are low in the last cycle: the core is idle
            busy = cyc < 19
            ctx.set(dut.pe_active, busy and cyc % 2 == 0)
            ctx.set(dut.exp_active, busy and cyc % 4 == 0)
            ctx.set(dut.starved, busy and cyc % 4 in (2, 3))   # a stall where nothing computes
            ctx.set(dut.finished, cyc == 19)
            await ctx.tick()
        ctx.set(dut.finished, 0)
        assert ctx.get(dut.done) and not ctx.get(dut.busy) and ctx.get(dut.error) == 0
        assert ctx.get(dut.pe_busy) == 10 and ctx.get(dut.exp_busy) == 5
        assert ctx.get(dut.mem_stall) == 4          # cycles 3, 7, 11 and 15
        assert ctx.get(dut.cycles) == 21
    simulate(GOOD, body)


@pytest.mark.parametrize("heads, head_scales", [(SCALE_TABLE_ENTRIES, 1),
                                                (SCALE_TABLE_ENTRIES + 1, 0)])
def test_a_run_within_the_scale_table_or_without_it_launches_with_its_c(heads, head_scales):
    """The table holds SCALE_TABLE_ENTRIES heads; without MODE.HEAD_SCALES any number of
    heads takes SCALE_C. The sequencers get both with the run."""
    async def body(ctx, dut):
        await until_launch(ctx, dut)
        assert ctx.get(dut.seq_start) and ctx.get(dut.error) == 0
        assert ctx.get(dut.seq_run.head_scales) == head_scales
        assert ctx.get(dut.seq_run.scale_c) == 0x3E12_3456
    simulate({**GOOD, "heads": heads, "head_scales": head_scales, "scale_c": 0x3E12_3456}, body)


def test_axi_error_is_reported_at_the_end():
    async def body(ctx, dut):
        await until_launch(ctx, dut)
        await ctx.tick()
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
        await until_launch(ctx, dut)
        assert ctx.get(dut.seq_start) and ctx.get(dut.error) == 0
        assert ctx.get(dut.seq_run.kv_len) == resolved
        assert ctx.get(dut.seq_run.seq_len) == 64
    simulate({**GOOD, "kv_len": kv_len, "causal": causal}, body)


@pytest.mark.parametrize("heads, group, grouped, code", [
    (3, 2, 1, ErrorCode.HEADS_NOT_GROUPED), (6, 4, 1, ErrorCode.HEADS_NOT_GROUPED),
    (3, 2, 0, ErrorCode.NONE), (8, 4, 1, ErrorCode.NONE)])
def test_grouped_heads_must_be_a_multiple_of_the_group(heads, group, grouped, code):
    """MODE.GROUPED with HEADS not a multiple of HEAD_GROUP ends the run after the setup's
    division, nothing started; without the bit the last K/V head serves fewer heads."""
    async def body(ctx, dut):
        for _ in range(dut.check_cycles + dut.setup_cycles() + 1):
            assert not ctx.get(dut.seq_start) or code == ErrorCode.NONE
            if ctx.get(dut.seq_start) or ctx.get(dut.done):
                break
            await ctx.tick()
        assert ctx.get(dut.error) == code
        assert ctx.get(dut.done) == (code != ErrorCode.NONE)
        assert ctx.get(dut.seq_start) == (code == ErrorCode.NONE)
    simulate({**GOOD, "heads": heads, "group": group, "grouped": grouped}, body)


@pytest.mark.parametrize("a, n, kv_len, group, grouped, causal", [
    (32, 64, 0, 1, 0, 0), (32, 45, 45, 2, 1, 1), (32, 20, 45, 2, 1, 1), (32, 1, 70, 4, 1, 0),
    (30, 100, 130, 4, 1, 1), (7, 200, 256, 3, 1, 1), (8, 13, 20, 8, 1, 1), (1, 5, 9, 1, 1, 1),
    (32, 45, 45, 2, 0, 1), (64, 256, 256, 5, 1, 1), (5, 3, 0, 2, 0, 0)])
def test_setup_derives_the_passes_blocks_and_strides(a, n, kv_len, group, grouped, causal):
    """What the sequencers get at LAUNCH equals the twin `run_setup`: gb = g when grouped, else
    1; a_g = a div gb, a_full = gb * a_g, N mod a_g and gb times N, N_kv - N, the strides."""
    run = {**GOOD, "heads": 2 * group, "seq_len": n, "kv_len": kv_len, "group": group,
           "grouped": grouped, "causal": causal, "q_head_stride": 1024 * 3,
           "o_head_stride": 1024 * 5}
    expect = run_setup(seq_len=n, heads=run["heads"], block_rows=a, causal=bool(causal),
                       kv_len=kv_len or n,
                       group=group, grouped=bool(grouped), q_head_stride=1024 * 3,
                       o_head_stride=1024 * 5)
    if grouped:
        assert expect["a_full"] == a - a % group and expect["short"] == (group * n) % (
            expect["a_full"])

    async def body(ctx, dut):
        await until_launch(ctx, dut)
        assert ctx.get(dut.seq_start) and ctx.get(dut.error) == 0
        got = {name: ctx.get(getattr(dut.seq_run.setup, name)) for name in expect}
        assert got == expect
    simulate(run, body, block_rows=a)


@pytest.mark.parametrize("heads, group, grouped", [
    (4_000_000_011, 1, 0), (4_000_000_028, 4, 1), (4_000_000_011, 7, 0)])
def test_setup_passes_are_heads_div_gb_in_full(heads, group, grouped):
    """The sequencers count passes, HEADS div gb: a quotient of 32 bits, wider than the
    block-sized ones the same divider makes."""
    async def body(ctx, dut):
        await until_launch(ctx, dut)
        assert ctx.get(dut.seq_start) and ctx.get(dut.error) == 0
        assert ctx.get(dut.seq_run.setup.passes) == heads // (group if grouped else 1)
    simulate({**GOOD, "heads": heads, "group": group, "grouped": grouped}, body)


async def until_launch_or_done(ctx, dut, limit=2000):
    """Ticks until the controller launches or ends the run; the cycles it took."""
    for cycle in range(limit):
        if ctx.get(dut.seq_start) or ctx.get(dut.done):
            return cycle
        assert ctx.get(dut.busy) and ctx.get(dut.cycles) == 0
        await ctx.tick()
    raise AssertionError(f"no launch within {limit} cycles")


@pytest.mark.parametrize("a, n, kv_len, group, grouped, causal, first, count", [
    (32, 64, 0, 1, 0, 0, 1, 1), (32, 45, 45, 2, 1, 1, 0, 1), (32, 45, 45, 2, 1, 1, 1, 0),
    (32, 45, 50, 2, 1, 1, 1, 2), (7, 200, 256, 3, 1, 1, 30, 36), (7, 200, 256, 3, 1, 0, 99, 0),
    (5, 203, 0, 1, 0, 1, 0, 0), (5, 203, 0, 1, 0, 0, 40, 1), (5, 203, 0, 1, 0, 1, 40, 1),
    (5, 203, 0, 1, 0, 0, 3, 5), (1, 5, 9, 1, 1, 1, 4, 1), (30, 100, 130, 4, 1, 1, 7, 6),
    (30, 100, 130, 4, 0, 1, 1, 2)])
def test_a_block_range_launches_as_the_run_of_its_rows(a, n, kv_len, group, grouped, causal,
                                                       first, count):
    """Q_BLOCK_FIRST and Q_BLOCK_COUNT rewrite the run into the rows of its blocks
    (`attenio.analysis.block_range`): N, N_kv (the keys of the range's last row with the mask),
    the Q and O bases on by row0 rows, and the setup of that run, short block included."""
    gb = group if grouped else 1
    run = {**GOOD, "heads": 2 * group, "seq_len": n, "kv_len": kv_len, "group": group,
           "grouped": grouped, "causal": causal, "q_head_stride": 1024 * 3,
           "o_head_stride": 1024 * 5, "q_row_stride": 24, "o_row_stride": 40,
           "block_first": first, "block_count": count}
    r = block_range(n, a // gb, first, count, causal=bool(causal), n_kv=kv_len or n)
    expect = run_setup(seq_len=r.rows, heads=run["heads"], block_rows=a, causal=bool(causal),
                       kv_len=r.n_kv, group=group, grouped=bool(grouped),
                       q_head_stride=1024 * 3, o_head_stride=1024 * 5)

    async def body(ctx, dut):
        cycles = await until_launch_or_done(ctx, dut)
        assert ctx.get(dut.seq_start) and ctx.get(dut.error) == 0
        # the walk: a block a cycle to the range's end, a row a cycle to row0
        walk = first + count + r.row0 + 6 if first or count else 0     # none without a range
        assert cycles == dut.check_cycles + dut.setup_cycles() + walk
        got = {name: ctx.get(getattr(dut.seq_run.setup, name)) for name in expect}
        assert got == expect
        assert ctx.get(dut.seq_run.seq_len) == r.rows
        assert ctx.get(dut.seq_run.kv_len) == r.n_kv
        assert ctx.get(dut.seq_run.q.base) == 0x1000 + r.row0 * 24
        assert ctx.get(dut.seq_run.o.base) == 0x1000 + r.row0 * 40
        assert ctx.get(dut.seq_run.k.base) == 0x1000
    simulate(run, body, block_rows=a)


@pytest.mark.parametrize("a, n, causal, first, count", [
    (32, 64, 0, 2, 0), (32, 64, 0, 0, 3), (32, 64, 1, 1, 2), (32, 65, 1, 3, 0), (5, 203, 0, 41, 1),
    (5, 203, 1, 40, 2), (32, 64, 0, 2 ** 32 - 1, 0), (32, 64, 0, 1, 2 ** 32 - 1)])
def test_a_range_past_the_last_block_ends_with_block_range(a, n, causal, first, count):
    """A first block at or past the last, or a count past it, ends the run with BLOCK_RANGE
    before anything starts, as `block_range` refuses it; a huge FIRST stops at the last block."""
    with pytest.raises(Exception, match="past the last"):
        block_range(n, a, first, count, causal=bool(causal))

    async def body(ctx, dut):
        cycles = await until_launch_or_done(ctx, dut)
        assert cycles <= dut.check_cycles + dut.setup_cycles() + block_count(n, a) + 3
        assert ctx.get(dut.done) and not ctx.get(dut.seq_start)
        assert ctx.get(dut.error) == ErrorCode.BLOCK_RANGE
        await ctx.tick()
        assert not ctx.get(dut.busy) and not ctx.get(dut.seq_start)
    simulate({**GOOD, "seq_len": n, "causal": causal, "kv_len": 0, "block_first": first,
              "block_count": count}, body, block_rows=a)


def test_a_batch_refuses_a_block_range():
    """With descriptors (DESC_COUNT > 0) a range is BLOCK_RANGE_IN_BATCH at the first
    descriptor's check: a batch runs its sequences whole."""
    dut = Controller(addr_width=32, max_seq_len=256, beat_bytes=8, block_rows=32, page_rows=16)

    async def tb(ctx):
        for t in ("q", "k", "v", "o"):
            for f in ("base", "head_stride", "row_stride"):
                ctx.set(getattr(getattr(dut.run, t), f), GOOD[f])
        ctx.set(dut.run.group, 1)
        ctx.set(dut.run.table_len, 16)
        ctx.set(dut.desc_count, 1)
        ctx.set(dut.desc_base, 0x8000)
        ctx.set(dut.block_count, 1)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        for _ in range(20):
            if ctx.get(dut.desc_fetch):
                break
            await ctx.tick()
        else:
            raise AssertionError("no descriptor fetched")
        await ctx.tick()
        words = {"SEQ_LEN": 64, "KV_LEN": 64, "HEADS": 2, "Q_BASE": 0x1000, "O_BASE": 0x2000,
                 "TABLE": 0x3000, "TABLE_LEN": 16}
        ctx.set(dut.desc, int.from_bytes(pack_descriptor(**{k.lower(): v
                                                            for k, v in words.items()}),
                                         "little"))
        ctx.set(dut.desc_valid, 1)
        await ctx.tick()
        ctx.set(dut.desc_valid, 0)
        for _ in range(10):
            if ctx.get(dut.done):
                break
            assert not ctx.get(dut.seq_start)
            await ctx.tick()
        assert ctx.get(dut.done) and ctx.get(dut.error) == ErrorCode.BLOCK_RANGE_IN_BATCH
        assert not ctx.get(dut.seq_start) and ctx.get(dut.desc_index) == 0

    run_clocked(dut, tb)
