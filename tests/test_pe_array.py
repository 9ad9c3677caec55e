"""The PE array against its format's twins, fed as the row replay feeds it.

`PEArray` (hdl/pe_array.py) takes one word a cycle at its entry: Q chunks into the
MACs' storage, K chunks whose products each MAC accumulates into its slots' scores
(the groups' chains add the partial scores when a row is split over s MACs), and V
chunks that update O with the (up, e) the softmax lanes wrote from those scores. Here
a Python driver plays `attenio.hdl.replay.RowReplay`: a block's Q rows, then its K and
V rows in an order the interlock allows (with B banks, K_(j+B) after V_j has started,
V_j once the lanes' `ready` shows bank j mod B, chosen at random among what is allowed), with
seeded random gaps between rows (and between the words of a row where nothing waits
on their spacing: not inside a float K row, whose accumulator loop takes a chunk every
`score_period` cycles), V_j started at random times after `ready`, and no O element
read before its last update is written. Then the normalizer's reads drain O, l (and m)
in random order.

What is held: every group's scores in their banks to the format's score twin
(`Int8Arith.np_mac`, `FloatArith.np_product` and `np_accumulate` in the order of
`attenio.sim.golden_fp`), O, l and m to the golden models' step (`attenio.sim.golden.step`,
and `attenio.sim.golden_fp.attention_bits`' loop), and the published latencies to the
cycles observed: `MAC.score_latency`, `MAC.update_latency`, `PEArray.ready_latency`,
`PEArray.drain_read_latency` and `MacLine.drain_read_latency`.
"""

import gc
import os
import re
import warnings
import zlib
from dataclasses import dataclass, field

import numpy as np
import pytest
from amaranth.hdl import Fragment, UnusedElaboratable, Value
from amaranth.hdl import Shape as HDLShape
from amaranth.sim import Simulator

from attenio.formats import format_by_name
from attenio.hdl.formats import FloatArith, arith_of, fp
from attenio.hdl.mac import MAC, score_period
from attenio.hdl.pe_array import MacLine, PEArray
from attenio.hdl.softmax import pa_layout
from attenio.sim import golden
from attenio.sim.golden_fp import FloatDatapath, score_bits, store

MAX_SEQ_LEN, HEAD_DIM = 64, 8     # the formats' widths (the shapes' head_dim is at most this)


@dataclass(frozen=True)
class Shape:
    """The array's parameters."""

    mac_lines: int
    macs_per_line: int
    rows_per_mac: int
    head_dim: int
    exp_units: int
    split: int
    banks: int = 2

    @property
    def groups(self):
        """Groups (of `split` MACs) per line."""
        return self.macs_per_line // self.split

    @property
    def groups_per_lane(self):
        return self.groups // (self.exp_units // self.mac_lines)

    @property
    def chunks(self):
        return self.head_dim // self.split

    @property
    def rows(self):
        return self.rows_per_mac * self.mac_lines * self.groups

    def row(self, slot, line, group):
        """The block row of a slot of a group (`attenio.plan.Plan.row_of`)."""
        return slot * self.mac_lines * self.groups + line * self.groups + group

    def build(self, arith):
        return PEArray(arith=arith, mac_lines=self.mac_lines, macs_per_line=self.macs_per_line,
                       rows_per_mac=self.rows_per_mac, head_dim=self.head_dim,
                       exp_units=self.exp_units, split=self.split, banks=self.banks)


SHAPES = {
    # one lane a line over both MACs
    "s1": Shape(mac_lines=2, macs_per_line=2, rows_per_mac=2, head_dim=4, exp_units=2, split=1),
    # rows split over two MACs, two lanes a line, one group each
    "s2": Shape(mac_lines=2, macs_per_line=4, rows_per_mac=2, head_dim=8, exp_units=4, split=2),
    # the same with three and four banks (B - 1 K rows of scores ahead of the updates)
    "s1b3": Shape(mac_lines=2, macs_per_line=2, rows_per_mac=2, head_dim=4, exp_units=2, split=1,
                  banks=3),
    "s2b4": Shape(mac_lines=2, macs_per_line=4, rows_per_mac=2, head_dim=8, exp_units=4, split=2,
                  banks=4),
}


