"""The latencies the blocks around the core publish, each seen in the cycle its effect appears.

`attenio.hdl.top.TopTiming` adds these constants up for the cycle model, so each is held
here to the block it describes: a bench drives the block cycle by cycle (inputs set,
then the settled outputs read: a handshake "in cycle t"), with seeded random gaps
where the block allows them, and the effect must come exactly the published number of
cycles after its cause, not a cycle sooner or later. A changed pipeline fails here in
seconds, before the end-to-end timing tests (tests/test_rtl_timing.py) would.
`StreamSlice.latency` and `StreamSlice.lead` are held in tests/test_stream_slice.py.
"""

from amaranth.hdl import signed

from amaranth_sim import run_clocked
from attenio.hdl.bursts import BurstSplitter
from attenio.hdl.controller import Controller
from attenio.hdl.dma import DMAReader, DMAWriter
from attenio.hdl.sim_memory import SimAXIMemory
from attenio.hdl.widthconv import BeatPacker, BeatUnpacker

BEAT = 8            # bytes of a 64-bit AXI beat


def run(dut, cycle, cycles):
    """Call `cycle(ctx, t)` in each of `cycles` cycles: it sets the inputs of cycle t and
    reads the outputs they settle to (the handshakes of cycle t)."""
    async def bench(ctx):
        for t in range(cycles):
            cycle(ctx, t)
            await ctx.tick()

    run_clocked(dut, bench)


def fire(ctx, port):
    """A stream's handshake in this cycle."""
    return bool(ctx.get(port.valid)) and bool(ctx.get(port.ready))


# --- the width converters ------------------------------------------------------------------

def test_an_unpacked_beat_offers_its_first_chunk_latency_cycles_after_it_is_taken(rng):
    dut = BeatUnpacker(data_width=64, width=2, element=signed(8))
    chunks = 64 // 16
    beats = [int(x) for x in rng.integers(0, 1 << 63, size=12)]
    taken, out = [], []

    def cycle(ctx, t):
        ctx.set(dut.o.ready, 1)
        offer = len(taken) < len(beats) and rng.random() < 0.4
        ctx.set(dut.i.valid, offer)
        if offer:
            ctx.set(dut.i.payload.data, beats[len(taken)])
        if fire(ctx, dut.o):
            out.append((t, [v & 0xFF for v in ctx.get(dut.o.payload.value)]))
        if fire(ctx, dut.i):
            taken.append(t)

    run(dut, cycle, 200)
    assert len(taken) == len(beats)
    # chunk j of a beat taken in cycle t leaves in cycle t + latency + j
    assert [t for t, _ in out] == [t + BeatUnpacker.latency + j for t in taken
                                   for j in range(chunks)]
    assert [v for _, v in out] == [[(b >> (16 * j + 8 * e)) & 0xFF for e in range(2)]
                                   for b in beats for j in range(chunks)]


def test_a_packed_beat_is_offered_latency_cycles_after_its_last_chunk(rng):
    dut = BeatPacker(data_width=64, width=2, element=signed(8))
    chunks = 64 // 16
    values = [[int(x) for x in rng.integers(-128, 128, size=2)] for _ in range(chunks * 10)]
    taken, out = [], []

    def cycle(ctx, t):
        ctx.set(dut.o.ready, 1)
        offer = len(taken) < len(values) and rng.random() < 0.5
        ctx.set(dut.i.valid, offer)
        if offer:
            ctx.set(dut.i.payload.value, values[len(taken)])
        if fire(ctx, dut.o):
            out.append((t, ctx.get(dut.o.payload.data)))
        if fire(ctx, dut.i):
            taken.append(t)

    run(dut, cycle, 200)
    assert len(taken) == len(values)
    lasts = taken[chunks - 1::chunks]
    assert [t for t, _ in out] == [t + BeatPacker.latency for t in lasts]
    packed = [sum((v & 0xFF) << (8 * i) for i, v in enumerate(
        x for chunk in values[k:k + chunks] for x in chunk)) for k in range(0, len(values), chunks)]
    assert [d for _, d in out] == packed


