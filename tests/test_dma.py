"""Tests of the AXI4 master DMA (attenio.hdl.axi, attenio.hdl.dma).

Fast tier: parameter checks, the Python twin `split_bursts`, `BurstSplitter`
under amaranth.sim against that twin, and the writer's stop after an error response
(the DMA against a Python AXI write slave). Integration tier: the cocotb bench
`attenio.sim.benches.bench_dma` on the emitted Verilog, on Verilator and Icarus,
with AxiRam, random latency and back-pressure (the long run is marked `slow`).
"""

import gc
import random
import warnings

import pytest
from amaranth.back import verilog
from amaranth.hdl import Fragment, UnusedElaboratable

from amaranth_sim import run_clocked
from attenio.hdl.axi import AXIResp, AXI4ReadSignature, AXI4Signature, AXI4WriteSignature
from attenio.hdl.dma import DMA, BurstSplitter, DMAReader, DMAWriter, split_bursts
from attenio.sim.runner import simulator_available

SEED = 20261129          # the amaranth.sim tests; the cocotb benches use conftest's `seed`


# --- parameters ---------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, bad", [
    (dict(addr_width=32, data_width=48), "48"),
    (dict(addr_width=32, data_width=True), "True"),
    (dict(addr_width=8, data_width=64), "8"),
    (dict(addr_width=32, data_width=64, id_width=0), "0"),
])
def test_signature_rejects(kwargs, bad):
    with pytest.raises(ValueError, match=bad):
        AXI4Signature(**kwargs)


def test_signature_members_and_names():
    sig = AXI4Signature(addr_width=40, data_width=128, id_width=3)
    assert sig.bytes_per_beat == 16
    assert sig == AXI4Signature(addr_width=40, data_width=128, id_width=3)
    assert sig != AXI4Signature(addr_width=40, data_width=64, id_width=3)
    read = AXI4ReadSignature(addr_width=40, data_width=128, id_width=3)
    write = AXI4WriteSignature(addr_width=40, data_width=128, id_width=3)
    assert set(sig.members.keys()) == set(read.members.keys()) | set(write.members.keys())
    assert "40" in repr(sig)
    with pytest.raises(AttributeError):
        sig.data_width = 32


def test_verilog_ports_follow_axi_names():
    text = verilog.convert(DMA(data_width=32), name="dma")
    for port in ("m_axi__arvalid", "m_axi__araddr", "m_axi__rdata", "m_axi__wlast",
                 "m_axi__bresp", "rd_cmd__payload", "rd_data__ready", "wr_done__valid",
                 "bytes_read", "bytes_written", "error"):
        assert f" {port};" in text, port


@pytest.mark.parametrize("cls, kwargs, bad", [
    (DMAReader, dict(data_width=16), "16"),
    (DMAReader, dict(data_width=1024), "1024"),
    (DMAReader, dict(max_outstanding=0), "0"),
    (DMAReader, dict(data_width=512, max_burst_beats=65), "65"),
    (DMAReader, dict(max_burst_beats=300), "300"),
    (DMAReader, dict(fifo_depth=100), "100"),
    (DMAWriter, dict(max_outstanding=-1), "-1"),
    (DMAWriter, dict(fifo_depth=1), "1"),
    (DMA, dict(counter_width=8), "8"),
    (DMA, dict(max_reads=1.5), "1.5"),
    (BurstSplitter, dict(addr_width=32, data_width=64, max_burst_beats=0), "0"),
])
def test_components_reject(cls, kwargs, bad):
    # The half-built object never gets elaborated; keep Amaranth's warning about it here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ValueError, match=bad.replace(".", r"\.")) as info:
            cls(**kwargs)
        del info
        gc.collect()


def _unused(elaboratable):
    """Built only to look at its properties: elaborated, so it is no unused design."""
    Fragment.get(elaboratable, None)
    return elaboratable


def test_dma_properties():
    dma = _unused(DMA(data_width=512, max_reads=8, max_writes=2))
    assert (dma.data_width, dma.max_reads, dma.max_writes) == (512, 8, 2)
    assert dma.max_burst_beats == 64                # 4 KB of 64-byte beats
    assert _unused(DMA(data_width=32)).max_burst_beats == 256  # AXI's 256-beat limit
    assert dma.read_fifo_depth == 128
    with pytest.raises(AttributeError):
        dma.max_reads = 3


