"""What the fast tests share to drive a block in `amaranth.sim`: one clock, testbenches
run to their end, and a wait that counts cycles."""

from amaranth.sim import Simulator

__all__ = ["run_clocked", "cycles_until"]


def run_clocked(dut, *testbenches, period=1e-8):
    """Simulate `dut` on one clock of `period` seconds until every testbench returns."""
    sim = Simulator(dut)
    sim.add_clock(period)
    for testbench in testbenches:
        sim.add_testbench(testbench)
    sim.run()


async def cycles_until(ctx, signal, limit=50):
    """The cycles from now until `signal` is high (0: it is high in this cycle)."""
    for cycle in range(limit):
        if ctx.get(signal):
            return cycle
        await ctx.tick()
    raise AssertionError(f"{signal} stayed low for {limit} cycles")
