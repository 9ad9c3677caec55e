"""cocotb bench of `attenio.hdl.core.AttentionCore` on its emitted Verilog.

Parameters (from the launcher, `attenio.sim.runner.bench_params`): the core's
`mac_lines`, `macs_per_line`, `rows_per_mac`, `head_dim`, `exp_units`,
`max_seq_len`, `split` (s: the feed and the output move chunks of s elements),
`format` (a name of `attenio.formats.FORMATS`); `blocks`, a list of [rows_valid,
n_keys] run back to back in `test_stream` (several blocks, so the drain of one overlaps
the Q load of the next); `random_blocks` for `test_backpressure`; `seed`; `report`, a JSON file
`test_stream` writes its cycle figures to.

The pieces are kept apart: `Block` (random Q/K/V in the format, a softmax constant,
and the golden model's elements; a float format's second block of `test_stream`
holds a NaN, an infinity and subnormals), `FeedDriver` (start commands and the feed in the
core's order, with optional random gaps), `Strobes` (counts pe_active /
exp_active and times every block), and the tests, which compare every byte with
the golden model (`attenio.sim.golden.attention` or `attenio.sim.golden_fp.attention`,
i.e. the twins of `Int8Arith` or `FloatArith`).
Streams, clock, reset and the seeded RNG come from `attenio.sim.tb`.
"""

import json

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from attenio.formats import format_by_name
from attenio.hdl.core import CoreTiming, Kind, feed_layout, start_layout
from attenio.hdl.formats import FloatArith, arith_of
from attenio.hdl.widthconv import element_layout
from attenio.sim import golden, golden_fp
from attenio.sim.runner import bench_params
from attenio.sim.tb.clock import reset, start_clock
from attenio.sim.tb.rng import seeded
from attenio.sim.tb.streams import StreamSink, StreamSource, pack, unpack

P = bench_params()
LINES = P.get("mac_lines", 2)
QM = P.get("macs_per_line", 2)
R = P.get("rows_per_mac", 1)
D = P.get("head_dim", 8)
E = P.get("exp_units", LINES)
NMAX = P.get("max_seq_len", 64)
SEED = P.get("seed", 1)
S = P.get("split", 1)
ROWS = R * LINES * QM // S
DC = D // S                          # chunks per row: array cycles per row and pass
FMT = format_by_name(P.get("format", "int8"))
ARITH = arith_of(FMT, max_seq_len=NMAX, head_dim=D)
FLOAT = isinstance(ARITH, FloatArith)
#: cycles of a K row per chunk (`CoreTiming.score_period`): r, or the float MACs' period
PERIOD = CoreTiming.of(ARITH, macs_per_line=QM, rows_per_mac=R, lanes=E // LINES,
                       split=S, head_dim=D).score_period
FEED = feed_layout(S, ARITH.element_shape)
START = start_layout(rows=ROWS, max_seq_len=NMAX)
OUT = element_layout(S, ARITH.out_shape)
DATAPATH = (golden_fp.FloatDatapath(ARITH.spec, max_seq_len=NMAX, head_dim=D, split=S,
                                    rows_per_mac=R, fixed=FMT.fixed,
                                    out=ARITH.out) if FLOAT else None)


def test_rng(name):
    """A seeded generator and its NumPy twin for one test, the seed printed for replay."""
    rng = seeded("bench_core", name, SEED, f"{LINES}x{QM}r{R}d{D}e{E}s{S}")
    return rng, rng.numpy()


def kv_order(n):
    """The core's feed order of K/V rows: K0, K1, V0, K2, V1, ..., V(N-1)."""
    seq = [("K", 0)]
    for j in range(1, n):
        seq += [("K", j), ("V", j - 1)]
    return seq + [("V", n - 1)]