# --- the burst split, in Python -----------------------------------------------------------

def _check_split(addr, length, data_width, max_burst_beats=None):
    bpb = data_width // 8
    limit = max_burst_beats or min(256, 4096 // bpb)
    bursts = split_bursts(addr, length, data_width=data_width, max_burst_beats=max_burst_beats)
    cursor = addr
    for i, (a, n) in enumerate(bursts):
        assert a == cursor and 1 <= n <= limit
        assert a // 4096 == (a + n * bpb - 1) // 4096, f"burst {a:#x}+{n} crosses 4 KB"
        # Greedy: a burst is cut short only by the end, the limit or a 4 KB boundary.
        if i < len(bursts) - 1:
            assert n == limit or (a + n * bpb) % 4096 == 0
        cursor += n * bpb
    assert cursor == addr + length
    return bursts


@pytest.mark.parametrize("data_width", [32, 64, 512])
def test_split_corners(data_width):
    bpb = data_width // 8
    limit = min(256, 4096 // bpb)
    assert split_bursts(0, bpb, data_width=data_width) == [(0, 1)]
    assert split_bursts(4096, 4096, data_width=data_width) == \
        [(4096 + i * limit * bpb, limit) for i in range(4096 // (limit * bpb))]
    assert _check_split(4096 - bpb, 2 * bpb, data_width) == [(4096 - bpb, 1), (4096, 1)]
    assert len(_check_split(4096 + 128, 4096, data_width)) == max(2, 4096 // (limit * bpb) + 1)
    assert _check_split(0, limit * bpb, data_width) == [(0, limit)]
    assert _check_split(0, (limit + 1) * bpb, data_width) == [(0, limit), (limit * bpb, 1)]
    for bad in [(0, 0), (1, bpb), (0, bpb + 1), (0, -bpb)]:
        assert split_bursts(*bad, data_width=data_width) == []


def test_split_random():
    rng = random.Random(SEED)
    for _ in range(2000):
        dw = rng.choice([32, 64, 128, 256, 512])
        bpb = dw // 8
        mbb = rng.choice([None, 1, 3, 16])
        _check_split(rng.randrange(0, 1 << 20) * bpb, rng.randint(1, 3000) * bpb, dw, mbb)


# --- BurstSplitter in amaranth.sim --------------------------------------------------------

def _simulate_splitter(data_width, max_burst_beats, cmds, seed):
    dut = BurstSplitter(addr_width=32, data_width=data_width, max_burst_beats=max_burst_beats)
    expected = [b for c in cmds for b in split_bursts(*c, data_width=data_width,
                                                      max_burst_beats=max_burst_beats)]
    got, malformed = [], []
    rng = random.Random(seed)

    async def source(ctx):
        for addr, length in cmds:
            while rng.random() < 0.2:
                await ctx.tick()
            ctx.set(dut.cmd.payload.addr, addr)
            ctx.set(dut.cmd.payload.length, length)
            ctx.set(dut.cmd.valid, 1)
            (bad,) = await ctx.tick().sample(dut.malformed).until(dut.cmd.ready)
            malformed.append(bad)
            ctx.set(dut.cmd.valid, 0)

    async def sink(ctx):
        bpb = data_width // 8
        while len(got) < len(expected):
            ready = rng.random() < 0.7
            ctx.set(dut.burst.ready, ready)
            _, _, valid, addr, length, last = await ctx.tick().sample(
                dut.burst.valid, dut.burst.payload.addr, dut.burst.payload.len,
                dut.burst.payload.last)
            if valid and ready:
                got.append((addr, length + 1, last))
        ctx.set(dut.burst.ready, 0)
        for _ in range(20):              # no stray bursts afterwards
            _, _, valid = await ctx.tick().sample(dut.burst.valid)
            assert not valid
        assert bpb

    run_clocked(dut, source, sink)
    assert [(a, n) for a, n, _ in got] == expected
    # `last` marks exactly the final burst of each command.
    ends = []
    for c in cmds:
        bursts = split_bursts(*c, data_width=data_width, max_burst_beats=max_burst_beats)
        ends += [i == len(bursts) - 1 for i in range(len(bursts))]
    assert [bool(last) for *_, last in got] == ends
    assert malformed == [not split_bursts(*c, data_width=data_width) for c in cmds]


@pytest.mark.parametrize("data_width, max_burst_beats", [(32, None), (64, None), (512, None),
                                                         (64, 5), (128, 1), (32, 3)])
def test_splitter_matches_twin(data_width, max_burst_beats):
    bpb = data_width // 8
    limit = max_burst_beats or min(256, 4096 // bpb)
    rng = random.Random(f"{SEED}:{data_width}:{max_burst_beats}")
    cmds = [(0, bpb), (4096 - bpb, bpb), (4096, 4096), (3 * 4096 - bpb, 2 * bpb),
            (4 * 4096 + 128, 4096), (6 * 4096, limit * bpb), (7 * 4096, (limit + 1) * bpb),
            (0, 0), (bpb // 2, bpb), (0, bpb + 4), ((1 << 32) - 4096, 4096)]
    for _ in range(60):
        beats = rng.choice([1, 2, rng.randint(1, 3 * limit)])
        addr = rng.randrange(0, 1 << 22) * bpb
        if rng.random() < 0.4:
            addr = (addr // 4096 + 1) * 4096 - rng.randint(1, 4) * bpb
        cmds.append((addr, beats * bpb))
    _simulate_splitter(data_width, max_burst_beats, cmds, seed=rng.random())


def test_splitter_one_burst_per_cycle():
    """Back-to-back one-beat commands leave as one burst per cycle (no bubble between),
    the first three cycles after it is taken (input stage, state, output register)."""
    dut = BurstSplitter(addr_width=32, data_width=64)
    count, burst_cycles = 64, []

    async def bench(ctx):
        ctx.set(dut.burst.ready, 1)
        sent = cycle = 0
        while len(burst_cycles) < count:
            ctx.set(dut.cmd.payload.addr, sent * 8)
            ctx.set(dut.cmd.payload.length, 8)
            ctx.set(dut.cmd.valid, sent < count)
            _, _, taken, valid = await ctx.tick().sample(dut.cmd.ready, dut.burst.valid)
            sent += bool(taken) and sent < count
            cycle += 1
            if valid:
                burst_cycles.append(cycle)
            assert cycle < 10 * count, "the splitter stalled"

    run_clocked(dut, bench)
    # Sampled at the first edge, a command is taken in cycle 1; its burst is valid
    # `BurstSplitter.latency` cycles later.
    assert burst_cycles[0] == 1 + BurstSplitter.latency, f"first burst in cycle {burst_cycles[0]}"
    assert burst_cycles == list(range(4, 4 + count)), f"bubbles: {burst_cycles}"


# --- the writer after an error response, in amaranth.sim ----------------------------------

class _WriteSlave:
    """An AXI4 write slave over a byte memory, answering SLVERR for a burst that touches
    `poisoned`, with random AWREADY/WREADY pauses and B latency. It stores every beat it
    takes (so its bytes show what went out on W) and logs each burst: address, beats,
    the cycles its AWVALID rose and was taken, and whether it fails."""

    def __init__(self, size, bpb, rng):
        self.bpb, self.rng, self.poisoned = bpb, rng, []
        self.mem = bytearray(rng.randbytes(size))
        self.bursts = []            # in AW order
        self.w_next = self.w_beat = 0   # the burst taking W beats, and its beat
        self.b_queue = []           # (burst index, first cycle its B may go)
        self.aw_rose = None

    def drive(self, ctx, axi, cycle):
        """Set the slave's outputs for this cycle."""
        ctx.set(axi.awready, self.rng.random() < 0.6)
        ctx.set(axi.wready, self.rng.random() < 0.7)
        ready = bool(self.b_queue) and self.b_queue[0][1] <= cycle
        ctx.set(axi.bvalid, ready)
        if ready:
            failed = self.bursts[self.b_queue[0][0]]["failed"]
            ctx.set(axi.bresp, AXIResp.SLVERR if failed else AXIResp.OKAY)

    def observe(self, ctx, axi, cycle):
        """Take this cycle's handshakes (the inputs set and settled); True on a failed B."""
        if ctx.get(axi.awvalid) and self.aw_rose is None:
            self.aw_rose = cycle
        if ctx.get(axi.awvalid) and ctx.get(axi.awready):
            addr, beats = ctx.get(axi.awaddr), ctx.get(axi.awlen) + 1
            failed = any(addr < end and start < addr + beats * self.bpb
                         for start, end in self.poisoned)
            self.bursts.append(dict(addr=addr, beats=beats, rose=self.aw_rose, taken=cycle,
                                    failed=failed))
            self.aw_rose = None
        if ctx.get(axi.wvalid) and ctx.get(axi.wready):
            assert self.w_next < len(self.bursts), f"cycle {cycle}: a W beat without its AW"
            burst = self.bursts[self.w_next]
            at = burst["addr"] + self.w_beat * self.bpb
            self.mem[at:at + self.bpb] = ctx.get(axi.wdata).to_bytes(self.bpb, "little")
            self.w_beat += 1
            assert ctx.get(axi.wlast) == (self.w_beat == burst["beats"]), f"cycle {cycle}: WLAST"
            if self.w_beat == burst["beats"]:
                self.b_queue.append((self.w_next, cycle + 1 + self.rng.randrange(4)))
                self.w_next, self.w_beat = self.w_next + 1, 0
        if ctx.get(axi.bvalid) and ctx.get(axi.bready):
            index, _ = self.b_queue.pop(0)
            return self.bursts[index]["failed"]
        return False


async def _write(ctx, dut, slave, commands, payloads, rng, *, data_gap):
    """Run the write `commands` (their bytes `payloads`) through `dut` (a DMA) until every
    `done` is in and the DMA is idle; returns the dones' `error` bits and the cycles
    (counted from the start of this call) of the failed B's."""
    bpb = slave.bpb
    data = [int.from_bytes(p[i:i + bpb], "little") for p in payloads
            for i in range(0, len(p), bpb)]
    cmds, limit = list(commands), 50 * (len(data) + len(commands))
    dones, fails, offered, cycle = [], [], False, 0
    while cmds or data or len(dones) < len(commands) or ctx.get(dut.busy):
        ctx.set(dut.wr_cmd.valid, bool(cmds))
        if cmds:
            ctx.set(dut.wr_cmd.payload.addr, cmds[0][0])
            ctx.set(dut.wr_cmd.payload.length, cmds[0][1])
        offered = bool(data) and (offered or rng.random() >= data_gap)   # held until taken
        ctx.set(dut.wr_data.valid, offered)
        if data:
            ctx.set(dut.wr_data.payload.data, data[0])
        ctx.set(dut.wr_done.ready, rng.random() < 0.7)
        slave.drive(ctx, dut.m_axi, cycle)
        if ctx.get(dut.wr_cmd.valid) and ctx.get(dut.wr_cmd.ready):
            cmds.pop(0)
        if offered and ctx.get(dut.wr_data.ready):
            data.pop(0)
            offered = False
        if ctx.get(dut.wr_done.valid) and ctx.get(dut.wr_done.ready):
            dones.append(ctx.get(dut.wr_done.payload.error))
        if slave.observe(ctx, dut.m_axi, cycle):
            fails.append(cycle)
        await ctx.tick()
        cycle += 1
        assert cycle < limit, f"the writes hung: {len(dones)} of {len(commands)} dones"
    return dones, fails


@pytest.mark.parametrize("data_gap", [0.0, 0.6])
@pytest.mark.parametrize("trial", range(3))
def test_the_writer_writes_nothing_after_an_error_response_and_still_completes(data_gap, trial):
    """A poisoned beat's SLVERR stops the writer: no AW raised after it (the one already up
    may go, AXI4 forbids withdrawing it), no byte written beyond the bursts AW had taken;
    every command still completes and all its data are taken, the dropped ones failed; the
    DMA's `error_clear` then lets a new run write as before."""
    seed = f"{SEED}:writer-stop:{data_gap}:{trial}"
    print(f"seed {seed!r}")
    rng = random.Random(seed)
    dut = DMA(addr_width=16, data_width=32, max_writes=2, max_burst_beats=4)
    bpb = 4
    slave = _WriteSlave(1 << 14, bpb, rng)
    # commands of 1 to 9 beats, each in a 256-byte slot of its own (those starting
    # 8 bytes before a 4 KB boundary cross it)
    slots = rng.sample(range(1, 60), 12)
    commands = [(slot * 256 - (8 if slot % 16 == 0 else 0), rng.randint(1, 9) * bpb)
                for slot in slots]
    payloads = [rng.randbytes(length) for _, length in commands]
    bad = rng.randrange(1, 4)           # the command with the poisoned beat
    at = commands[bad][0] + rng.randrange(commands[bad][1] // bpb) * bpb
    slave.poisoned = [(at, at + bpb)]
    again = [(slot * 256 + 64, rng.randint(1, 9) * bpb) for slot in rng.sample(range(60, 64), 3)]
    again_data = [rng.randbytes(length) for _, length in again]

    async def bench(ctx):
        before = bytes(slave.mem)
        dones, fails = await _write(ctx, dut, slave, commands, payloads, rng, data_gap=data_gap)
        assert len(fails) == 1, f"failed B's in cycles {fails}"
        assert ctx.get(dut.error.write)
        # the AW's taken after the failed B were all up before it
        late = [b for b in slave.bursts if b["taken"] > fails[0]]
        assert all(b["rose"] <= fails[0] for b in late), f"an AW raised after the error: {late}"
        assert len(late) <= 1, late
        # the bytes: the bursts AW took hold their data, nothing else changed
        image = bytearray(before)
        for (addr, length), payload in zip(commands, payloads):
            image[addr:addr + length] = payload
        expected = bytearray(before)
        written = [(b["addr"], b["beats"] * bpb) for b in slave.bursts]
        for addr, length in written:
            expected[addr:addr + length] = image[addr:addr + length]
        assert slave.mem == expected, "bytes written beyond the bursts AW took"
        assert ctx.get(dut.bytes_written) == sum(length for _, length in written)
        # every command done; failed exactly when a burst of it failed or was dropped
        bursts = {(b["addr"], b["beats"]): b["failed"] for b in slave.bursts}
        expect = [any(bursts.get((a, n), True)
                      for a, n in split_bursts(addr, length, data_width=32, max_burst_beats=4))
                  for addr, length in commands]
        assert dones == expect, f"done errors {dones}, expected {expect}"
        assert expect[bad] and expect[-1], "the poisoned command and the last failed"
        # the next run, after error_clear, writes as before
        ctx.set(dut.error_clear, 1)
        await ctx.tick()
        ctx.set(dut.error_clear, 0)
        assert not ctx.get(dut.error.write)
        slave.poisoned = []
        dones, fails = await _write(ctx, dut, slave, again, again_data, rng, data_gap=data_gap)
        assert dones == [0] * len(again) and not fails
        for (addr, length), payload in zip(again, again_data):
            assert slave.mem[addr:addr + length] == payload

    run_clocked(dut, bench)


# --- the cocotb bench on the emitted Verilog ----------------------------------------------

def _need(simulator):
    if not simulator_available(simulator):
        pytest.skip(f"{simulator} is not installed; the DMA bench needs it "
                    f"(Verilator comes with `make setup`, Icarus from the system)")


def _launch(**kwargs):
    from attenio.sim.benches.bench_dma import launch
    return launch(**kwargs)


# The default suite: every bench once per configuration, ~100 commands per side; the
# 64-bit bus on Verilator (Icarus runs it by default) and the 32-bit one (whose AXI rules
# tests/formal proves on a 32-bit bus) only in the slow suite.
@pytest.mark.parametrize("simulator, data_width", [
    pytest.param("verilator", 32, marks=pytest.mark.slow),
    pytest.param("verilator", 64, marks=pytest.mark.slow),
    ("verilator", 512), ("icarus", 64), ("icarus", 512),
])
def test_dma_bench(simulator, data_width, seed):
    _need(simulator)
    # Icarus runs the Python side about 3x slower: fewer random commands there.
    _launch(simulator=simulator, data_width=data_width, seed=seed,
            random_cmds=100 if simulator == "verilator" else 50, throughput_beats=1024)


# One transaction in flight per side: the limits must hold without deadlock (Icarus:
# a second parameter set costs no Verilator build).
@pytest.mark.parametrize("simulator", ["icarus"])
def test_dma_bench_one_outstanding(simulator, seed):
    _need(simulator)
    _launch(simulator=simulator, data_width=64, max_reads=1, max_writes=1, seed=seed,
            random_cmds=60, testcase="test_random_traffic")


# Thousands of bursts under random latency and back-pressure: no deadlock, all data intact.
@pytest.mark.slow
@pytest.mark.parametrize("simulator, data_width", [
    ("verilator", 32), ("verilator", 64), ("verilator", 512), ("icarus", 64),
])
def test_dma_bench_long(simulator, data_width, seed):
    _need(simulator)
    _launch(simulator=simulator, data_width=data_width, seed=seed, random_cmds=200,
            rounds=15, testcase="test_random_traffic")
