"""The board's block-RAM AXI slave, in amaranth.sim: AXI bursts and host bytes at once.

An AXI master writes and reads random INCR and FIXED bursts (random strobes, pauses on
every channel) in one half of the memory while the host port reads and writes random
bytes in the other, so the two contend for the memory's ports on nearly every cycle;
every byte read either way must be the model's. Then each side reads what the other
wrote (the byte lanes both ways), and a burst past the memory is answered DECERR.
"""

import random

from amaranth_sim import run_clocked
from attenio.hdl.axi import AXIBurst, AXIResp
from attenio.hdl.axi_ram import AXIRam

SIZE = 4096
BEAT = 8                    # bytes: 64-bit data
HALF = SIZE // 2            # the host's bytes below, the AXI master's above
LIMIT = 400                 # cycles a handshake may wait before the test calls it stuck


async def _wait(ctx, signal, what):
    for _ in range(LIMIT):
        if ctx.get(signal):
            return
        await ctx.tick()
    raise AssertionError(f"{what}: no {signal.name} in {LIMIT} cycles")


async def _handshake(ctx, out, back, what, sample=None):
    """`out` held high until `back` is, for one transfer at the next edge; returns
    `sample` as it was in the transfer's cycle (None without one)."""
    ctx.set(out, 1)
    await _wait(ctx, back, what)
    value = None if sample is None else ctx.get(sample)
    await ctx.tick()
    ctx.set(out, 0)
    return value


async def _pause(ctx, rng, most=3):
    for _ in range(rng.randrange(most + 1)):
        await ctx.tick()


async def _address(ctx, axi, channel, addr, beats, fixed):
    """The address phase on `channel` ("aw" or "ar") of a burst of full-width beats."""
    port = {name: getattr(axi, channel + name)
            for name in ("addr", "len", "size", "burst", "valid", "ready")}
    ctx.set(port["addr"], addr)
    ctx.set(port["len"], beats - 1)
    ctx.set(port["size"], 3)
    ctx.set(port["burst"], AXIBurst.FIXED if fixed else AXIBurst.INCR)
    await _handshake(ctx, port["valid"], port["ready"], channel.upper())


async def _axi_write(ctx, axi, rng, addr, data, strobes, *, fixed=False):
    """One burst of len(data) beats; returns BRESP."""
    await _address(ctx, axi, "aw", addr, len(data), fixed)
    for i, (word, strobe) in enumerate(zip(data, strobes)):
        await _pause(ctx, rng)
        ctx.set(axi.wdata, word)
        ctx.set(axi.wstrb, strobe)
        ctx.set(axi.wlast, i == len(data) - 1)
        await _handshake(ctx, axi.wvalid, axi.wready, "W")
    await _pause(ctx, rng)
    return await _handshake(ctx, axi.bready, axi.bvalid, "B", sample=axi.bresp)


async def _axi_read(ctx, axi, rng, addr, beats, *, fixed=False):
    """One burst; returns its (data, resp, last) beats."""
    await _address(ctx, axi, "ar", addr, beats, fixed)
    got = []
    while len(got) < beats:
        ready = rng.random() < 0.6
        ctx.set(axi.rready, ready)
        if ready and ctx.get(axi.rvalid):
            got.append((ctx.get(axi.rdata), AXIResp(ctx.get(axi.rresp)), ctx.get(axi.rlast)))
        await ctx.tick()
    ctx.set(axi.rready, 0)
    return got


def _model_write(model, addr, word, strobe):
    for lane in range(BEAT):
        if strobe >> lane & 1:
            model[addr + lane] = word >> (8 * lane) & 0xFF


def _model_word(model, addr):
    return int.from_bytes(model[addr:addr + BEAT], "little")


async def _host_access(ctx, host, addr, *, write=None):
    """A host byte: written if `write` is a byte, else read; returns the byte read."""
    ctx.set(host.addr, addr)
    ctx.set(host.we, write is not None)
    ctx.set(host.wdata, write or 0)
    return await _handshake(ctx, host.req, host.ack, "host ack", sample=host.rdata)


