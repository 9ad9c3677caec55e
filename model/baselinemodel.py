"""The baseline dataflows (`attenio.baselines`) timed on the same hardware as AttenIO.

Same resources: P = p x q MACs, E EXP lanes, the same off-chip link
(`attenio.model.memmodel.Memory`: bandwidth shared by reads and writes, one
latency). Each baseline keeps its own tiling and its exact off-chip traffic
(the BaselinePlan's), and does its softmax the way its dataflow must.

Mapping onto the p x q array. AttenIO's array keeps Q rows in the MACs and
broadcasts one K/V element per cycle along each line; the baselines multiply
two streamed blocks, so they get the array they need: an output-stationary
p x q systolic array (operands flowing along both dimensions, double-buffered
accumulators, so consecutive output tiles follow each other without bubbles).
A product with an R x C output and reduction length K takes
``passes * K`` cycles, passes = min(ceil(R/p) ceil(C/q), ceil(R/q) ceil(C/p))
(the better orientation); the spatial utilization is R C / (passes p q). The
array's fill and drain (p + q - 2 cycles) is paid where a dependency empties
the pipeline, not per tile.

Softmax lanes. The E lanes have what an AttenIO lane has: per cycle one
element through a comparator, an exp and a multiply-add, pipelined. A row-wise
softmax needs two passes over its elements (the max first, then exp and sum
together), so it costs 2 x elements / E lane cycles, where AttenIO's
element-wise online softmax costs one per element and needs no reduction.

Overlap (fair to the baselines: double buffering wherever the dataflow lets it):

* FlashAttention-2 (and its fair variant): per Q block of B_r rows, K/V blocks
  of B_c rows stream, double-buffered. With S and P double-buffered, the array
  computes S_(j+1) and P_(j-1) V_(j-1) while the lanes reduce and exponentiate
  block j: each K/V block costs max(array, lanes, memory), and one block's
  softmax is exposed per Q block (the pipeline's fill), plus the array fill.
  The row reductions (max, then sum, over B_c columns) sit between the two
  products of the same block; only this software pipelining hides them.
  Array per K/V block: S = Q_i K_j^T (B_r x B_c outputs, reduction d), O += P V_j
  (B_r x d outputs, reduction B_c), the rescale of O (one pass). Lanes:
  2 B_r B_c / E (max; exp + sum) + B_r / E (the rescale factors).
* FLAT: per block of R query rows, S = Q_R K^T (R x N outputs, reduction d)
  with K streaming and the row max reduced on the fly; then exp and sum stream
  into O = P V (R x d outputs, reduction N) with V streaming. The whole R x N
  row block must exist before the exponentials (the max over N), so the two
  products cannot overlap each other, and there is no room for a second R x N
  buffer: phase 1 costs max(QK^T, lanes, K memory), phase 2 max(PV, lanes,
  V memory), plus the reduction latency between them. When a row of S does not
  fit, it spills: S is written in phase 1, read for the statistics, read again
  for P V.
* Standard: three unfused phases, each max(compute, memory) with its inputs
  streamed double-buffered, one after the other: S = Q K^T in square tiles
  (write S), the softmax (read S, once if a row fits else twice, three lane
  passes per element: max, exp + sum, normalize; write P), O = P V (read P and V,
  write O).

Counters as for AttenIO: `pe_busy` array cycles (a pass in flight), `exp_busy`
lane cycles, `mem_stall` cycles in which memory alone bounds the phase, and
the bytes of the BaselinePlan's traffic.
"""

from dataclasses import dataclass
from math import ceil, log2

from attenio.analysis import causal_limit
from attenio.baselines import all_baselines
from attenio.plan import make_plan

from .cyclemodel import Result, RtlParams
from .memmodel import Memory

__all__ = ["matmul", "tiled_matmul", "simulate_baseline", "simulate_baselines", "BASELINE_ORDER"]

BASELINE_ORDER = ("standard", "flat", "flashattention2", "flashattention2_fair")


@dataclass(frozen=True)
class _Mm:
    busy: int       # array cycles
    useful: int     # useful MAC operations

    def __add__(self, o):
        return _Mm(self.busy + o.busy, self.useful + o.useful)

    def __mul__(self, k):
        return _Mm(self.busy * k, self.useful * k)


def matmul(rows, cols, depth, p, q):
    """An output block of rows x cols, reduction `depth`, on the output-stationary p x q array."""
    if rows <= 0 or cols <= 0 or depth <= 0:
        return _Mm(0, 0)
    passes = min(ceil(rows / p) * ceil(cols / q), ceil(rows / q) * ceil(cols / p))
    return _Mm(passes * depth, rows * cols * depth)


