"""The normalizer against its format's twins, with the PE array's read port played by a twin.

`Normalizer` (hdl/normalizer.py) drains a finished block: armed by its block command,
started by the block's last V word at the last MAC (`tail`), it reads each valid row's
O chunks and l (and m, for a float format) through the array's read port and sends
O * (1/l) in the storage format down `o_out`. Here a Python twin of the array answers
each read `PEArray.drain_read_latency` cycles after the request (and noise on every
other cycle), the block commands and tails come at seeded random gaps, blocks overlap
the previous block's drain, and the consumer takes `o_out` under seeded random
back-pressure. Every chunk is held to the twins the golden models use
(`np_reciprocal`, then `np_finalize`; a float row whose max is NaN or +inf, or whose l is
0, is the canonical NaN, as `attenio.sim.golden_fp` has it), `busy` to the blocks in
flight, and the cycles to the published latencies (`Normalizer.trigger_latency`,
`Normalizer.latency`, `Normalizer.output_latency`).
"""

from dataclasses import dataclass, field

import numpy as np
import pytest
from amaranth.hdl import Fragment

from amaranth_sim import run_clocked
from attenio.formats import FORMATS, format_by_name
from attenio.hdl.formats import FloatArith, arith_of
from attenio.hdl.formats.fp import FP32
from attenio.hdl.normalizer import Normalizer
from attenio.hdl.pe_array import PEArray

MAX_SEQ_LEN = 64


@dataclass(frozen=True)
class Shape:
    """The array the normalizer drains."""

    mac_lines: int
    macs_per_line: int
    rows_per_mac: int
    head_dim: int
    lanes: int
    split: int

    @property
    def groups_per_line(self):
        return self.macs_per_line // self.split

    @property
    def groups_per_lane(self):
        return self.groups_per_line // self.lanes

    @property
    def chunks(self):
        """Chunks of `split` elements per row."""
        return self.head_dim // self.split

    @property
    def block_rows(self):
        return self.rows_per_mac * self.mac_lines * self.groups_per_line

    def row_of(self, addr, u, mac, lane, line):
        """The block row and chunk a read of the port addresses (`drain_signature`), its
        fields checked against each other."""
        slot, chunk = divmod(addr, self.chunks)
        assert lane == mac // self.groups_per_lane
        assert u == slot * self.groups_per_lane + mac % self.groups_per_lane
        return (slot * self.mac_lines + line) * self.groups_per_line + mac, chunk


SHAPES = {
    "s1": Shape(mac_lines=2, macs_per_line=4, rows_per_mac=2, head_dim=4, lanes=2, split=1),
    "s2": Shape(mac_lines=2, macs_per_line=4, rows_per_mac=2, head_dim=8, lanes=1, split=2),
    "s4": Shape(mac_lines=1, macs_per_line=4, rows_per_mac=2, head_dim=8, lanes=1, split=4),
}


def arith_named(name):
    return arith_of(format_by_name(name), max_seq_len=MAX_SEQ_LEN, head_dim=8)


# -- the twin ------------------------------------------------------------------------------

@dataclass
class Block:
    """One block's array contents (O, l and m of every row of the array) and its valid rows."""

    rows_valid: int
    o: np.ndarray
    l: np.ndarray
    m: np.ndarray = None


def expected_chunks(arith, shape, block):
    """[(elements, last)] of the block's valid rows, row-major: O * (1/l) through the
    format's twins, as `attenio.sim.golden.finish` and `attenio.sim.golden_fp` compute it."""
    rows = block.rows_valid
    y, e = arith.np_reciprocal(block.l[:rows])
    if isinstance(arith, FloatArith):
        out = arith.np_finalize(block.o[:rows].astype(np.uint32), y[:, None], e[:, None])
        m = block.m[:rows].astype(np.uint32)
        bad = FP32.is_nan(m) | (m == FP32.inf) | (block.l[:rows] == 0)
        out = np.where(bad[:, None], arith.out.nan, out)
    else:
        out = arith.np_finalize(block.o[:rows], y[:, None], e[:, None])
    out = np.asarray(out, np.int64)
    chunks = out.reshape(rows * shape.chunks, shape.split)
    return [(list(c), k == len(chunks) - 1) for k, c in enumerate(chunks)]


