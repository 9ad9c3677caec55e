"""The DMA command sequencers against their Python twins, under random back-pressure; the
read sequencer at two score banks and more (B - 1 K rows ahead, blocks shorter than that)."""

import gc
import warnings

import pytest
from amaranth.hdl import UnusedElaboratable

from amaranth_sim import cycles_until, run_clocked
from attenio.hdl.sequencer import (Kind, ReadSequencer, WriteSequencer, read_schedule,
                                   run_setup, write_schedule)
from attenio.regmap import SCALE_TABLE_ENTRIES

ROW_BYTES = 16


def run_params(rng, seq_len, heads):
    tensors = {}
    for t in "qkvo":
        base = int(rng.integers(0, 2 ** 16)) * 8
        row_stride = ROW_BYTES * int(rng.integers(1, 3))
        tensors[t] = (base, row_stride * (seq_len + int(rng.integers(0, 3))), row_stride)
    return tensors


def set_run(ctx, port, seq_len, heads, t, causal=False, kv_len=None, group=1, grouped=False,
            block_rows=4):
    """The run as the controller hands it over: latched, KV_LEN resolved, setup derived (its
    twin `run_setup`; tests/test_controller.py holds the controller to the twin)."""
    ctx.set(port.seq_len, seq_len)
    ctx.set(port.heads, heads)
    ctx.set(port.causal, int(causal))
    # the controller resolves KV_LEN = 0 before the sequencers see it
    ctx.set(port.kv_len, seq_len if kv_len is None else kv_len)
    ctx.set(port.group, group)
    ctx.set(port.grouped, int(grouped))
    setup = run_setup(seq_len=seq_len, heads=heads, block_rows=block_rows, causal=causal,
                      kv_len=kv_len, group=group, grouped=grouped, q_head_stride=t["q"][1],
                      o_head_stride=t["o"][1])
    for name, value in setup.items():
        ctx.set(getattr(port.setup, name), value)
    for name in "qkvo":
        sub = getattr(port, name)
        ctx.set(sub.base, t[name][0])
        ctx.set(sub.head_stride, t[name][1])
        ctx.set(sub.row_stride, t[name][2])


@pytest.mark.parametrize("seq_len, heads, block_rows, causal, kv_len, group, grouped", [
    # grouped blocks: the same rows of the g heads of a group, row-major; partial blocks,
    # the causal short block first, decode, N_kv != N, a block of a = g rows
    (1, 4, 4, False, 37, 2, True), (1, 4, 8, False, 9, 4, True), (9, 4, 4, False, None, 2, True),
    (7, 4, 6, True, 19, 2, True), (13, 8, 8, True, 20, 4, True), (5, 2, 5, True, None, 2, True),
    (6, 2, 2, True, 6, 2, True), (10, 4, 8, False, 3, 4, True), (1, 4, 4, True, 64, 4, True),
    # one head a block
    (1, 1, 4, False, None, 1, False), (7, 2, 4, False, None, 1, False),
    (8, 1, 4, False, None, 1, False), (5, 3, 8, False, None, 1, False),
    # causal: the short block first, each block's keys up to its last row
    (1, 1, 4, True, None, 1, False), (7, 2, 4, True, None, 1, False),
    (8, 1, 4, True, None, 1, False), (5, 3, 8, True, None, 1, False),
    (13, 2, 3, True, None, 1, False), (64, 1, 5, True, None, 1, False),
    # N_kv apart from N: decode (one query row), cross-attention both ways, causal rows
    # aligned at the end; g query heads per K/V head, MQA, and a group that does not
    # divide the heads (the last K/V head serves fewer)
    (1, 2, 4, False, 37, 1, False), (9, 1, 4, False, 3, 1, False), (1, 1, 4, True, 64, 1, False),
    (7, 4, 4, True, 19, 2, False), (13, 3, 5, True, 13, 3, False), (6, 4, 4, False, 11, 4, False),
    (5, 3, 8, False, 9, 2, False)])
def test_read_sequencer_matches_its_twin(rng, seq_len, heads, block_rows, causal, kv_len,
                                         group, grouped):
    check_read_sequencer(rng, seq_len, heads, block_rows, causal, kv_len, group, grouped)


