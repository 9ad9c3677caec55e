"""One MAC's O update against the (P, alpha) the lane wrote last.

The bus is registered in the MAC, and its (bank, slot) registers take the bus register
a cycle later: a write the lane drives in cycle t is in the bus register in t + 1 and in
the pair's registers from t + 2. The MAC selects a word's (up, e) a cycle ahead, from
`wi`, from the pair's registers alone (hdl/mac.py); the lane's `ready` rises only when
they hold its pass's last row (hdl/softmax.py). So the latest write the update must use
is one in the bus register the cycle before the word's wi cycle.
"""

import gc
import warnings

import numpy as np
import pytest
from amaranth.hdl import Module, Signal, UnusedElaboratable, Value, signed

from amaranth_sim import run_clocked
from attenio.hdl.formats import Int8Arith, fp
from attenio.hdl.mac import MAC

R, D, LANE_INDEX = 4, 4, 1
ARITH = Int8Arith(max_seq_len=64, head_dim=D)


def run(case, seed, banks=2):
    """O after one V word for (bank, slot) of value v, with a lane write in the bus
    register the cycle before the word's `wi` cycle as `case` says, in a MAC of `banks`
    banks; returns (O element, e written before, e written then, v)."""
    rng = np.random.default_rng(seed)
    print(f"seed {seed}")
    dut = MAC(arith=ARITH, mac_lines=1, macs_per_line=2, rows_per_mac=R, head_dim=D,
              macs_per_lane=2, index=0, lane_index=LANE_INDEX, banks=banks)
    bank, slot = int(rng.integers(banks)), int(rng.integers(R))
    e_old, e_new = (int(x) for x in rng.integers(1, ARITH.one, size=2))
    v = int(rng.integers(-128, 128))
    addr = slot * D + int(rng.integers(D))
    result = {}

    async def tb(ctx):
        def write(mac, b, t, e):
            ctx.set(dut.pa, {"valid": 1, "mac": mac, "bank": b, "slot": t, "up": 0, "e": e})
        write(LANE_INDEX, bank, slot, e_old)
        await ctx.tick()
        ctx.set(dut.pa.valid, 0)
        await ctx.tick()
        # two cycles before the word is on wi: the lane writes again, as `case` says, so
        # that the write is in the MAC's bus register the cycle before the word's wi cycle
        if case == "same":
            write(LANE_INDEX, bank, slot, e_new)
        elif case == "other_mac":
            write(1 - LANE_INDEX, bank, slot, e_new)
        elif case == "other_slot":
            write(LANE_INDEX, bank, (slot + 1) % R, e_new)
        await ctx.tick()
        ctx.set(dut.pa.valid, 0)
        await ctx.tick()
        ctx.set(dut.wi, {"valid": 1, "is_u": 1, "addr": addr, "slot": slot, "bank": bank,
                         "first": 1, "value": [v]})
        ctx.set(dut.pick_in, {"addr": pick_address(bank, slot), "u": 1})   # wi's, as the line's
        await ctx.tick()
        ctx.set(dut.wi.valid, 0)
        ctx.set(dut.pick_in.u, 0)
        ctx.set(dut.drain_addr, addr)
        for _ in range(MAC.update_latency(ARITH) + 2):
            await ctx.tick()
        result["o"] = ctx.get(dut.o_rd)

    run_clocked(dut, tb)
    return result["o"], e_old, e_new, v


def pick_address(bank, slot):
    """`attenio.hdl.mac.pick_addr` in Python: the slot's bits, then the bank's."""
    return bank << (R - 1).bit_length() | slot


def expected(p, v):
    """O of a block's first V row with (alpha, P) = (1, p): the format's twin."""
    return int(ARITH.np_update_o(ARITH.one, 0, p, v))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_lane_write_just_before_the_words_wi_cycle_is_the_one_the_update_uses(seed):
    o, _, e_new, v = run("same", seed)
    assert o == expected(e_new, v)