def tiled_matmul(rows, cols, depth, tx, ty, p, q):
    """The same product cut into output tiles tx x ty (edge tiles smaller)."""
    total = _Mm(0, 0)
    for nr, r in ((rows // tx, tx), (1 if rows % tx else 0, rows % tx)):
        for nc, c in ((cols // ty, ty), (1 if cols % ty else 0, cols % ty)):
            if nr and nc:
                total = total + matmul(r, c, depth, p, q) * (nr * nc)
    return total


class _Acc:
    """Accumulates cycles and counters of a baseline run."""

    def __init__(self):
        self.cycles = self.pe_busy = self.exp_busy = self.mem_stall = self.useful = 0
        self.exps = 0

    def phase(self, array, lanes, memory, exposed=0):
        """A phase whose array, lane and memory work overlap; `exposed` cycles of none."""
        t = max(array, lanes, memory)
        self.cycles += t + exposed
        self.mem_stall += max(0, memory - max(array, lanes))
        return t


def _result(acc, bl, hw, heads):
    return Result(cycles=acc.cycles * heads + hw["tail"], pe_busy=acc.pe_busy * heads,
                  exp_busy=acc.exp_busy * heads, mem_stall=acc.mem_stall * heads + hw["tail"],
                  interlock_stall=0, bytes_read=bl.traffic.read_bytes,
                  bytes_written=bl.traffic.write_bytes, useful_macs=acc.useful * heads,
                  exps=acc.exps * heads, macs=hw["P"], exp_units=hw["E"])


def _hw(config):
    b = config.budget
    mem = Memory.of(b)
    # the first data of a run arrives one latency after start, the last write is
    # acknowledged one latency after it leaves: paid once per run by every dataflow
    return {"p": b.mac_lines, "q": b.macs_per_line, "P": b.macs, "E": b.exp_units, "mem": mem,
            "eb": config.format.element_bytes, "fill": b.mac_lines + b.macs_per_line - 2,
            "lane_lat": RtlParams.of(make_plan(config)).lane_latency,
            "tail": 2 * b.latency_cycles}


def _bytes(traffic, direction, tensor):
    return sum(t.bytes for t in getattr(traffic, direction) if t.tensor == tensor)


def _fa2_qblock(rows, keys, d, bc, hw):
    """Array, lane and memory cycles of one Q block of `rows` rows over `keys` K/V rows."""
    p, q, E, mem, eb = hw["p"], hw["q"], hw["E"], hw["mem"], hw["eb"]
    out = {"array": 0, "useful": 0, "lanes": 0, "exps": 0, "mem": 0, "kv_bytes": 0}
    full, last = divmod(keys, bc)
    for count, cols in ((full, bc), (1 if last else 0, last)):
        if not count:
            continue
        mm = matmul(rows, cols, d, p, q) + matmul(rows, d, cols, p, q) \
            + _Mm(ceil(rows * d / (p * q)), 0)
        out["array"] += mm.busy * count
        out["useful"] += mm.useful * count
        out["lanes"] += (2 * ceil(rows * cols / E) + ceil(rows / E)) * count
        out["exps"] += (rows * cols + rows) * count
        out["mem"] += mem.stream_cycles(2 * cols * d * eb) * count
        out["kv_bytes"] += 2 * cols * d * eb * count
    cols0 = min(bc, keys)
    out["first_lanes"] = 2 * ceil(rows * cols0 / E) + ceil(rows / E) + hw["lane_lat"] \
        + ceil(log2(max(2, cols0)))
    out["mem"] += mem.stream_cycles(2 * rows * d * eb)      # Q in, O out
    out["normalize"] = ceil(rows * d / E)
    return out


def _fa2(config, bl, hw, causal=False):
    w = config.workload
    n, n_kv, d = w.seq_len, w.n_kv, w.head_dim
    br, bc = bl.tiling["B_r"], bl.tiling["B_c"]
    acc = _Acc()
    kv_bytes = 0
    cache = {}
    for i0 in range(0, n, br):
        rows = min(br, n - i0)
        keys = causal_limit(i0 + rows - 1, n, n_kv) if causal else n_kv
        if (rows, keys) not in cache:
            cache[rows, keys] = _fa2_qblock(rows, keys, d, bc, hw)
        b = cache[rows, keys]
        acc.phase(b["array"], b["lanes"], b["mem"], exposed=b["first_lanes"] + hw["fill"])
        acc.cycles += b["normalize"]
        acc.pe_busy += b["array"]
        acc.useful += b["useful"]
        acc.exp_busy += b["lanes"] + b["normalize"]
        acc.exps += b["exps"]
        kv_bytes += b["kv_bytes"]
    return acc, kv_bytes


def _flat(config, bl, hw):
    n, d = config.workload.seq_len, config.workload.head_dim
    acc = _Acc()
    R, spill = bl.tiling["R"], bl.tiling["spill"]
    sb = _bytes(bl.traffic, "writes", "S") // max(1, config.workload.heads * n * n) if spill else 0
    red = hw["lane_lat"] + ceil(log2(max(2, n)))
    full, last = divmod(n, R)
    for count, rows in ((full, R), (1 if last else 0, last)):
        if count:
            _flat_rows(acc, rows, count, n, d, spill, sb, red, hw)
    return acc


def _flat_rows(acc, rows, count, n, d, spill, sb, red, hw):
    """`count` identical blocks of `rows` query rows."""
    p, q, E, mem, eb = hw["p"], hw["q"], hw["E"], hw["mem"], hw["eb"]
    one = _Acc()
    qk = matmul(rows, n, d, p, q)
    pv = matmul(rows, d, n, p, q)
    lane_pass = ceil(rows * n / E)
    k_mem = mem.stream_cycles((rows * d + n * d) * eb)
    v_mem = mem.stream_cycles(n * d * eb + rows * d * eb)
    if not spill:
        one.phase(qk.busy, lane_pass, k_mem, exposed=red + hw["fill"])
        one.phase(pv.busy, lane_pass, v_mem, exposed=hw["fill"])
    else:
        s_mem = mem.stream_cycles(rows * n * sb)
        one.phase(qk.busy, 0, k_mem + s_mem, exposed=hw["fill"])
        one.phase(0, lane_pass, s_mem, exposed=red)             # statistics from S
        one.phase(pv.busy, lane_pass, v_mem + s_mem, exposed=hw["fill"])
    acc.cycles += one.cycles * count
    acc.mem_stall += one.mem_stall * count
    acc.exp_busy += 2 * lane_pass * count
    acc.pe_busy += (qk.busy + pv.busy) * count
    acc.useful += (qk.useful + pv.useful) * count
    acc.exps += rows * n * count


def _standard(config, bl, hw):
    n, d = config.workload.seq_len, config.workload.head_dim
    p, q, E, mem = hw["p"], hw["q"], hw["E"], hw["mem"]
    t, tr, heads = bl.tiling, bl.traffic, config.workload.heads
    per = lambda direction, tensor: _bytes(tr, direction, tensor) // heads
    acc = _Acc()
    qk = tiled_matmul(n, n, d, t["x"], t["y"], p, q)
    acc.phase(qk.busy, 0, mem.stream_cycles(per("reads", "Q") + per("reads", "K")
                                            + per("writes", "S")), exposed=hw["fill"])
    lanes = 3 * ceil(n * n / E)
    acc.phase(0, lanes, mem.stream_cycles(per("reads", "S") + per("writes", "P")),
              exposed=hw["lane_lat"])
    pv = tiled_matmul(n, d, n, t["x_pv"], t["y_pv"], p, q)
    acc.phase(pv.busy, 0, mem.stream_cycles(per("reads", "P") + per("reads", "V")
                                            + per("writes", "O")), exposed=hw["fill"])
    acc.pe_busy = qk.busy + pv.busy
    acc.useful = qk.useful + pv.useful
    acc.exp_busy = lanes
    acc.exps = n * n
    return acc


def simulate_baseline(config, bl, *, causal=False):
    """The Result of BaselinePlan `bl` of `config` on the same hardware.

    `causal` (FlashAttention-2 variants only) skips the K/V blocks past each Q
    block's last row, the block-granular version of AttenIO's row skipping; its
    bytes are then the model's, not the BaselinePlan's. So are they for the
    workload's decoder shapes (FlashAttention-2 only): N query rows against N_kv key
    rows, and grouped K/V heads, which FlashAttention-2 reads once per query head
    (each query head's blocks load their K/V head's blocks again; no pass serves a
    group).
    """
    hw = _hw(config)
    w = config.workload
    heads = w.heads
    decoder = w.n_kv != w.seq_len or w.n_kv_heads != heads
    if bl.name in ("flashattention2", "flashattention2_fair"):
        acc, kv_bytes = _fa2(config, bl, hw, causal)
        res = _result(acc, bl, hw, heads)
        if causal or decoder:
            nd_bytes = w.seq_len * w.head_dim * hw["eb"] * heads
            res.bytes_read = nd_bytes + kv_bytes * heads
            res.bytes_written = nd_bytes
        return res
    if causal:
        raise ValueError(f"causal masking is modelled for FlashAttention-2 only, not {bl.name}")
    if decoder:
        raise ValueError(f"N_kv != N and grouped heads are modelled for FlashAttention-2 only, "
                         f"not {bl.name}")
    if bl.name == "flat":
        return _result(_flat(config, bl, hw), bl, hw, heads)
    if bl.name == "standard":
        return _result(_standard(config, bl, hw), bl, hw, heads)
    raise ValueError(f"no cycle model for baseline {bl.name!r}")


def simulate_baselines(config, baselines=None):
    """{name: Result} of every baseline of `config`."""
    baselines = baselines if baselines is not None else all_baselines(config)
    return {name: simulate_baseline(config, baselines[name]) for name in BASELINE_ORDER
            if name in baselines}