@pytest.mark.parametrize("banks", [3, 4, 5])
@pytest.mark.parametrize("seq_len, heads, block_rows, causal, kv_len, group, grouped", [
    # causal blocks of 1, 4, 7, 10, 13 keys (the first one shorter than any lead);
    # decode (one key); one block of 37 keys; grouped causal heads
    (13, 2, 3, True, None, 1, False), (1, 2, 4, False, 1, 1, False),
    (1, 4, 4, False, 37, 2, True), (7, 4, 6, True, 19, 2, True)])
def test_read_sequencer_with_more_banks_reads_its_twins_lead(rng, banks, seq_len, heads,
                                                              block_rows, causal, kv_len, group,
                                                              grouped):
    """With B banks each block's K/V rows come B - 1 K rows ahead (`kv_order`), a block of
    fewer keys reading its K rows and then its V rows."""
    check_read_sequencer(rng, seq_len, heads, block_rows, causal, kv_len, group, grouped,
                         banks=banks)


@pytest.mark.parametrize("seq_len, heads, block_rows, causal, group, grouped", [
    (9, 5, 4, False, 1, False), (7, 6, 4, True, 3, False), (13, 8, 8, True, 4, True)])
def test_read_sequencer_takes_each_passs_c_from_the_table(rng, seq_len, heads, block_rows,
                                                          causal, group, grouped):
    """MODE.HEAD_SCALES: every block of pass p gets entry p * gb (its first query head's),
    SCALE_C without; the table's read port answers a cycle after its address."""
    for head_scales in (True, False):
        check_read_sequencer(rng, seq_len, heads, block_rows, causal, None, group, grouped,
                             head_scales=head_scales)


@pytest.mark.parametrize("tag_depth", [2, 3, 5])
def test_read_sequencer_never_loses_a_tag_when_its_tags_back_up(rng, tag_depth):
    """The kinds are taken one cycle in ten: the tag FIFO fills, and the commands wait on
    its registered room without one tag dropped or issued past the FIFO."""
    outstanding = check_read_sequencer(rng, 9, 2, 4, True, None, 1, False, tag_depth=tag_depth,
                                       kind_ready=0.1)
    assert tag_depth <= outstanding <= tag_depth + 1


def test_read_sequencer_refuses_one_bank():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ValueError, match="^ReadSequencer: banks must be an integer >= 2, "
                                             "not 1$") as info:
            ReadSequencer(addr_width=32, block_rows=4, row_bytes=ROW_BYTES, max_seq_len=64,
                          banks=1)
        del info
        gc.collect()


def test_read_sequencer_refuses_a_tag_fifo_of_one():
    # the half-built object is never elaborated; keep Amaranth's warning about it here
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ValueError, match="ReadSequencer: tag_depth must be an integer "
                                             ">= 2, not 1") as info:
            ReadSequencer(addr_width=32, block_rows=4, row_bytes=ROW_BYTES, max_seq_len=64,
                          tag_depth=1)
        del info
        gc.collect()