@pytest.mark.parametrize("banks, seed", [(3, 4), (5, 5)])
def test_a_mac_of_more_banks_updates_with_the_pair_of_the_words_bank(banks, seed):
    o, _, e_new, v = run("same", seed, banks)
    assert o == expected(e_new, v)


def test_a_mac_of_b_banks_holds_b_r_scores_and_addresses_b_r_pairs():
    """The score port is B r scores (bank * r + slot); the (up, e) address is the slot's
    bits, then as many bits as B banks need."""
    from amaranth.lib import data

    for banks, bank_bits in ((2, 1), (3, 2), (4, 2), (5, 3)):
        dut = MAC(arith=ARITH, mac_lines=1, macs_per_line=2, rows_per_mac=R, head_dim=D,
                  macs_per_lane=2, index=0, lane_index=LANE_INDEX, banks=banks)
        score = dut.signature.members["score"].shape
        assert isinstance(score, data.ArrayLayout) and score.length == banks * R
        assert dut.signature.members["pick_in"].shape["addr"].shape == \
            (R - 1).bit_length() + bank_bits
        assert dut.signature.members["wi"].shape["bank"].shape == range(banks)
        dut._MustUse__silence = True        # not elaborated, on purpose


def test_a_mac_refuses_fewer_than_two_banks():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)     # refused, never elaborated
        with pytest.raises(ValueError, match="^MAC: banks must be an integer >= 2, not 1$") as info:
            MAC(arith=ARITH, mac_lines=1, macs_per_line=2, rows_per_mac=R, head_dim=D,
                macs_per_lane=2, index=0, lane_index=LANE_INDEX, banks=1)
        del info
        gc.collect()                 # the refused object goes while the warning is ignored


@pytest.mark.parametrize("case", ["none", "other_mac", "other_slot"])
def test_other_writes_in_that_cycle_leave_the_words_pair_alone(case):
    o, e_old, _, v = run(case, 7)
    assert o == expected(e_old, v)


@pytest.mark.parametrize("copies", [0, 1])
def test_qk_is_the_signed_product_qk_latency_cycles_later_for_every_pair(copies):
    """`MAC._qk` on every pair of int8 operands, a new pair each cycle: k's rows added in
    pairs, then in pairs again, `QK_LATENCY` registered levels; with a copy of q's
    register the first level's adders share the two out."""
    m = Module()
    q, k = Signal(signed(8)), Signal(signed(8))
    qk = MAC._qk(m, q, k, [q] * copies)
    lat = MAC.QK_LATENCY
    assert lat == 3 and len(qk) == 16
    pairs = [(a, b) for a in range(-128, 128) for b in range(-128, 128)]
    bad = []

    async def tb(ctx):
        for i in range(len(pairs) + lat):
            if i < len(pairs):
                ctx.set(q, pairs[i][0])
                ctx.set(k, pairs[i][1])
            if i >= lat:
                a, b = pairs[i - lat]
                if ctx.get(qk) != a * b:
                    bad.append((a, b, ctx.get(qk)))
            await ctx.tick()

    run_clocked(m, tb)
    assert not bad, bad[:5]


def test_qk_refuses_a_k_that_is_not_8_bits():
    with pytest.raises(ValueError, match=r"q\*k: k must have 8 bits \(QK_LATENCY\), not 6"):
        MAC._qk(Module(), Signal(signed(8)), Signal(signed(6)))


