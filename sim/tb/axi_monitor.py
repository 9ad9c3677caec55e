"""The rules an AXI4 master must keep, checked on every handshake of its port."""

from collections import deque

import cocotb
from cocotb.triggers import RisingEdge

from attenio.hdl.axi import AXI_4KB, AXIBurst

__all__ = ["AxiMonitor"]


class AxiMonitor:
    """Samples the port `<prefix>__*` of `dut` right after each rising edge, outside reset.

    Records AR and AW bursts as (address, beats) in `ar` and `aw`; checks INCR,
    full-width beat-aligned beats, at most `max_burst` beats (by default AXI's 256
    or 4 KB of beats, whichever is less), no 4 KB crossing, WLAST on exactly the
    last beat of each write burst, no W beat before its AW, and at most
    `max_reads`/`max_writes` bursts in flight (None: unchecked). Counts R, W
    beats and B responses, the most bursts in flight, and `r_stalls`, the cycles
    in which RVALID met a low RREADY. `check()` raises on any violation.
    """

    def __init__(self, dut, prefix="m_axi", *, max_reads=None, max_writes=None, max_burst=None):
        self._sig = {name: getattr(dut, f"{prefix}__{name}") for name in (
            "arvalid", "arready", "araddr", "arlen", "arsize", "arburst",
            "rvalid", "rready", "rlast",
            "awvalid", "awready", "awaddr", "awlen", "awsize", "awburst",
            "wvalid", "wready", "wlast", "bvalid", "bready")}
        self.clk, self.rst = dut.clk, dut.rst
        self.bytes_per_beat = len(getattr(dut, f"{prefix}__rdata")) // 8
        self.max_burst = max_burst or min(256, AXI_4KB // self.bytes_per_beat)
        self.max_reads, self.max_writes = max_reads, max_writes
        self.ar, self.aw = [], []
        self.r_beats = self.w_beats = self.b_resps = 0
        self.reads_in_flight = self.writes_in_flight = 0
        self.max_reads_in_flight = self.max_writes_in_flight = 0
        self.r_stalls = 0
        self.errors = []
        self._w_bursts = deque()        # beats expected in each write burst whose AW went out
        self._w_beat = 0
        cocotb.start_soon(self._run())

    def reset_stats(self):
        """Forget the bursts and beats seen so far (the in-flight counts stay true)."""
        self.ar.clear()
        self.aw.clear()
        self.r_beats = self.w_beats = self.b_resps = 0
        self.max_reads_in_flight = self.reads_in_flight
        self.max_writes_in_flight = self.writes_in_flight

    def _check_burst(self, kind, addr, length, size, burst):
        beats, bpb = length + 1, self.bytes_per_beat
        if burst != AXIBurst.INCR:
            self.errors.append(f"{kind} burst type {burst} at {addr:#x}, not INCR")
        if size != bpb.bit_length() - 1:
            self.errors.append(f"{kind} size {size} at {addr:#x}, not full width")
        if addr % bpb:
            self.errors.append(f"{kind} address {addr:#x} not beat-aligned")
        if beats > self.max_burst:
            self.errors.append(f"{kind} burst of {beats} beats at {addr:#x} exceeds "
                               f"{self.max_burst}")
        if addr // AXI_4KB != (addr + beats * bpb - 1) // AXI_4KB:
            self.errors.append(f"{kind} burst {addr:#x}+{beats * bpb} crosses a 4 KB boundary")

    def _address(self, channel):
        s = self._sig
        addr, length = int(s[f"{channel}addr"].value), int(s[f"{channel}len"].value)
        self._check_burst(channel.upper(), addr, length, int(s[f"{channel}size"].value),
                          int(s[f"{channel}burst"].value))
        return addr, length + 1

    async def _run(self):
        s = self._sig
        while True:
            await RisingEdge(self.clk)
            if self.rst.value:
                continue
            if s["arvalid"].value and s["arready"].value:
                self.ar.append(self._address("ar"))
                self.reads_in_flight += 1
                self.max_reads_in_flight = max(self.max_reads_in_flight, self.reads_in_flight)
                if self.max_reads is not None and self.reads_in_flight > self.max_reads:
                    self.errors.append(f"{self.reads_in_flight} reads in flight > "
                                       f"{self.max_reads}")
            if s["rvalid"].value:
                if s["rready"].value:
                    self.r_beats += 1
                    if s["rlast"].value:
                        self.reads_in_flight -= 1
                else:
                    self.r_stalls += 1
            if s["awvalid"].value and s["awready"].value:
                burst = self._address("aw")
                self.aw.append(burst)
                self._w_bursts.append(burst[1])
                self.writes_in_flight += 1
                self.max_writes_in_flight = max(self.max_writes_in_flight, self.writes_in_flight)
                if self.max_writes is not None and self.writes_in_flight > self.max_writes:
                    self.errors.append(f"{self.writes_in_flight} writes in flight > "
                                       f"{self.max_writes}")
            if s["wvalid"].value and s["wready"].value:
                self._w_beat_seen(bool(s["wlast"].value))
            if s["bvalid"].value and s["bready"].value:
                self.b_resps += 1
                self.writes_in_flight -= 1

    def _w_beat_seen(self, last):
        self.w_beats += 1
        if not self._w_bursts:
            self.errors.append("W beat before its AW")
            return
        self._w_beat += 1
        expected = self._w_bursts[0]
        if last != (self._w_beat == expected):
            self.errors.append(f"WLAST={int(last)} on beat {self._w_beat} of a "
                               f"{expected}-beat burst")
        if last or self._w_beat == expected:
            self._w_bursts.popleft()
            self._w_beat = 0

    def check(self):
        assert not self.errors, "AXI protocol violations:\n  " + "\n  ".join(self.errors[:20])
