"""`RowReplay` against a plain model of the words of each row it launches, cycle by cycle,
under random row gaps and interlocks, with two score banks and more, and its published issue
latency measured."""

import pytest
from amaranth.hdl import signed

from amaranth_sim import run_clocked
from attenio.hdl.kv_buffer import row_layout
from attenio.hdl.replay import RowReplay

from test_kv_buffer import buffer_rows, random_block

C_SHAPE = signed(12)


def make_replay(*, mac_lines, macs_per_line, rows_per_mac, head_dim, split, score_period,
                block_rows, max_seq_len=8, banks=2, arith=None):
    layout = row_layout(rows=block_rows, mac_lines=mac_lines, macs_per_line=macs_per_line,
                        rows_per_mac=rows_per_mac, head_dim=head_dim, c_shape=C_SHAPE,
                        max_seq_len=max_seq_len, split=split, banks=banks)
    return RowReplay(row_layout=layout, mac_lines=mac_lines, macs_per_line=macs_per_line,
                     rows_per_mac=rows_per_mac, block_rows=block_rows, head_dim=head_dim,
                     c_shape=C_SHAPE, split=split, score_period=score_period, banks=banks,
                     element=signed(8) if arith is None else arith.element_shape, arith=arith)


def row_words(tag, chunks, *, rows_per_mac, head_chunks, score_period):
    """The plain model: the entry words of one row, cycle by cycle (None: an idle cycle).
    A Q row goes once, to its slot; a V row, and a K row without a score period, r times
    (pass t: slot t); a K row with a score period P chunk by chunk, slots 0 .. r-1 and
    then P - r idle cycles."""
    r, d = rows_per_mac, head_chunks

    def word(chunk, slot, addr):
        return {"is_q": tag["is_q"], "is_s": tag["is_s"], "is_u": tag["is_u"],
                "line": tag["line"], "mac": tag["mac"], "bank": tag["bank"],
                "first": tag["first"], "last": tag["last"], "addr": addr, "slot": slot,
                "kfirst": int(chunk == 0), "klast": int(chunk == d - 1),
                "value": chunks[chunk]}

    if tag["is_q"]:
        return [word(e, 0, tag["qbase"] + e) for e in range(d)]
    if tag["is_s"] and score_period:
        return [word(e, t, t * d + e) if t < r else None
                for e in range(d) for t in range(score_period)]
    return [word(e, t, t * d + e) for t in range(r) for e in range(d)]


def row_payload(tag):
    """The `row_layout` value of a tag as `buffer_rows` gives it."""
    mask = {name: tag[name] for name in ("causal", "gdiag", "step")}
    return {**{name: tag[name] for name in ("half", "is_q", "is_s", "is_u", "line", "mac",
                                            "qbase", "bank", "first", "last", "rows_valid",
                                            "c")},
            "mask": mask}


def pick_address(bank, slot, rows_per_mac):
    """`attenio.hdl.mac.pick_addr` in Python: the slot's bits, then the bank."""
    return slot | bank << (rows_per_mac - 1).bit_length()


@pytest.mark.parametrize("mac_lines, macs_per_line, rows_per_mac, head_dim, split, score_period", [
    (2, 4, 3, 8, 2, None),      # int8: slot by slot
    (2, 4, 3, 8, 2, 5),         # a float format: chunk by chunk, idle cycles
    (1, 2, 2, 4, 1, 2),         # chunk by chunk with no idle cycle (P = r)
    (2, 2, 4, 4, 2, None)])     # a whole line a group
def test_replay_issues_the_models_words_of_every_row_under_random_gaps_and_interlocks(
        rng, mac_lines, macs_per_line, rows_per_mac, head_dim, split, score_period):
    """Every row the buffer offers is launched once, in order, only when its interlock
    allows; its words reach the entry `issue_latency` after the launch, one a cycle, as the
    model says, with the block's c and mask; its release, consume and drain on time."""
    check_replay(rng, mac_lines, macs_per_line, rows_per_mac, head_dim, split, score_period,
                 banks=2)


@pytest.mark.parametrize("mac_lines, macs_per_line, rows_per_mac, head_dim, split, score_period, "
                         "banks", [
    (2, 4, 3, 8, 2, None, 3), (2, 4, 3, 8, 2, 5, 4), (1, 2, 2, 4, 1, 2, 5),
    (2, 2, 4, 4, 2, None, 4)])
