"""cocotb bench of `attenio_top`: AxiRam behind the AXI4 master, CSRs over AXI4-Lite.

Driven by `attenio.sim.e2e.run_e2e`, which passes (see `bench_params`): `image`
(npz of memory segments), `mem_size`, `regs` ({name: [offset, value]}), `regmap`
({name: offset}), `o_region` ([base, bytes]), `runs` (a list of register overrides, one run each, back to back, no reset),
`seed`, `memory` ("axiram": cocotbext-axi's AxiRam on `m_axi`, with `latency`
([probability, max cycles]) and `backpressure` (pause probability per AXI
channel); "model": the design carries `attenio.hdl.sim_memory`, loaded and read
through its backdoor, `beat` bytes a word), `progress_cycles`, `expect_bytes_written`, `max_cycles`, and
`results` (the JSON file it writes: per run the status, error, counters, the
simulated cycles and the O region read back as hex).

The bench only drives and records; the launcher compares with the golden model.
"""

import json
import logging
import random
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotb.utils import get_sim_time
from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiRam

from attenio.sim.runner import bench_params

P = bench_params()
COUNTERS = ("CYCLES", "PE_BUSY", "EXP_BUSY", "MEM_STALL", "BYTES_READ", "BYTES_WRITTEN")
POISON = 0xA5


def pauses(rng, probability):
    while True:
        yield rng.random() < probability


def add_latency(port, hook, clk, rng, probability, most):
    """Wrap AxiRam's access hook so an access waits a random number of cycles first."""
    inner = getattr(port, hook)

    async def hooked(address, arg):
        if rng.random() < probability:
            await ClockCycles(clk, rng.randint(1, most))
        return await inner(address, arg)

    setattr(port, hook, hooked)


class RamMemory:
    """cocotbext-axi's AxiRam on the AXI4 master, with optional latency and back-pressure."""

    def __init__(self, dut, rng):
        self.ram = AxiRam(AxiBus.from_prefix(dut, "m_axi", bus_separator="__"), dut.clk, dut.rst,
                          size=P["mem_size"])
        for port in (self.ram.read_if, self.ram.write_if):
            port.log.setLevel(logging.WARNING)
        probability, most = P.get("latency", [0.0, 0])
        if most:
            add_latency(self.ram.read_if, "_read", dut.clk, rng, probability, most)
            add_latency(self.ram.write_if, "_write", dut.clk, rng, probability, most)
        if P.get("backpressure"):
            r, w = self.ram.read_if, self.ram.write_if
            for ch in (r.ar_channel, r.r_channel, w.aw_channel, w.w_channel, w.b_channel):
                ch.set_pause_generator(pauses(rng, P["backpressure"]))

    def load(self, segments):
        for addr, blob in segments:
            self.ram.write(addr, blob)

    def write(self, addr, blob):
        self.ram.write(addr, blob)

    def read(self, addr, length):
        return self.ram.read(addr, length)


class LiteDriver:
    """A minimal AXI4-Lite master for long runs: it runs only while it accesses.

    AxiLiteMaster keeps coroutines waking on every clock edge; over millions of
    cycles that costs more than the simulated design. The protocol tests use
    AxiLiteMaster; this driver serves the runs on the memory model.
    """

    def __init__(self, dut):
        self.dut, self.clk = dut, dut.clk
        for name in ("awvalid", "wvalid", "bready", "arvalid", "rready"):
            getattr(dut, f"s_axil__{name}").value = 0
        dut.s_axil__wstrb.value = 0xF
        dut.s_axil__awprot.value = 0
        dut.s_axil__arprot.value = 0

    async def _handshake(self, valid, ready):
        valid.value = 1
        while True:
            await RisingEdge(self.clk)
            if int(ready.value):
                break
        valid.value = 0

    async def write_dword(self, addr, value):
        d = self.dut
        d.s_axil__awaddr.value = addr
        d.s_axil__wdata.value = value
        d.s_axil__awvalid.value = 1
        await self._handshake(d.s_axil__wvalid, d.s_axil__wready)
        d.s_axil__awvalid.value = 0
        d.s_axil__bready.value = 1
        while True:
            await RisingEdge(self.clk)
            if int(d.s_axil__bvalid.value):
                break
        d.s_axil__bready.value = 0
        assert int(d.s_axil__bresp.value) == 0, f"write to {addr:#x} answered {int(d.s_axil__bresp.value)}"

    async def read_dword(self, addr):
        d = self.dut
        d.s_axil__araddr.value = addr
        await self._handshake(d.s_axil__arvalid, d.s_axil__arready)
        d.s_axil__rready.value = 1
        while True:
            await RisingEdge(self.clk)
            if int(d.s_axil__rvalid.value):
                value = int(d.s_axil__rdata.value)
                break
        d.s_axil__rready.value = 0
        return value