def test_qk_takes_a_registered_dsp_below_the_width_of_its_halves():
    """Elaborated for ECP5 with a LUT width below q*k's halves (8 x 5 as Yosys sees the
    low half, unsigned: 4), q*k is a MULT18X18D with its input and output registers, like
    the update's: not ``q * k`` that Yosys would map to a DSP without them. Its results:
    the core with every product in a DSP (tests/test_dsp_primitive.py)."""
    import re

    from amaranth.back import rtlil

    from attenio.hdl.formats.dsp import ECP5Target

    cells = {}
    for width in (5, 4):
        dut = MAC(arith=ARITH, mac_lines=1, macs_per_line=2, rows_per_mac=R, head_dim=D,
                  macs_per_lane=2, index=0, lane_index=LANE_INDEX)
        text = rtlil.convert(dut, platform=ECP5Target(lut_mul_width=width))
        for module, body in re.findall(r"\nmodule \\top\.(\w+)\n(.*?)\nend\n", text, re.S):
            found = re.findall(r"cell \\MULT18X18D \S+\n(.*?)\n  end", body, re.S)
            cells[width, module] = found
            for cell in found:
                assert 'REG_INPUTA_CLK "CLK0"' in cell and 'REG_OUTPUT_CLK "CLK0"' in cell
    assert len(cells[5, "upd"]) > 0 and (5, "qk") not in cells
    assert len(cells[4, "qk"]) == 1


# -- float scores: interleaved sub-sums, the chain, the fold ---------------------------------

def _float_line(spec, rows, split, chunks, interleave):
    """A line of one group of `split` float MACs (a Module), its MACs, and its arith."""
    from attenio.hdl.formats import FloatArith

    head_dim = split * chunks
    arith = FloatArith(spec, max_seq_len=64, head_dim=head_dim)
    m = Module()
    macs = []
    for g in range(split):
        mac = MAC(arith=arith, mac_lines=1, macs_per_line=split, rows_per_mac=rows,
                  head_dim=head_dim, macs_per_lane=split, index=g, lane_index=0, split=split,
                  interleave=interleave)
        m.submodules[f"mac{g}"] = mac
        if g:
            m.d.comb += [mac.wi.eq(macs[-1].wo), mac.chain_in.eq(macs[-1].chain_out),
                         mac.ahead_in.eq(macs[-1].ahead_out)]
        macs.append(mac)
    return m, macs, arith


def _float_scores_run(spec, rows, split, chunks, seed, interleave=True, krows=4, watch=None):
    """Q rows, then `krows` K rows chunk by chunk (`score_period`), the first at once, each
    other after a random gap (often none) but not before the scores of the row two before it, in its bank, are
    written; returns [(row, slot, cycle its last word entered MAC 0, score at each cycle
    from there)] and the golden datapath, Q and K. `watch(fragment, macs)`, if given,
    returns a function called with (ctx, cycle) after each edge of the K rows (the
    elaborated line, so that a MAC's memories can be found in it)."""
    from amaranth.hdl import Fragment

    from attenio.sim import golden_fp

    rng = np.random.default_rng(seed)
    print(f"seed {seed}")
    m, macs, arith = _float_line(spec, rows, split, chunks, interleave)
    fragment = Fragment.get(m, None)
    observe = watch(fragment, macs) if watch else None
    d = split * chunks
    dp = golden_fp.FloatDatapath(spec, max_seq_len=64, head_dim=d, split=split,
                                 rows_per_mac=rows if interleave else None)
    # magnitudes spread over 2**-6 .. 2**6, so that the order of the additions shows
    def draw(n):
        return rng.standard_normal((n, d)) * 2.0 ** rng.integers(-6, 7, (n, d))
    q, k = dp.store(draw(rows)), dp.store(draw(krows))
    period = macs[0].period
    latency = MAC.score_latency(arith, split, rows_per_mac=rows, head_dim=d,
                                interleave=interleave)
    last = macs[-1]
    seen = []

    trace = []                  # the last MAC's score banks after each edge of the K rows
    memory = last.score_banks.memory

    def widened(elements):      # the words carry fp32 (`RowReplay` widens at the entry)
        return [int(x) for x in fp.np_convert(elements, spec, fp.FP32)]

    async def tb(ctx):
        def put(word):
            ctx.set(macs[0].wi, word)

        async def step():
            await ctx.tick()
            trace.append([ctx.get(memory.data[i]) for i in range(memory.depth)])
            if observe:
                observe(ctx, len(trace))
        for t in range(rows):
            for c in range(chunks):
                put({"valid": 1, "is_q": 1, "addr": t * chunks + c,
                     "value": widened(q[t, c * split:(c + 1) * split])})
                await ctx.tick()
        put({"valid": 0})
        written = []
        for j in range(krows):
            # the first K row right after the last Q word (a block's S_0 can follow its Q
            # rows at once), the others back to back or apart
            gap = 0 if j == 0 or rng.random() < 0.5 else int(rng.integers(1, 2 * period + 1))
            ready = written[j - 2] if j >= 2 else 0
            for _ in range(max(gap, ready - len(trace))):
                await step()
            for c in range(chunks):
                for t in range(period):
                    if t < rows:
                        put({"valid": 1, "is_s": 1, "slot": t, "addr": t * chunks + c,
                             "kfirst": int(c == 0), "klast": int(c == chunks - 1),
                             "bank": j % 2,
                             "value": widened(k[j, c * split:(c + 1) * split])})
                        if c == chunks - 1:
                            seen.append((j, t, len(trace)))
                    else:
                        put({"valid": 0})
                    await step()
            put({"valid": 0})
            written.append(len(trace) + split + latency + 1)
        for _ in range(split + latency + 2):
            await step()

    run_clocked(fragment, tb)
    return seen, trace, dp, q, k, latency, last.score_banks