def check_read_sequencer(rng, seq_len, heads, block_rows, causal, kv_len, group, grouped, *,
                         tag_depth=16, kind_ready=0.5, banks=2, head_scales=None):
    """Runs the read sequencer under random back-pressure (`kind_ready`: the chance the
    kinds are taken in a cycle) and holds it to its twin; returns the most commands that
    were ever issued and their kinds not yet taken. Each block's `block_c` is SCALE_C, or
    with `head_scales` (None: drawn) the table's word of its pass's first query head, read
    from a random table through a port that answers a cycle after its address."""
    t = run_params(rng, seq_len, heads)
    if head_scales is None:
        head_scales = bool(rng.integers(2))
    table = [int(x) for x in rng.integers(0, 2 ** 32, SCALE_TABLE_ENTRIES)]
    scale_c = int(rng.integers(0, 2 ** 32))
    expect_cmds, expect_blocks = read_schedule(seq_len=seq_len, heads=heads, block_rows=block_rows,
                                               q=t["q"], k=t["k"], v=t["v"], causal=causal,
                                               kv_len=kv_len, group=group, grouped=grouped,
                                               banks=banks)
    gb = group if grouped else 1
    if kv_len is not None:
        assert expect_blocks[-1][1] == kv_len     # the last block sees every key
    a_g = block_rows // gb
    if causal and seq_len % a_g:      # the twin: the short block first
        assert expect_blocks[0][0] == gb * (seq_len % a_g)
    dut = ReadSequencer(addr_width=32, block_rows=block_rows, row_bytes=ROW_BYTES, max_seq_len=64,
                        tag_depth=tag_depth, banks=banks)
    cmds, kinds, blocks, block_cs = [], [], [], []
    ready = rng.integers(0, 2, size=(100000, 3))
    ready[:, 1] = rng.random(100000) < kind_ready
    outstanding = 0

    async def tick(ctx):        # the table's read port: its word a cycle after the address
        addr = ctx.get(dut.scale_addr)
        await ctx.tick()
        ctx.set(dut.scale_data, table[addr])

    async def tb(ctx):
        set_run(ctx, dut.run, seq_len, heads, t, causal, kv_len, group, grouped, block_rows)
        ctx.set(dut.run.scale_c, scale_c)
        ctx.set(dut.run.head_scales, int(head_scales))
        ctx.set(dut.scale_addr, int(rng.integers(SCALE_TABLE_ENTRIES)))   # the last run's
        ctx.set(dut.start, 1)
        await tick(ctx)
        ctx.set(dut.start, 0)
        nonlocal outstanding
        for cyc in range(int(10 / kind_ready) * len(expect_cmds) + 100):
            ctx.set(dut.cmd.ready, int(ready[cyc, 0]))
            ctx.set(dut.kind.ready, int(ready[cyc, 1]))
            ctx.set(dut.block.ready, int(ready[cyc, 2]))
            await ctx.delay(1e-9)
            if ctx.get(dut.cmd.valid) and ctx.get(dut.cmd.ready):
                p = ctx.get(dut.cmd.payload)
                assert p.length == ROW_BYTES
                cmds.append(p.addr)
            if ctx.get(dut.kind.valid) and ctx.get(dut.kind.ready):
                kinds.append(ctx.get(dut.kind.payload))
            outstanding = max(outstanding, len(cmds) - len(kinds))
            if ctx.get(dut.block.valid) and ctx.get(dut.block.ready):
                p = ctx.get(dut.block.payload)
                blocks.append((p.rows_valid, p.n_keys, p.gdiag))
                block_cs.append(ctx.get(dut.block_c))
                assert p.causal == causal and p.step == gb
            await tick(ctx)
            if len(kinds) == len(expect_cmds) and not ctx.get(dut.busy):
                break
        assert not ctx.get(dut.busy)

    run_clocked(dut, tb)
    assert blocks == expect_blocks
    per_pass = len(expect_blocks) // (heads // gb)
    assert block_cs == [table[i // per_pass * gb] if head_scales else scale_c
                        for i in range(len(expect_blocks))]
    assert cmds == [a for _, a in expect_cmds]
    assert kinds == [k for k, _ in expect_cmds]
    return outstanding


@pytest.mark.parametrize("seq_len, heads, group, grouped", [
    (1, 1, 1, False), (6, 2, 1, False), (4, 4, 2, False),
    # passes of one and of two rows: a pass's end reloads the rows from the latched run
    (1, 3, 1, False), (2, 4, 1, False),
    # grouped: row t of each head of the pass in turn, as the blocks hold them
    (3, 4, 2, True), (5, 8, 4, True), (1, 4, 4, True), (2, 2, 2, True)])
def test_write_sequencer_matches_its_twin_and_finishes(rng, seq_len, heads, group, grouped):
    t = run_params(rng, seq_len, heads)
    expect = write_schedule(seq_len=seq_len, heads=heads, o=t["o"], group=group,
                            grouped=grouped)
    dut = WriteSequencer(addr_width=32, row_bytes=ROW_BYTES)
    got = []

    async def tb(ctx):
        for run in range(2):           # twice, without reset
            got.clear()
            set_run(ctx, dut.run, seq_len, heads, t, group=group, grouped=grouped)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            pending = 0
            for cyc in range(2000):
                ctx.set(dut.cmd.ready, int(rng.integers(0, 2)))
                ctx.set(dut.done.valid, int(pending > 0 and rng.integers(0, 2)))
                ctx.set(dut.done.payload.error, 0)
                await ctx.delay(1e-9)
                assert not ctx.get(dut.finished) or (pending == 0 and len(got) == len(expect))
                if ctx.get(dut.cmd.valid) and ctx.get(dut.cmd.ready):
                    got.append(ctx.get(dut.cmd.payload).addr)
                    pending += 1
                if ctx.get(dut.done.valid):
                    pending -= 1
                await ctx.tick()
                if ctx.get(dut.finished):
                    break
            assert ctx.get(dut.finished) and got == expect

    run_clocked(dut, tb)


def test_read_schedule_serves_each_kv_head_to_its_group():
    """Query head h reads K/V head h // g: with N_kv = 2 and a block of N = 1 row, the K rows of
    four query heads at g = 2 come from K/V heads 0, 0, 1, 1."""
    cmds, blocks = read_schedule(seq_len=1, heads=4, block_rows=4, q=(0, 1000, 10),
                                 k=(5000, 100, 10), v=(9000, 100, 10), kv_len=2, group=2)
    assert blocks == [(1, 2, 0)] * 4
    k_rows = [a for kind, a in cmds if kind == Kind.K]
    assert k_rows == [5000, 5010, 5000, 5010, 5100, 5110, 5100, 5110]


def test_write_schedule_grouped_order():
    """Two heads a pass, two rows: O[0][0], O[1][0], O[0][1], O[1][1], then the next pass."""
    assert write_schedule(seq_len=2, heads=4, o=(0, 100, 10), group=2, grouped=True) == [
        0, 100, 10, 110, 200, 300, 210, 310]


def test_read_schedule_grouped_reads_each_kv_row_once_a_group():
    """A decode step (N = 1) of four query heads on two K/V heads: one block per group of two
    rows (one of each head), so K/V head 0 is read once, not twice."""
    cmds, blocks = read_schedule(seq_len=1, heads=4, block_rows=4, q=(0, 1000, 10),
                                 k=(5000, 100, 10), v=(9000, 100, 10), kv_len=2, group=2,
                                 grouped=True)
    assert blocks == [(2, 2, 0)] * 2
    assert [a for kind, a in cmds if kind == Kind.Q] == [0, 1000, 2000, 3000]
    assert [a for kind, a in cmds if kind == Kind.K] == [5000, 5010, 5100, 5110]



def test_read_sequencer_offers_its_first_block_and_command_at_its_published_latencies(rng):
    """`block_latency` and `command_latency` as the timing of the top counts them: the
    cycles from the one with `start` to the first offered on `block` and on `cmd`, every
    consumer ready."""
    t = run_params(rng, 5, 2)
    dut = ReadSequencer(addr_width=32, block_rows=4, row_bytes=ROW_BYTES, max_seq_len=64)

    async def tb(ctx):
        set_run(ctx, dut.run, 5, 2, t)
        for ready in (dut.cmd.ready, dut.kind.ready, dut.block.ready):
            ctx.set(ready, 1)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        block = 1 + await cycles_until(ctx, dut.block.valid)
        assert block == ReadSequencer.block_latency
        assert block + await cycles_until(ctx, dut.cmd.valid) == ReadSequencer.command_latency

    run_clocked(dut, tb)


def test_write_sequencer_finishes_its_published_latency_after_the_last_completion(rng):
    """`finish_latency`: the cycles from the one in which the last write's completion is on
    `done` to the first with `finished`."""
    seq_len, heads = 3, 2
    t = run_params(rng, seq_len, heads)
    dut = WriteSequencer(addr_width=32, row_bytes=ROW_BYTES)

    async def tb(ctx):
        set_run(ctx, dut.run, seq_len, heads, t)
        ctx.set(dut.cmd.ready, 1)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        issued = 0
        while issued < seq_len * heads:     # every command taken, no completion yet
            issued += ctx.get(dut.cmd.valid)
            await ctx.tick()
        for left in range(issued, 0, -1):   # then the completions, the last alone
            ctx.set(dut.done.valid, 1)
            await ctx.delay(1e-9)
            assert not ctx.get(dut.finished)
            await ctx.tick()
            ctx.set(dut.done.valid, 0)
            if left > 1 and rng.random() < 0.5:
                await ctx.tick()
        assert await cycles_until(ctx, dut.finished) + 1 == WriteSequencer.finish_latency

    run_clocked(dut, tb)
