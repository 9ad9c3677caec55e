"""`KVBuffer` against a plain model of its rows, under random back-pressure and feed gaps,
at two score banks and more (the K/V order of `kv_order`, with blocks of fewer keys than
the lead), and its published latencies measured."""

import gc
import warnings

import pytest
from amaranth.hdl import UnusedElaboratable, signed

from amaranth_sim import cycles_until, run_clocked
from attenio.hdl.kv_buffer import Kind, KVBuffer, kv_order

C_SHAPE = signed(12)


@pytest.mark.parametrize("banks", [2, 3, 4, 5])
def test_kv_order_reads_each_k_row_as_early_as_its_bank_is_free(banks):
    """`kv_order`, the twin the buffer, the replay's tests and the read sequencer share:
    every K and V row once, each in order; K_j waits only for V_(j-B), whose update frees
    its bank, and V_j only for K_(j+B-1) (or the last K row): B - 1 rows of lead; with two
    banks, K_0, K_1, V_0, K_2, V_1, ..., V_(n-1)."""
    for n in range(1, 12):
        order = kv_order(n, banks=banks)
        at = {row: k for k, row in enumerate(order)}
        assert len(order) == 2 * n, n
        for kind in Kind.K, Kind.V:
            assert [j for k, j in order if k == kind] == list(range(n)), (n, kind)
        for j in range(n):
            assert at[Kind.V, j] > at[Kind.K, min(j + banks - 1, n - 1)], (n, j)
            if j + banks - 1 < n:
                assert at[Kind.V, j] == at[Kind.K, j + banks - 1] + 1, (n, j)
            if j + banks < n:
                assert at[Kind.K, j + banks] == at[Kind.V, j] + 1, (n, j)
        if banks == 2:
            assert order == [(Kind.K, 0)] + [row for j in range(1, n)
                                             for row in ((Kind.K, j), (Kind.V, j - 1))] + [
                (Kind.V, n - 1)]