#: (r, s, d/s): r = 1 .. 9 at s = 1, 2, 4 (k = 3, 2 or 1 sub-sums, P = r but where the
#: fold would not keep up); k = 5 at d/s = 16; two chunks a row (k <= 2, P > r); one chunk a
#: row and one row, where a K row's first word reads the Q slot the last Q word writes in
#: the same cycle (`MAC`'s Q forwarding)
_LINES = ([(r, s, 8 if s < 4 else 4) for r in range(1, 10) for s in (1, 2, 4)]
          + [(2, 1, 16), (3, 2, 2), (1, 1, 1), (1, 2, 1), (2, 2, 1)])


@pytest.mark.parametrize("rows, split, chunks", _LINES)
def test_a_line_of_float_macs_writes_each_score_in_the_golden_order_at_the_published_latency(
        rows, split, chunks):
    """A group of s float MACs with interleaved sub-sums: every score is the golden
    model's (`attenio.sim.golden_fp.score_bits`: sub-sums, chain, fold, bit for bit), in
    its bank `MAC.score_latency` cycles after the slot's last K word is at the group's
    last MAC, not a cycle sooner; K rows back to back or apart."""
    _check_line(rows, split, chunks, interleave=True)


def test_the_lines_above_fold_on_the_chain_adder_and_on_their_own():
    """The group's last MAC folds on its chain's adder where `fold_shares_chain` finds the
    chain's and the fold's additions never meet (the small preset: r 6, s 4, d/s 4), and
    on an adder of its own elsewhere: `_LINES` holds both, so the bit-exact line bench
    above checks each."""
    from attenio.hdl.formats import FloatArith, fp
    from attenio.hdl.mac import fold_shares_chain, score_sums

    arith = FloatArith(fp.FP16, max_seq_len=64, head_dim=16)
    assert fold_shares_chain(arith, 6, head_dim=16, split=4)
    folds = {fold_shares_chain(arith, r, head_dim=s * c, split=s)
             for r, s, c in _LINES if s > 1 and score_sums(arith, r, head_dim=s * c, split=s) > 1}
    assert folds == {True, False}
    assert not fold_shares_chain(arith, 6, head_dim=8, split=1)    # no chain at s = 1


@pytest.mark.parametrize("rows, split", [(4, 2), (9, 1)])
def test_without_the_interleave_a_line_keeps_one_sum_a_slot_in_its_period(rows, split):
    """P = max(r, L), one sum a slot, the chain's order: the same bench holds."""
    _check_line(rows, split, 8, interleave=False)