# --- the DMA ------------------------------------------------------------------------------

def test_a_command_is_offered_as_its_first_burst_latency_cycles_after_it_is_taken(rng):
    dut = BurstSplitter(addr_width=32, data_width=64)
    # commands of one burst each (within a 4 KB page), with random gaps between them
    commands = [(4096 * k + BEAT * int(rng.integers(0, 16)), BEAT * int(rng.integers(1, 9)))
                for k in range(24)]
    taken, bursts = [], []

    def cycle(ctx, t):
        ctx.set(dut.burst.ready, 1)
        offer = len(taken) < len(commands) and rng.random() < 0.6
        ctx.set(dut.cmd.valid, offer)
        if offer:
            addr, length = commands[len(taken)]
            ctx.set(dut.cmd.payload.addr, addr)
            ctx.set(dut.cmd.payload.length, length)
        if fire(ctx, dut.burst):
            bursts.append((t, ctx.get(dut.burst.payload.addr), ctx.get(dut.burst.payload.len)))
        if fire(ctx, dut.cmd):
            taken.append(t)

    run(dut, cycle, 120)
    assert len(taken) == len(commands)
    assert [t for t, _, _ in bursts] == [t + BurstSplitter.latency for t in taken]
    assert [(a, n + 1) for _, a, n in bursts] == [(a, length // BEAT) for a, length in commands]


def test_a_read_beat_on_r_is_offered_on_data_response_latency_cycles_later(rng):
    """Four commands of one four-beat burst each; the memory answers with random gaps."""
    dut = DMAReader(addr_width=32, data_width=64, max_burst_beats=4, fifo_depth=8)
    commands = [(0x1000 * k, 4 * BEAT) for k in range(4)]
    sent, pending, r_beats, data = [], [], [], []

    def cycle(ctx, t):
        ctx.set(dut.axi.arready, 1)
        ctx.set(dut.data.ready, 1)
        ctx.set(dut.cmd.valid, len(sent) < len(commands))
        if len(sent) < len(commands):
            ctx.set(dut.cmd.payload.addr, commands[len(sent)][0])
            ctx.set(dut.cmd.payload.length, commands[len(sent)][1])
        beat = bool(pending) and rng.random() < 0.6
        ctx.set(dut.axi.rvalid, beat)
        if beat:
            ctx.set(dut.axi.rdata, len(r_beats))
            ctx.set(dut.axi.rlast, pending[0] == 1)
            assert ctx.get(dut.axi.rready), "the reader reserves its FIFO: RREADY stays high"
            r_beats.append(t)
            pending[0] -= 1
            if not pending[0]:
                pending.pop(0)
        if fire(ctx, dut.data):
            data.append((t, ctx.get(dut.data.payload.data), ctx.get(dut.data.payload.last)))
        if ctx.get(dut.axi.arvalid):                    # arready is high
            pending.append(ctx.get(dut.axi.arlen) + 1)
        if fire(ctx, dut.cmd):
            sent.append(t)

    run(dut, cycle, 150)
    assert len(r_beats) == 16
    assert [t for t, _, _ in data] == [t + DMAReader.response_latency for t in r_beats]
    assert [(d, last) for _, d, last in data] == [(k, k % 4 == 3) for k in range(16)]


def test_a_beat_taken_off_data_frees_room_for_a_burst_room_latency_cycles_later(rng):
    """A FIFO of two beats and bursts of two: the second burst waits for the first burst's
    beats to leave, and its AR goes out `room_latency` cycles after the last one does."""
    for trial in range(6):
        dut = DMAReader(addr_width=32, data_width=64, max_burst_beats=2, fifo_depth=2)
        hold = int(rng.integers(8, 14))         # the consumer takes nothing before this cycle
        log = {"sent": 0, "ar": [], "r_left": 0, "pops": []}

        def cycle(ctx, t):
            ctx.set(dut.axi.arready, 1)
            ctx.set(dut.cmd.valid, log["sent"] < 2)
            ctx.set(dut.cmd.payload.addr, 0x1000 * log["sent"])
            ctx.set(dut.cmd.payload.length, 2 * BEAT)
            ctx.set(dut.data.ready, t >= hold and rng.random() < 0.5)
            beat = log["r_left"] > 0
            ctx.set(dut.axi.rvalid, beat)
            ctx.set(dut.axi.rlast, log["r_left"] == 1)
            log["r_left"] -= beat and bool(ctx.get(dut.axi.rready))
            if fire(ctx, dut.data):
                log["pops"].append(t)
            if ctx.get(dut.axi.arvalid):
                log["ar"].append(t)
                if len(log["ar"]) == 1:
                    log["r_left"] = 2               # the memory answers the first burst only
            log["sent"] += fire(ctx, dut.cmd)

        run(dut, cycle, 60)
        assert len(log["ar"]) == 2 and len(log["pops"]) == 2, (trial, log)
        assert log["ar"][0] < hold
        assert log["ar"][1] == log["pops"][1] + DMAReader.room_latency, (trial, log)


def write(rng):
    """Two commands of one four-beat burst each through a `DMAWriter`: the beats, offered
    with random gaps once both AWs are out, go out on an always-ready W; each B, answered
    after a random delay, completes its command on `done`. Returns the cycles of the
    handshakes on `data` and W (with W's data), of the Bs and of `done`."""
    dut = DMAWriter(addr_width=32, data_width=64, max_burst_beats=4)
    commands = [(0x1000 * k, 4 * BEAT) for k in range(2)]
    log = {"sent": 0, "aw": 0, "data": [], "w": [], "b_due": [], "b": [], "done": []}

    def cycle(ctx, t):
        ctx.set(dut.axi.awready, 1)
        ctx.set(dut.axi.wready, 1)
        ctx.set(dut.done.ready, 1)
        more = log["sent"] < len(commands)
        ctx.set(dut.cmd.valid, more)
        if more:
            ctx.set(dut.cmd.payload.addr, commands[log["sent"]][0])
            ctx.set(dut.cmd.payload.length, commands[log["sent"]][1])
        offer = log["aw"] == 2 and len(log["data"]) < 8 and rng.random() < 0.5
        ctx.set(dut.data.valid, offer)
        ctx.set(dut.data.payload.data, len(log["data"]))
        answer = bool(log["b_due"]) and log["b_due"][0] <= t
        ctx.set(dut.axi.bvalid, answer)
        if answer:
            assert ctx.get(dut.axi.bready)
            log["b_due"].pop(0)
            log["b"].append(t)
        if fire(ctx, dut.done):
            log["done"].append(t)
        if ctx.get(dut.axi.wvalid):                     # wready is high
            log["w"].append((t, ctx.get(dut.axi.wdata)))
            if ctx.get(dut.axi.wlast):
                log["b_due"].append(t + int(rng.integers(1, 6)))
        if fire(ctx, dut.data):
            log["data"].append(t)
        log["aw"] += bool(ctx.get(dut.axi.awvalid))
        log["sent"] += fire(ctx, dut.cmd)

    run(dut, cycle, 120)
    assert len(log["data"]) == 8 and len(log["done"]) == 2
    return log


def test_a_write_beat_reaches_w_data_latency_cycles_after_it_is_taken(rng):
    log = write(rng)
    assert [t for t, _ in log["w"]] == [t + DMAWriter.data_latency for t in log["data"]]
    assert [d for _, d in log["w"]] == list(range(8))


def test_a_write_command_is_done_response_latency_cycles_after_its_b(rng):
    log = write(rng)
    assert log["done"] == [t + DMAWriter.response_latency for t in log["b"]]


# --- the memory model ----------------------------------------------------------------------

def test_the_memory_model_answers_b_write_response_latency_cycles_after_wlast(rng):
    dut = SimAXIMemory(addr_width=32, data_width=64, depth=256)
    lengths = [int(x) for x in rng.integers(1, 5, size=8)]
    log = {"aw": 0, "beat": 0, "burst": 0, "wlast": [], "b": []}

    def cycle(ctx, t):
        bus = dut.s_axi
        ctx.set(bus.bready, 1)
        more = log["aw"] < len(lengths)
        ctx.set(bus.awvalid, more)
        if more:
            ctx.set(bus.awaddr, 0x100 * log["aw"])
            ctx.set(bus.awlen, lengths[log["aw"]] - 1)
        offer = log["burst"] < len(lengths) and rng.random() < 0.6
        last = offer and log["beat"] == lengths[log["burst"]] - 1
        ctx.set(bus.wvalid, offer)
        ctx.set(bus.wlast, last)
        ctx.set(bus.wstrb, 0xFF)
        if ctx.get(bus.bvalid):
            log["b"].append(t)
        if offer and ctx.get(bus.wready):
            log["beat"] += 1
            if last:
                log["wlast"].append(t)
                log["burst"] += 1
                log["beat"] = 0
        log["aw"] += more and bool(ctx.get(bus.awready))

    run(dut, cycle, 120)
    assert len(log["wlast"]) == len(lengths)
    assert log["b"] == [t + SimAXIMemory.write_response_latency for t in log["wlast"]]


# --- the controller ------------------------------------------------------------------------

def test_done_comes_done_latency_cycles_after_the_run_is_finished_and_idle(rng):
    """Whichever of `finished`, the readers' and the core's idleness comes last, `done`
    follows it by `done_latency` (the idleness after `idle_latency` more), and `cycles`
    counts from LAUNCH up to that edge."""
    for last in ("finished", "readers_busy", "core_busy", "finished", "core_busy"):
        dut = Controller(addr_width=32, max_seq_len=256, beat_bytes=BEAT, block_rows=32)
        log = {"launch": None, "end": None, "done": None}
        others = [n for n in ("finished", "readers_busy", "core_busy") if n != last]
        delay = int(rng.integers(3, 20))
        early = {n: int(rng.integers(0, delay)) for n in others}
        early[last] = delay

        def cycle(ctx, t):
            if t == 0:
                run_fields = {"seq_len": 64, "heads": 2, "kv_len": 0, "group": 1}
                for name, value in run_fields.items():
                    ctx.set(getattr(dut.run, name), value)
                for name in "qkvo":
                    tensor = getattr(dut.run, name)
                    ctx.set(tensor.base, 0x10000 * "qkvo".index(name))
                    ctx.set(tensor.head_stride, 64 * 16)
                    ctx.set(tensor.row_stride, 16)
            ctx.set(dut.start, t == 0)
            if log["launch"] is None and ctx.get(dut.seq_start):
                log["launch"] = t
            since = None if log["launch"] is None else t - log["launch"]
            over = {n: since is not None and since >= early[n] for n in early}
            ctx.set(dut.finished, over["finished"])
            ctx.set(dut.readers_busy, not over["readers_busy"])
            ctx.set(dut.core_busy, not over["core_busy"])
            if log["end"] is None and all(over.values()):
                log["end"] = t
            if log["done"] is None and ctx.get(dut.done):
                log["done"] = (t, ctx.get(dut.cycles))

        run(dut, cycle, 200)
        assert log["launch"] is not None and log["end"] is not None, (last, log)
        t, cycles = log["done"]
        idle = Controller.idle_latency
        end = log["launch"] + max(early["finished"], early["readers_busy"] + idle,
                                  early["core_busy"] + idle)
        assert t == end + Controller.done_latency, (last, early, log)
        assert cycles == end - log["launch"] + 1, (last, early, log)