def arith_named(name):
    return arith_of(format_by_name(name), max_seq_len=MAX_SEQ_LEN, head_dim=HEAD_DIM)


def softmax_constant_of(arith):
    if isinstance(arith, FloatArith):
        return arith.c
    return golden.softmax_constant(0.02, 0.02, HEAD_DIM, arith.cfg)


# -- the twin ------------------------------------------------------------------------------

@dataclass
class Block:
    """A block's Q [rows, d], K and V [N, d], and what the twin says of it: the scores
    [N, rows], and O, l and m after the block's last V row and after the one before it."""

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    c: int
    scores: np.ndarray = None
    o: np.ndarray = None
    l: np.ndarray = None
    m: np.ndarray = None
    o_before_last: np.ndarray = None


def random_block(arith, shape, rng, keys):
    """A block of random Q, K and V of `keys` rows, with its twin's results."""
    rows, d = shape.rows, shape.head_dim
    if isinstance(arith, FloatArith):
        q, k, v = (store(arith.spec, rng.normal(scale=s, size=(n, d))).astype(np.int64)
                   for s, n in ((1.5, rows), (1.5, keys), (1.0, keys)))
    else:
        q, k, v = (rng.integers(-128, 128, (n, d)) for n in (rows, keys, keys))
    block = Block(q, k, v, softmax_constant_of(arith))
    (twin_float if isinstance(arith, FloatArith) else twin_int8)(arith, shape, block)
    return block


def twin_int8(arith, shape, block):
    """The block through the int8 twins, one K/V row at a time (`attenio.sim.golden.step`)."""
    rows = shape.rows
    state = golden.init_state(arith, rows, shape.head_dim)
    scores = []
    for j in range(len(block.k)):
        s = np.zeros(rows, np.int64)
        for col in range(shape.head_dim):
            s = arith.np_mac(s, block.q[:, col], block.k[j, col])
        scores.append(s)
        block.o_before_last = state.o
        state = golden.step(arith, state, s, block.v[j], block.c)
    block.scores, block.o, block.l, block.m = np.array(scores), state.o, state.l, state.m


def twin_float(arith, shape, block):
    """The block through `FloatArith`'s twins in the order of
    `attenio.sim.golden_fp.attention_bits`: its scores are `score_bits`' (the MACs' sub-sums,
    the chain, the fold)."""
    a, rows, d, s = arith, shape.rows, shape.head_dim, shape.split
    dp = FloatDatapath(a.spec, max_seq_len=MAX_SEQ_LEN, head_dim=d, split=s,
                       rows_per_mac=shape.rows_per_mac)
    c = np.full(rows, block.c, np.uint32)
    q, k, v = (x.astype(np.uint32) for x in (block.q, block.k, block.v))
    m = np.full(rows, a.m_init, np.uint32)
    l = np.zeros(rows, np.int64)
    o = np.zeros((rows, d), np.uint32)
    scores = []
    all_scores = score_bits(dp, q, k)
    for j in range(len(k)):
        total = all_scores[:, j]
        scores.append(total)
        x = a.np_scale(total, c)
        z, up = a.np_exp_arg(x, m)
        e = a.np_exp2(z)
        l = a.np_update_l(up, e, l)
        block.o_before_last = o
        o = a.np_update(np.repeat(up[:, None], d, 1), np.repeat(a.np_to_float(e)[:, None], d, 1),
                        o, np.broadcast_to(v[j], (rows, d)))
        m = a.np_maximum(m, x)
    block.scores, block.o, block.l, block.m = (np.array(scores, np.int64), o.astype(np.int64), l,
                                               m.astype(np.int64))


# -- the words, as the replay issues them ---------------------------------------------------

def q_words(arith, shape, block):
    """The block's Q rows, each to its group's slot."""
    words = []
    for slot in range(shape.rows_per_mac):
        for line in range(shape.mac_lines):
            for group in range(shape.groups):
                row = shape.row(slot, line, group)
                for chunk in range(shape.chunks):
                    words.append({"valid": 1, "is_q": 1, "line": line, "mac": group,
                                  "addr": slot * shape.chunks + chunk,
                                  "value": chunk_of(arith, block.q[row], shape, chunk)})
    return words