def _check_line(rows, split, chunks, *, interleave):
    from attenio.hdl.formats import fp
    from attenio.sim import golden_fp

    spec = (fp.FP16, fp.BF16)[(rows + split) % 2]
    seed = 1000 * rows + 100 * split + chunks
    seen, trace, dp, q, k, latency, banks = _float_scores_run(spec, rows, split, chunks, seed,
                                                              interleave)
    want = golden_fp.score_bits(dp, q, k)           # [rows, K rows]
    changes = 0
    for j, t, entry in seen:
        index = banks.index(j % 2, t)

        def value(cycle):
            # trace[i] holds the banks after the i-th clock edge of the K rows' start
            return trace[cycle][index]
        at_last_mac = entry + split             # in MAC s - 1's word register
        written = at_last_mac + latency
        assert value(written) == int(want[t, j]), (j, t, hex(value(written)), hex(int(want[t, j])))
        assert value(written - 1) == value(at_last_mac - 1), (j, t)
        changes += value(written - 1) != int(want[t, j])
    assert changes


# -- block RAM reads against the writes of the same word: the forwarding the schedule needs --

def _chain_watch(arith, rows, split, log):
    """A `_float_scores_run` watch that logs, per (bank, sub-sum, slot): the cycles MAC 0
    made its partial (its `chain_out` holds it the cycle after), the cycles MAC g >= 2
    wrote its own into its block RAM (the word differs the cycle after), and the cycles
    MAC g's `cin` held the chain's sum (its `chain_in` the cycle before)."""
    def watch(fragment, macs):
        sums = macs[0].sums
        slot_bits, sub_bits = (rows - 1).bit_length(), (sums - 1).bit_length()
        parts = {g: fragment.find_subfragment(f"mac{g}").find_subfragment("parts").origins[0]
                 for g in range(2, split)}
        before = {}

        def key(port, ctx):
            return (ctx.get(port.bank), ctx.get(port.sub) if sums > 1 else 0, ctx.get(port.slot))

        def observe(ctx, cycle):
            if ctx.get(macs[0].chain_out.valid):
                log.setdefault((0, "made"), []).append((cycle - 1, key(macs[0].chain_out, ctx)))
            for g in range(1, split):
                if ctx.get(macs[g].chain_in.valid):
                    log.setdefault((g, "cin"), []).append((cycle + 1, key(macs[g].chain_in, ctx)))
            for g, memory in parts.items():
                now = [ctx.get(memory.data[i]) for i in range(memory.depth)]
                for i, (old, new) in enumerate(zip(before.get(g, now), now)):
                    if old != new:       # `_part_addr`: the slot's bits, the sub-sum's, the bank's
                        address = (i >> slot_bits + sub_bits, i >> slot_bits & (1 << sub_bits) - 1,
                                   i & (1 << slot_bits) - 1)
                        log.setdefault((g, "wrote"), []).append((cycle - 1, address))
                before[g] = now
        return observe
    return watch


def _by_key(events):
    cycles = {}
    for cycle, key in events:
        cycles.setdefault(key, []).append(cycle)
    return cycles


#: (format, r, s, d/s): chains of 3 and 4 MACs with k = 1, 2 and 3 sub-sums, P = r and P > r
#: (every float format adds in the same fp32 adder, fp8 too)
_CHAINS = [("fp16", 2, 4, 4), ("bf16", 4, 3, 4), ("fp16", 9, 4, 2), ("fp16", 1, 3, 4),
           ("bf16", 3, 4, 4)]