def test_axi_ram_serves_bursts_and_host_bytes_at_once(seed):
    rng = random.Random(seed)
    dut = AXIRam(size_bytes=SIZE, addr_width=13, data_width=8 * BEAT)
    axi, host = dut.axi, dut.host
    model = bytearray(SIZE)             # the memory starts at zero (`init=[]`)
    done = {"host": False, "axi": False}
    counts = {"host reads": 0, "host writes": 0, "beats read": 0, "beats written": 0}

    async def host_bench(ctx):
        hrng = random.Random(rng.randrange(1 << 32))
        for _ in range(150):
            addr = hrng.randrange(HALF)
            if hrng.random() < 0.5:
                byte = hrng.randrange(256)
                await _host_access(ctx, host, addr, write=byte)
                model[addr] = byte
                counts["host writes"] += 1
            else:
                got = await _host_access(ctx, host, addr)
                assert got == model[addr], f"host read of {addr:#x}: {got:#04x}, " \
                                           f"model {model[addr]:#04x}"
                counts["host reads"] += 1
            await _pause(ctx, hrng, 2)
        done["host"] = True
        while not done["axi"]:
            await ctx.tick()
        # the AXI master's bytes, through the host port's byte lanes
        for addr in hrng.sample(range(HALF, SIZE), 64):
            got = await _host_access(ctx, host, addr)
            assert got == model[addr], f"host read of AXI byte {addr:#x}: {got:#04x}, " \
                                       f"model {model[addr]:#04x}"

    async def axi_bench(ctx):
        arng = random.Random(rng.randrange(1 << 32))
        for _ in range(40):
            beats = arng.randrange(1, 9)
            fixed = arng.random() < 0.2
            addr = arng.randrange(HALF // BEAT, SIZE // BEAT - beats + 1) * BEAT
            if arng.random() < 0.5:
                data = [arng.getrandbits(8 * BEAT) for _ in range(beats)]
                strobes = [arng.choice([0xFF, arng.randrange(256)]) for _ in range(beats)]
                assert await _axi_write(ctx, axi, arng, addr, data, strobes,
                                        fixed=fixed) == AXIResp.OKAY
                for i, (word, strobe) in enumerate(zip(data, strobes)):
                    _model_write(model, addr if fixed else addr + i * BEAT, word, strobe)
                counts["beats written"] += beats
            else:
                got = await _axi_read(ctx, axi, arng, addr, beats, fixed=fixed)
                for i, (word, resp, last) in enumerate(got):
                    at = addr if fixed else addr + i * BEAT
                    assert (word, resp, last) == (_model_word(model, at), AXIResp.OKAY,
                                                  i == beats - 1), \
                        f"AXI read beat {i} of {addr:#x}: {word:#018x} {resp!r} last={last}"
                counts["beats read"] += beats
            await _pause(ctx, arng, 4)
        done["axi"] = True
        while not done["host"]:
            await ctx.tick()
        # the host's bytes, through the AXI side's lanes
        got = await _axi_read(ctx, axi, arng, 0, 8)
        got += await _axi_read(ctx, axi, arng, HALF - 8 * BEAT, 8)
        expect = ([_model_word(model, i * BEAT) for i in range(8)]
                  + [_model_word(model, HALF - (8 - i) * BEAT) for i in range(8)])
        assert [word for word, _, _ in got] == expect
        # past the memory: DECERR, zeros read, nothing written
        before = bytes(model)
        assert await _axi_write(ctx, axi, arng, SIZE, [(1 << 64) - 1] * 2,
                                [0xFF] * 2) == AXIResp.DECERR
        got = await _axi_read(ctx, axi, arng, SIZE + BEAT, 2)
        assert got == [(0, AXIResp.DECERR, False), (0, AXIResp.DECERR, True)]
        got = await _axi_read(ctx, axi, arng, 0, 2)     # the wrapped address is untouched
        assert [word for word, _, _ in got] == [_model_word(before, 0),
                                                _model_word(before, BEAT)]

    run_clocked(dut, host_bench, axi_bench)
    assert done == {"host": True, "axi": True}
    print(counts)
    assert counts["host reads"] > 30 and counts["host writes"] > 30
    assert counts["beats read"] > 30 and counts["beats written"] > 30