def chunk_of(arith, values, shape, chunk):
    """A word's value: the chunk's elements as the array carries them (a float format's
    widened to fp32, as `RowReplay` widens them at the entry)."""
    elements = values[chunk * shape.split:(chunk + 1) * shape.split]
    if isinstance(arith, FloatArith):
        elements = fp.np_convert(np.asarray(elements), arith.spec, fp.FP32)
    return [int(x) for x in elements]


def kv_words(arith, shape, block, kind, j):
    """K_j or V_j: slot by slot, or a float K row chunk by chunk, each chunk
    `score_period` cycles (None: an idle cycle)."""
    n = len(block.k)
    common = {"valid": 1, "bank": j % shape.banks, "first": int(j == 0)}
    if kind == "k":
        common["is_s"] = 1
        source = block.k[j]
    else:
        common.update(is_u=1, last=int(j == n - 1))
        source = block.v[j]

    def word(slot, chunk):
        return {**common, "slot": slot, "addr": slot * shape.chunks + chunk,
                "kfirst": int(chunk == 0), "klast": int(chunk == shape.chunks - 1),
                "value": chunk_of(arith, source, shape, chunk)}
    period = score_period(arith, shape.rows_per_mac, head_dim=shape.head_dim,
                          split=shape.split)
    if kind == "k" and period:
        return [word(slot, chunk) if slot < shape.rows_per_mac else None
                for chunk in range(shape.chunks) for slot in range(period)]
    return [word(slot, chunk) for slot in range(shape.rows_per_mac)
            for chunk in range(shape.chunks)]


# -- the bench ------------------------------------------------------------------------------

def unpack(raw, width, count):
    """`count` fields of `width` bits of `raw`, as unsigned bits."""
    return [(raw >> (k * width)) & ((1 << width) - 1) for k in range(count)]


def bits(value, width):
    return int(value) & ((1 << width) - 1)


@dataclass
class Record:
    """What the bench drove and saw, cycle by cycle."""

    scores: list = field(default_factory=list)        # {(line, group): raw banks}
    lanes_ready: list = field(default_factory=list)   # every lane's ready ANDed, per bank
    array_ready: list = field(default_factory=list)
    requests: list = field(default_factory=list)      # the drain read made (row, chunk) or None
    drained: list = field(default_factory=list)       # (o, l, m) raw on the drain port
    line0: list = field(default_factory=list)         # line 0's own drain o, raw
    k_last: list = field(default_factory=list)        # (block, j, slot, entry cycle)
    v_last: list = field(default_factory=list)        # the entry cycle of each block's last V word
    probes: list = field(default_factory=list)        # (first cycle of the probe, line, group, g)
    drains: list = field(default_factory=list)        # the first cycle of each block's drain


