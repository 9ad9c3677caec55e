"""cocotb bench of `attenio_top`: a memory behind the AXI4 master, CSRs over AXI4-Lite.

Driven by `attenio.sim.e2e.run_e2e`, which passes (see `bench_params`): `image`
(npz of memory segments), `mem_size`, `regs` ({name: [offset, value]}, written by
name), `regmap` ({name: offset}), `o_region` ([base, bytes]), `runs` (a list of
register overrides, one run each, back to back, no reset), `seed`, `memory`
("axiram": cocotbext-axi's AxiRam on `m_axi`, with `latency` ([probability, max
cycles]) and `backpressure` (pause probability per AXI channel); "model": the
design carries `attenio.hdl.sim_memory`, loaded and read through its backdoor,
`beat` bytes a word), `progress_cycles`, `progress_file` (lines "cycles bytes_written
wall_seconds" for `attenio.sim.progress`), `counters` (unused here: the map's list), `expect_bytes_written`, `max_cycles`, and
`results` (the JSON file it writes: per run the status, error, counters, the
simulated cycles and the O region read back as hex).

The bench only drives and records; the launcher compares with the golden model.
The memories, the CSR access, the counter list, clock, reset and the seeded RNG
come from `attenio.sim.tb`.
"""

import functools
import json
import logging
import time

import cocotb
import numpy as np
from cocotb.simtime import get_sim_time
from cocotb.triggers import ClockCycles

from attenio.hdl.sim_memory import SimSystem
from attenio.sim.fast import POISON
from attenio.sim.runner import bench_params
from attenio.sim.tb.axi_memory import AxiMemory
from attenio.sim.tb.backdoor import BackdoorMemory
from attenio.sim.tb.clock import PERIOD_NS, reset, start_clock
from attenio.sim.tb.lite import Registers, lite_master
from attenio.sim.tb.rng import seeded

P = bench_params()


def memory(dut, rng):
    """The design's memory: its own model through the backdoor, or AxiRam on `m_axi`."""
    if P.get("memory", "axiram") == "model":
        return BackdoorMemory(functools.reduce(getattr, SimSystem.STORAGE, dut), P["beat"])
    mem = AxiMemory.from_prefix(dut, "m_axi", size=P["mem_size"], rng=rng)
    mem.latency = tuple(P.get("latency", [0.0, 0]))
    mem.back_pressure(P.get("backpressure", 0))
    return mem


@cocotb.test(timeout_time=P.get("timeout_ms", 10 ** 7), timeout_unit="ms")
async def end_to_end(dut):
    rng = seeded("bench_top", "end_to_end", P.get("seed", 1))
    log = logging.getLogger("cocotb.bench_top")
    start_clock(dut.clk)
    logging.getLogger(f"cocotb.{dut._name}").setLevel(logging.WARNING)   # the bus models' chatter
    mem = memory(dut, rng)
    # The light master on the memory model: its runs are the long ones.
    regs = Registers(lite_master(dut, light=P.get("memory", "axiram") == "model"), P["regmap"])
    await reset(dut, cycles=5, settle=2)

    image = np.load(P["image"])
    ends = np.cumsum(image["lengths"])
    mem.load([(int(a), image["data"][e - n:e].tobytes())
              for a, n, e in zip(image["addrs"], image["lengths"], ends)])
    o_base, o_size = P["o_region"]

    results = {"o_base": o_base, "runs": []}
    progress = open(P["progress_file"], "a") if P.get("progress_file") else None
    for run, overrides in enumerate(P["runs"]):
        mem.write(o_base, bytes([POISON]) * o_size)
        for offset, value in {**P["regs"], **overrides}.values():
            await regs.write_at(offset, value)
        t0, cpu0, start_time = time.perf_counter(), time.process_time(), get_sim_time("ns")
        await regs.write("CTRL", 1)
        last_wall, last_percent, status = time.perf_counter(), 0.0, 0
        while True:
            await ClockCycles(dut.clk, min(P.get("progress_cycles", 20000), 2000))
            status = await regs.read("STATUS")
            if status & 2:
                break
            cycles = (get_sim_time("ns") - start_time) / PERIOD_NS
            assert cycles < P["max_cycles"], f"no DONE after {int(cycles)} cycles"
            if cycles % P.get("progress_cycles", 20000) < 2000:
                # progress: to the launcher's file (attenio.sim.progress), and printed every
                # 5 % of O written or every 30 s of wall time
                written = await regs.read64("BYTES_WRITTEN")
                percent = 100 * written / max(1, P.get("expect_bytes_written", 1))
                now = time.perf_counter()
                if progress:
                    progress.write(f"{int(cycles)} {written} {now - t0:.3f}\n")
                    progress.flush()
                if percent - last_percent >= 5 or now - last_wall >= 30:
                    last_wall, last_percent = now, percent
                    rate = cycles / max(now - t0, 1e-9)
                    print(f"bench_top: run {run + 1}: {percent:5.1f}% of O written, "
                          f"{int(cycles)} cycles, {rate:.0f} cycles/s", flush=True)
        counters = await regs.counters()
        error = await regs.read("ERROR")
        o = mem.read(o_base, o_size)
        sim_cycles = (get_sim_time("ns") - start_time) / PERIOD_NS
        results["runs"].append({
            "status": status, "error": error, "counters": counters, "sim_cycles": int(sim_cycles),
            "wall_seconds": time.perf_counter() - t0,
            # the simulator process's CPU time (cocotb runs inside it): a rate load cannot halve
            "cpu_seconds": time.process_time() - cpu0,
            "o": o.hex(), "o_untouched": o == bytes([POISON]) * o_size,
        })
        log.info("run %d: status %#x error %d counters %s", run + 1, status, error, counters)
        print(f"bench_top: run {run + 1} done: {counters}", flush=True)
    if progress:
        progress.close()
    with open(P["results"], "w") as f:
        json.dump(results, f)
