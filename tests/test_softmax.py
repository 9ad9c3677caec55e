"""One softmax lane against its format's twins, driven as a MAC line drives it.

A line (hdl/pe_array.py) gives its lanes the MACs' B banks of scores, a start
pulse per K row (`start`, and `start_next` a cycle ahead), the block's causal mask and
the clear strobes `consume`; it reads (up, e) off the lane's bus and l (and m, for a
float format) through the drain port between blocks. Here a Python driver plays the
line: start pulses at seeded random gaps, back-to-back ones included (the lane holds
them in its pending queue until the previous pass allows), K_j's pulse only after bank
j mod B was consumed and with at most B - 1 pulses waiting, as the schedule gives them,
consume pulses at random times after `ready`. Each pass's (up, e) per row, `ready`, `active` and the final l and
m are held to the format's NumPy twins (`Int8Arith.np_scale`, `np_exp2`,
`np_update_l`; `FloatArith.np_scale`, `np_exp_arg`, ...) stepped as sim/golden.py and
sim/golden_fp.py step one K/V row, and every cycle to the lane's published latencies
(`SoftmaxLane.start_latency`, `stages`, `bus_stage`, `ready_stage`).
"""

from dataclasses import dataclass, field

import numpy as np
import pytest
from amaranth.hdl import Module, Value

from amaranth_sim import run_clocked
from attenio.formats import FORMATS, format_by_name
from attenio.hdl import softmax as softmax_module
from attenio.hdl.formats import FloatArith, arith_of
from attenio.hdl.mac import ScoreBanks
from attenio.hdl.softmax import SoftmaxLane
from attenio.sim.golden import softmax_constant

MAX_SEQ_LEN, HEAD_DIM = 64, 16


def arith_named(name):
    return arith_of(format_by_name(name), max_seq_len=MAX_SEQ_LEN, head_dim=HEAD_DIM)


# -- the twin ------------------------------------------------------------------------------

def softmax_constant_of(arith):
    if isinstance(arith, FloatArith):
        return arith.c
    return softmax_constant(0.02, 0.02, HEAD_DIM, arith.cfg)


def twin_step(arith, c, scores, masked, m, l):
    """One K row for every row of the lane: (up, e on the bus, m, l) per row, as the
    golden models step it (a masked row: up = 0, e = 0, m and l held)."""
    visible = ~masked
    if isinstance(arith, FloatArith):
        x = arith.np_scale(np.asarray(scores, np.uint32), np.full(len(m), c, np.uint32))
        z, up = arith.np_exp_arg(x, m)
        e = np.where(visible, arith.np_exp2(z), 0)
        up = up & visible
        m_new = np.where(visible, arith.np_maximum(m, x), m)
        return up, arith.np_to_float(e), m_new, arith.np_update_l(up, e, l)
    x = np.asarray(scores, np.int64)
    up = visible & (x > m)
    m_new = np.where(visible, arith.np_max(m, x), m)
    e = np.where(visible, arith.np_exp2(arith.np_scale(-np.abs(arith.np_sub(x, m)), c)), 0)
    alpha, p = np.where(up, e, arith.one), np.where(up, arith.one, e)
    return up, e, m_new, arith.np_update_l(alpha, l, p)


def random_scores(rng, arith, rows, c):
    """Scores whose differences span exp2's range, with ties and the extremes."""
    if isinstance(arith, FloatArith):
        x = (rng.standard_normal(rows) * 8).astype(np.float32)
        x[rng.random(rows) < 0.1] = np.float32(1.5)                      # ties
        special = rng.random(rows) < 0.05
        x[special] = rng.choice(np.float32([-np.inf, np.inf, np.nan, 3e38, -3e38]),
                                size=special.sum())
        return [int(v) for v in x.view(np.uint32)]
    width = arith.score_shape.width
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    span = int(30 * (1 << arith.cfg.c_frac) / c)       # x = diff * c up to ~ -30
    x = rng.integers(-span, span + 1, size=rows)
    x[rng.random(rows) < 0.1] = 7                                        # ties
    extreme = rng.random(rows) < 0.05
    x[extreme] = rng.choice([lo, hi], size=extreme.sum())
    return [int(v) for v in np.clip(x, lo, hi)]


