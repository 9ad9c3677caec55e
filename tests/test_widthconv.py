"""Beat <-> element width converters under random back-pressure (amaranth.sim)."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from attenio.hdl.widthconv import BeatPacker, BeatUnpacker


async def send(ctx, port, payload):
    """Offer `payload` on the stream `port` until it is taken."""
    ctx.set(port.payload, payload)
    ctx.set(port.valid, 1)
    await ctx.tick().until(port.ready)
    ctx.set(port.valid, 0)


def pump(dut, sent, count, read, stalls):
    """Offer the payloads `sent` on `dut.i` and take `count` items from `dut.o`, whose
    ready follows `stalls` cycle by cycle; returns `read` of each payload taken."""
    got = []

    async def producer(ctx):
        for payload in sent:
            await send(ctx, dut.i, payload)

    async def consumer(ctx):
        for ready in stalls:
            if len(got) == count:
                break
            ctx.set(dut.o.ready, int(ready))
            await ctx.delay(1e-9)
            if ctx.get(dut.o.valid) and ctx.get(dut.o.ready):
                got.append(read(ctx.get(dut.o.payload)))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(producer)
    sim.add_testbench(consumer)
    sim.run_until(4e-8 * 10 * max(len(sent), count))
    return got


@pytest.mark.parametrize("width", [32, 64, 128])
def test_unpacker_keeps_order_and_last(rng, width):
    n = width // 8
    beats = rng.integers(0, 2 ** 63, size=12, dtype=np.uint64)
    lasts = rng.integers(0, 2, size=12)
    data = [int(b) & ((1 << width) - 1) | (int(rng.integers(0, 2**63)) << 64 if width > 64 else 0)
            for b in beats]
    data = [d & ((1 << width) - 1) for d in data]
    expect = [(((d >> (8 * k)) & 0xFF) - (256 if (d >> (8 * k)) & 0x80 else 0),
               int(last and k == n - 1)) for d, last in zip(data, lasts) for k in range(n)]
    got = pump(BeatUnpacker(data_width=width),
               [{"data": d, "last": int(last)} for d, last in zip(data, lasts)], len(expect),
               lambda p: (p.value, p.last), rng.integers(0, 2, size=10 * len(expect)))
    assert got == expect


def test_packer_builds_little_endian_beats(rng):
    values = [int(v) for v in rng.integers(-128, 128, size=8 * 6)]
    elements = [{"value": v, "last": 0} for v in values]
    got = pump(BeatPacker(data_width=64), elements, len(values) // 8, lambda p: p.data,
               rng.integers(0, 2, size=1000))
    expect = [sum((v & 0xFF) << (8 * k) for k, v in enumerate(values[i:i + 8]))
              for i in range(0, len(values), 8)]
    assert got == expect


def test_bad_width_is_refused():
    with pytest.raises(ValueError, match="BeatPacker: data_width must be one of 32, 64, 128, 256, "
                                         "512, not 48"):
        BeatPacker(data_width=48)