@pytest.mark.parametrize("name, rows, split, chunks", _CHAINS)
def test_the_chains_sum_reaches_a_mac_the_chain_gap_after_the_mac_wrote_its_own_partial(
        name, rows, split, chunks):
    """MAC g >= 1 of a group finds in its `cin` the chain's sum of each (bank, sub-sum,
    slot) exactly `chain_gap` ((g - 1) L + 1) cycles after it made its own partial: MAC g
    writes g cycles after MAC 0 made its (seen in MAC g's block RAM from g = 2), so MAC 1
    can take its own from a register, and a MAC further on reads its block RAM two cycles
    ahead of `cin` with no write to forward; the same for every row and score."""
    from attenio.hdl.formats import FloatArith
    from attenio.hdl.mac import chain_gap, score_sums

    spec = fp.STORAGE[name]
    arith = FloatArith(spec, max_seq_len=64, head_dim=split * chunks)
    log, krows = {}, 4
    _float_scores_run(spec, rows, split, chunks, seed=7000 + 100 * rows + 10 * split + chunks,
                      krows=krows, watch=_chain_watch(arith, rows, split, log))
    made = _by_key(log[0, "made"])
    sums = score_sums(arith, rows, head_dim=split * chunks, split=split)
    assert len(log[0, "made"]) == krows * rows * sums
    assert chain_gap(arith, 1) == 1 and chain_gap(arith, 2) == arith.accumulate_latency + 1
    for g in range(1, split):
        arrived = _by_key(log[g, "cin"])
        wrote = ({key: [c + g for c in cycles] for key, cycles in made.items()} if g == 1
                 else _by_key(log[g, "wrote"]))
        assert arrived.keys() == made.keys() == wrote.keys()
        for key, cycles in made.items():
            assert wrote[key] == [c + g for c in cycles], (g, key)      # the words' skew
            gaps = {a - w for a, w in zip(arrived[key], wrote[key], strict=True)}
            assert gaps == {chain_gap(arith, g)}, (g, key, gaps)


def _score_line_run(rows, macs_per_line, split, lanes, chunks, seed, krows):
    """A float `MacLine` (fp16) loaded with random Q, then `krows` K rows, each once the
    lanes have finished the last one's pass (so a lane starts on the start pulse); returns
    the line's MACs and, per cycle, what each group's `ScoreBanks` was written (None, or
    (bank, slot, score)), its read address and its output, and each lane's start (None,
    or its bank)."""
    from amaranth.hdl import Fragment

    from attenio.hdl.formats import FloatArith
    from attenio.hdl.pe_array import MacLine
    from attenio.hdl.softmax import SoftmaxLane

    rng = np.random.default_rng(seed)
    print(f"seed {seed}")
    d, groups = split * chunks, macs_per_line // split
    arith = FloatArith(fp.FP16, max_seq_len=64, head_dim=d)
    line = MacLine(arith=arith, mac_lines=1, macs_per_line=macs_per_line, rows_per_mac=rows,
                   head_dim=d, lanes=lanes, split=split)
    fragment = Fragment.get(line, None)
    macs = [fragment.find_subfragment(f"mac{i}").origins[0] for i in range(macs_per_line)]
    lane_list = [fragment.find_subfragment(f"lane{i}").origins[0] for i in range(lanes)]
    banks = [macs[(g + 1) * split - 1].score_banks for g in range(groups)]
    period = macs[0].period
    spacing = SoftmaxLane.stages(arith) + rows * groups // lanes + 2
    q = rng.standard_normal((groups, rows, d)) * 2.0 ** rng.integers(-4, 5, (groups, rows, d))
    k = rng.standard_normal((krows, d)) * 2.0 ** rng.integers(-4, 5, (krows, d))

    def widened(values):
        return [int(x) for x in fp.np_convert(fp.FP16.from_float(values.astype(np.float16)),
                                              fp.FP16, fp.FP32)]
    record = []

    async def tb(ctx):
        ctx.set(Value.cast(line.c), arith.np_lane_c(arith.c))    # the bits of its layout

        async def put(word):
            ctx.set(line.wi, word)
            await ctx.tick()
            record.append({
                "wrote": [(ctx.get(b.wr.bank), ctx.get(b.wr.slot), ctx.get(b.wr.value))
                          if ctx.get(b.wr.en) else None for b in banks],
                "at": [(ctx.get(b.rd_at.bank), ctx.get(b.rd_at.slot)) for b in banks],
                "rd": [ctx.get(b.rd) for b in banks],
                "start": [ctx.get(lane.start.bank) if ctx.get(lane.start.valid) else None
                          for lane in lane_list]})
        for group in range(groups):
            for t in range(rows):
                for c in range(chunks):
                    await put({"valid": 1, "is_q": 1, "mac": group, "addr": t * chunks + c,
                               "value": widened(q[group, t, c * split:(c + 1) * split])})
        for j in range(krows):
            for c in range(chunks):
                for t in range(period):
                    await put({"valid": int(t < rows), "is_s": 1, "slot": min(t, rows - 1),
                               "addr": min(t, rows - 1) * chunks + c, "kfirst": int(c == 0),
                               "klast": int(c == chunks - 1), "bank": j % 2, "first": int(j == 0),
                               "value": widened(k[j, c * split:(c + 1) * split])})
            for _ in range(spacing + int(rng.integers(0, period + 1))):
                await put({"valid": 0})
        for _ in range(2 * spacing):
            await put({"valid": 0})

    run_clocked(fragment, tb)
    return macs, record


