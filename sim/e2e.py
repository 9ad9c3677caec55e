"""End-to-end simulation of `attenio_top`: `attenio sim` and the end-to-end tests.

`run_e2e` generates the Verilog (reusing it when the Plan has not changed),
prepares Q, K, V in the Plan's format (`attenio.sim.run_data.RunData`: random, or
the arrays of an npz; quantized only for int8),
lays them out in memory, runs the cocotb bench `attenio.sim.benches.bench_top`
(an AxiRam with optional random latency and back-pressure behind the AXI4
master, the CSRs programmed over AXI4-Lite) or, with the engine "fast", the same
parameters on the C++ harness of `attenio.sim.fast` (the in-design memory model,
no Python in the loop), and compares what comes back, alike for both:
O bit for bit with the golden model, the byte counters with the Plan exactly,
and the cycle counters with the cycle model where it is available. A causal
workload (`Workload.causal`) sets the MODE register's CAUSAL bit, N_kv key rows
(`Workload.kv_len`, `E2EOptions.kv_len`) the KV_LEN register, and g query heads a
K/V head (`Workload.kv_heads`, `E2EOptions.head_group`) the HEAD_GROUP register, and
blocks that serve a whole group (`E2EOptions.grouped`, default the planner's rule at the
run's shape, `attenio.plan.wins_grouped`) the MODE register's GROUPED bit; every one of
those checks follows them.

Everything is written beside the Verilog: `sim_report.json` and `sim_outputs.npz`
(O in real units, the RTL's output and the golden output as stored, the float64
reference: `RunData.outputs`).
"""

import dataclasses
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attenio.analysis import key_rows
from attenio.errors import ConfigError
from attenio.model.cyclemodel import model_counters
from attenio.model.memmodel import Memory
from attenio.model.rtl_params import RtlParams
from attenio.plan import make_plan, run_kv_len, wins_grouped
from attenio.regmap import (SCALE_TABLE_ENTRIES, TABLE_ENTRY_BYTES, DescFlag, ErrorCode,
                            pack_table, register_map, table_pages)

from . import fast
from .progress import follow
from .run_data import RunData, load_inputs
from .runner import primitive_models, run_bench
from .tb.counters import counter_names

__all__ = ["ENGINES", "MEMORIES", "MODEL_TOLERANCE", "BUILD_COSTS", "Layout", "E2EOptions",
           "expected_seconds", "fast_cxx_opt", "choose_engine", "run_e2e", "run_grouped",
           "build_fast_model", "across_runs", "load_inputs",
           "rtl_digest", "cached_verilog", "cocotb_build_dir"]

#: how a run is simulated: the cocotb bench, or the fast C++ harness (attenio.sim.fast)
ENGINES = ("cocotb", "fast")
#: where the simulated design's memory lives: cocotbext-axi's AxiRam, or a model inside it
MEMORIES = ("axiram", "model")


@dataclass(frozen=True)
class Layout:
    """Where Q, K, V and O live: bases, head strides, row strides in bytes, and each
    tensor's (heads, rows) in `shapes`."""

    tensors: dict
    shapes: dict

    @classmethod
    def packed(cls, *, seq_len, head_dim, heads, beat, rng=None, gap_rows=0, pad_bytes=0,
               element_bytes=1, out_bytes=None, kv_len=None, kv_heads=None):
        """[head][row][d] row-major, each tensor 4 KB aligned (plus a random beat offset
        when `rng` is given); `pad_bytes` between rows, `gap_rows` rows between heads. Q and
        O have `heads` heads of `seq_len` rows, K and V `kv_heads` of `kv_len` (None: the
        same as Q's); O's elements are `out_bytes` wide (None: `element_bytes`)."""
        out_bytes = element_bytes if out_bytes is None else out_bytes
        kv = (heads if kv_heads is None else kv_heads, seq_len if kv_len is None else kv_len)
        shapes = {"Q": (heads, seq_len), "K": kv, "V": kv, "O": (heads, seq_len)}
        tensors, addr = {}, 0x1000
        for t in "QKVO":
            offset = int(rng.integers(0, 8)) * beat if rng is not None else 0
            h, rows = shapes[t]
            row_stride = head_dim * (out_bytes if t == "O" else element_bytes) + pad_bytes
            head_stride = (rows + gap_rows) * row_stride
            tensors[t] = (addr + offset, head_stride, row_stride)
            addr = (addr + offset + h * head_stride + 0xFFF) // 0x1000 * 0x1000 + 0x1000
        return cls(tensors, shapes)

    def size(self):
        """The end of the last tensor's last row: the bytes the memory must hold."""
        return max(b + (self.shapes[t][0] - 1) * hs + self.shapes[t][1] * rs
                   for t, (b, hs, rs) in self.tensors.items())

    def scatter(self, name, x, dtype=np.dtype("i1")):
        """(addr, bytes) segments placing array x [heads, N, d] of elements `dtype` at
        tensor `name`."""
        base, hs, rs = self.tensors[name]
        segs = []
        for h in range(x.shape[0]):
            if rs == x.shape[2] * dtype.itemsize:
                segs.append((base + h * hs, x[h].astype(dtype).tobytes()))
            else:
                segs += [(base + h * hs + i * rs, x[h, i].astype(dtype).tobytes())
                         for i in range(x.shape[1])]
        return segs