# -- the driver ------------------------------------------------------------------------------

@dataclass
class Block:
    """The K rows of one Q block as the lane sees them: a bank of scores per pass, and the
    block's causal mask (`attenio.hdl.kv_buffer.mask_layout`) with the lane's `row_base`."""
    scores: list                                  # per pass, per lane row u
    causal: bool = False
    gdiag: int = 0
    step: int = 1
    row_base: int = 0
    masked: list = field(default_factory=list)    # per pass, per lane row u


def make_blocks(rng, arith, c, *, macs_per_lane, rows_per_mac, slot_stride, passes, causal):
    """A block of K rows for each count in `passes`; with `causal`, masks that hide some
    rows and leave others in the later passes (of a block of two passes or more)."""
    rows = macs_per_lane * rows_per_mac
    # lane row u is MAC u mod q/L, slot u div q/L: block row row_base + slot*G + mac
    offsets = np.array([(u // macs_per_lane) * slot_stride + u % macs_per_lane
                        for u in range(rows)])
    blocks = []
    for passes in passes:
        block = Block(scores=[random_scores(rng, arith, rows, c) for _ in range(passes)])
        while causal and passes > 1:
            # pass j masks block row i when i < step * j - gdiag
            block.causal, block.step = True, int(rng.integers(1, 3))
            block.row_base = int(rng.integers(0, slot_stride * rows_per_mac))
            block.gdiag = int(rng.integers(0, block.step * passes))
            hidden = np.array([offsets + block.row_base + block.gdiag < block.step * j
                               for j in range(1, passes)])
            if hidden.any() and not hidden.all():
                break
        block.masked = [block.causal & (offsets + block.row_base + block.gdiag < block.step * j)
                        for j in range(passes)]
        blocks.append(block)
    return blocks


IDLE = {"valid": 0, "bank": 0, "first": 0}


def run_lane(rng, arith, *, macs_per_lane, rows_per_mac, slot_stride, passes, causal,
             banks=2, gaps=None, lowest_last=False, max_cycles=20000):
    """Drives a lane through blocks of `passes` K rows (one count a block) as a line with
    `banks` banks does, its start pulses at least `gaps` cycles apart (per pass; seeded
    random ones by default), with `lowest_last` the lane's last row scored m_init in every
    pass (x ties m, so e = 1 and the l as read counts in every pass), checking
    `active` and `ready` every cycle; returns what it saw: per pass its pulse cycle, the
    cycle of its first row in flight and its bus writes, and per block the drained l, m."""
    lane = SoftmaxLane(arith=arith, macs_per_lane=macs_per_lane, rows_per_mac=rows_per_mac,
                       slot_stride=slot_stride, banks=banks)
    c = softmax_constant_of(arith)
    rows, floating = lane.rows, isinstance(arith, FloatArith)
    # a float lane reads its MACs' score banks (`ScoreBanks`), an int8 lane their registers
    dut, score_banks = lane, []
    if floating:
        dut = Module()
        dut.submodules.lane = lane
        for mac in range(macs_per_lane):
            dut.submodules[f"scores{mac}"] = store = ScoreBanks(
                arith=arith, rows_per_mac=rows_per_mac, banks=banks)
            dut.d.comb += [store.rd_at.eq(lane.score_at), lane.score_rd[mac].eq(store.rd)]
            score_banks.append(store)

    def write_score(ctx, mac, bank, slot, score):
        if floating:
            store = score_banks[mac]
            ctx.set(store.memory.data[store.index(bank, slot)], score)
        else:
            ctx.set(lane.scores[(mac * banks + bank) * rows_per_mac + slot], score)
    blocks = make_blocks(rng, arith, c, macs_per_lane=macs_per_lane, rows_per_mac=rows_per_mac,
                         slot_stride=slot_stride, passes=passes, causal=causal)
    if lowest_last:
        for scores in (scores for block in blocks for scores in block.scores):
            scores[-1] = arith.m_init
    stages = SoftmaxLane.stages(arith)
    bus_stage, ready_stage = SoftmaxLane.bus_stage(arith), SoftmaxLane.ready_stage(arith)
    total = sum(passes)
    block_first = [sum(passes[:b]) for b in range(len(passes))]      # its first pass
    if gaps is None:
        gaps = rng.choice([1, 1, 1, 2, 3, 7, stages, 2 * stages], size=total)
    gaps = list(gaps)       # the caller's list stays as given
    gaps[1] = 1             # the first block's second pulse right behind its first
    seen = {"pulses": [], "firsts": [], "writes": [[] for _ in range(total)],
            "ends": [], "waiting": []}
    pulses, firsts = seen["pulses"], seen["firsts"]

    def first_row(k):
        """The lane's rule: a pass's first row `start_latency` after its pulse, but not
        before the previous pass has issued its last row, nor within `stages` cycles of
        the previous pass's first."""
        t = pulses[k] + SoftmaxLane.start_latency
        return max(t, firsts[k - 1] + rows, firsts[k - 1] + stages + 1) if k else t

    async def tb(ctx):
        ctx.set(Value.cast(lane.c), arith.np_lane_c(c))      # the bits of its layout
        ready, rise, consumed = [0] * banks, {}, {}
        block_index, phase, since = 0, "mask", 0
        start, k_next, drained = None, 0, []
        for cycle in range(max_cycles):
            block = blocks[block_index]
            # -- outputs of this cycle, against the model
            busy = any(f <= cycle <= f + rows - 1 + stages for f in firsts)
            assert ctx.get(lane.active) == busy, f"active in cycle {cycle}"
            for k, t in rise.items():
                if t == cycle:
                    ready[k % banks] = 1
            assert [ctx.get(lane.ready[b]) for b in range(banks)] == ready, \
                f"ready in cycle {cycle}"
            pa = ctx.get(lane.pa)
            if pa.valid:
                k = [k for k, f in enumerate(firsts) if f + bus_stage - 1 <= cycle]
                assert k and pa.bank == k[-1] % banks, f"bus write in cycle {cycle}"
                seen["writes"][k[-1]].append(
                    (cycle, pa.slot * macs_per_lane + pa.mac, pa.up, pa.e))
            # -- consume: V_j enters the array at a random time after its pass's ready
            consume = 0
            for k, t in rise.items():
                if k not in consumed and t <= cycle and not consume >> k % banks & 1 \
                        and rng.random() < 0.3:
                    consume |= 1 << k % banks
                    consumed[k] = cycle
                    ready[k % banks] = 0           # from the next cycle
            ctx.set(lane.consume, consume)
            # -- this cycle's start, decided a cycle ago
            ctx.set(lane.start, start or IDLE)
            if start:
                pulses.append(cycle)
                firsts.append(first_row(len(pulses) - 1))
                rise[len(pulses) - 1] = firsts[-1] + rows - 1 + ready_stage
            start = None
            # -- the next cycle's start: its bank's scores are in before it
            if phase == "mask":
                ctx.set(lane.mask, {"causal": block.causal, "gdiag": block.gdiag,
                                    "step": block.step})
                ctx.set(lane.row_base, block.row_base)
                phase, since = "passes", cycle
            elif phase == "passes" and k_next < block_first[block_index] + len(block.scores):
                k, j = k_next, k_next - block_first[block_index]
                # at a random gap after the previous pulse (1: back to back), once the
                # bank's previous pass is consumed (V_(j-B) in the array: K_j comes after
                # it), and with at most B - 2 passes not started: a line holds at most
                # B - 1 starts ahead of its lanes (see hdl/softmax.py)
                waiting = sum(f > cycle + 1 for f in firsts)
                if j == 0:
                    due = cycle + 1 >= since + 2 + gaps[k]
                else:
                    due = (cycle + 1 >= pulses[k - 1] + gaps[k]
                           and len(firsts) == k and waiting <= banks - 2
                           and (j < banks or k - banks in consumed))
                if due:
                    for u, score in enumerate(block.scores[j]):
                        mac, slot = u % macs_per_lane, u // macs_per_lane
                        write_score(ctx, mac, k % banks, slot, score)
                    start = {"valid": 1, "bank": k % banks, "first": int(j == 0)}
                    seen["waiting"].append(waiting + 1)
                    k_next += 1
            elif phase == "passes":
                last = len(firsts) == k_next and cycle > firsts[-1] + rows - 1 + stages
                if last and len(consumed) == k_next:
                    phase, drained = "drain", []
            if phase == "drain":
                # between blocks, the drain reads l (and m) with a cycle's latency
                if drained:
                    drained[-1] = (ctx.get(lane.l_rd), ctx.get(lane.m_rd) if floating else None)
                if len(drained) == rows:
                    seen["ends"].append(([l for l, _ in drained], [m for _, m in drained]))
                    block_index += 1
                    if block_index == len(blocks):
                        return
                    phase = "mask"
                else:
                    ctx.set(lane.drain_u, len(drained))
                    drained.append(None)
            ctx.set(lane.start_next, start or IDLE)
            await ctx.tick()
        raise AssertionError(f"the lane did not finish in {max_cycles} cycles")

    run_clocked(dut, tb)
    return lane, blocks, c, seen


def expected(arith, c, blocks, rows):
    """The twin's (up, e) per row of every pass, and l and m per row after each block."""
    floating = isinstance(arith, FloatArith)
    pairs, ends = [], []
    for block in blocks:
        m = np.full(rows, arith.m_init, np.uint32 if floating else np.int64)
        l = np.zeros(rows, np.int64)
        for scores, masked in zip(block.scores, block.masked):
            up, e, m, l = twin_step(arith, c, scores, masked, m, l)
            pairs.append([(int(a), int(b)) for a, b in zip(up, e)])
        ends.append(([int(v) for v in l], [int(v) for v in m] if floating else [None] * rows))
    return pairs, ends


# -- the tests ---------------------------------------------------------------------------

GEOMETRIES = {
    # (macs_per_lane, rows_per_mac, slot_stride): the small preset's lane (one MAC of 8
    # rows), several MACs and slots with a stride past the lane's MACs, one row
    "small": (1, 8, 4), "3x2": (3, 2, 7), "one_row": (1, 1, 2),
}


# bf16's lane is fp16's but for the twin's inputs: one geometry
CASES = [(fmt, geometry) for fmt in ("int8", "fp16") for geometry in GEOMETRIES] + [
    ("bf16", "3x2")]


@pytest.mark.parametrize("fmt, geometry", CASES)
@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
def test_lane_matches_its_twin_at_its_published_latencies(rng, fmt, geometry, causal):
    """Each pass's (up, e) per row is the twin's, on the bus one row a cycle from its first
    row's issue plus `bus_stage` - 1; the first row is in flight `start_latency` after the
    pulse unless the previous pass holds it back (its last row, `stages` + 1 cycles from its
    first); `ready` rises `ready_stage` after the last row (checked every cycle, as is
    `active`); the drained l and m are the twin's."""
    arith = arith_named(fmt)
    ql, r, stride = GEOMETRIES[geometry]
    lane, blocks, c, seen = run_lane(rng, arith, macs_per_lane=ql, rows_per_mac=r,
                                     slot_stride=stride, passes=(6, 6), causal=causal)
    check_passes(arith, lane, blocks, c, seen)
    # the schedule took the paths it is meant to: a pulse held back in the pending register
    pulses, firsts = seen["pulses"], seen["firsts"]
    held = [k for k in range(1, len(pulses))
            if firsts[k] > pulses[k] + SoftmaxLane.start_latency]
    assert 1 in held and pulses[1] == pulses[0] + 1
    if causal:
        assert any(m.any() for block in blocks for m in block.masked)


@pytest.mark.parametrize("fmt, rows_per_mac", [("int8", 12), ("fp16", 24)])
def test_lane_runs_passes_back_to_back_when_its_rows_outlast_its_stages(rng, fmt, rows_per_mac):
    """A lane of more rows than `stages` + 1 (two MACs of `rows_per_mac`) issues a pass's
    first row the cycle after the previous pass's last: rows of both passes are in flight
    together, each with its own pass's `first` (a block's first pass forces m and l as
    read to m_init and 0, its next pass does not), and still match the twin."""
    arith = arith_named(fmt)
    assert 2 * rows_per_mac > SoftmaxLane.stages(arith) + 1
    lane, blocks, c, seen = run_lane(rng, arith, macs_per_lane=2, rows_per_mac=rows_per_mac,
                                     slot_stride=3, passes=(4, 4), causal=False,
                                     gaps=[1] * 8, lowest_last=True)
    check_passes(arith, lane, blocks, c, seen)
    # the second block's first pass and the next back to back (the first block's would not
    # show l forced by a `first` from the wrong pass: its l reads as the memory's reset 0)
    firsts = seen["firsts"]
    assert firsts[5] == firsts[4] + lane.rows


@pytest.mark.parametrize("fmt, geometry, banks, passes", [
    # blocks shorter than the lead (B - 1 K rows) between longer ones
    ("int8", "small", 3, (6, 1, 5)), ("int8", "3x2", 4, (7, 2, 6)),
    ("fp16", "3x2", 4, (7, 2, 6)), ("fp16", "one_row", 3, (6, 1, 4)),
    ("bf16", "small", 5, (9, 3, 6))])
@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
def test_lane_with_more_banks_queues_the_starts_of_their_lead(rng, fmt, geometry, banks, passes,
                                                              causal):
    """With B banks the line may give B - 1 starts before the lane takes them: each pass
    still runs in order on its bank (j mod B), at the published latencies, with the twin's
    (up, e), `ready` per bank, and the twin's l and m; the queue was full at least once."""
    arith = arith_named(fmt)
    ql, r, stride = GEOMETRIES[geometry]
    lane, blocks, c, seen = run_lane(rng, arith, macs_per_lane=ql, rows_per_mac=r,
                                     slot_stride=stride, passes=passes, causal=causal,
                                     banks=banks)
    check_passes(arith, lane, blocks, c, seen)
    assert max(seen["waiting"]) == banks - 1


def check_passes(arith, lane, blocks, c, seen):
    """Every pass's bus writes at their cycles with the twin's (up, e), and the drained
    l and m the twin's."""
    rows = lane.rows
    pairs, ends = expected(arith, c, blocks, rows)
    bus = SoftmaxLane.bus_stage(arith)
    for k, writes in enumerate(seen["writes"]):
        first = seen["firsts"][k]
        assert [t for t, *_ in writes] == [first + bus - 1 + u for u in range(rows)], f"pass {k}"
        assert [u for _, u, *_ in writes] == list(range(rows)), f"pass {k}"
        assert [(up, e) for _, _, up, e in writes] == pairs[k], f"pass {k}"
    assert seen["ends"] == ends


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_stage_table_agrees_with_the_published_stages(fmt):
    """The module docstring's steps, as `stage_table` numbers them, end where `e_stage`,
    `bus_stage`, `ready_stage` and `stages` say, and each step lasts its builder's latency."""
    arith = arith_named(fmt)
    table = SoftmaxLane.stage_table(arith)
    stage = {step: (first, last) for step, first, last in table}
    assert len(stage) == len(table)
    assert stage["issue"] == (0, 0) and stage["select"] == (1, 1)
    assert stage["exp2"][1] == SoftmaxLane.e_stage(arith)
    assert stage["bus"] == (SoftmaxLane.bus_stage(arith),) * 2
    assert stage["ready"] == (SoftmaxLane.ready_stage(arith),) * 2
    assert stage["write-back"] == (SoftmaxLane.stages(arith),) * 2
    floating = isinstance(arith, FloatArith)
    chain = (["issue", "select", "scale", "exp_arg", "exp2", "to_float"] if floating
             else ["issue", "select", "compare", "scale", "exp2"])
    for before, after in zip(chain, chain[1:]):
        assert stage[after][0] == stage[before][1] + 1, f"{before} to {after}"
    latency = {"scale": arith.scale_latency, "exp2": arith.exp2_latency,
               **({"exp_arg": arith.exp_arg_latency, "to_float": arith.to_float_latency,
                   "update_l": arith.update_l_latency} if floating
                  else {"update": arith.update_latency})}
    for step, cycles in latency.items():
        assert stage[step][1] - stage[step][0] + 1 == cycles, step
    assert stage["bus"][0] == stage[chain[-1]][1] + 1
    update = stage["update_l" if floating else "update"]
    assert update[0] == stage["exp2"][1] + 1 and update[1] <= stage["write-back"][0]
    doc = softmax_module.__doc__
    assert all(step in doc for step in stage), "the module docstring names every step"