#: (r, q, s, lanes): one group a lane at r = 1 (the line's last group reads a score in the
#: cycle it is written, in a line of one group and of two), at r = 2 and 3, and two groups
#: a lane at r = 1, with and without a chain
_SCORE_LINES = [(1, 2, 2, 1), (1, 4, 2, 2), (2, 2, 2, 1), (3, 2, 2, 1), (1, 4, 1, 2), (2, 4, 2, 1)]


@pytest.mark.parametrize("rows, macs_per_line, split, lanes", _SCORE_LINES)
def test_a_lane_reads_each_score_no_sooner_than_the_score_read_gap_after_its_write_and_gets_it(
        rows, macs_per_line, split, lanes):
    """In a float line, the lane reads slot t of its group at the (bank, slot) its pass
    reaches t n + (group mod n) cycles after its start (n groups a lane), at least
    `score_read_gap` cycles after the group wrote that score, exactly that many for slot 0
    when the lane starts on the pulse; and the group's `ScoreBanks` answers the score
    written, which at a gap of 0 only its forwarding of the write gives."""
    from attenio.hdl.mac import score_read_gap

    krows = 5
    macs, record = _score_line_run(rows, macs_per_line, split, lanes, chunks=2, krows=krows,
                                   seed=8000 + 100 * rows + 10 * macs_per_line + split)
    groups = macs_per_line // split
    per_lane = groups // lanes
    fewest = {}
    for lane in range(lanes):
        starts = [(c, rec["start"][lane]) for c, rec in enumerate(record)
                  if rec["start"][lane] is not None]
        assert len(starts) == krows
        for begin, bank in starts:
            for u in range(rows * per_lane):
                slot, within = divmod(u, per_lane)
                group, read = lane * per_lane + within, begin + u
                assert record[read]["at"][group] == (bank, slot), (group, u)
                written = [c for c in range(read + 1)
                           if record[c]["wrote"][group] is not None
                           and record[c]["wrote"][group][:2] == (bank, slot)]
                assert written, (group, bank, slot)
                fewest[group] = min(fewest.get(group, read), read - written[-1])
                assert record[read + 1]["rd"][group] == record[written[-1]]["wrote"][group][2]
    for group in range(groups):
        gap = score_read_gap(rows_per_mac=rows, macs_per_line=macs_per_line,
                             macs_per_lane=macs_per_line // lanes, split=split, group=group)
        assert fewest[group] == gap, (group, fewest[group], gap)
        assert macs[(group + 1) * split - 1].score_banks.forward == (gap == 0)