def page_kv(layout, k, v, *, page_rows, beat, rng, dtype):
    """K and V of `layout` (arrays [K/V heads, N_kv, d]) moved into page slots of
    `page_rows` rows in a random order (`rng`, seeded), found through a block table
    (docs/microarchitecture.md, "Paged K/V"): a slot holds the page's rows of every K head,
    then of every V head. The slots take K's and V's place; the table and O follow them.
    Returns (layout with K and V as offsets in a slot and O moved, segments of K, V and the
    table, the paging registers, the table)."""
    tensors = dict(layout.tensors)
    kv_heads, n_kv = layout.shapes["K"]
    row = k.shape[2] * dtype.itemsize
    if row % beat:
        raise ConfigError(f"a K/V row of {row} bytes is not a whole number of {beat}-byte beats")
    head_bytes = page_rows * row
    slot = 2 * kv_heads * head_bytes
    pages = table_pages(n_kv, page_rows)
    pool = tensors["K"][0] // 0x1000 * 0x1000
    order = rng.permutation(pages)
    table = [pool + int(i) * slot for i in order]
    segments = []
    for p, addr in enumerate(table):
        rows = slice(p * page_rows, min((p + 1) * page_rows, n_kv))
        for h in range(kv_heads):
            segments.append((addr + h * head_bytes, k[h, rows].astype(dtype).tobytes()))
            segments.append((addr + (kv_heads + h) * head_bytes,
                             v[h, rows].astype(dtype).tobytes()))
    table_base = (pool + pages * slot + beat - 1) // beat * beat
    table_bytes = pack_table(table)
    segments.append((table_base, table_bytes))
    o_base = (table_base + len(table_bytes) + 0xFFF) // 0x1000 * 0x1000 + 0x1000
    tensors["K"] = (0, head_bytes, row)
    tensors["V"] = (kv_heads * head_bytes, head_bytes, row)
    tensors["O"] = (o_base, *tensors["O"][1:])
    paged = Layout(tensors, layout.shapes)
    regs = {"KV_TABLE": table_base, "KV_TABLE_LEN": pages}
    return paged, segments, regs, table


@dataclass
class E2EOptions:
    simulator: str = "verilator"
    seed: int = 1
    seq_len: int = None          # runtime N (default: the workload's)
    heads: int = None            # runtime query heads (default: the workload's)
    kv_len: int = None           # runtime N_kv (default: the workload's kv_len, else seq_len)
    head_group: int = None       # query heads per K/V head (default: the workload's group)
    grouped: bool = None         # MODE.GROUPED (default: where grouped blocks move less)
    inputs: str = None           # npz with q, k, v (float or int8 with scale_q/k/v)
    input_kind: str = "gaussian"  # golden.make_inputs kind when no npz is given
    head_scales: bool = False    # a scale a tensor and K/V head, each head's c from
                                 # SCALE_C_TABLE (MODE.HEAD_SCALES), in one launch
    runs: int = 1                # back-to-back runs without reset (same inputs)
    latency: tuple = (0.0, 0)    # (probability, max cycles) of a random memory stall
    backpressure: float = 0.0    # probability of a pause on each AXI channel per cycle
    random_layout: bool = False  # random beat offsets, row padding and head gaps
    bad_runs: tuple = ()         # register overrides, one bad run each, before the good runs
    quick_build: bool = False    # C++ at -O0: faster to build, slower to run (tests)
    verbose: bool = False        # show the simulator's own log lines (cocotb's), not only ours
    memory: str = "axiram"       # "axiram" (cocotbext-axi, per-cycle Python) or "model"
                                 # (attenio.hdl.sim_memory inside the design: long runs)
    engine: str = "cocotb"       # "cocotb" (the bench, any memory) or "fast" (attenio.sim.fast:
                                 # a C++ main on the memory model, no Python in the loop)
    threads: int = 1             # Verilator --threads of the fast model
    progress_cycles: int = 20000
    progress: object = None      # a callable(cycles, bytes_written, wall_s), or None
    blocks: tuple = None         # ((first, count), ...): one launch of those Q blocks of each
                                 # pass each (Q_BLOCK_FIRST, Q_BLOCK_COUNT), checked by range;
                                 # None: the whole run
    build_dir: str = None        # where the Verilog and the simulator models are (None: the
                                 # output folder): runs that share one build
    cxx_opt: str = None          # the fast model's C++ optimisation (None: by the run's length)


