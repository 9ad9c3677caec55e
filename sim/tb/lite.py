"""Control and status registers by name over the AXI4-Lite port `s_axil`.

Two masters serve `Registers`: cocotbext-axi's `AxiLiteMaster`, the protocol's
reference, and `LiteDriver`, a minimal master that runs only while it accesses.
AxiLiteMaster keeps coroutines waking on every clock edge; over the millions of
cycles of a run on the in-design memory model that costs more than the design.
"""

import logging

from cocotb.triggers import RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from .counters import counter_names

__all__ = ["LiteDriver", "Registers", "lite_master"]


class LiteDriver:
    """An AXI4-Lite master with one access at a time (`read_dword`, `write_dword`)."""

    def __init__(self, dut, prefix="s_axil"):
        self.clk = dut.clk
        self._s = lambda name: getattr(dut, f"{prefix}__{name}")
        for name in ("awvalid", "wvalid", "bready", "arvalid", "rready", "awprot", "arprot"):
            self._s(name).value = 0
        self._s("wstrb").value = (1 << len(self._s("wstrb"))) - 1

    async def _hold(self, mine, theirs):
        """Hold our `mine` (a valid or a ready) high until the edge that sees `theirs` high."""
        mine.value = 1
        while True:
            await RisingEdge(self.clk)
            if int(theirs.value):
                break
        mine.value = 0

    async def write_dword(self, addr, value):
        s = self._s
        s("awaddr").value = addr
        s("wdata").value = value
        s("awvalid").value = 1
        await self._hold(s("wvalid"), s("wready"))
        s("awvalid").value = 0
        await self._hold(s("bready"), s("bvalid"))
        resp = int(s("bresp").value)
        assert resp == 0, f"write to {addr:#x} answered {resp}"

    async def read_dword(self, addr):
        s = self._s
        s("araddr").value = addr
        await self._hold(s("arvalid"), s("arready"))
        await self._hold(s("rready"), s("rvalid"))
        return int(s("rdata").value)


def lite_master(dut, prefix="s_axil", *, light=False):
    """cocotbext-axi's AxiLiteMaster on `<prefix>__*` (quiet), or with `light` a `LiteDriver`."""
    if light:
        return LiteDriver(dut, prefix)
    master = AxiLiteMaster(AxiLiteBus.from_prefix(dut, prefix, bus_separator="__"), dut.clk,
                           dut.rst)
    master.write_if.log.setLevel(logging.WARNING)
    master.read_if.log.setLevel(logging.WARNING)
    return master


class Registers:
    """Named access to the CSRs through `master`; `offsets` maps names to byte offsets
    (a `RegisterMap` or a {name: offset} dict)."""

    def __init__(self, master, offsets):
        if not isinstance(offsets, dict):
            offsets = {r.name: r.offset for r in offsets}
        self.master, self.offsets = master, offsets

    async def read(self, name):
        return await self.master.read_dword(self.offsets[name])

    async def write(self, name, value):
        await self.write_at(self.offsets[name], value)

    async def write_at(self, offset, value):
        """The word at byte `offset`: a window's entry (`attenio.regmap.Window`) too."""
        await self.master.write_dword(offset, value & 0xFFFF_FFFF)

    async def read64(self, name):
        """A 64-bit register: the low word first (reading it latches the high word)."""
        lo = await self.read(name)
        hi = await self.master.read_dword(self.offsets[name] + 4)
        return hi << 32 | lo

    async def counters(self, names=None):
        """{name: value} of every performance counter."""
        return {name: await self.read64(name) for name in names or counter_names()}