def random_block(arith, shape, rng, rows_valid):
    """A block's contents as the array leaves them: l in [1, N] (fixed point), O about l
    times an output a little beyond the storage range; a float format's m mostly finite."""
    n = shape.block_rows
    one = arith.fixed.one if isinstance(arith, FloatArith) else arith.one
    l = rng.integers(one, MAX_SEQ_LEN * one + 1, n)
    if isinstance(arith, FloatArith):
        magnitude = 10.0 ** rng.integers(-3, 4, (n, 1))
        value = rng.normal(scale=4.0, size=(n, shape.head_dim)) * magnitude
        o = (value * (l[:, None] / one)).astype(np.float32).view(np.uint32).astype(np.int64)
        m = rng.normal(scale=8.0, size=n).astype(np.float32).view(np.uint32).astype(np.int64)
        return Block(rows_valid, o, l, m)
    o = np.rint(rng.uniform(-140, 140, (n, shape.head_dim)) * l[:, None]).astype(np.int64)
    return Block(rows_valid, o, l)


def edge_block(arith, shape, rng):
    """A full block of the edge cases, row by row: l at one (its least once the max has
    contributed its exact one), beside the powers of two, at N (its most: the format's
    widths hold N keys) and below one (which reads as one); O at zero, at the rounding and
    saturation boundaries and at the ends of what l allows (|O| <= 128 l); a float format's
    O and m also at +-0, +-inf, NaN and subnormals, and l at 0."""
    n = shape.block_rows
    if isinstance(arith, FloatArith):
        one = arith.fixed.one
        ls = [0, one, one + 1, 2 * one - 1, 2 * one, MAX_SEQ_LEN * one, 1, one - 1]
        specials = np.array([0, FP32.sign_bit, FP32.inf, FP32.neg_inf, FP32.nan, 0xFFC00001,
                             1, 0x807FFFFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0x477FE000,
                             0x47800000, 0x33800000], np.int64)
        l = np.array([ls[k % len(ls)] for k in range(n)], np.int64)
        o = rng.choice(specials, size=(n, shape.head_dim))
        m = np.array([[0x41000000, FP32.nan, FP32.inf, FP32.neg_inf, 0xFFC00000,
                       FP32.sign_bit][k % 6] for k in range(n)], np.int64)
        return Block(n, o, l, m)
    one = arith.one
    ls = [one, one + 1, 2 * one - 1, 2 * one, MAX_SEQ_LEN * one, MAX_SEQ_LEN * one - 1, 0,
          one - 1, 3 * one]
    l = np.array([ls[k % len(ls)] for k in range(n)], np.int64)
    lsat = np.maximum(l, one)
    boundaries = [127, 127.5, 128, -128, -128.5, -129, 0.5, -0.5, 0]
    o = np.zeros((n, shape.head_dim), np.int64)
    for row in range(n):
        for col in range(shape.head_dim):
            k = row * shape.head_dim + col
            ends = [0, 1, -1, 128 * lsat[row], -128 * lsat[row]]
            if k % 3 == 0:
                o[row, col] = ends[k % len(ends)]
            else:
                b = boundaries[k % len(boundaries)] * lsat[row]
                o[row, col] = int(np.rint(b)) + int(rng.integers(-2, 3))
    return Block(n, o, l)


# -- the bench -----------------------------------------------------------------------------

@dataclass
class Trace:
    """What the bench saw, cycle by cycle."""

    taken: list = field(default_factory=list)          # (cycle, elements, last)
    written: list = field(default_factory=list)        # cycles of the output FIFO's writes
    offered: list = field(default_factory=list)        # cycles o_out is valid
    requests: list = field(default_factory=list)       # (cycle, row, chunk) on the read port
    busy: list = field(default_factory=list)
    accepted: list = field(default_factory=list)       # cycle of each block command taken
    tails: list = field(default_factory=list)          # cycle of each block's tail trigger


def tail_word(shape, rng, *, trigger):
    """A word at the last MAC: the block's last V word (`trigger`), or one that is not
    (another kind, another slot or chunk, not the last row)."""
    word = {"valid": 1, "is_u": 1, "last": 1, "klast": 1, "slot": shape.rows_per_mac - 1,
            "addr": int(rng.integers(shape.rows_per_mac * shape.chunks)),
            "bank": int(rng.integers(2))}
    if not trigger:
        spoil = rng.integers(5)
        word.update([{"valid": 0}, {"is_u": 0, "is_s": 1}, {"last": 0}, {"klast": 0},
                     {"slot": int(rng.integers(shape.rows_per_mac - 1))}][spoil])
    return word


