"""`StreamSlice`: order under random back-pressure, its published latency and lead, and
that neither side's handshake reaches the other within a cycle (amaranth.sim)."""

from amaranth.hdl import unsigned

from amaranth_sim import run_clocked
from attenio.hdl.stream_slice import StreamSlice


def run(valid, ready, payloads):
    """Drive the slice cycle by cycle: `valid[t]` offers the next payload on `i` at
    cycle t, `ready[t]` is `o.ready`. Returns the cycles of each handshake on `i` and
    on `o`, the payloads taken from `o`, and (i.ready, o.valid) seen each cycle before
    and after the other side's signal is set."""
    dut = StreamSlice(unsigned(16))
    log = {"i": [], "o": [], "got": [], "probe": []}

    async def bench(ctx):
        k = 0
        for t, (v, r) in enumerate(zip(valid, ready)):
            ctx.set(dut.i.valid, 0)
            ctx.set(dut.o.ready, 0)
            before = (ctx.get(dut.i.ready), ctx.get(dut.o.valid))
            offer = bool(v) and k < len(payloads)
            ctx.set(dut.i.valid, int(offer))
            if offer:
                ctx.set(dut.i.payload, payloads[k])
            ctx.set(dut.o.ready, int(r))
            after = (ctx.get(dut.i.ready), ctx.get(dut.o.valid))
            log["probe"].append((before, after))
            if offer and ctx.get(dut.i.ready):
                log["i"].append(t)
                k += 1
            if r and ctx.get(dut.o.valid):
                log["o"].append(t)
                log["got"].append(ctx.get(dut.o.payload))
            await ctx.tick()

    run_clocked(dut, bench)
    return log


def test_keeps_every_payload_in_order_under_random_back_pressure(rng):
    payloads = [int(x) for x in rng.integers(0, 1 << 16, size=200)]
    cycles = 2000
    log = run(rng.integers(0, 2, size=cycles), rng.integers(0, 2, size=cycles), payloads)
    assert log["got"] == payloads


def test_one_payload_a_cycle_one_cycle_late():
    n = 20
    log = run([1] * (n + 2), [1] * (n + 2), list(range(n)))
    assert log["i"] == list(range(n))
    assert log["o"] == [t + StreamSlice.latency for t in range(n)]
    assert log["got"] == list(range(n))


def test_after_a_stall_the_producer_leads_the_consumer_by_the_published_lead():
    # the consumer stalls for cycles 0..9, then takes every cycle: the slice fills with
    # two payloads (one in flight, one waiting), and from then on `i` takes each payload
    # `lead` cycle after the one two before it has left
    n, stall = 12, 10
    log = run([1] * 40, [0] * stall + [1] * 30, list(range(n)))
    assert log["i"][:2] == [0, 1]
    assert log["o"][:2] == [stall, stall + 1]
    # payload k >= 2 enters when payload k - 2 has left, `lead` cycle(s) later ...
    for k in range(2, n):
        assert log["i"][k] == log["o"][k - 2] + StreamSlice.lead
    # ... and leaves the cycle after it entered, so the consumer sees no bubble
    assert log["o"] == list(range(stall, stall + n))


def test_neither_handshake_crosses_the_slice_within_a_cycle(rng):
    cycles = 300
    log = run(rng.integers(0, 2, size=cycles), rng.integers(0, 2, size=cycles),
              [int(x) for x in rng.integers(0, 1 << 16, size=100)])
    # i.ready does not follow o.ready, nor o.valid i.valid, in the same cycle
    assert all(before == after for before, after in log["probe"])
    # and the probe saw both levels of each, so the comparison above can fail
    assert {b[0] for b, _ in log["probe"]} == {0, 1}
    assert {b[1] for b, _ in log["probe"]} == {0, 1}