def compute_bound_cycles(plan, *, seq_len, heads, causal=False, kv_len=None, gb=1):
    """Cycles the PE array needs at least: every Q block passes each of its K/V rows twice
    (scores, then the update), 2 r d / s array cycles a row; a block reads N_kv rows
    (`kv_len`, default seq_len), with causal masking up to its last row's limit. Blocks
    serving `gb` query heads (MODE.GROUPED) hold a div gb rows of each: heads / gb passes."""
    keys = key_rows(seq_len, plan.a // gb, causal=causal, n_kv=kv_len)
    return -(-heads // gb) * keys * 2 * plan.rows_per_mac * plan.workload.head_dim // plan.split


#: the largest |RTL / model - 1| of a run on a deterministic memory that counts as agreeing
#: (tests/test_rtl_timing.py holds them exactly equal; more than this is a stale design or
#: a broken model, never a result to report)
MODEL_TOLERANCE = 0.01

#: What each way of simulating costs, measured on the small preset (int8, 4x4 MACs) on this
#: project's 2-core machine (docs/simulation.md, "Choosing the engine"): CPU-seconds to
#: build the simulator from the Verilog (Verilator and the C++ compiler), and simulated
#: cycles per CPU-second once it runs. Larger designs cost more in both, about in
#: proportion, so the ranking of the engines holds for them too. The cocotb model is built
#: with --vpi --public-flat-rw (every signal kept and reachable), three times the C++ of
#: the fast model, and its loop runs Python at every clock edge.
BUILD_COSTS = {
    ("cocotb", None): (157.0, 21_000),
    ("fast", "-O1"): (30.5, 358_000),
    ("fast", "-O3"): (45.7, 393_000),
}


def expected_seconds(engine, cxx_opt, cycles, *, built=False):
    """CPU-seconds a run of `cycles` is expected to take on `engine` (with the fast
    engine's C++ at `cxx_opt`), its build included unless `built` (`BUILD_COSTS`)."""
    build, rate = BUILD_COSTS[engine, cxx_opt]
    return (0.0 if built else build) + cycles / rate


def fast_cxx_opt(cycles, built=()):
    """The fast model's C++ optimisation for a run of `cycles`: the level with the least
    expected time, counting no build for the levels in `built` (made already)."""
    return min((opt for e, opt in BUILD_COSTS if e == "fast"),
               key=lambda opt: expected_seconds("fast", opt, cycles, built=opt in built))


def choose_engine(plan, *, seq_len, heads, engine="auto", memory=None, simulator="verilator",
                  protocol=False):
    """(engine, memory, why) of a run: `engine` "fast", "cocotb" or "auto", `memory` "axiram",
    "model" or None (the engine's own), `protocol` whether random latency or back-pressure
    was asked for. Combinations only cocotb can run are refused for the fast engine; "auto"
    takes the engine with the least expected time, its build included (`expected_seconds`),
    among those that can run what was asked."""
    cocotb_only = [what for what, asked in (("--memory axiram", memory == "axiram"),
                                            (f"--simulator {simulator}", simulator != "verilator"),
                                            ("random latency or back-pressure", protocol))
                   if asked]
    if engine == "fast":
        if cocotb_only:
            raise ConfigError(f"the fast engine runs Verilator on the in-design memory model; "
                              f"{', '.join(cocotb_only)} need(s) --engine cocotb")
        return "fast", "model", "asked for"
    if engine == "cocotb":
        return "cocotb", memory or "axiram", "asked for"
    if engine != "auto":
        raise ConfigError(f"engine must be auto, fast or cocotb, not {engine!r}")
    if cocotb_only:
        return "cocotb", memory or "axiram", f"auto: {', '.join(cocotb_only)} need(s) cocotb"
    cycles = compute_bound_cycles(plan, seq_len=seq_len, heads=heads,
                                  kv_len=run_kv_len(plan.workload, seq_len))
    fast_s = expected_seconds("fast", fast_cxx_opt(cycles), cycles)
    cocotb_s = expected_seconds("cocotb", None, cycles)
    if fast_s <= cocotb_s:
        return "fast", "model", (f"auto: about {_count(cycles)} cycles, expected {fast_s:.0f} "
                                 f"CPU-s with its build against {cocotb_s:.0f} for cocotb; "
                                 f"--engine cocotb for AxiRam's protocol checks")
    return "cocotb", memory or "axiram", (f"auto: about {_count(cycles)} cycles, expected "
                                          f"{cocotb_s:.0f} CPU-s with its build against "
                                          f"{fast_s:.0f} for the fast engine")


def _count(cycles):
    return f"{cycles / 1e6:.1f}M" if cycles >= 1e6 else f"{cycles / 1e3:.0f}k"


SIM_TOP_NAME = "attenio_sim_top"

#: cocotbext-axi's AxiRam answers a read burst this many cycles after its AR handshake,
#: and a write this many after its last data (measured on the bench)
AXIRAM_READ_LATENCY = 2
AXIRAM_WRITE_LATENCY = 2


def simulated_memory(plan, memory):
    """The memory a simulation runs on, as the cycle model sees it: one beat per cycle
    each way on the Plan's AXI port, with the latencies of the in-design model
    (`memory` "model") or of AxiRam ("axiram")."""
    from attenio.hdl.sim_memory import SimAXIMemory

    beat = plan.budget.axi_data_bits // 8
    if memory == "model":
        read = SimAXIMemory.first_beat_latency(plan.budget.latency_cycles)
        write = SimAXIMemory.write_response_latency
    else:
        read, write = AXIRAM_READ_LATENCY, AXIRAM_WRITE_LATENCY
    return Memory(bw_bytes=beat, latency=read, axi_bytes=beat, axi_rate_cap=True,
                  write_latency=write)


def model_depth(plan):
    """Words of the in-design memory model: the packed layout of the Plan's heads, every
    tensor at the hardware's max_keys rows (a run may read up to that many K/V rows), each
    element at the width the format stores (O at its `out_bytes`)."""
    w = plan.workload
    beat = plan.budget.axi_data_bits // 8
    size = Layout.packed(seq_len=w.max_keys, head_dim=w.head_dim, heads=w.heads, beat=beat,
                         element_bytes=plan.config.format.element_bytes,
                         out_bytes=plan.config.format.out_bytes).size()
    page_rows = plan.budget.page_rows
    if page_rows:   # a last page's rows past N_kv, the table, the page alignments
        size += (2 * w.heads * page_rows * w.head_dim * plan.config.format.element_bytes
                 + TABLE_ENTRY_BYTES * table_pages(w.max_keys, page_rows) + 0x3000)
    return (size + 0x1000) // beat


def rtl_digest(hdl_dir=None):
    """A digest of every source the simulated Verilog is made from, so that a change to the
    hardware invalidates Verilog generated earlier for the same Plan: every module of the
    generator's RTL at any depth (`hdl_dir`, default attenio.hdl's folder: the formats'
    builders too) and the models of the ECP5 primitives simulated beside it
    (`attenio.sim.runner.primitive_models`). Each file is hashed under its path relative
    to its folder, in sorted order, so the digest depends on the sources and where they
    sit among each other, not on where the tree is."""
    if hdl_dir is None:
        import attenio.hdl
        hdl_dir = Path(attenio.hdl.__file__).parent
    hdl_dir = Path(hdl_dir)
    sources = [(f"hdl/{f.relative_to(hdl_dir).as_posix()}", f) for f in hdl_dir.rglob("*.py")]
    sources += [(f"sim/models/{f.name}", f) for f in primitive_models()]
    h = hashlib.sha256()
    for name, f in sorted(sources):
        body = f.read_bytes()
        h.update(f"{name}\0{len(body)}\0".encode() + body)
    return h.hexdigest()


def cached_verilog(config, build_dir, memory, log):
    """Generate the Verilog unless the same Plan was generated there already by the same RTL.

    The stamp beside the Verilog names the Plan, the RTL's sources (`rtl_digest`) and the
    Verilog's own digest, so a file written over since (`attenio gen` of another design
    into the same directory) is generated again, not simulated as this Plan's.
    With `memory` "model" the simulated top is `attenio_sim_top` (the accelerator
    with `attenio.hdl.sim_memory.SimAXIMemory` on its AXI port).
    """
    from attenio.gen.build import TOP_NAME, generate
    from attenio.gen.verilog import emit
    from attenio.report import plan_json

    plan = make_plan(config)
    # the hardware's Plan: the causal mask, N_kv and the head group are run-time
    # registers, so a workload that differs only in them reuses the same Verilog, unless
    # its N_kv raises the keys the hardware must hold
    w = config.workload

    def hardware_plan(kv_heads):
        return make_plan(dataclasses.replace(
            config, workload=dataclasses.replace(
                w, causal=False, kv_heads=kv_heads,
                kv_len=w.kv_len if w.kv_len and w.kv_len > w.seq_len else None),
            split=plan.split, rows_per_mac=plan.rows_per_mac))
    hardware = hardware_plan(None)
    if hardware.a != plan.a:        # the group raised the rows a block may hold (g * N)
        hardware = hardware_plan(w.kv_heads)
    sources = {"plan": plan_json(hardware), "rtl": rtl_digest()}
    name = SIM_TOP_NAME if memory == "model" else TOP_NAME
    v = build_dir / f"{name}.v"
    stamp_file = build_dir / f".{name}_stamp"

    def stamp():
        digest = hashlib.sha256(v.read_bytes()).hexdigest() if v.is_file() else None
        return json.dumps({**sources, "verilog": digest}, sort_keys=True)
    if stamp_file.is_file() and stamp_file.read_text() == stamp():
        return plan, v, name
    if memory == "model":
        from attenio.hdl.sim_memory import SimSystem
        log(f"elaborating and converting {name} (memory model: {model_depth(plan)} words) ...")
        emit(SimSystem(plan, depth=model_depth(plan)), v, name=name)
    else:
        generate(config, build_dir, log=log)
    stamp_file.write_text(stamp())
    return plan, v, name


def run_grouped(config, plan, *, heads, seq_len, kv_len, group, grouped=None):
    """Whether a run sets MODE.GROUPED: `grouped`, or by default where blocks serving the whole
    group move less (`attenio.plan.wins_grouped`) and the heads are a multiple of it."""
    if grouped is not None:
        return grouped
    return heads % group == 0 and wins_grouped(config, plan.a, seq_len=seq_len, kv_len=kv_len,
                                               group=group)


def run_e2e(config, out_dir, opts=None, *, log=print):
    """Simulate `config` end to end; returns the report dict (also written to sim_report.json)."""
    opts = opts or E2EOptions()
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    if opts.memory not in MEMORIES:
        raise ConfigError(f"memory must be one of {', '.join(map(repr, MEMORIES))}, "
                          f"not {opts.memory!r}")
    if opts.engine not in ENGINES:
        raise ConfigError(f"engine must be one of {', '.join(ENGINES)}, not {opts.engine!r}")
    if opts.engine == "fast" and (opts.memory != "model" or opts.simulator != "verilator"):
        raise ConfigError("the fast engine runs Verilator on the in-design memory model "
                          "(--memory model --simulator verilator); use --engine cocotb for "
                          "AxiRam or Icarus")
    # The inputs first: a bad file is refused before minutes of elaboration.
    w = config.workload
    d = w.head_dim
    rng = np.random.default_rng(opts.seed)
    seq_len = opts.seq_len or w.seq_len
    data = RunData.make(config.format, head_dim=d,
                        inputs=load_inputs(opts.inputs, head_dim=d) if opts.inputs else None,
                        kind=opts.input_kind, seq_len=seq_len,
                        kv_len=run_kv_len(w, seq_len, opts.kv_len),
                        heads=opts.heads or w.heads, seed=opts.seed,
                        group=opts.head_group or w.group, head_scales=opts.head_scales)
    heads, n, n_kv = data.heads, data.seq_len, data.kv_len
    if data.head_scales and heads > SCALE_TABLE_ENTRIES:
        raise ConfigError(f"a scale a head takes one SCALE_C_TABLE entry a query head: "
                          f"{heads} heads, the table holds {SCALE_TABLE_ENTRIES}")
    for what, rows in (("N", n), ("N_kv", n_kv)):
        if rows > w.max_keys:
            raise ConfigError(f"the inputs have {what} = {rows} rows, above the {w.max_keys} "
                              f"this hardware is generated for (raise --seq-len or --kv-len)")
    if w.causal and n_kv < n:
        raise ConfigError(f"causal attention needs N_kv >= N, not {n_kv} < {n}")
    build_root = Path(opts.build_dir).resolve() if opts.build_dir else out_dir
    plan, verilog, toplevel = cached_verilog(config, build_root, opts.memory, log)
    grouped = run_grouped(config, plan, heads=heads, seq_len=n, kv_len=n_kv, group=data.group,
                          grouped=opts.grouped)
    if grouped and (heads % data.group or data.group > plan.a):
        raise ConfigError(f"grouped blocks need HEADS ({heads}) a multiple of the group "
                          f"({data.group}) and the group at most a = {plan.a}")
    gb = data.group if grouped else 1
    beat = plan.budget.axi_data_bits // 8
    if opts.memory == "model" and (opts.latency[1] or opts.backpressure):
        raise ConfigError("random latency and back-pressure need the AxiRam memory (--memory axiram)")
    if opts.memory == "model" and heads > w.heads:
        raise ConfigError(f"the memory model is sized for {w.heads} head(s); raise --heads")
    layout = Layout.packed(seq_len=n, head_dim=d, heads=heads, beat=beat,
                           rng=rng if opts.random_layout and opts.memory == "axiram" else None,
                           gap_rows=int(rng.integers(0, 3)) if opts.random_layout else 0,
                           pad_bytes=beat * int(rng.integers(0, 2)) if opts.random_layout else 0,
                           element_bytes=data.dtype.itemsize,
                           out_bytes=data.out_dtype.itemsize, kv_len=n_kv,
                           kv_heads=data.kv_heads)
    if opts.memory == "model" and layout.size() > model_depth(plan) * beat:
        raise ConfigError(f"the inputs need {layout.size()} bytes of the memory model, which "
                          f"holds {model_depth(plan) * beat} (the Plan's {w.heads} head(s) of "
                          f"{w.max_keys} rows); raise --heads or --seq-len, or use "
                          f"--memory axiram")
    causal = w.causal
    # a block range is a run of its own rows: only those are computed, here as in the RTL
    spans = None
    if opts.blocks is not None:
        if opts.runs != 1:
            raise ConfigError("block ranges run once each (runs = 1)")
        spans = [plan.block_range(first, count, seq_len=n, causal=causal, kv_len=n_kv,
                                  grouped=grouped, group=data.group)
                 for first, count in opts.blocks]
    rows = n if spans is None else sum(r.rows for r in spans)
    log(f"golden model: {heads} head(s) ({data.kv_heads} K/V), N = {n}"
        f"{'' if spans is None else f' ({rows} rows in {len(spans)} block range(s))'}, "
        f"N_kv = {n_kv}, d = {d}, a = {plan.a} ...")
    t0 = time.perf_counter()
    if spans is None:
        expect = data.golden(plan, causal=causal)
        golden_s = time.perf_counter() - t0
        ref = data.reference(causal=causal)
    else:
        expect = [data.golden(plan, causal=causal, span=r) for r in spans]
        golden_s = time.perf_counter() - t0
        ref = [data.reference(causal=causal, span=r) for r in spans]

    period = RtlParams.of(plan).score_period    # cycles a chunk of a K row
    rmap = register_map(plan)
    # KV_LEN = 0 (its reset) when N_kv = N: what a driver that predates KV_LEN writes
    regs = {"SEQ_LEN": n, "HEADS": heads, **data.registers(),
            "MODE": int(causal) * DescFlag.CAUSAL | int(grouped) * DescFlag.GROUPED
            | int(data.head_scales) * DescFlag.HEAD_SCALES,
            "KV_LEN": 0 if n_kv == n else n_kv, "HEAD_GROUP": data.group,
            "Q_BLOCK_FIRST": 0, "Q_BLOCK_COUNT": 0}
    page_rows = plan.budget.page_rows
    if page_rows:
        layout, kv_segments, paging, _ = page_kv(layout, data.k, data.v, page_rows=page_rows,
                                                 beat=beat, rng=rng, dtype=data.dtype)
        log(f"paged K/V: {paging['KV_TABLE_LEN']} pages of {page_rows} rows in a random "
            f"order (seed {opts.seed}), the block table at 0x{paging['KV_TABLE']:x}")
        regs.update(paging)
    for t, (base, hs, rs) in layout.tensors.items():
        regs.update({f"{t}_BASE": base, f"{t}_HEAD_STRIDE": hs, f"{t}_ROW_STRIDE": rs})
    segments = [seg for t in ("QKV" if not page_rows else "Q")
                for seg in layout.scatter(t, getattr(data, t.lower()), data.dtype)]
    if page_rows:
        segments += kv_segments
    image = out_dir / "sim_image.npz"
    np.savez(image, addrs=np.array([a for a, _ in segments], np.int64),
             lengths=np.array([len(b) for _, b in segments], np.int64),
             data=np.frombuffer(b"".join(b for _, b in segments), np.uint8))
    results = out_dir / "sim_results.json"
    if page_rows:   # a page slot at or past the memory's end is refused (PAGE_OUT_OF_RANGE)
        regs["PAGE_LIMIT"] = (layout.size() + 0xFFFF) // 0x10000 * 0x10000
    params = {
        "image": str(image), "results": str(results), "memory": opts.memory, "beat": beat,
        "mem_size": (layout.size() + 0xFFFF) // 0x10000 * 0x10000,
        "regs": {name: [rmap.offset(name), value] for name, value in regs.items()},
        "regmap": {r.name: r.offset for r in rmap},
        "o_region": [layout.tensors["O"][0], layout.size() - layout.tensors["O"][0]],
        "runs": [{name: [rmap.offset(name), value] for name, value in bad.items()}
                 for bad in opts.bad_runs] + ([{}] * opts.runs if spans is None else [
                     {"Q_BLOCK_FIRST": [rmap["Q_BLOCK_FIRST"].offset, first],
                      "Q_BLOCK_COUNT": [rmap["Q_BLOCK_COUNT"].offset, count]}   # 0: to the last
                     for first, count in opts.blocks]),
        "counters": list(counter_names(rmap)), "progress_file": str(out_dir / "sim_progress.txt"),
        "seed": opts.seed, "latency": list(opts.latency),
        "backpressure": opts.backpressure, "progress_cycles": opts.progress_cycles,
        "expect_bytes_written": int(plan.traffic_at(seq_len=n, heads=heads, kv_len=n_kv,
                                                    grouped=grouped,
                                                    group=data.group).write_bytes),
        "max_cycles": int(50 * (heads * -(-n // plan.a) * (n_kv * (plan.rows_per_mac + period) * d
                                                          + 4 * plan.a * d) // plan.split
                                + 10000)),
    }
    t0 = time.perf_counter()
    progress = across_runs(opts.progress or (lambda *_: None))
    if opts.engine == "fast":
        work = out_dir / "sim_fast"
        work.mkdir(parents=True, exist_ok=True)
        if spans is None:
            cycles = compute_bound_cycles(plan, seq_len=n, heads=heads, causal=causal,
                                          kv_len=n_kv, gb=gb) * len(params["runs"])
        else:
            cycles = sum(compute_bound_cycles(plan, seq_len=r.rows, heads=heads, causal=causal,
                                              kv_len=r.n_kv, gb=gb) for r in spans)
        exe, _ = _fast_model(plan, verilog, toplevel, build_root, opts, cycles, log)
        log(f"simulating on the fast Verilator model (seed {opts.seed}) ...")
        with follow(params["progress_file"], progress):
            got = fast.run(exe, params, work, segments,
                           progress_file=params["progress_file"])
    else:
        log(f"simulating on {opts.simulator} with cocotb (seed {opts.seed}) ...")
        build_dir, design = cocotb_build_dir(out_dir / f"sim_{opts.simulator}_{opts.memory}",
                                              verilog)
        with follow(params["progress_file"], progress):
            run_bench(simulator=opts.simulator, verilog_sources=[design], toplevel=toplevel,
                      module="attenio.sim.benches.bench_top", build_dir=build_dir,
                      params=params, seed=opts.seed, quick_build=opts.quick_build,
                      verbose=opts.verbose)
        got = json.loads(results.read_text())
        for r in got["runs"]:
            r["o_bytes"] = bytes.fromhex(r.pop("o"))
    wall = time.perf_counter() - t0
    return _report(plan, opts, layout, got, expect, ref, data, out_dir, wall, golden_s, n, heads,
                   gb, log, spans)


def across_runs(progress):
    """`progress` (a callable(cycles, bytes_written, wall_s)) fed the sums over a script's
    runs: each run's counters and clock start from 0 again, the bar's go on."""
    done = [0, 0, 0.0]          # the runs before this one
    last = [0, 0, 0.0]

    def feed(cycles, written, wall):
        if cycles < last[0]:    # a new run
            done[:] = [x + y for x, y in zip(done, last)]
        last[:] = [cycles, written, wall]
        progress(done[0] + cycles, done[1] + written, done[2] + wall)
    return feed


def _fast_model(plan, verilog, toplevel, build_root, opts, cycles, log):
    """The fast model of `verilog` (built in `build_root`/sim_fast/models unless it is there)
    at `opts.cxx_opt`, or for a run of about `cycles` cycles (`fast_cxx_opt`: a level already
    built counts no build; -O0 with `quick_build`); returns its executable and that level."""
    models_dir = build_root / "sim_fast" / "models"
    beat = plan.budget.axi_data_bits // 8
    models = dict(toplevel=toplevel, beat=beat, depth=model_depth(plan),
                  addr_width=register_map(plan).addr_width, threads=opts.threads)
    cxx_opt = opts.cxx_opt or ("-O0" if opts.quick_build else None)
    if cxx_opt is None:
        built = [opt for e, opt in BUILD_COSTS if e == "fast"
                 and (models_dir / fast.build_key(verilog, cxx_opt=opt, **models)).is_dir()]
        cxx_opt = fast_cxx_opt(cycles, built)
    return fast.build(verilog, cache_dir=models_dir, cxx_opt=cxx_opt, log=log, **models), cxx_opt


def build_fast_model(config, build_dir, opts, *, cycles, log=print):
    """Generate the Verilog of `config` and build its fast model in `build_dir` before runs
    that share them (`E2EOptions.build_dir`, the shards of `attenio sim --shards`), for runs
    of about `cycles` cycles each; returns the C++ optimisation it chose, for their
    `E2EOptions.cxx_opt`."""
    build_dir = Path(build_dir).resolve()
    plan, verilog, toplevel = cached_verilog(config, build_dir, "model", log)
    return _fast_model(plan, verilog, toplevel, build_dir, opts, cycles, log)[1]


def cocotb_build_dir(root, verilog):
    """The cocotb build folder of `verilog` under `root`, named by the Verilog's own digest,
    and the copy of the Verilog inside it that the build is made from: a later run of the
    same bytes (the same hardware at another N, after another design ran in the same
    folder) finds its model there newer than its source and reuses it; `fast.KEEP_BUILDS`
    folders stay, the most recently used."""
    digest = hashlib.sha256(Path(verilog).read_bytes()).hexdigest()[:20]
    build_dir = Path(root) / digest
    design = build_dir / Path(verilog).name
    if not design.is_file():
        build_dir.mkdir(parents=True, exist_ok=True)
        tmp = design.with_suffix(".tmp")
        tmp.write_bytes(Path(verilog).read_bytes())
        tmp.rename(design)
    os.utime(build_dir)
    for old in sorted((d for d in Path(root).iterdir() if d.is_dir()),
                      key=lambda d: d.stat().st_mtime, reverse=True)[fast.KEEP_BUILDS:]:
        shutil.rmtree(old, ignore_errors=True)
    return build_dir, design


def _read_o(layout, blob, o_base, heads, n, d, dtype, row0=0):
    """O's rows `row0` .. `row0 + n - 1` of every head from the O region's bytes `blob`."""
    base, hs, rs = layout.tensors["O"]
    out = np.empty((heads, n, d), dtype.newbyteorder("="))
    for h in range(heads):
        for i in range(n):
            start = base - o_base + h * hs + (row0 + i) * rs
            out[h, i] = np.frombuffer(blob[start:start + d * dtype.itemsize], dtype)
    return out


def _only_rows_written(layout, blob, o_base, heads, span, d, dtype):
    """Whether the O region's bytes `blob` hold the poison (`fast.POISON`) everywhere but in
    the rows of `span` (a BlockRange) of every head: a range writes its rows and no other."""
    base, hs, rs = layout.tensors["O"]
    written = np.zeros(len(blob), bool)
    for h in range(heads):
        for i in range(span.row0, span.row0 + span.rows):
            start = base - o_base + h * hs + i * rs
            written[start:start + d * dtype.itemsize] = True
    rest = np.frombuffer(blob, np.uint8)[~written]
    return bool(np.all(rest == fast.POISON))


def _report(plan, opts, layout, got, expect, ref, data, out_dir, wall, golden_s, n, heads, gb,
            log, spans=None):
    d, causal = plan.workload.head_dim, plan.workload.causal
    n_kv = data.kv_len
    run_shape = dict(heads=heads, kv_len=n_kv, grouped=gb > 1, group=data.group)
    traffic = plan.traffic_at(seq_len=n, **run_shape)
    link = simulated_memory(plan, opts.memory)
    # random latency and back-pressure slow the RTL where the model's memory does not
    random = bool(opts.latency[0] and opts.latency[1]) or bool(opts.backpressure)
    runs, last_o = [], None
    for i, r in enumerate(got["runs"]):
        entry = {k: r[k] for k in ("status", "error", "counters", "sim_cycles")}
        entry["error_name"] = ErrorCode(r["error"]).name
        entry["bad"] = i < len(opts.bad_runs)
        if entry["bad"]:
            entry["o_untouched"] = r["o_untouched"]
        elif spans is None:
            o = _read_o(layout, r["o_bytes"], got["o_base"], heads, n, d, data.out_dtype)
            entry["bit_exact"] = bool(np.array_equal(o, expect))
            entry["mismatches"] = int(np.sum(o != expect))
            entry["bytes_match_plan"] = (r["counters"]["BYTES_READ"] == traffic.read_bytes
                                         and r["counters"]["BYTES_WRITTEN"] == traffic.write_bytes)
            last_o = o
        else:
            k = i - len(opts.bad_runs)
            span, want = spans[k], expect[k]
            o = _read_o(layout, r["o_bytes"], got["o_base"], heads, span.rows, d,
                        data.out_dtype, row0=span.row0)
            blocks = (span.first, span.count)
            t = plan.traffic_at(seq_len=n, blocks=blocks, **run_shape)
            model = model_counters(plan, seq_len=n, memory=link, blocks=blocks, **run_shape)
            c = r["counters"]
            entry.update({
                "first": span.first, "count": span.count, "row0": span.row0, "rows": span.rows,
                "kv_len": span.n_kv, "bit_exact": bool(np.array_equal(o, want)),
                "mismatches": int(np.sum(o != want)),
                "only_its_rows_written": _only_rows_written(layout, r["o_bytes"], got["o_base"],
                                                            heads, span, d, data.out_dtype),
                "plan_bytes_read": t.read_bytes, "plan_bytes_written": t.write_bytes,
                "bytes_match_plan": (c["BYTES_READ"] == t.read_bytes
                                     and c["BYTES_WRITTEN"] == t.write_bytes),
                "model": model,
                "cycles_match_model": None if random else all(
                    c[name.upper()] == model[name] for name in model),
            })
            entry["o"] = o
        runs.append(entry)
    good = [r for r in runs if not r["bad"]]
    if spans is not None:
        return _report_ranges(plan, opts, runs, got, data, out_dir, wall, golden_s, n, heads,
                              gb, run_shape, link, expect, ref)
    c0 = good[0]["counters"] if good else runs[0]["counters"]
    report = {
        "config": plan.config.name, "simulator": opts.simulator, "memory": opts.memory,
        "engine": opts.engine, "seed": opts.seed,
        "seq_len": n, "heads": heads, "head_dim": d, "causal": causal, "a": plan.a,
        "kv_len": n_kv, "kv_heads": data.kv_heads, "head_group": data.group,
        "grouped": gb > 1, "head_scales": data.head_scales,
        "split": plan.split,
        "rows_per_mac": plan.rows_per_mac,
        "plan_bytes_read": traffic.read_bytes, "plan_bytes_written": traffic.write_bytes,
        "runs": runs,
        "wall_seconds": round(wall, 2), "golden_seconds": round(golden_s, 3), **_rates(got),
    }
    cyc = c0["CYCLES"]
    if good and cyc:
        report["pe_busy_fraction"] = c0["PE_BUSY"] / cyc
        report["exp_busy_fraction"] = c0["EXP_BUSY"] / cyc
        report["mem_stall_fraction"] = c0["MEM_STALL"] / cyc
        compute = compute_bound_cycles(plan, seq_len=n, heads=heads, causal=causal, kv_len=n_kv,
                                       gb=gb)
        memory = traffic.bytes / plan.budget.bw_bytes_per_cycle
        report["compute_bound_cycles"] = compute
        report["memory_bound_cycles"] = round(memory)
        report["cycles_over_bound"] = cyc / max(compute, memory)
        model = model_counters(plan, seq_len=n, memory=link, **run_shape)
        report["model"] = model
        report["cycles_vs_model"] = cyc / model["cycles"]
        report["model_agrees"] = (None if random else
                                  abs(report["cycles_vs_model"] - 1) <= MODEL_TOLERANCE)
    (out_dir / "sim_report.json").write_text(json.dumps(report, indent=2) + "\n")
    if last_o is not None:
        np.savez(out_dir / "sim_outputs.npz", **data.outputs(last_o, expect, ref))
    return report


def _rates(got):
    """Simulated cycles per second of the runs themselves (the build not counted), per second
    of wall time and of the simulator's own CPU time (what a busy machine does not change)."""
    cycles = sum(r["sim_cycles"] for r in got["runs"])
    return {"sim_cycles_per_second": round(cycles / max(sum(r["wall_seconds"]
                                                            for r in got["runs"]), 1e-9)),
            "sim_cycles_per_cpu_second": round(cycles / max(sum(r["cpu_seconds"]
                                                                for r in got["runs"]), 1e-9))}


def _report_ranges(plan, opts, runs, got, data, out_dir, wall, golden_s, n, heads, gb, run_shape,
                   link, expect, ref):
    """The report of a launch per block range (`E2EOptions.blocks`): each range's O rows
    against the golden model's, its bytes against the Plan's for the range, its counters
    against the model's; the sums over the ranges; and the whole run by the model."""
    good = [r for r in runs if not r["bad"]]
    outs = [r.pop("o") for r in good]
    whole = model_counters(plan, seq_len=n, memory=link, **run_shape)
    total = {name: sum(r["counters"][name] for r in good) for name in good[0]["counters"]}
    report = {
        "config": plan.config.name, "simulator": opts.simulator, "memory": opts.memory,
        "engine": opts.engine, "seed": opts.seed,
        "seq_len": n, "heads": heads, "head_dim": plan.workload.head_dim,
        "causal": plan.workload.causal, "a": plan.a, "a_g": plan.a // gb,
        "kv_len": data.kv_len, "kv_heads": data.kv_heads, "head_group": data.group,
        "grouped": gb > 1, "head_scales": data.head_scales, "split": plan.split,
        "rows_per_mac": plan.rows_per_mac, "blocks_per_pass": -(-n // (plan.a // gb)),
        "blocks": [b for r in good for b in range(r["first"], r["first"] + r["count"])],
        "runs": runs, "counters": total,
        "plan_bytes_read": sum(r["plan_bytes_read"] for r in good),
        "plan_bytes_written": sum(r["plan_bytes_written"] for r in good),
        "whole_run_model": whole,
        "whole_run_plan_bytes": plan.traffic_at(seq_len=n, **run_shape).bytes,
        "all_bit_exact": all(r["bit_exact"] and r["only_its_rows_written"] for r in good),
        "all_bytes_match_plan": all(r["bytes_match_plan"] for r in good),
        "all_cycles_match_model": (None if any(r["cycles_match_model"] is None for r in good)
                                   else all(r["cycles_match_model"] for r in good)),
        "wall_seconds": round(wall, 2), "golden_seconds": round(golden_s, 3), **_rates(got),
    }
    (out_dir / "sim_report.json").write_text(json.dumps(report, indent=2) + "\n")
    outputs = data.outputs(np.concatenate(outs, axis=1), np.concatenate(expect, axis=1),
                           np.concatenate(ref, axis=1))
    outputs["rows"] = np.concatenate([np.arange(r["row0"], r["row0"] + r["rows"]) for r in good])
    np.savez(out_dir / "sim_outputs.npz", **outputs)
    report["o"] = outs      # the ranges' rows, for a caller that merges shards (not in the json)
    return report