def run(arith, shape, blocks, rng, *, ready_chance, max_gap):
    """Drains `blocks` through a `Normalizer`; returns its `Trace`."""
    dut = Normalizer(arith=arith, mac_lines=shape.mac_lines, macs_per_line=shape.macs_per_line,
                     rows_per_mac=shape.rows_per_mac, block_rows=shape.block_rows,
                     head_dim=shape.head_dim, lanes=shape.lanes, split=shape.split)
    fragment = Fragment.get(dut, None)
    out_fifo = fragment.find_subfragment("out_fifo").origins[0]
    is_float = isinstance(arith, FloatArith)
    latency = PEArray.drain_read_latency
    trace = Trace()
    expected = sum(len(expected_chunks(arith, shape, b)) for b in blocks)

    async def bench(ctx):
        answers = {}                     # cycle -> (o, l, m) the array puts on the port
        current = None                   # the block whose rows the array holds
        pending = list(blocks)
        wait = int(rng.integers(max_gap + 1))
        tail_at = None
        cycle = 0
        while len(trace.taken) < expected:
            assert cycle < 200 * expected, "the normalizer stalled"
            # the array's answer to the read `latency` cycles ago, noise otherwise
            if cycle in answers:
                o, l, m = answers.pop(cycle)
            else:
                o = [int(x) for x in rng.integers(0, 1 << 30, shape.split)]
                l, m = int(rng.integers(0, 1 << 20)), int(rng.integers(0, 1 << 32))
            ctx.set(dut.array.o, o)
            ctx.set(dut.array.l, l)
            if is_float:
                ctx.set(dut.array.m, m)
            # the read the normalizer makes this cycle, answered `latency` cycles later
            request = [ctx.get(getattr(dut.array, name))
                       for name in ("addr", "u", "mac", "lane", "line")]
            row, chunk = shape.row_of(*request)
            trace.requests.append((cycle, row, chunk))
            if current is not None:
                answers[cycle + latency] = (
                    [int(x) for x in current.o[row, chunk * shape.split:(chunk + 1) * shape.split]],
                    int(current.l[row]), int(current.m[row]) if is_float else 0)
            # the next block's command once the previous one is drained, after a gap
            ctx.set(dut.block.valid, 0)
            if pending and tail_at is None:
                if wait:
                    wait -= 1
                else:
                    ctx.set(dut.block.valid, 1)
                    ctx.set(dut.block.payload.rows_valid, pending[0].rows_valid)
                    if ctx.get(dut.block.ready):
                        current = pending.pop(0)
                        trace.accepted.append(cycle)
                        tail_at = cycle + int(rng.integers(max_gap + 1))
            # the block's last V word at the last MAC, other words around it
            trigger = tail_at == cycle
            other = rng.random() < 0.3
            ctx.set(dut.tail, tail_word(shape, rng, trigger=trigger) if trigger or other
                    else {"valid": 0})
            if trigger:
                trace.tails.append(cycle)
                tail_at = None
                wait = int(rng.integers(max_gap + 1))
            # the consumer
            ready = int(rng.random() < ready_chance)
            ctx.set(dut.o_out.ready, ready)
            if ctx.get(dut.o_out.valid):
                trace.offered.append(cycle)
                if ready:
                    payload = ctx.get(dut.o_out.payload)
                    trace.taken.append((cycle, [int(x) for x in payload.value],
                                        bool(payload.last)))
            if ctx.get(out_fifo.w_en):
                assert ctx.get(out_fifo.w_rdy), "a chunk written into a full FIFO"
                trace.written.append(cycle)
            trace.busy.append(ctx.get(dut.busy))
            await ctx.tick()
            cycle += 1

    run_clocked(fragment, bench)
    return trace


def check_outputs(arith, shape, blocks, trace):
    want = [chunk for b in blocks for chunk in expected_chunks(arith, shape, b)]
    got = [(values, last) for _, values, last in trace.taken]
    for k, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"chunk {k}: {g} != {w}"
    assert len(got) == len(want)


