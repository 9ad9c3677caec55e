"""cocotb bench of `attenio.hdl.dma.DMA` on an AXI memory (`attenio.sim.tb.axi_memory`).

Parameters (from the launcher, see `attenio.sim.runner.bench_params`): `data_width`,
`addr_width`, `max_reads`, `max_writes`, `seed`, `random_cmds` (commands per side in
`test_random_traffic`), `rounds`, `throughput_beats`, `latency`, `timeout_scale`,
`report` (a JSON file `test_throughput` writes its figures to).

The memory, the AXI protocol monitor and the stream drivers come from the
testbench library (`attenio.sim.tb`); here are the DMA's own stimulus (random and
corner-case commands) and the tests, which compare against the Python twin
`split_bursts` and the memory image.
"""

import json

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from attenio.hdl.axi import AXI_4KB
from attenio.hdl.dma import command_layout, error_layout, read_data_layout, split_bursts
from attenio.sim.runner import bench_params
from attenio.sim.tb.axi_memory import AxiMemory
from attenio.sim.tb.axi_monitor import AxiMonitor
from attenio.sim.tb.clock import reset, start_clock
from attenio.sim.tb.rng import seeded
from attenio.sim.tb.streams import StreamSink, StreamSource, pack, unpack

P = bench_params()
DW = P.get("data_width", 64)
AW = P.get("addr_width", 32)
MAX_READS = P.get("max_reads", 4)
MAX_WRITES = P.get("max_writes", 4)
SEED = P.get("seed", 1)
BPB = DW // 8                       # bytes per beat
MAX_BURST = P.get("max_burst_beats")  # the DMA's own limit, from the launcher (None outside)
MEM_SIZE = 1 << 21                  # 2 MB: reads from the lower half, writes to the upper
READ_BASE, WRITE_BASE = 0, 1 << 20
REGION = 1 << 20
ROUNDS = P.get("rounds", 1)          # rounds of `random_cmds` commands per side
TIMEOUT_SCALE = P.get("timeout_scale", 1.0)   # simulated-time limits scale with the work
COMMAND = command_layout(AW)
READ_DATA = read_data_layout(DW)
ERROR = error_layout()


def timeout_ms(base):
    return base * TIMEOUT_SCALE


def test_rng(name):
    """One seeded generator per test, its seed printed so a failure can be replayed."""
    return seeded("bench_dma", name, SEED, DW)


def command(addr, length):
    return pack(COMMAND, addr=addr, length=length)


