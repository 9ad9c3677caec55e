"""The DMA command sequencers against their Python twins, under random back-pressure."""

import pytest
from amaranth.sim import Simulator

from attenio.hdl.sequencer import (Kind, ReadSequencer, WriteSequencer, read_schedule,
                                   write_schedule)

ROW_BYTES = 16


def run_params(rng, seq_len, heads):
    tensors = {}
    for t in "qkvo":
        base = int(rng.integers(0, 2 ** 16)) * 8
        row_stride = ROW_BYTES * int(rng.integers(1, 3))
        tensors[t] = (base, row_stride * (seq_len + int(rng.integers(0, 3))), row_stride)
    return tensors


def set_run(ctx, port, seq_len, heads, t, causal=False, kv_len=None, group=1):
    ctx.set(port.seq_len, seq_len)
    ctx.set(port.heads, heads)
    ctx.set(port.causal, int(causal))
    # the controller resolves KV_LEN = 0 before the sequencers see it
    ctx.set(port.kv_len, seq_len if kv_len is None else kv_len)
    ctx.set(port.group, group)
    for name in "qkvo":
        sub = getattr(port, name)
        ctx.set(sub.base, t[name][0])
        ctx.set(sub.head_stride, t[name][1])
        ctx.set(sub.row_stride, t[name][2])


@pytest.mark.parametrize("seq_len, heads, block_rows, causal, kv_len, group", [
    (1, 1, 4, False, None, 1), (7, 2, 4, False, None, 1), (8, 1, 4, False, None, 1),
    (5, 3, 8, False, None, 1),
    # causal: the short block first, each block's keys up to its last row
    (1, 1, 4, True, None, 1), (7, 2, 4, True, None, 1), (8, 1, 4, True, None, 1),
    (5, 3, 8, True, None, 1), (13, 2, 3, True, None, 1), (64, 1, 5, True, None, 1),
    # N_kv apart from N: decode (one query row), cross-attention both ways, causal rows
    # aligned at the end; g query heads per K/V head, MQA, and a group that does not
    # divide the heads (the last K/V head serves fewer)
    (1, 2, 4, False, 37, 1), (9, 1, 4, False, 3, 1), (1, 1, 4, True, 64, 1),
    (7, 4, 4, True, 19, 2), (13, 3, 5, True, 13, 3), (6, 4, 4, False, 11, 4),
    (5, 3, 8, False, 9, 2)])
def test_read_sequencer_matches_its_twin(rng, seq_len, heads, block_rows, causal, kv_len,
                                         group):
    t = run_params(rng, seq_len, heads)
    expect_cmds, expect_blocks = read_schedule(seq_len=seq_len, heads=heads, block_rows=block_rows,
                                               q=t["q"], k=t["k"], v=t["v"], causal=causal,
                                               kv_len=kv_len, group=group)
    if kv_len is not None:
        assert expect_blocks[-1][1] == kv_len     # the last block sees every key
    if causal and seq_len % block_rows:
        assert expect_blocks[0][0] == seq_len % block_rows      # the twin: the short block first
    dut = ReadSequencer(addr_width=32, block_rows=block_rows, row_bytes=ROW_BYTES, max_seq_len=64)
    cmds, kinds, blocks = [], [], []
    ready = rng.integers(0, 2, size=(100000, 3))

    async def tb(ctx):
        set_run(ctx, dut.run, seq_len, heads, t, causal, kv_len, group)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        for cyc in range(20 * len(expect_cmds) + 100):
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
            if ctx.get(dut.block.valid) and ctx.get(dut.block.ready):
                p = ctx.get(dut.block.payload)
                blocks.append((p.rows_valid, p.n_keys))
                assert p.causal == causal
            await ctx.tick()
            if len(kinds) == len(expect_cmds) and not ctx.get(dut.busy):
                break
        assert not ctx.get(dut.busy)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert blocks == expect_blocks
    assert cmds == [a for _, a in expect_cmds]
    assert kinds == [k for k, _ in expect_cmds]


@pytest.mark.parametrize("seq_len, heads", [(1, 1), (6, 2)])
def test_write_sequencer_matches_its_twin_and_finishes(rng, seq_len, heads):
    t = run_params(rng, seq_len, heads)
    expect = write_schedule(seq_len=seq_len, heads=heads, o=t["o"])
    dut = WriteSequencer(addr_width=32, row_bytes=ROW_BYTES)
    got = []

    async def tb(ctx):
        for run in range(2):           # twice, without reset
            got.clear()
            set_run(ctx, dut.run, seq_len, heads, t)
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

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()


def test_read_schedule_serves_each_kv_head_to_its_group():
    """Query head h reads K/V head h // g: with N_kv = 2 and a block of N = 1 row, the K rows of
    four query heads at g = 2 come from K/V heads 0, 0, 1, 1."""
    cmds, blocks = read_schedule(seq_len=1, heads=4, block_rows=4, q=(0, 1000, 10),
                                 k=(5000, 100, 10), v=(9000, 100, 10), kv_len=2, group=2)
    assert blocks == [(1, 2)] * 4
    k_rows = [a for kind, a in cmds if kind == Kind.K]
    assert k_rows == [5000, 5010, 5000, 5010, 5100, 5110, 5100, 5110]