class ModelMemory:
    """The in-design memory model (`attenio.hdl.sim_memory`), reached through its backdoor."""

    def __init__(self, storage, beat):
        self.storage, self.beat = storage, beat

    def write(self, addr, blob):
        assert addr % self.beat == 0 and len(blob) % self.beat == 0
        words = np.frombuffer(blob, dtype=f"<u{self.beat}") if self.beat <= 8 else None
        for i in range(len(blob) // self.beat):
            chunk = blob[i * self.beat:(i + 1) * self.beat]
            value = int(words[i]) if words is not None else int.from_bytes(chunk, "little")
            self.storage[addr // self.beat + i].value = value

    def load(self, segments):
        # Rows may be narrower than a beat only if padded; merge segments into whole beats.
        image = {}
        for addr, blob in segments:
            for k, byte in enumerate(blob):
                image[addr + k] = byte
        words = {}
        for a, byte in image.items():
            words.setdefault(a // self.beat, bytearray(self.beat))[a % self.beat] = byte
        for w, chunk in sorted(words.items()):
            self.storage[w].value = int.from_bytes(chunk, "little")

    def read(self, addr, length):
        out = bytearray()
        for w in range(addr // self.beat, (addr + length + self.beat - 1) // self.beat):
            out += int(self.storage[w].value).to_bytes(self.beat, "little")
        start = addr % self.beat
        return bytes(out[start:start + length])


@cocotb.test(timeout_time=P.get("timeout_ms", 10 ** 7), timeout_unit="ms")
async def end_to_end(dut):
    rng = random.Random(P.get("seed", 1))
    log = logging.getLogger("cocotb.bench_top")
    print(f"bench_top: seed {P.get('seed', 1)}", flush=True)
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    logging.getLogger(f"cocotb.{dut._name}").setLevel(logging.WARNING)   # the bus models' chatter
    if P.get("memory", "axiram") == "model":
        mem = ModelMemory(dut.mem.storage, P["beat"])
    else:
        mem = RamMemory(dut, rng)
    if P.get("memory", "axiram") == "model":
        axil = LiteDriver(dut)
    else:
        axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil", bus_separator="__"), dut.clk,
                             dut.rst)
        axil.write_if.log.setLevel(logging.WARNING)
        axil.read_if.log.setLevel(logging.WARNING)

    dut.rst.value = 1
    await ClockCycles(dut.clk, 5)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)

    image = np.load(P["image"])
    ends = np.cumsum(image["lengths"])
    mem.load([(int(a), image["data"][e - n:e].tobytes())
              for a, n, e in zip(image["addrs"], image["lengths"], ends)])
    regmap = P["regmap"]
    o_base, o_size = P["o_region"]

    async def read64(name):
        lo = await axil.read_dword(regmap[name])
        hi = await axil.read_dword(regmap[name] + 4)
        return lo | hi << 32

    results = {"o_base": o_base, "runs": []}
    for run, overrides in enumerate(P["runs"]):
        mem.write(o_base, bytes([POISON]) * o_size)
        for name, (offset, value) in {**P["regs"], **overrides}.items():
            await axil.write_dword(offset, value & 0xFFFF_FFFF)
        t0, start_time = time.perf_counter(), get_sim_time("ns")
        await axil.write_dword(regmap["CTRL"], 1)
        last_wall, last_percent, status = time.perf_counter(), 0.0, 0
        while True:
            await ClockCycles(dut.clk, min(P.get("progress_cycles", 20000), 2000))
            status = await axil.read_dword(regmap["STATUS"])
            if status & 2:
                break
            cycles = (get_sim_time("ns") - start_time) / 10
            assert cycles < P["max_cycles"], f"no DONE after {int(cycles)} cycles"
            if cycles % P.get("progress_cycles", 20000) < 2000:
                # progress: every 5 % of O written, or every 30 s of wall time
                written = await read64("BYTES_WRITTEN")
                percent = 100 * written / max(1, P.get("expect_bytes_written", 1))
                now = time.perf_counter()
                if percent - last_percent >= 5 or now - last_wall >= 30:
                    last_wall, last_percent = now, percent
                    rate = cycles / max(now - t0, 1e-9)
                    print(f"bench_top: run {run + 1}: {percent:5.1f}% of O written, "
                          f"{int(cycles)} cycles, {rate:.0f} cycles/s", flush=True)
        counters = {name: await read64(name) for name in COUNTERS}
        error = await axil.read_dword(regmap["ERROR"])
        o = mem.read(o_base, o_size)
        sim_cycles = (get_sim_time("ns") - start_time) / 10
        results["runs"].append({
            "status": status, "error": error, "counters": counters, "sim_cycles": int(sim_cycles),
            "wall_seconds": time.perf_counter() - t0,
            "o": o.hex(), "o_untouched": o == bytes([POISON]) * o_size,
        })
        log.info("run %d: status %#x error %d counters %s", run + 1, status, error, counters)
        print(f"bench_top: run {run + 1} done: {counters}", flush=True)
    with open(P["results"], "w") as f:
        json.dump(results, f)