def check_busy(blocks, trace):
    """`busy` from the cycle after a block command is taken to its last chunk taken."""
    ends = [cycle for cycle, _, last in trace.taken if last]
    for t, busy in enumerate(trace.busy):
        want = any(a < t <= z for a, z in zip(trace.accepted, ends))
        assert busy == want, f"cycle {t}: busy {busy}, expected {want}"


# -- the tests -----------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("shape_name", ["s1", "s2", "s4"])
def test_every_chunk_is_o_times_the_reciprocal_of_l_under_random_back_pressure(
        rng, fmt, shape_name):
    arith, shape = arith_named(fmt), SHAPES[shape_name]
    blocks = [random_block(arith, shape, rng, int(rng.integers(1, shape.block_rows + 1)))
              for _ in range(4)]
    blocks.append(random_block(arith, shape, rng, shape.block_rows))
    trace = run(arith, shape, blocks, rng, ready_chance=0.6, max_gap=6)
    check_outputs(arith, shape, blocks, trace)
    check_busy(blocks, trace)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_edge_values_of_l_and_o_and_the_nan_rows(rng, fmt):
    """l at one, N, the largest it holds and beside the powers of two; O at the rounding
    and saturation boundaries; a float row whose max is NaN or +inf, or whose l is 0,
    is NaN in every element, whatever its O."""
    arith, shape = arith_named(fmt), SHAPES["s2"]
    blocks = [edge_block(arith, shape, rng) for _ in range(2)]
    trace = run(arith, shape, blocks, rng, ready_chance=0.8, max_gap=2)
    check_outputs(arith, shape, blocks, trace)
    if isinstance(arith, FloatArith):
        nans = sum(values == [arith.out.nan] * shape.split for _, values, _ in trace.taken)
        assert nans >= len(trace.taken) // 2        # the rule was exercised


@pytest.mark.parametrize("fmt", ["int8", "fp16"])
@pytest.mark.parametrize("shape_name", ["s1", "s2", "s4"])
def test_the_published_latencies_are_the_cycles_observed(rng, fmt, shape_name):
    """With a consumer always ready: the tail to the first chunk written into the output
    FIFO is `trigger_latency` + `latency` + the chunk's reads after its first (a chunk
    is read s/F times, `Normalizer.finalizers`); a chunk's last read on the port to its
    write is `latency` less its issue's cycle (the read leaves a register one cycle
    after the issue); a write to its offer on `o_out` is `output_latency`; and the
    chunks of a block leave s/F cycles apart, a row's in `row_cycles` (the FIFO's
    credits never hold the drain)."""
    arith, shape = arith_named(fmt), SHAPES[shape_name]
    blocks = [random_block(arith, shape, rng, int(rng.integers(2, shape.block_rows + 1)))
              for _ in range(3)]
    trace = run(arith, shape, blocks, rng, ready_chance=1.0, max_gap=4)
    check_outputs(arith, shape, blocks, trace)
    trigger, latency = Normalizer.trigger_latency(arith), Normalizer.latency(arith)
    assert len(trace.written) == len(trace.taken)
    assert [t - w for (t, _, _), w in zip(trace.taken, trace.written)] == \
        [Normalizer.output_latency] * len(trace.written)
    assert trace.offered == [t for t, _, _ in trace.taken]
    reads = shape.split // Normalizer.finalizers(arith, shape.split)
    assert Normalizer.row_cycles(arith, shape.split, shape.head_dim) == shape.chunks * reads
    first = 0
    for block, tail in zip(blocks, trace.tails):
        n = block.rows_valid * shape.chunks
        writes = trace.written[first:first + n]
        assert writes[0] - tail == trigger + latency + reads - 1
        assert writes == list(range(writes[0], writes[0] + n * reads, reads))
        # chunk k's reads on the port, `reads` cycles in a row, after chunk k - 1's (k >= 1:
        # chunk 0's address may be there before the drain starts)
        seen = tail
        for k in range(n):
            seen = next(c for c, row, chunk in trace.requests
                        if c >= seen and (row, chunk) == divmod(k, shape.chunks))
            if k:
                assert [divmod(k, shape.chunks)] * reads == \
                    [(row, chunk) for _, row, chunk in trace.requests[seen:seen + reads]]
                assert writes[k] - (seen + reads - 1) == latency - 1
        first += n