class Block:
    """One Q block: random Q [rows, d], K, V [n, d] in the format, its softmax constant, and
    the expected elements. `specials` (float formats): subnormals in Q's first row, a NaN
    in its last (that row outputs NaN), an infinity in V's last row."""

    def __init__(self, nrng, rows, n, specials=False):
        self.rows, self.n = rows, n
        if FLOAT:
            self.c = ARITH.c
            # gaussian Q, K, V with a spread that makes the softmax neither flat nor one-hot
            q, k, v = (nrng.normal(0, sd, shape) for sd, shape in ((2.0, (rows, D)),
                                                                  (2.0, (n, D)), (1.0, (n, D))))
            if specials:
                q[0, :2] = ARITH.spec.to_float(np.array([1, 2], ARITH.spec.bits_dtype))
                q[rows - 1, D - 1] = np.nan
                v[n - 1, 0] = np.inf
            self.q, self.k, self.v = (DATAPATH.store(x) for x in (q, k, v))
            self.expected = golden_fp.attention(DATAPATH, self.q, self.k, self.v).reshape(-1)
            self.expected = self.expected.astype(int)
            return
        # scores spread over a realistic range: c between 2**-8 and 2**-3 (raw, c_frac bits)
        cf = ARITH.cfg.c_frac
        self.c = int(nrng.integers(1 << (cf - 8), 1 << (cf - 3)))
        self.q = nrng.integers(-128, 128, (rows, D))
        self.k = nrng.integers(-128, 128, (n, D))
        self.v = nrng.integers(-128, 128, (n, D))
        self.expected = golden.attention(self.q, self.k, self.v, c=self.c, a=rows,
                                         arith=ARITH).reshape(-1).astype(int)

    def words(self):
        out = [pack(FEED, kind=Kind.Q, value=x) for x in self.q.reshape(-1, S)]
        for kind, j in kv_order(self.n):
            row = self.k[j] if kind == "K" else self.v[j]
            out += [pack(FEED, kind=Kind[kind], value=x) for x in row.reshape(-1, S)]
        return out


class FeedDriver:
    """Issues each block's start command (with its c), then its feed words; `gap` is the
    probability of holding valid low for a cycle."""

    def __init__(self, dut, rng, gap=0.0):
        self.dut = dut
        self.start = StreamSource(dut, "start")
        self.feed = StreamSource(dut, "feed", rng=rng, gap=gap)

    async def run(self, blocks):
        for blk in blocks:
            self.dut.c.value = blk.c
            await self.start.send([pack(START, rows_valid=blk.rows, n_keys=blk.n)])
            await self.feed.send(blk.words())


class Strobes:
    """Per-cycle counters of the status strobes, with the cycle of every pe_active."""

    def __init__(self, dut):
        self.dut = dut
        self.cycle = 0
        self.pe = self.exp = 0
        self.pe_cycles = []
        self.out_cycles = []

    async def run(self):
        d = self.dut
        while True:
            await RisingEdge(d.clk)
            self.cycle += 1
            if d.pe_active.value:
                self.pe += 1
                self.pe_cycles.append(self.cycle)
            if d.exp_active.value:
                self.exp += 1
            if d.o_out__valid.value and d.o_out__ready.value:
                self.out_cycles.append(self.cycle)
            assert not d.error.value, "the core raised error"