class Bench:
    """The DMA with its memory and monitor; `run` drives its five streams at once."""

    def __init__(self, dut, rng):
        self.dut, self.rng = dut, rng
        self.mem = AxiMemory.from_prefix(dut, "m_axi", size=MEM_SIZE, rng=rng)
        self.mon = None

    async def start(self):
        d = self.dut
        start_clock(d.clk)
        await reset(d, cycles=5, settle=0, idle=(
            d.rd_cmd__valid, d.rd_data__ready, d.wr_cmd__valid, d.wr_data__valid,
            d.wr_done__ready, d.error_clear, d.counters_clear, d.rd_cmd__payload,
            d.wr_cmd__payload, d.wr_data__payload))
        self.mon = AxiMonitor(d, "m_axi", max_reads=MAX_READS, max_writes=MAX_WRITES,
                              max_burst=MAX_BURST)
        await ClockCycles(d.clk, 2)

    def fill(self, base, length):
        data = self.rng.randbytes(length)
        self.mem.write(base, data)
        return data

    async def run(self, reads=(), writes=(), write_data=None, *, cmd_gap=0.0, ready=1.0,
                  data_gap=0.0):
        """Run read commands and write commands concurrently; return (beats, dones, cycles).

        `write_data` maps each write command to its bytes. Returns the read beats as
        (data, last) pairs and the `wr_done` entries.
        """
        d, rng = self.dut, self.rng
        read_beats = sum(n for c in reads for _, n in split_bursts(*c, data_width=DW))
        wbeats = []
        for (addr, length), payload in zip(writes, write_data or []):
            wbeats += [int.from_bytes(payload[i:i + BPB], "little")
                       for i in range(0, len(payload), BPB)]
        writes_ok = [w for w in writes if split_bursts(*w, data_width=DW)]
        rd_data = StreamSink(d, "rd_data", rng=rng, ready=ready)
        wr_done = StreamSink(d, "wr_done", rng=rng, ready=ready)
        tasks = [
            cocotb.start_soon(StreamSource(d, "rd_cmd", rng=rng, gap=cmd_gap)
                              .send([command(*c) for c in reads])),
            cocotb.start_soon(rd_data.take(read_beats)),
            cocotb.start_soon(StreamSource(d, "wr_cmd", rng=rng, gap=cmd_gap)
                              .send([command(*c) for c in writes])),
            cocotb.start_soon(StreamSource(d, "wr_data", rng=rng, gap=data_gap).send(wbeats)),
            cocotb.start_soon(wr_done.take(len(writes_ok))),
        ]
        cycles = 0
        while not all(t.done() for t in tasks):
            await RisingEdge(d.clk)
            cycles += 1
        for t in tasks:
            t.result()                      # re-raise anything a driver raised
        # Nothing more may arrive once the expected beats are in: wait and look.
        for _ in range(20):
            await RisingEdge(d.clk)
            assert not d.rd_data__valid.value, "a read beat beyond the commands' lengths"
            assert not d.wr_done__valid.value, "a wr_done beyond the write commands"
        beats = [(b.data, b.last) for b in (unpack(READ_DATA, v) for v in rd_data.items)]
        return beats, wr_done.items, cycles

    def expect_read(self, reads, beats):
        """The beats must be the memory's bytes, in command order, `last` on command ends."""
        i = 0
        for n, (addr, length) in enumerate(reads):
            image = self.mem.read(addr, length)
            for k in range(length // BPB):
                data, last = beats[i]
                want = int.from_bytes(image[k * BPB:(k + 1) * BPB], "little")
                assert data == want, (f"read command {n} ({addr:#x}+{length}) beat {k}: "
                                      f"{data:#x} != {want:#x}")
                assert last == (k == length // BPB - 1), f"read command {n} beat {k}: last={last}"
                i += 1
        assert i == len(beats), f"{len(beats) - i} extra read beats"

    def expected_bursts(self, cmds):
        return [b for c in cmds for b in split_bursts(*c, data_width=DW)]


# --- stimulus -----------------------------------------------------------------------------

def aligned_commands(rng, count, base, span, *, max_beats, near_boundary=0.3, disjoint=False):
    """Random beat-aligned (addr, length) commands inside [base, base + span).

    A share start just below a 4 KB boundary so they cross it; with `disjoint` the
    commands never overlap (so a write image is unambiguous).
    """
    cmds, cursor = [], base
    for _ in range(count):
        beats = rng.choice([1, 1, 2, rng.randint(1, 16), rng.randint(1, max_beats)])
        length = beats * BPB
        if disjoint:
            addr = cursor + rng.randrange(0, 4) * BPB
            if rng.random() < near_boundary:
                page_end = (addr // AXI_4KB + 1) * AXI_4KB
                addr = page_end - rng.randint(1, min(4, page_end // BPB)) * BPB
                if addr < cursor:
                    addr = page_end
            cursor = addr + length
        else:
            addr = base + rng.randrange(0, (span - length) // BPB) * BPB
            if rng.random() < near_boundary:
                page_end = (addr // AXI_4KB + 1) * AXI_4KB
                addr = min(page_end - rng.randint(1, 4) * BPB, base + span - length)
        assert base <= addr and addr + length <= base + span
        cmds.append((addr, length))
    return cmds


def corner_commands(base):
    """Beat-aligned corner cases: one beat, 4 KB exactly, boundaries, the largest bursts."""
    page = AXI_4KB
    max_bytes = MAX_BURST * BPB
    return [
        (base, BPB),                                  # one beat
        (base + page - BPB, BPB),                     # one beat, last in its page
        (base + page, page),                          # exactly 4 KB, page-aligned
        (base + 3 * page - BPB, 2 * BPB),             # two beats straddling a boundary
        (base + 4 * page + 128, page),                # 4 KB not aligned: crosses once
        (base + 6 * page, max_bytes),                 # exactly one maximal burst
        (base + 7 * page, max_bytes + BPB),           # one beat past it
        (base + 8 * page + BPB, 3 * page),            # many bursts, several boundaries
        (base + 12 * page - 256, 512),                # small, crossing
    ]


# --- the tests ----------------------------------------------------------------------------

async def _read_write_and_check(bench, reads, writes, *, cmd_gap, ready, data_gap):
    d, mon = bench.dut, bench.mon
    read_before, written_before = int(d.bytes_read.value), int(d.bytes_written.value)
    image = {w: bench.rng.randbytes(w[1]) for w in writes}
    beats, dones, cycles = await bench.run(reads, writes, [image[w] for w in writes],
                                           cmd_gap=cmd_gap, ready=ready, data_gap=data_gap)
    await ClockCycles(d.clk, 5)
    bench.expect_read(reads, beats)
    for addr, length in writes:
        assert bench.mem.read(addr, length) == image[(addr, length)], \
            f"write {addr:#x}+{length}: memory differs"
    mon.check()
    assert mon.ar == bench.expected_bursts(reads), "AR bursts differ from split_bursts"
    assert mon.aw == bench.expected_bursts(writes), "AW bursts differ from split_bursts"
    read_bytes = sum(length for _, length in reads)
    write_bytes = sum(length for _, length in writes)
    assert mon.r_beats * BPB == read_bytes and mon.w_beats * BPB == write_bytes
    assert int(d.bytes_read.value) - read_before == read_bytes, \
        f"bytes_read {int(d.bytes_read.value) - read_before} != {read_bytes}"
    assert int(d.bytes_written.value) - written_before == write_bytes, \
        f"bytes_written {int(d.bytes_written.value) - written_before} != {write_bytes}"
    assert len(dones) == len(writes) and not any(dones), f"wr_done {dones}"
    assert mon.r_stalls == 0, f"RREADY low under RVALID in {mon.r_stalls} cycles"
    assert int(d.error.value) == 0, f"error status {int(d.error.value):#05b}"
    assert not d.busy.value, "DMA still busy after all traffic"
    return cycles


@cocotb.test(timeout_time=timeout_ms(5), timeout_unit="ms")
async def test_corners(dut):
    """Corner-case commands one at a time, then all at once, on a quiet and a noisy bus."""
    rng = test_rng("corners")
    bench = Bench(dut, rng)
    await bench.start()
    bench.fill(READ_BASE, REGION // 4)
    reads = corner_commands(READ_BASE)
    writes = corner_commands(WRITE_BASE)
    for noisy in (False, True):
        bench.mem.back_pressure(0.3 if noisy else 0)
        bench.mem.latency = (0.1, 8) if noisy else (0.0, 0)
        for r, w in zip(reads, writes):
            bench.mon.reset_stats()
            await _read_write_and_check(bench, [r], [w], cmd_gap=0, ready=0.7 if noisy else 1,
                                        data_gap=0.3 if noisy else 0)
        bench.mon.reset_stats()
        await _read_write_and_check(bench, reads, writes, cmd_gap=0,
                                    ready=0.7 if noisy else 1, data_gap=0.3 if noisy else 0)
    assert int(dut.bytes_read.value) == 2 * 2 * sum(length for _, length in reads)


@cocotb.test(timeout_time=timeout_ms(5), timeout_unit="ms")
async def test_read_backpressure(dut):
    """A slow consumer of `rd_data` throttles AR; R is never stalled and nothing is lost.

    Four maximal bursts against a read FIFO of two: without the reservation the
    FIFO would fill with bursts in flight and RREADY would have to drop.
    """
    rng = test_rng("read_backpressure")
    bench = Bench(dut, rng)
    await bench.start()
    bench.fill(READ_BASE, 8 * MAX_BURST * BPB)
    reads = [(READ_BASE, 4 * MAX_BURST * BPB), (READ_BASE + 4 * MAX_BURST * BPB, 4 * BPB)]
    await _read_write_and_check(bench, reads, [], cmd_gap=0, ready=0.15, data_gap=0)
    assert bench.mon.max_reads_in_flight >= 2, "no reads overlapped"


@cocotb.test(timeout_time=timeout_ms(20 * ROUNDS), timeout_unit="ms")
async def test_random_traffic(dut):
    """Random commands on both sides at once, random latency and back-pressure everywhere.

    `rounds` rounds of `random_cmds` commands per side, each checked in full (data,
    bursts, counters, nothing written outside the commands) before the next.
    """
    rng = test_rng("random_traffic")
    count = P.get("random_cmds", 100)
    bench = Bench(dut, rng)
    await bench.start()
    bench.mem.back_pressure(0.25)
    bench.mem.latency = (0.05, 16)
    max_beats = min(3 * MAX_BURST, 2 * AXI_4KB // BPB)
    totals = {"reads": 0, "writes": 0, "ar": 0, "aw": 0, "cycles": 0, "max_r": 0, "max_w": 0}
    for _ in range(ROUNDS):
        bench.fill(READ_BASE, REGION)
        before = bench.fill(WRITE_BASE, REGION)
        reads = aligned_commands(rng, count, READ_BASE, REGION, max_beats=max_beats)
        writes = aligned_commands(rng, count, WRITE_BASE, REGION, max_beats=max_beats,
                                  disjoint=True)
        bench.mon.reset_stats()
        cycles = await _read_write_and_check(bench, reads, writes, cmd_gap=0.1, ready=0.6,
                                             data_gap=0.2)
        # Nothing outside the commands was written.
        after = bytearray(bench.mem.read(WRITE_BASE, REGION))
        for addr, length in writes:
            o = addr - WRITE_BASE
            after[o:o + length] = before[o:o + length]
        assert bytes(after) == before, "the DMA wrote outside its commands"
        mon = bench.mon
        for key, value in (("reads", len(reads)), ("writes", len(writes)), ("ar", len(mon.ar)),
                           ("aw", len(mon.aw)), ("cycles", cycles)):
            totals[key] += value
        totals["max_r"] = max(totals["max_r"], mon.max_reads_in_flight)
        totals["max_w"] = max(totals["max_w"], mon.max_writes_in_flight)
    dut._log.info("random traffic: %d reads (%d bursts), %d writes (%d bursts) in %d cycles; "
                  "at most %d reads and %d writes in flight", totals["reads"], totals["ar"],
                  totals["writes"], totals["aw"], totals["cycles"], totals["max_r"],
                  totals["max_w"])
    print(f"bench_dma random traffic: {totals}", flush=True)
    assert totals["max_r"] >= min(2, MAX_READS), "reads were never overlapped"
    assert totals["max_w"] >= min(2, MAX_WRITES), "writes were never overlapped"


@cocotb.test(timeout_time=timeout_ms(2), timeout_unit="ms")
async def test_errors(dut):
    """SLVERR on R and B reaches the sticky status; reads continue, the writer writes
    nothing after the failed B but the bursts AW had taken and still completes every
    command; clear works."""
    rng = test_rng("errors")
    bench = Bench(dut, rng)
    await bench.start()
    bench.fill(READ_BASE, 8 * AXI_4KB)
    bench.mem.back_pressure(0.2)
    bad = (READ_BASE + AXI_4KB + 4 * BPB, READ_BASE + AXI_4KB + 5 * BPB)      # one read beat
    # One write beat, in the first of the two bursts of the second write command.
    wbad = (WRITE_BASE + 2 * AXI_4KB - 2 * BPB, WRITE_BASE + 2 * AXI_4KB - BPB)
    bench.mem.poisoned = [bad, wbad]
    reads = [(READ_BASE, BPB), (READ_BASE + AXI_4KB, 16 * BPB), (READ_BASE + 3 * AXI_4KB, 4 * BPB)]
    writes = [(WRITE_BASE, 8 * BPB), (WRITE_BASE + 2 * AXI_4KB - 4 * BPB, 8 * BPB),
              (WRITE_BASE + 4 * AXI_4KB, 4 * BPB)]
    data = [rng.randbytes(length) for _, length in writes]
    beats, dones, _ = await bench.run(reads, writes, data)
    await ClockCycles(dut.clk, 5)
    err = unpack(ERROR, int(dut.error.value))
    status = f"error status {err.as_bits():#05b}"
    assert err.read and err.write, f"{status}: read and write errors expected"
    assert not err.command, f"{status}: no malformed command was sent"
    # Every beat still arrived; good beats intact, the poisoned beat as the slave gave it (zero).
    assert len(beats) == sum(length for _, length in reads) // BPB
    assert beats[1 + 4][0] == 0
    good = [b for i, b in enumerate(beats) if i != 5]
    assert len(good) == len(beats) - 1
    # The writer stops at the failed B: a command is written in full only if AW took all
    # of its bursts (before, or already up when, the error came), and is done failed if
    # a burst of it failed or was dropped; the write region is zero where nothing went.
    taken = set(bench.mon.aw)
    expect = [any((a, n) not in taken or a <= wbad[0] < a + n * BPB
                  for a, n in split_bursts(*w, data_width=DW)) for w in writes]
    assert dones == expect and expect[1], f"wr_done errors {dones}, expected {expect}"
    for (addr, length), payload in zip(writes, data):
        for a, n in split_bursts(addr, length, data_width=DW):
            got, o = bench.mem.read(a, n * BPB), a - addr
            if (a, n) in taken and not a <= wbad[0] < a + n * BPB:
                assert got == payload[o:o + n * BPB], f"burst {a:#x} not written"
            elif (a, n) not in taken:
                assert got == bytes(n * BPB), f"burst {a:#x} written after the error"
    assert int(dut.bytes_read.value) == sum(length for _, length in reads)
    assert int(dut.bytes_written.value) == sum(n * BPB for _, n in bench.mon.aw)
    bench.mon.check()
    # Clearing, then malformed commands: counted as `command` errors, no bus traffic.
    dut.error_clear.value = 1
    await RisingEdge(dut.clk)
    dut.error_clear.value = 0
    await RisingEdge(dut.clk)
    assert int(dut.error.value) == 0, "error_clear did not clear the status"
    bench.mem.poisoned = []
    bench.mon.reset_stats()
    malformed = [(READ_BASE, 0), (READ_BASE + 1, BPB), (READ_BASE, BPB + BPB // 2)]
    await bench.run(malformed, malformed, [b""] * 3)
    await ClockCycles(dut.clk, 5)
    err = unpack(ERROR, int(dut.error.value))
    assert err.command and not err.read and not err.write, f"error status {err.as_bits():#05b}"
    assert not bench.mon.ar and not bench.mon.aw, "a malformed command reached the bus"
    # And the DMA still works afterwards, counters cleared first.
    dut.counters_clear.value = 1
    await RisingEdge(dut.clk)
    dut.counters_clear.value = 0
    await RisingEdge(dut.clk)
    assert int(dut.bytes_read.value) == 0 and int(dut.bytes_written.value) == 0
    beats, dones, _ = await bench.run(reads[:1], writes[:1], data[:1])
    bench.expect_read(reads[:1], beats)
    assert dones == [0]


@cocotb.test(timeout_time=timeout_ms(10), timeout_unit="ms")
async def test_throughput(dut):
    """Sustained bytes per cycle on long transfers.

    Three loads: a quiet bus; 20% random pauses on every AXI channel with the DMA's
    own streams throttled to 80%; and a quiet bus whose reads take `latency` cycles
    (pipelined), where the reads in flight, bounded by the read FIFO, must cover
    the latency.
    """
    rng = test_rng("throughput")
    bench = Bench(dut, rng)
    await bench.start()
    total = P.get("throughput_beats", 4096) * BPB
    bench.fill(READ_BASE, total)
    chunk = 16 * AXI_4KB if total >= 16 * AXI_4KB else total
    reads = [(READ_BASE + o, chunk) for o in range(0, total, chunk)]
    writes = [(WRITE_BASE + o, chunk) for o in range(0, total, chunk)]
    # One-beat commands both ways: the per-command overhead of the splitter and the DMA.
    ones = min(1024, total // BPB)
    small = [(READ_BASE + i * BPB, BPB) for i in range(ones)]
    small_w = [(WRITE_BASE + i * BPB, BPB) for i in range(ones)]
    latency = P.get("latency", 100)
    results = {"data_width": DW, "bytes_per_beat": BPB, "bytes": total, "max_reads": MAX_READS,
               "max_writes": MAX_WRITES, "read_fifo_depth": P.get("read_fifo_depth"),
               "latency": latency}
    for label, pressure, lat in (("quiet", 0.0, 0), ("pressure", 0.2, 0),
                                 ("latency", 0.0, latency)):
        bench.mem.back_pressure(pressure)
        bench.mem.read_latency = lat
        ready = 1.0 - pressure
        for kind, r, w in (("read", reads, []), ("write", [], writes), ("both", reads, writes),
                           ("small", small, small_w)):
            bench.mon.reset_stats()
            cycles = await _read_write_and_check(bench, r, w, cmd_gap=0, ready=ready,
                                                 data_gap=pressure)
            moved = sum(length for _, length in r) + sum(length for _, length in w)
            results[f"{kind}_{label}"] = {"cycles": cycles, "bytes": moved,
                                          "bytes_per_cycle": moved / cycles,
                                          "max_reads_in_flight": bench.mon.max_reads_in_flight,
                                          "max_writes_in_flight": bench.mon.max_writes_in_flight}
            dut._log.info("%s %s: %d bytes in %d cycles = %.2f B/cycle (bus %d B/beat)",
                          kind, label, moved, cycles, moved / cycles, BPB)
    if P.get("report"):
        with open(P["report"], "w") as f:
            json.dump(results, f, indent=2)


# --- launching (runs outside the simulator: pytest and bench/bench_dma.py) -----------------

def launch(*, simulator, data_width, max_reads=4, max_writes=4, addr_width=32, seed=1,
           read_fifo_depth=None, testcase=None, quick_build=True, **params):
    """Emit the DMA for one parameter set and run this bench on it; returns the build dir.

    The Verilog goes to build/bench_dma/<parameters>/dma.v and each simulator builds
    in its own subdirectory; extra `params` (random_cmds, rounds, report, ...) reach
    the bench through `bench_params`. Verilator builds at -O0 by default
    (`quick_build`): the bench spends its time in Python (AxiRam, drivers), not in
    the model, so a six times faster build is the better trade.
    """
    from pathlib import Path

    from amaranth.back import verilog

    from attenio.hdl.dma import DMA
    from attenio.sim.runner import run_bench

    root = Path(__file__).resolve().parents[2]
    dut = DMA(addr_width=addr_width, data_width=data_width, max_reads=max_reads,
              max_writes=max_writes, read_fifo_depth=read_fifo_depth)
    tag = f"a{addr_width}_d{data_width}_r{max_reads}_w{max_writes}_f{dut.read_fifo_depth}"
    build = root / "build" / "bench_dma" / tag
    build.mkdir(parents=True, exist_ok=True)
    source = build / "dma.v"
    text = verilog.convert(dut, name="dma")
    if not source.exists() or source.read_text() != text:
        source.write_text(text)
    run_bench(simulator=simulator, verilog_sources=[source], toplevel="dma",
              module=__name__, build_dir=build / simulator, seed=seed, testcase=testcase,
              quick_build=quick_build and simulator == "verilator",
              params={"data_width": data_width, "addr_width": addr_width,
                      "max_reads": max_reads, "max_writes": max_writes, "seed": seed,
                      "max_burst_beats": dut.max_burst_beats,
                      "read_fifo_depth": dut.read_fifo_depth, **params})
    return build / simulator
