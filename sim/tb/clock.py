"""The clock every bench runs at and the reset sequence."""

from cocotb.clock import Clock
from cocotb.triggers import ClockCycles

__all__ = ["PERIOD_NS", "start_clock", "reset"]

PERIOD_NS = 10


def start_clock(clk, period_ns=PERIOD_NS):
    """Start a free-running clock on `clk`; returns its task."""
    return Clock(clk, period_ns, unit="ns").start()


async def reset(dut, *, cycles=5, settle=1, idle=()):
    """Drive every signal in `idle` to 0, hold `dut.rst` for `cycles` clock cycles, then
    wait `settle` more with reset released."""
    for signal in idle:
        signal.value = 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, cycles)
    dut.rst.value = 0
    if settle:
        await ClockCycles(dut.clk, settle)