async def run_blocks(dut, blocks, rng, *, gap=0.0, pause=0.0):
    start_clock(dut.clk)
    await reset(dut, cycles=3, idle=(dut.start__valid, dut.feed__valid, dut.o_out__ready,
                                     dut.start__payload, dut.feed__payload, dut.c))
    strobes = Strobes(dut)
    cocotb.start_soon(strobes.run())
    sink = StreamSink(dut, "o_out", rng=rng, ready=1.0 - pause)
    sink.start()
    driver = FeedDriver(dut, rng, gap)
    t0 = strobes.cycle
    await driver.run(blocks)
    total = sum(b.rows * DC for b in blocks)             # chunks
    budget = 50 * sum(b.n * (PERIOD + R) * DC + b.rows * DC + 400 for b in blocks)
    waited = 0
    while len(sink.items) < total and waited < budget:
        await RisingEdge(dut.clk)
        waited += 1
    for _ in range(20):                  # nothing more may come
        await RisingEdge(dut.clk)
    assert not dut.busy.value, "busy after the last byte"
    out = [unpack(OUT, word) for word in sink.items]
    assert len(out) == total, f"got {len(out)} chunks, expected {total}"
    got = np.array([[int(v) for v in o.value] for o in out], dtype=int).reshape(-1)
    off = 0
    for i, b in enumerate(blocks):
        seg = got[off:off + b.rows * D]
        bad = np.nonzero(seg != b.expected)[0]
        assert bad.size == 0, (
            f"block {i} (rows {b.rows}, n {b.n}): {bad.size} of {seg.size} elements differ from "
            f"the golden model; first at row {bad[0] // D}, col {bad[0] % D}: "
            f"got {seg[bad[0]]}, expected {b.expected[bad[0]]}")
        lasts = [o.last for o in out[off // S:(off + b.rows * D) // S]]
        assert lasts == [0] * (len(lasts) - 1) + [1], f"block {i}: last flags {lasts}"
        off += b.rows * D
    return strobes, sink, strobes.cycle - t0


@cocotb.test(timeout_time=200, timeout_unit="ms")
async def test_stream(dut):
    """Blocks back to back at full rate: bit-exact bytes, and the cycles per K/V row."""
    rng, nrng = test_rng("stream")
    blocks = [Block(nrng, rows, n, specials=FLOAT and i == 1)
              for i, (rows, n) in enumerate(P.get("blocks", [[ROWS, 8]]))]
    strobes, sink, cycles = await run_blocks(dut, blocks, rng)
    # steady state of each block: from its first to its last S/U element into the array
    figures = []
    pe_cycles = strobes.pe_cycles
    off = out = 0
    for b in blocks:
        count = b.n * 2 * R * DC
        idle = b.n * (PERIOD - R) * DC       # a float format's idle slots in the K rows
        span = pe_cycles[off + count - 1] - pe_cycles[off] + 1
        figures.append({"rows_valid": b.rows, "n_keys": b.n, "array_cycles": span,
                        "cycles_per_row": span / b.n, "ideal_per_row": (PERIOD + R) * DC,
                        "stall_cycles": span - count - idle,
                        # from the last U chunk entering the array to the first O chunk out
                        "drain_latency": strobes.out_cycles[out] - pe_cycles[off + count - 1],
                        "drain_cycles": strobes.out_cycles[out + b.rows * DC - 1]
                        - strobes.out_cycles[out] + 1})
        off += count
        out += b.rows * DC
    assert off == strobes.pe, f"pe_active counted {strobes.pe}, expected {off}"
    report = {"config": {"mac_lines": LINES, "macs_per_line": QM, "rows_per_mac": R,
                         "head_dim": D, "exp_units": E, "split": S, "format": FMT.name},
              "blocks": figures, "total_cycles": cycles, "pe_active": strobes.pe,
              "exp_active": strobes.exp, "pe_busy_fraction": strobes.pe / cycles}
    for f in figures:
        dut._log.info("block rows %d N %d: %.2f cycles per K/V row (ideal (P + r)*d/s = %d), "
                      "%d stall cycles; first O chunk %d cycles after the last U chunk, "
                      "%d chunks in %d cycles", f["rows_valid"], f["n_keys"],
                      f["cycles_per_row"], f["ideal_per_row"], f["stall_cycles"],
                      f["drain_latency"], f["rows_valid"] * DC, f["drain_cycles"])
    dut._log.info("PE busy %d of %d cycles (%.1f%%)", strobes.pe, cycles,
                  100 * strobes.pe / cycles)
    if P.get("report"):
        with open(P["report"], "w") as fh:
            json.dump(report, fh, indent=1)


@cocotb.test(timeout_time=400, timeout_unit="ms")
async def test_backpressure(dut):
    """Random gaps in the feed and random back-pressure on o_out, random block shapes."""
    rng, nrng = test_rng("backpressure")
    count = P.get("random_blocks", 3)
    nmax = min(NMAX, P.get("random_nmax", 12))
    blocks = [Block(nrng, rng.randint(1, ROWS), rng.randint(1, nmax)) for _ in range(count)]
    await run_blocks(dut, blocks, rng, gap=0.3, pause=0.3)