def buffer_rows(blocks, *, mac_lines, macs_per_line, head_dim, split, banks=2):
    """The plain model: the rows the buffer announces for `blocks` (dicts of the block
    command and its `c`), in order, as (kind, the tag's fields that the kind gives
    meaning to). A Q row goes to the next MAC group of a line, then the next line, then
    the next slot; the K/V rows in `kv_order`, row j in bank j mod `banks`; the halves
    alternate from 0 across blocks."""
    groups, chunks = macs_per_line // split, head_dim // split
    rows = []
    for block in blocks:
        common = {"rows_valid": block["rows_valid"], "c": block["c"],
                  "causal": block["causal"], "gdiag": block["gdiag"], "step": block["step"]}
        for i in range(block["rows_valid"]):
            rows.append((Kind.Q, {**common, "is_q": 1, "is_s": 0, "is_u": 0,
                                  "mac": i % groups, "line": i // groups % mac_lines,
                                  "qbase": i // (groups * mac_lines) * chunks}))
        n = block["n_keys"]
        for kind, j in kv_order(n, banks=banks):
            rows.append((kind, {**common, "is_q": 0, "is_s": int(kind == Kind.K),
                                "is_u": int(kind == Kind.V), "bank": j % banks,
                                "first": int(j == 0), "last": int(kind == Kind.V and j == n - 1)}))
    return [(kind, {**fields, "half": k % 2}) for k, (kind, fields) in enumerate(rows)]


def random_block(rng, *, block_rows, max_seq_len):
    causal = int(rng.integers(0, 2))
    return {"rows_valid": int(rng.integers(1, block_rows + 1)),
            "n_keys": int(rng.integers(1, min(max_seq_len, 6) + 1)),
            "causal": causal, "gdiag": int(rng.integers(0, 4 * max_seq_len + 1)),
            "step": int(rng.integers(1, 5)) if causal else int(rng.integers(0, 5)),
            "c": int(rng.integers(-2 ** 11, 2 ** 11))}


def tag_of(view):
    """The row tag's fields, as `buffer_rows` names them."""
    return {"half": view.half, "is_q": view.is_q, "is_s": view.is_s, "is_u": view.is_u,
            "line": view.line, "mac": view.mac, "qbase": view.qbase, "bank": view.bank,
            "first": view.first, "last": view.last, "rows_valid": view.rows_valid,
            "c": view.c, "causal": view.mask.causal, "gdiag": view.mask.gdiag,
            "step": view.mask.step}


def set_block(ctx, dut, block):
    for name in ("rows_valid", "n_keys", "causal", "gdiag", "step"):
        ctx.set(getattr(dut.start.payload, name), block[name])
    ctx.set(dut.c, block["c"])


@pytest.mark.parametrize("mac_lines, macs_per_line, rows_per_mac, head_dim, split", [
    (2, 4, 3, 8, 1),        # several slots a MAC, a row a chunk per element
    (2, 4, 2, 8, 2),        # a Q row split over two MACs, chunks of two elements
    (3, 4, 2, 8, 4),        # a group of the whole line
    (1, 2, 4, 2, 2)])       # a row of one chunk: every element is a row's last
def test_kv_buffer_delivers_the_models_rows_under_back_pressure_and_feed_gaps(
        rng, mac_lines, macs_per_line, rows_per_mac, head_dim, split):
    """Several blocks, causal or not, through both halves: every row is announced once, in
    the model's order with its tags, and the replay reads back the chunks fed into it."""
    check_kv_buffer(rng, mac_lines, macs_per_line, rows_per_mac, head_dim, split, banks=2)


@pytest.mark.parametrize("mac_lines, macs_per_line, rows_per_mac, head_dim, split, banks", [
    # two and three K rows ahead (blocks of 1 .. 6 keys: some shorter than the lead), and
    # five banks, whose counters wrap at a count that is no power of two
    (2, 4, 3, 8, 1, 3), (1, 2, 4, 2, 2, 4), (2, 4, 2, 8, 2, 5)])
def test_kv_buffer_with_more_banks_takes_the_k_rows_of_their_lead(
        rng, mac_lines, macs_per_line, rows_per_mac, head_dim, split, banks):
    """As with two banks, in `kv_order`'s order for B banks and with row j in bank j mod B."""
    check_kv_buffer(rng, mac_lines, macs_per_line, rows_per_mac, head_dim, split, banks=banks)


def check_kv_buffer(rng, mac_lines, macs_per_line, rows_per_mac, head_dim, split, *, banks):
    """Feeds four blocks (six with more banks) under random back-pressure and holds every
    row announced to `buffer_rows`, and every chunk read back to the feed."""
    block_rows = rows_per_mac * mac_lines * macs_per_line // split
    max_seq_len = 8
    dut = KVBuffer(mac_lines=mac_lines, macs_per_line=macs_per_line, rows_per_mac=rows_per_mac,
                   block_rows=block_rows, head_dim=head_dim, max_seq_len=max_seq_len,
                   c_shape=C_SHAPE, split=split, banks=banks)
    blocks = [random_block(rng, block_rows=block_rows, max_seq_len=max_seq_len)
              for _ in range(4 if banks == 2 else 6)]
    if banks > 2:
        blocks[1]["n_keys"] = 1            # a block shorter than the lead
    expect = buffer_rows(blocks, mac_lines=mac_lines, macs_per_line=macs_per_line,
                         head_dim=head_dim, split=split, banks=banks)
    chunks = head_dim // split
    # the feed: every row's chunks, random elements, tagged with the row's kind
    feed = [(kind, [int(x) for x in rng.integers(-128, 128, size=split)])
            for kind, _ in expect for _ in range(chunks)]
    feed_chance, ready_chance, release_chance = rng.uniform(0.3, 1.0, size=3)
    print(f"feed {feed_chance:.2f}, row ready {ready_chance:.2f}, release {release_chance:.2f}")
    got = []            # (kind, tag) of every row taken off `row`
    read_back = []      # the chunks the replay read of each released row

    async def tb(ctx):
        next_block = next_feed = 0
        held = []       # rows taken and not released: [tag, chunks read]
        reading = None  # the chunk whose address was given last cycle
        both_full = False
        for _ in range(40 * len(feed) + 200):
            if next_block < len(blocks) and rng.random() < 0.7:
                set_block(ctx, dut, blocks[next_block])
                ctx.set(dut.start.valid, 1)
            else:
                ctx.set(dut.start.valid, 0)
            feeding = next_feed < len(feed) and rng.random() < feed_chance
            ctx.set(dut.feed.valid, int(feeding))
            if feeding:
                kind, value = feed[next_feed]
                ctx.set(dut.feed.payload.kind, kind)
                ctx.set(dut.feed.payload.value, value)
            # the replay reads the row it holds chunk by chunk, then releases it; it takes
            # the next row when it holds none or in the cycle it releases its own (the
            # buffer's contract: a taken row's half stays `full` until its release)
            if reading is not None:
                held[0][1].append([int(x) for x in ctx.get(dut.rd_data)])
                reading = None
            release = bool(held) and len(held[0][1]) == chunks and rng.random() < release_chance
            ctx.set(dut.release, int(release))
            ctx.set(dut.row.ready, int((not held or release) and rng.random() < ready_chance))
            if held and len(held[0][1]) < chunks and not release:
                reading = len(held[0][1])
                ctx.set(dut.rd_addr, held[0][0]["half"] * chunks + reading)
            await ctx.delay(1e-9)
            assert not ctx.get(dut.error)
            both_full |= bool(held) and bool(ctx.get(dut.row.valid))
            if ctx.get(dut.start.valid) and ctx.get(dut.start.ready):
                next_block += 1
            if ctx.get(dut.feed.valid) and ctx.get(dut.feed.ready):
                next_feed += 1
            if release:
                read_back.append(held.pop(0)[1])
            if ctx.get(dut.row.valid) and ctx.get(dut.row.ready):
                payload = ctx.get(dut.row.payload)
                kind = Kind.Q if payload.is_q else Kind.K if payload.is_s else Kind.V
                got.append((kind, tag_of(payload)))
                held.append([got[-1][1], []])
                assert len(held) == 1
            await ctx.tick()
            if len(read_back) == len(expect) and not ctx.get(dut.busy):
                break
        assert not ctx.get(dut.busy) and not ctx.get(dut.error)
        assert both_full, "the buffer never held a row beside the one being read"

    run_clocked(dut, tb)
    assert [kind for kind, _ in got] == [kind for kind, _ in expect]
    for k, ((_, tag), (_, model)) in enumerate(zip(got, expect)):
        assert {name: tag[name] for name in model} == model, f"row {k}"
    rows_fed = [[value for _, value in feed[k * chunks:(k + 1) * chunks]]
                for k in range(len(expect))]
    assert read_back == rows_fed


def test_kv_buffer_flags_an_element_of_the_wrong_kind():
    """A K element where the block's Q row is due raises the sticky `error`."""
    dut = KVBuffer(mac_lines=1, macs_per_line=2, rows_per_mac=2, block_rows=4, head_dim=2,
                   max_seq_len=4, c_shape=C_SHAPE)

    async def tb(ctx):
        set_block(ctx, dut, {"rows_valid": 1, "n_keys": 1, "causal": 0, "gdiag": 0,
                             "step": 1, "c": 0})
        ctx.set(dut.start.valid, 1)
        await ctx.tick()
        ctx.set(dut.start.valid, 0)
        ctx.set(dut.feed.valid, 1)
        ctx.set(dut.feed.payload.kind, Kind.K)
        await ctx.tick().until(dut.feed.ready)
        await ctx.tick()
        assert ctx.get(dut.error)

    run_clocked(dut, tb)


def test_kv_buffer_refuses_one_bank():
    # the half-built object is never elaborated; keep Amaranth's warning about it here
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ValueError, match="^KVBuffer: banks must be an integer >= 2, "
                                             "not 1$") as info:
            KVBuffer(mac_lines=1, macs_per_line=2, rows_per_mac=2, block_rows=4, head_dim=2,
                     max_seq_len=4, c_shape=C_SHAPE, banks=1)
        del info
        gc.collect()


# -- the published latencies -------------------------------------------------------------------

def small_buffer():
    return KVBuffer(mac_lines=1, macs_per_line=2, rows_per_mac=2, block_rows=4, head_dim=4,
                    max_seq_len=4, c_shape=C_SHAPE)



async def take_block(ctx, dut, rows_valid=2, n_keys=1):
    """Offer a block until it is taken; returns in the cycle after the handshake."""
    set_block(ctx, dut, {"rows_valid": rows_valid, "n_keys": n_keys, "causal": 0, "gdiag": 0,
                         "step": 1, "c": 0})
    ctx.set(dut.start.valid, 1)
    await ctx.tick().until(dut.start.ready)
    ctx.set(dut.start.valid, 0)


def run(dut, bench):
    run_clocked(dut, bench)


def test_kv_buffer_fills_its_published_start_latency_after_taking_a_block():
    """`start_latency`: from the cycle a block is taken on `start` to `filling`, and with it
    the feed's `ready`, the cycle of the block's first element at the earliest."""
    dut = small_buffer()

    async def tb(ctx):
        ctx.set(dut.feed.valid, 1)
        ctx.set(dut.feed.payload.kind, Kind.Q)
        await take_block(ctx, dut)
        assert 1 + await cycles_until(ctx, dut.filling) == KVBuffer.start_latency
        assert ctx.get(dut.feed.ready)

    run(dut, tb)


def test_kv_buffer_offers_a_row_its_published_row_latency_after_its_last_element():
    """`row_latency`: from the cycle the row's last element is taken off `feed` to the row
    offered on `row`."""
    dut = small_buffer()
    chunks = 4

    async def tb(ctx):
        await take_block(ctx, dut)
        ctx.set(dut.feed.valid, 1)
        ctx.set(dut.feed.payload.kind, Kind.Q)
        taken = 0
        while True:
            await ctx.delay(1e-9)
            assert not ctx.get(dut.row.valid)
            taken += ctx.get(dut.feed.ready)
            await ctx.tick()
            if taken == chunks:
                break
        ctx.set(dut.feed.valid, 0)
        assert 1 + await cycles_until(ctx, dut.row.valid) == KVBuffer.row_latency

    run(dut, tb)


def test_kv_buffer_refills_a_half_its_published_refill_latency_after_its_release():
    """`refill_latency`: both halves full and the feed waiting, from the cycle of the
    oldest half's `release` to the cycle its next element is taken."""
    dut = small_buffer()
    chunks = 4

    async def tb(ctx):
        await take_block(ctx, dut, rows_valid=3)
        ctx.set(dut.feed.valid, 1)
        ctx.set(dut.feed.payload.kind, Kind.Q)
        ctx.set(dut.row.ready, 1)
        for _ in range(2 * chunks):          # two rows, then the buffer is full
            await ctx.tick().until(dut.feed.ready)
        for _ in range(5):
            assert not ctx.get(dut.feed.ready)
            await ctx.tick()
        ctx.set(dut.release, 1)
        await ctx.delay(1e-9)
        assert not ctx.get(dut.feed.ready)
        await ctx.tick()
        ctx.set(dut.release, 0)
        assert 1 + await cycles_until(ctx, dut.feed.ready) == KVBuffer.refill_latency

    run(dut, tb)