class Bench:
    """Plays the row replay and the normalizer for a `PEArray`, recording as it goes."""

    def __init__(self, arith, shape, blocks, rng, max_gap):
        self.arith, self.shape, self.blocks, self.rng, self.max_gap = (arith, shape, blocks, rng,
                                                                      max_gap)
        self.dut = shape.build(arith)
        self.fragment = Fragment.get(self.dut, None)
        lines = [self.fragment.find_subfragment(f"line{i}") for i in range(shape.mac_lines)]
        self.lanes = [f.find_subfragment(f"lane{g}").origins[0] for f in lines
                      for g in range(shape.exp_units // shape.mac_lines)]
        self.line0 = lines[0].origins[0]
        # the last MAC of each group holds the group's score banks
        self.banks = {(i, g): f.find_subfragment(f"mac{(g + 1) * shape.split - 1}").origins[0]
                      for i, f in enumerate(lines) for g in range(shape.groups)}
        self.score_width = arith.score_shape.width
        self.record = Record()
        self.cycle = 0
        self.word = None                       # the word on the entry next cycle
        self.consume = 0

    def run(self):
        sim = Simulator(self.fragment)
        sim.add_clock(1e-8)
        sim.add_testbench(self.bench)
        sim.run()
        return self.record

    async def tick(self, ctx, next_word=None, consume=0, request=None):
        """One cycle: the word decided last cycle on the entry and `next_word`'s (bank, slot)
        on `pick_next` (as the replay's register and its next value), the consume pulse
        decided last cycle, the drain read `request` ((row, chunk) or None); returns the
        cycle."""
        dut, r, rec = self.dut, self.shape.rows_per_mac, self.record
        word = self.word
        ctx.set(dut.wi, word if word else {"valid": 0})
        # a word without a (bank, slot) of its own (none, or a Q chunk) takes any
        pick = {"bank": int(self.rng.integers(self.shape.banks)),
                "slot": int(self.rng.integers(r)),
                **(next_word or {})}
        ctx.set(dut.pick_next, {"addr": pick["bank"] << (r - 1).bit_length() | pick["slot"],
                                "u": int(bool(next_word) and bool(next_word.get("valid"))
                                         and bool(next_word.get("is_u")))})
        ctx.set(dut.consume, self.consume)
        self.word, self.consume = next_word, consume
        if request is not None:
            self.set_request(ctx, *request)
        rec.requests.append(request)
        rec.scores.append({key: self.scores_of(ctx, mac) for key, mac in self.banks.items()})
        rec.lanes_ready.append([all(ctx.get(lane.ready[b]) for lane in self.lanes)
                                for b in range(self.shape.banks)])
        rec.array_ready.append([ctx.get(dut.ready[b]) for b in range(self.shape.banks)])
        rec.drained.append((ctx.get(Value.cast(dut.drain.o)), ctx.get(dut.drain.l),
                            ctx.get(dut.drain.m) if isinstance(self.arith, FloatArith) else 0))
        rec.line0.append(ctx.get(Value.cast(self.line0.drain.o)))
        await ctx.tick()
        self.cycle += 1
        return self.cycle - 1

    def set_request(self, ctx, row, chunk):
        shape = self.shape
        slot, rest = divmod(row, shape.mac_lines * shape.groups)
        line, group = divmod(rest, shape.groups)
        gl = shape.groups_per_lane
        port = self.dut.drain
        ctx.set(port.addr, slot * shape.chunks + chunk)
        ctx.set(port.u, slot * gl + group % gl)
        ctx.set(port.mac, group)
        ctx.set(port.lane, group // gl)
        ctx.set(port.line, line)

    async def gaps(self, ctx, chance):
        while self.rng.random() < chance:
            await self.tick(ctx)

    async def bench(self, ctx):
        for number, block in enumerate(self.blocks):
            ctx.set(self.dut.c, block.c)
            for word in q_words(self.arith, self.shape, block):
                await self.gaps(ctx, 0.1)
                await self.tick(ctx, word)
            await self.feed_kv(ctx, number, block)
            await self.drain(ctx, number, block)

    async def feed_kv(self, ctx, number, block):
        """K and V rows in an order the interlock allows, chosen at random: K_(j+B) once V_j
        has started, V_j once the array's `ready` shows bank j mod B."""
        arith, shape, rng = self.arith, self.shape, self.rng
        n, update = len(block.k), MAC.update_latency(arith)
        is_float = isinstance(arith, FloatArith)
        last_v = {}                              # O address -> its last V word's entry cycle
        k_next = v_next = 0
        banks = shape.banks
        while v_next < n:
            ready = [ctx.get(self.dut.ready[b]) for b in range(banks)]
            choices = (["k"] if k_next < n and k_next <= v_next + banks - 1 else []) + \
                      (["v"] if v_next < k_next and ready[v_next % banks] else [])
            if not choices or rng.random() < 0.3:
                await self.tick(ctx)             # a gap, or V_j started late
                continue
            if choices[int(rng.integers(len(choices)))] == "k":
                for word in kv_words(arith, shape, block, "k", k_next):
                    if not is_float:             # nothing waits on an int8 K row's spacing
                        await self.gaps(ctx, 0.15)
                    entry = await self.tick(ctx, word) + 1
                    if word and word["klast"]:
                        self.record.k_last.append((number, k_next, word["slot"], entry))
                k_next += 1
                continue
            self.check_bank(ctx, block, v_next)
            # the consume pulse in the cycle after the launch, as the replay's register
            await self.tick(ctx, consume=1 << (v_next % banks))
            for word in kv_words(arith, shape, block, "v", v_next):
                await self.gaps(ctx, 0.15)
                # no O element read before its last update is written
                while self.cycle + 1 < last_v.get(word["addr"], -update) + update + 1:
                    await self.tick(ctx)
                last_v[word["addr"]] = await self.tick(ctx, word) + 1
            v_next += 1
        self.record.v_last.append(max(last_v.values()))

    def scores_of(self, ctx, mac):
        """A group's scores now, from its last MAC (`mac`), bank * r + slot: int8's
        registers, a float group's `ScoreBanks`."""
        r, banks = self.shape.rows_per_mac, self.shape.banks
        if mac.score_banks is None:
            return unpack(ctx.get(Value.cast(mac.score)), self.score_width, banks * r)
        memory, index = mac.score_banks.memory, mac.score_banks.index
        return [ctx.get(memory.data[index(b, t)]) for b in range(banks) for t in range(r)]

    def check_bank(self, ctx, block, j):
        """The scores of K_j in bank j mod B of every group, as V_j starts."""
        r, width, banks = self.shape.rows_per_mac, self.score_width, self.shape.banks
        for (line, group), mac in self.banks.items():
            values = self.scores_of(ctx, mac)
            for slot in range(r):
                want = bits(block.scores[j, self.shape.row(slot, line, group)], width)
                assert values[(j % banks) * r + slot] == want, (j, line, group, slot)

    async def drain(self, ctx, number, block):
        """The probe of the block's last V word's update (a group and element whose O it
        changes, read from the cycle it enters), then every chunk in random order, among
        random repeats and gaps."""
        shape, rng = self.shape, self.rng
        r, last = shape.rows_per_mac, shape.chunks - 1
        probe = next((line, group, g) for line in range(shape.mac_lines)
                     for group in range(shape.groups) for g in range(shape.split)
                     if block.o[shape.row(r - 1, line, group), last * shape.split + g]
                     != block.o_before_last[shape.row(r - 1, line, group), last * shape.split + g])
        line, group, g = probe
        self.record.probes.append((self.cycle, *probe))
        wait = MAC.update_latency(self.arith) + shape.macs_per_line + PEArray.drain_read_latency
        for _ in range(wait + 4):
            await self.tick(ctx, request=(shape.row(r - 1, line, group), last))
        reads = [(row, chunk) for row in range(shape.rows) for chunk in range(shape.chunks)]
        reads = [reads[k] for k in rng.permutation(len(reads))]
        self.record.drains.append(self.cycle)
        for read in reads:
            await self.gaps(ctx, 0.1)
            if rng.random() < 0.1:
                await self.tick(ctx, request=reads[int(rng.integers(len(reads)))])
            await self.tick(ctx, request=read)
        for _ in range(PEArray.drain_read_latency + 1):
            await self.tick(ctx)


def run(fmt, shape_name, rng, *, blocks=2, keys=(3, 5), max_gap=3):
    """`blocks` blocks of random Q, K and V (`keys` K/V rows each, at most) through a
    `PEArray`: (arith, shape, blocks, `Record`). With B > 2 banks three blocks of B + 1,
    B - 2 (fewer than the lead) and B + 2 keys."""
    arith, shape = arith_named(fmt), SHAPES[shape_name]
    counts = ([int(rng.integers(keys[0], keys[1] + 1)) for _ in range(blocks)]
              if shape.banks == 2 else [shape.banks + 1, shape.banks - 2, shape.banks + 2])
    data = [random_block(arith, shape, rng, count) for count in counts]
    return arith, shape, data, Bench(arith, shape, data, rng, max_gap).run()


_runs = {}


def recorded(fmt, shape_name):
    """One run per format and shape, shared by the tests below (the simulation is the
    cost); its seed is printed, ATTENIO_SEED=N replays or varies it (tests/conftest.py)."""
    seed = int(os.environ.get("ATTENIO_SEED", "0")) or zlib.crc32(f"{fmt}-{shape_name}".encode())
    print(f"seed = {seed} (replay with ATTENIO_SEED={seed})")
    if (fmt, shape_name, seed) not in _runs:
        _runs[fmt, shape_name, seed] = run(fmt, shape_name, np.random.default_rng(seed))
    return _runs[fmt, shape_name, seed]


# -- the checks -----------------------------------------------------------------------------

def pack(values, width):
    return sum(bits(v, width) << (k * width) for k, v in enumerate(values))


def drain_windows(record):
    """(block, first cycle, end) of each block's random-order drain."""
    ends = [probe[0] for probe in record.probes[1:]] + [len(record.requests)]
    return list(zip(range(len(ends)), record.drains, ends))


def expected_read(arith, shape, block, row, chunk):
    """(o, l, m) raw on the drain port for a read of (row, chunk)."""
    o = pack(block.o[row, chunk * shape.split:(chunk + 1) * shape.split], arith.o_shape.width)
    m = bits(block.m[row], 32) if isinstance(arith, FloatArith) else 0
    return o, int(block.l[row]), m


def check_drained_values(arith, shape, blocks, record):
    """Every read answers `PEArray.drain_read_latency` cycles later with the twin's O chunk,
    l and m of its row (and not a cycle sooner); line 0 answers `MacLine.drain_read_latency`
    cycles later with its own row of that slot and group."""
    array, line = PEArray.drain_read_latency, MacLine.drain_read_latency
    early = reads = 0
    for number, start, end in drain_windows(record):
        block = blocks[number]
        for t in range(start, end):
            if record.requests[t] is None:
                continue
            row, chunk = record.requests[t]
            want = expected_read(arith, shape, block, row, chunk)
            assert record.drained[t + array] == want, (number, row, chunk)
            early += record.drained[t + array - 1] != want
            reads += 1
            group, slot = row % shape.groups, row // (shape.mac_lines * shape.groups)
            own = expected_read(arith, shape, block, shape.row(slot, 0, group), chunk)
            assert record.line0[t + line] == own[0]
    assert reads and early


def check_score_latency(arith, shape, blocks, record):
    """Each score is written into its bank `MAC.score_latency` cycles after the slot's last
    K word is at its group's last MAC (the bank register holds it from the next cycle, as
    an O element's memory after `MAC.update_latency`), and not a cycle sooner."""
    latency = MAC.score_latency(arith, shape.split, rows_per_mac=shape.rows_per_mac,
                                head_dim=shape.head_dim)
    r, width = shape.rows_per_mac, arith.score_shape.width
    banks = shape.banks
    changes = 0
    for number, j, slot, entry in record.k_last:
        for (line, group), _ in record.scores[0].items():
            at_last_mac = entry + 1 + (group + 1) * shape.split - 1
            index = (j % banks) * r + slot

            def value(t):
                return record.scores[t][line, group][index]
            want = bits(blocks[number].scores[j, shape.row(slot, line, group)], width)
            written = at_last_mac + latency
            assert value(written + 1) == want, (number, j, slot, line, group)
            assert value(written) == value(at_last_mac)
            changes += value(written) != want
    assert changes


def check_update_latency(arith, shape, blocks, record):
    """The block's last V word's O element is written `MAC.update_latency` cycles after the
    word is at its MAC: a drain read from `MAC.drain_write_lag` cycles later on answers the
    new value (a block of one key is left out: the value before its only update is the
    previous block's)."""
    latency, r, last = MAC.update_latency(arith), shape.rows_per_mac, shape.chunks - 1
    width = arith.o_shape.width
    checked = 0
    for number, (start, line, group, g) in enumerate(record.probes):
        block, entry = blocks[number], record.v_last[number]
        assert start == entry
        if len(block.k) == 1:
            continue
        checked += 1
        row, col = shape.row(r - 1, line, group), last * shape.split + g
        new, old = bits(block.o[row, col], width), bits(block.o_before_last[row, col], width)

        def value(t):
            return unpack(record.drained[t][0], width, shape.split)[g]
        first = start + PEArray.drain_read_latency
        seen = next(t for t in range(first, len(record.drained)) if value(t) == new)
        assert value(seen - 1) == old
        written = seen - PEArray.drain_read_latency - MAC.drain_write_lag(arith)
        assert written - (entry + 1 + group * shape.split + g) == latency
    assert checked


def check_ready_latency(record):
    """The array's `ready` is every lane's, ANDed, `PEArray.ready_latency` cycles later."""
    lag = PEArray.ready_latency
    assert record.array_ready[lag:] == record.lanes_ready[:-lag]
    assert any(a != b for a, b in zip(record.lanes_ready, record.lanes_ready[1:]))


# -- the tests ------------------------------------------------------------------------------

def mac_pa_takes_the_banks():
    """Whether `MAC`'s (P, alpha) port is the lane's `pa_layout` with a bank of range(banks);
    until it is, an array of more than two banks is not wired right."""
    arith = arith_named("int8")
    with warnings.catch_warnings():             # built for its signature, never elaborated
        warnings.simplefilter("ignore", UnusedElaboratable)
        mac = MAC(arith=arith, mac_lines=1, macs_per_line=1, rows_per_mac=2, head_dim=2,
                  macs_per_lane=1, index=0, lane_index=0, banks=3)
        layout = mac.signature.members["pa"].shape
        del mac
        gc.collect()
    return layout == pa_layout(arith=arith, macs_per_lane=1, rows_per_mac=2, banks=3)


BANKED = pytest.mark.skipif(not mac_pa_takes_the_banks(), reason="hdl/mac.py: MAC's pa port "
                            "is not yet pa_layout(..., banks=banks)")
CASES = pytest.mark.parametrize("fmt, shape_name", [
    pytest.param(fmt, shape, marks=BANKED if SHAPES[shape].banks > 2 else ())
    for fmt in ("int8", "fp16") for shape in SHAPES])


@CASES
def test_scores_o_l_and_m_are_the_twins_and_drain_reads_take_the_published_latency(
        fmt, shape_name):
    """The banks hold K_j's scores as V_j starts (`Bench.check_bank`, during the run);
    every drain read answers the twin's O, l (and m) `PEArray.drain_read_latency` cycles
    later, line 0 its own `MacLine.drain_read_latency` cycles later."""
    arith, shape, blocks, record = recorded(fmt, shape_name)
    check_drained_values(arith, shape, blocks, record)


@CASES
def test_every_score_is_written_the_published_score_latency_after_its_last_k_word(
        fmt, shape_name):
    check_score_latency(*recorded(fmt, shape_name))


@CASES
def test_the_last_o_update_is_written_the_published_update_latency_after_its_v_word(
        fmt, shape_name):
    check_update_latency(*recorded(fmt, shape_name))


@CASES
def test_the_arrays_ready_is_the_lanes_ready_after_the_published_ready_latency(
        fmt, shape_name):
    check_ready_latency(recorded(fmt, shape_name)[3])


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "int8"])
def test_a_float_lane_takes_c_from_a_kept_register_of_its_own(fmt):
    """Every lane scales by the same c; a float lane's scale operand registers would merge
    across lanes in Yosys (one register driving every line's DSPs: the float 4x4's worst
    path), so each float lane takes c from a register of its own with a `keep`
    (`attenio.gen.synth.KEPT_REGISTERS` keeps its flip-flops), wired to that lane's c
    alone. An fp16 c is normalized once, in the array, and the lanes take that (`fp.NORMAL`:
    no lane counts c's leading zeros); bf16's lanes take fp32 bits (its product normalizes
    after multiplying). int8's lanes take c as it comes."""
    from amaranth.back import rtlil

    shape = SHAPES["s2"]                                    # two lanes a line
    arith = arith_named(fmt)
    text = rtlil.convert(shape.build(arith))
    kept = re.findall(r"((?:  attribute [^\n]*\n)*)  wire width (\d+) \\(lane\d+_c)\n", text)
    normalizers = re.findall(r"wire width \d+ \\fcnorm_sig1\n", text)
    if fmt == "int8":
        assert kept == [] and normalizers == []
        return
    assert len(normalizers) == (fmt == "fp16")
    width = {"fp16": HDLShape.cast(fp.NORMAL).width, "bf16": 32}[fmt]
    assert HDLShape.cast(arith.lane_c_shape).width == width
    lanes_per_line = shape.exp_units // shape.mac_lines
    lines = shape.mac_lines                                 # a module each
    assert sorted(name for _, _, name in kept) == sorted(
        f"lane{n}_c" for n in range(lanes_per_line) for _ in range(lines))
    for attrs, got, name in kept:
        assert "attribute \\keep 1" in attrs and int(got) == width, (name, attrs)
        assert len(re.findall(rf"connect \\Q \\{name}\n", text)) == lines      # registers
        assert len(re.findall(rf"connect \\c \\{name} \[{width - 1}:0\]\n", text)) == lines