def test_replay_with_more_banks_waits_for_the_bank_of_each_v_row(
        rng, mac_lines, macs_per_line, rows_per_mac, head_dim, split, score_period, banks):
    """As with two banks, in the K/V order of B banks (blocks shorter than the lead among
    them): a V row of bank b waits for `lanes_ready[b]` alone and consumes bit b."""
    check_replay(rng, mac_lines, macs_per_line, rows_per_mac, head_dim, split, score_period,
                 banks=banks)


@pytest.mark.parametrize("spec", ["fp16", "bf16", "fp8_e4m3"])
def test_a_float_replay_widens_every_element_to_fp32_at_its_published_latency(rng, spec):
    """With a float format the words carry fp32, each element widened from its stored
    bits (subnormals among them), `issue_latency(arith)` after the launch, in step with
    the word's fields."""
    from attenio.hdl.formats import FloatArith, fp

    arith = FloatArith(fp.STORAGE[spec], max_seq_len=8, head_dim=8, out=fp.BF16)
    assert RowReplay.issue_latency(arith) == 3 + fp.convert_latency(arith.spec, fp.FP32)
    check_replay(rng, 2, 4, 3, 8, 2, 5, banks=2, arith=arith)


def check_replay(rng, mac_lines, macs_per_line, rows_per_mac, head_dim, split, score_period, *,
                 banks, arith=None):
    """Three blocks of the buffer's rows (`buffer_rows`, four with more banks, one of a
    single key) through the replay, every cycle against `row_words`; with a float `arith`
    the elements are random encodings and the words their fp32 widening."""
    block_rows = rows_per_mac * mac_lines * macs_per_line // split
    dut = make_replay(mac_lines=mac_lines, macs_per_line=macs_per_line,
                      rows_per_mac=rows_per_mac, head_dim=head_dim, split=split,
                      score_period=score_period, block_rows=block_rows, banks=banks,
                      arith=arith)
    d = head_dim // split
    blocks = [random_block(rng, block_rows=block_rows, max_seq_len=8)
              for _ in range(3 if banks == 2 else 4)]
    if banks > 2:
        blocks[1]["n_keys"] = 1            # a block shorter than the lead
    rows = buffer_rows(blocks, mac_lines=mac_lines, macs_per_line=macs_per_line,
                       head_dim=head_dim, split=split, banks=banks)
    tags = []
    for _, fields in rows:      # the fields the buffer leaves open: anything
        tag = {"line": int(rng.integers(0, mac_lines)),
               "mac": int(rng.integers(0, macs_per_line // split)),
               "qbase": int(rng.integers(0, rows_per_mac * d)),
               "bank": int(rng.integers(0, banks)),
               "first": int(rng.integers(0, 2)), "last": int(rng.integers(0, 2))}
        tags.append({**tag, **fields})
    if arith is None:
        data = [[[int(x) for x in rng.integers(-128, 128, size=split)] for _ in range(d)]
                for _ in tags]
        values = data
    else:
        from attenio.hdl.formats import fp
        bits = arith.element_shape.width
        data = [[[int(x) for x in rng.integers(0, 1 << bits, size=split)] for _ in range(d)]
                for _ in tags]
        values = [[[int(x) for x in fp.np_convert(chunk, arith.spec, fp.FP32)]
                   for chunk in row] for row in data]
    offer_chance, lanes_chance, drain_chance = rng.uniform(0.3, 1.0, size=3)
    print(f"offer {offer_chance:.2f}, lanes ready {lanes_chance:.2f}, "
          f"drain ready {drain_chance:.2f}")
    model = dict(rows_per_mac=rows_per_mac, head_chunks=d, score_period=score_period)
    latency = RowReplay.issue_latency(arith)

    async def tb(ctx):
        memory = [[None] * d, [None] * d]   # the buffer's halves as the replay may read them
        read = None                         # the chunk read in the last cycle
        offered = released = 0              # rows offered (the next on `row`), released
        launched = []                       # the cycle of each row's launch
        expect = {}                         # cycle: the entry word the model expects
        releases, consumes, drains = set(), {}, {}
        last_pick = None
        taken = False                       # a row was taken in the last cycle
        for cycle in range(200 * len(tags)):
            ctx.set(dut.rd_data, read if read is not None else [0] * split)
            if taken:
                ctx.set(dut.row.valid, 0)
                taken = False
            # the buffer offers row k once row k - 2 has released its half
            if offered < len(tags) and offered - released < 2 and not ctx.get(dut.row.valid):
                if rng.random() < offer_chance:
                    memory[offered % 2] = data[offered]
                    ctx.set(dut.row.payload, row_payload(tags[offered]))
                    ctx.set(dut.row.valid, 1)
            lanes = [int(rng.random() < lanes_chance) for _ in range(banks)]
            ctx.set(dut.lanes_ready, sum(bit << b for b, bit in enumerate(lanes)))
            ctx.set(dut.drain.ready, int(rng.random() < drain_chance))
            await ctx.delay(1e-9)

            entry = ctx.get(dut.word)
            if entry.valid:
                got = {name: getattr(entry, name) for name in
                       ("is_q", "is_s", "is_u", "line", "mac", "bank", "first", "last",
                        "addr", "slot", "kfirst", "klast")}
                got["value"] = [int(x) for x in entry.value]
                want = expect.get(cycle)
                assert want is not None and got == want[0], f"cycle {cycle}"
                assert last_pick.addr == pick_address(entry.bank, entry.slot, rows_per_mac)
                if entry.is_s or entry.is_u:    # the block's c and mask reach the lanes
                    tag = tags[want[1]]
                    mask = ctx.get(dut.mask)
                    assert ctx.get(dut.c) == tag["c"]
                    assert (mask.causal, mask.gdiag, mask.step) == (
                        tag["causal"], tag["gdiag"], tag["step"])
            else:
                assert expect.get(cycle) is None, f"cycle {cycle}: a word missing"
            assert ctx.get(dut.pe_active) == (entry.valid and (entry.is_s or entry.is_u))
            # MAC 0's O read address selection, a cycle ahead: valid V words only
            assert last_pick is None or last_pick.u == (entry.valid and entry.is_u)
            last_pick = ctx.get(dut.pick_next)
            assert ctx.get(dut.release) == (cycle in releases)
            assert ctx.get(dut.consume) == consumes.get(cycle, 0)
            assert ctx.get(dut.drain.valid) == (cycle in drains)
            if cycle in drains:
                assert ctx.get(dut.drain.payload.rows_valid) == drains[cycle]

            if ctx.get(dut.row.valid) and ctx.get(dut.row.ready):
                k = len(launched)
                tag = tags[k]
                if tag["is_u"]:
                    assert lanes[tag["bank"]], "a V row launched before its lanes were ready"
                    consumes[cycle + 1] = 1 << tag["bank"]
                    if tag["last"]:
                        drains[cycle + 1] = tag["rows_valid"]
                if tag["is_s"] and tag["first"]:
                    assert ctx.get(dut.drain.ready), "K_0 launched before the drain was idle"
                words = row_words(tag, values[k], **model)
                for i, w in enumerate(words):
                    assert cycle + latency + i not in expect
                    expect[cycle + latency + i] = None if w is None else (w, k)
                releases.add(cycle + len(words))
                launched.append(cycle)
                taken = True
                offered += 1
            half = ctx.get(dut.rd_addr) // d
            read = memory[half][ctx.get(dut.rd_addr) % d]
            if ctx.get(dut.release):
                memory[released % 2] = [None] * d   # the buffer refills it from now on
                released += 1
            await ctx.tick()
            if released == len(tags) and not ctx.get(dut.busy):
                break
        assert len(launched) == released == len(tags)
        assert not ctx.get(dut.busy)
        assert all(c <= cycle for c in expect)     # every word seen

    run_clocked(dut, tb)


def test_replay_issues_a_rows_first_word_its_published_issue_latency_after_the_launch():
    """`issue_latency`: from the cycle a row is taken off `row` to its first word at the
    array's entry."""
    dut = make_replay(mac_lines=1, macs_per_line=2, rows_per_mac=2, head_dim=4, split=1,
                      score_period=None, block_rows=4)

    async def tb(ctx):
        ctx.set(dut.row.payload.is_q, 1)
        ctx.set(dut.row.valid, 1)
        await ctx.delay(1e-9)
        assert ctx.get(dut.row.ready)       # an idle replay launches a Q row at once
        await ctx.tick()
        ctx.set(dut.row.valid, 0)
        for cycle in range(1, 10):
            if ctx.get(dut.word.valid):
                break
            await ctx.tick()
        assert cycle == RowReplay.issue_latency()

    run_clocked(dut, tb)
