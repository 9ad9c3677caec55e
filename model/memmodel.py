"""The off-chip memory as the cycle models see it: one link with a bandwidth and a latency.

A request of `n` bytes issued at cycle `t` is split into AXI bursts (at most
`burst_bytes` each, never more than 256 beats or 4 KiB); its data occupies the
link for `transfer_cycles(n)` cycles, which cannot start before `t + latency`
nor before the link is free, and has arrived when that transfer ends::

    arrival = max(t + latency, link_free) + transfer_cycles(n)

Any number of requests may be outstanding (the prefetch depth of the dataflow
bounds them, not the memory), so latency is paid once per stream, not once per
request, as long as requests are issued early enough: that is what the K/V
prefetch depth of the Plan is sized for.

Reads and writes share the link's bandwidth (a DRAM data bus is shared; AXI's
separate channels do not double the DRAM's bandwidth). In the event model
reads have priority and writes fill the link's idle time (`Link.write`); in
the closed-form baseline models the link time is simply total bytes / bandwidth.

Channels and banks. HBM and DDR spread consecutive addresses over channels and
banks at a fine interleave; every dataflow modelled here moves long contiguous
rows (K, V, Q, O rows of d elements, whole tiles of S and P), which hit open
rows and spread evenly over all channels, so the aggregate bandwidth and one
latency describe them. Channels and banks would change the answer only for
access patterns these dataflows do not have: strided or random accesses
(row-buffer misses, bank conflicts), a single stream pinned to one channel
(capped at one channel's bandwidth), or many short requests (command-bus
limits). Refresh and read/write turnaround are not modelled; they would cost
all dataflows the same few per cent of bandwidth.
"""

from dataclasses import dataclass
from math import ceil

from attenio import validate

__all__ = ["Memory", "Link"]

AXI_4KB = 4096
AXI_MAX_BEATS = 256


@dataclass(frozen=True)
class Memory:
    """The off-chip link's constants.

    bw_bytes          bytes per cycle the memory delivers (reads and writes together)
    latency           cycles from a request to its first data
    axi_bytes         AXI data bus width in bytes: sizes the bursts, and with
                      `axi_rate_cap` caps the rate at one beat per cycle
    burst_overhead    idle cycles on the data bus per AXI burst (address phase,
                      turnaround); 0 for a memory that pipelines bursts back to back.
                      The memory's cost, not the accelerator's: its DMA reader holds
                      RREADY high (`attenio.hdl.dma.DMAReader`)
    write_latency     cycles from a write's last data to its response (None: `latency`)
    axi_rate_cap      True: one AXI port moves at most one beat per cycle, so the
                      rate is min(bw_bytes, axi_bytes); False (default): the memory
                      system delivers bw_bytes whatever the port width (several ports
                      or a wide interconnect), as in the paper's 128 GB/s HBM
    """

    bw_bytes: int
    latency: int
    axi_bytes: int = 64
    burst_overhead: int = 0
    axi_rate_cap: bool = False
    write_latency: int = None

    def __post_init__(self):
        validate.positive("memory", bw_bytes=self.bw_bytes, axi_bytes=self.axi_bytes)
        validate.non_negative("memory", latency=self.latency, burst_overhead=self.burst_overhead)
        if self.write_latency is None:
            object.__setattr__(self, "write_latency", self.latency)
        validate.non_negative("memory", write_latency=self.write_latency)

    @classmethod
    def of(cls, budget, **overrides):
        """The memory of a `Budget` (bandwidth, latency, AXI width), with overrides."""
        kw = dict(bw_bytes=budget.bw_bytes_per_cycle, latency=budget.latency_cycles,
                  axi_bytes=budget.axi_data_bits // 8)
        kw.update(overrides)
        return cls(**kw)

    @property
    def rate(self):
        """Bytes per cycle on the link."""
        return min(self.bw_bytes, self.axi_bytes) if self.axi_rate_cap else self.bw_bytes

    @property
    def burst_bytes(self):
        return min(AXI_4KB, AXI_MAX_BEATS * self.axi_bytes)

    def bursts(self, nbytes):
        return ceil(nbytes / self.burst_bytes)

    def transfer_cycles(self, nbytes):
        """Cycles the link is busy moving `nbytes` (whole beats, burst overheads)."""
        if nbytes <= 0:
            return 0
        beats = ceil(nbytes / self.axi_bytes)
        return ceil(beats * self.axi_bytes / self.rate) + self.bursts(nbytes) * self.burst_overhead

    def stream_cycles(self, nbytes, requests=1):
        """Closed form for the baselines: `nbytes` in `requests` requests, pipelined."""
        if nbytes <= 0:
            return 0
        per = ceil(nbytes / requests)
        return requests * self.transfer_cycles(per)


class Link:
    """The link's state in the event model: when its data bus is next free.

    `read(t, n)` returns the arrival cycle of a read issued at `t`. `write(avail, n)`
    queues `n` bytes that may be sent from cycle `avail` on; they are sent in the
    link's idle time before later reads (`read` pays them down from the gap
    between `link_free` and the next read's first data) and whatever is left when
    the run ends is sent by `flush`.
    """

    __slots__ = ("mem", "free", "debt")

    def __init__(self, mem, start=0):
        self.mem = mem
        self.free = start
        self.debt = []          # [earliest cycle the link may send it, cycles left]

    def _pay(self, until):
        """Send queued writes in the idle time before `until`."""
        while self.debt and self.free < until:
            avail, left = self.debt[0]
            start = max(self.free, avail)
            if start >= until:
                break
            sent = min(left, until - start)
            self.free = start + sent
            if sent == left:
                self.debt.pop(0)
            else:
                self.debt[0] = [avail, left - sent]

    def read(self, t, nbytes):
        first = t + self.mem.latency
        if self.debt:
            self._pay(first)
        start = max(first, self.free)
        self.free = start + self.mem.transfer_cycles(nbytes)
        return self.free

    def write(self, avail, nbytes):
        cycles = self.mem.transfer_cycles(nbytes)
        if cycles:
            self.debt.append([avail, cycles])

    def flush(self):
        """Send every queued write; the cycle the last write data leaves."""
        for avail, left in self.debt:
            self.free = max(self.free, avail) + left
        self.debt = []
        return self.free

    def snapshot(self, t):
        """The link's state relative to cycle `t` (see `attenio.model.cyclemodel`)."""
        return (self.free - t, tuple((max(a, self.free) - t, c) for a, c in self.debt))

    def shift(self, delta):
        self.free += delta
        for item in self.debt:
            item[0] += delta
