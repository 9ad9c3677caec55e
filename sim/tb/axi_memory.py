"""An AXI4 memory for benches: cocotbext-axi's AxiRam with latency, back-pressure and faults.

Built on the extension points cocotbext-axi documents: the read and write
interfaces are subclasses of `AxiRamRead`/`AxiRamWrite` overriding `_read` and
`_write` (the slave calls them once per beat; an exception there makes it answer
SLVERR), and back-pressure comes from pause generators (`set_pause_generator`)
on the five channels.
"""

import logging
import math

from cocotb.simtime import get_sim_time
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiBus, AxiRamRead, AxiRamWrite
from cocotbext.axi.axi_channels import AxiARMonitor, AxiARTransaction
from cocotbext.axi.memory import Memory

from .clock import PERIOD_NS

__all__ = ["AxiMemory", "pauses"]


def pauses(rng, probability):
    """A pause generator: pause the channel in a cycle with `probability`."""
    while True:
        yield rng.random() < probability


class _StampedAR(AxiARTransaction):
    """An AR request that remembers when its handshake happened."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.arrival_ns = get_sim_time("ns")


class _ARArrivals(AxiARMonitor):
    # The monitor builds one `_transaction_obj` per handshake, in the cycle of the handshake.
    _transaction_obj = _StampedAR


class _Write(AxiRamWrite):
    def __init__(self, memory, *args, **kwargs):
        self._memory = memory
        super().__init__(*args, **kwargs)

    async def _write(self, address, data):
        m = self._memory
        await m._stall()
        m.writes += 1
        m._fault(address, len(data))
        await super()._write(address, data)


class _Read(AxiRamRead):
    """Reads that wait for the pipelined latency before the first beat of each burst.

    The slave serves one burst at a time and calls `_read` once per beat; an AR
    monitor on the same channel records when each request was accepted, so the
    first beat of a burst waits until `read_latency` cycles after its own AR,
    however long it queued behind earlier bursts, and those keep streaming.
    """

    def __init__(self, memory, bus, clock, reset, reset_active_level, **kwargs):
        self._memory = memory
        self._beats_left = 0
        super().__init__(bus, clock, reset, reset_active_level, **kwargs)
        self._arrivals = _ARArrivals(bus.ar, clock, reset, reset_active_level)
        self._arrivals.log.setLevel(logging.WARNING)

    def _handle_reset(self, state):
        super()._handle_reset(state)
        if state:
            self._arrivals.clear()
            self._beats_left = 0

    async def _read(self, address, length):
        m = self._memory
        if not self._beats_left:
            ar = await self._arrivals.recv()
            self._beats_left = int(ar.arlen) + 1
            due_ns = ar.arrival_ns + m.read_latency * m.period_ns
            wait = math.ceil((due_ns - get_sim_time("ns")) / m.period_ns)
            if wait > 0:
                await ClockCycles(self.clock, wait)
        self._beats_left -= 1
        await m._stall()
        m.reads += 1
        m._fault(address, length)
        return await super()._read(address, length)


class AxiMemory(Memory):
    """AxiRam on an AXI4 slave port, with the stalls and faults a bench asks for.

    The knobs, all changeable while the bench runs:

    * `latency = (probability, most)`: before an access (a beat), wait 1..`most`
      cycles with `probability`; the slave stalls meanwhile, like a busy memory.
    * `read_latency`: a pipelined memory: the first beat of a read burst comes no
      earlier than this many cycles after its AR handshake. The AR channel accepts
      up to `ar_depth` requests ahead, so several bursts can be waiting at once.
    * `poisoned`: (start, end) byte ranges; an access touching one answers SLVERR
      (a read beat then carries zeros).
    * `back_pressure(probability)`: random pauses on all five channels.

    `reads` and `writes` count the beats asked for, faulty ones included.
    """

    def __init__(self, bus, clock, reset=None, *, size, rng, reset_active_level=True,
                 period_ns=PERIOD_NS, ar_depth=64):
        super().__init__(size)
        self.rng = rng
        self.period_ns = period_ns
        self.latency = (0.0, 0)
        self.read_latency = 0
        self.poisoned = []
        self.reads = self.writes = 0
        self.write_if = _Write(self, bus.write, clock, reset, reset_active_level, mem=self.mem)
        self.read_if = _Read(self, bus.read, clock, reset, reset_active_level, mem=self.mem)
        # cocotbext-axi sets this limit itself (2); it bounds the requests accepted ahead.
        self.read_if.ar_channel.queue_occupancy_limit = ar_depth
        for port in (self.read_if, self.write_if):
            port.log.setLevel(logging.WARNING)

    @classmethod
    def from_prefix(cls, dut, prefix, **kwargs):
        """The memory on the port `<prefix>__*` of `dut`, clocked by `dut.clk`, reset by
        `dut.rst`."""
        bus = AxiBus.from_prefix(dut, prefix, bus_separator="__")
        return cls(bus, dut.clk, dut.rst, **kwargs)

    def load(self, segments):
        """Write (address, bytes) segments."""
        for addr, blob in segments:
            self.write(addr, blob)

    async def _stall(self):
        probability, most = self.latency
        if most and self.rng.random() < probability:
            await ClockCycles(self.read_if.clock, self.rng.randint(1, most))

    def _fault(self, address, size):
        """Raise (the slave then answers SLVERR) if the access touches a poisoned range."""
        for start, end in self.poisoned:
            if address < end and start < address + size:
                raise OSError(f"injected SLVERR at {address:#x}")

    def channels(self):
        r, w = self.read_if, self.write_if
        return (r.ar_channel, r.r_channel, w.aw_channel, w.w_channel, w.b_channel)

    def back_pressure(self, probability):
        """Random pauses on all five channels with `probability` each cycle (0: none)."""
        for channel in self.channels():
            channel.set_pause_generator(pauses(self.rng, probability) if probability else None)
            # Removing the generator leaves `pause` at its last value; a channel caught
            # paused would stay paused for good.
            if not probability:
                channel.pause = False
