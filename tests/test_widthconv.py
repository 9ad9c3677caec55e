"""Beat <-> element width converters under random back-pressure (amaranth.sim)."""

import numpy as np
import pytest
from amaranth.hdl import unsigned
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


def _signed8(x):
    return x - 256 if x & 0x80 else x


@pytest.mark.parametrize("width, chunk", [(32, 1), (64, 1), (128, 1), (64, 2), (64, 8),
                                          (128, 4)])
def test_unpacker_keeps_order_and_last(rng, width, chunk):
    n = width // (8 * chunk)                       # chunks per beat
    lasts = rng.integers(0, 2, size=12)
    data = [int.from_bytes(rng.integers(0, 256, size=width // 8, dtype=np.uint8).tobytes(),
                           "little") for _ in lasts]
    expect = [([_signed8(d >> (8 * (k * chunk + e)) & 0xFF) for e in range(chunk)],
               int(last and k == n - 1)) for d, last in zip(data, lasts) for k in range(n)]
    got = pump(BeatUnpacker(data_width=width, width=chunk),
               [{"data": d, "last": int(last)} for d, last in zip(data, lasts)], len(expect),
               lambda p: ([int(v) for v in p.value], p.last),
               rng.integers(0, 2, size=10 * len(expect)))
    assert got == expect


@pytest.mark.parametrize("chunk", [1, 2, 8])
def test_packer_builds_little_endian_beats(rng, chunk):
    values = [int(v) for v in rng.integers(-128, 128, size=8 * 6)]
    chunks = [{"value": values[i:i + chunk], "last": 0} for i in range(0, len(values), chunk)]
    got = pump(BeatPacker(data_width=64, width=chunk), chunks, len(values) // 8,
               lambda p: p.data, rng.integers(0, 2, size=1000))
    expect = [sum((v & 0xFF) << (8 * k) for k, v in enumerate(values[i:i + 8]))
              for i in range(0, len(values), 8)]
    assert got == expect


def test_converters_refuse_a_chunk_that_splits_a_beat():
    with pytest.raises(ValueError, match="BeatUnpacker: a 32-bit beat must hold whole chunks "
                                         "of 3 8-bit elements"):
        BeatUnpacker(data_width=32, width=3)
    with pytest.raises(ValueError, match="BeatPacker: a 32-bit beat must hold whole chunks "
                                         "of 4 16-bit elements"):
        BeatPacker(data_width=32, width=4, element=unsigned(16))
    with pytest.raises(ValueError, match="BeatPacker: element width must be one of 8, 16, not 32"):
        BeatPacker(data_width=64, width=1, element=unsigned(32))


@pytest.mark.parametrize("chunk", [1, 2])
def test_16_bit_elements_round_trip(rng, chunk):
    """fp16/bf16 encodings: little-endian 16-bit elements, unpacked and packed back."""
    values = [int(v) for v in rng.integers(0, 1 << 16, size=4 * 6)]
    beats = [sum(v << (16 * k) for k, v in enumerate(values[i:i + 4]))
             for i in range(0, len(values), 4)]
    chunks = pump(BeatUnpacker(data_width=64, width=chunk, element=unsigned(16)),
                  [{"data": b, "last": 0} for b in beats], len(values) // chunk,
                  lambda p: [int(v) for v in p.value], rng.integers(0, 2, size=1000))
    assert sum(chunks, []) == values
    got = pump(BeatPacker(data_width=64, width=chunk, element=unsigned(16)),
               [{"value": c, "last": 0} for c in chunks], len(beats), lambda p: p.data,
               rng.integers(0, 2, size=1000))
    assert got == beats
    with pytest.raises(ValueError, match="BeatPacker: width must be a positive integer, not 0"):
        BeatPacker(data_width=64, width=0)


def test_bad_width_is_refused():
    with pytest.raises(ValueError, match="BeatPacker: data_width must be one of 32, 64, 128, 256, "
                                         "512, not 48"):
        BeatPacker(data_width=48)
