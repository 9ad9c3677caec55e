"""The parallel softmax: one `SoftmaxLane` per EXP module, L = E / p lanes per MAC line.

With b = 1 every softmax step is element-wise over the rows of the Q block, so
the EXP unit is E independent lanes. A lane owns `macs_per_lane` (q/L) MACs of
its line and keeps the running max m and sum l of their r*q/L rows in two small
lane-local memories. After the scores of K_j are in the MACs' bank j mod B (B =
`banks`, the score and (P, alpha) banks), a start pulse from the line makes each lane stream over its rows, one per cycle,
through these steps in this order, each as long as the latency named beside it
(`SoftmaxLane.stage_table(arith)` gives each step's first and last stage, in
cycles after the row's issue, from those latencies):

    issue        the row's counters and its score's one-hot selection register
    select       the score (one-hot, from the bank's q/L*r); m and l read
    compare      up = x > m, and both x - m and m - x (three carry chains side by side)
    scale        d = min(m, x) - max(m, x) (m - x if up else x - m), selected into the
                 scale's operand registers beside m_new = max(m, x); then
                 z = scale(d, c)                    `Int8Arith.scale`, `scale_latency`
    exp2         e = exp2(z)                        `Int8Arith.exp2`, `exp2_latency`
    bus          (up, e) onto the line-local bus as exp2 puts it out, in each MAC's bus
                 register a stage later (`SoftmaxLane.bus_stage`):
                 (alpha, P) = (e, 1) if up else (1, e)
    ready        the pass's last row in the MACs' (bank, slot) registers, `ready`
                 (`SoftmaxLane.ready_stage`)
    update       l = update(up, e, l), from exp2's output, beside the bus
                                                    `Int8Arith.update`, `update_latency`
    write-back   m and l written in update's last stage (`SoftmaxLane.stages`)

Every multiply has a register before and after it (ECP5 MULT18X18D blocks with
fabric registers on both sides, their partial products summed in a stage of
their own), and every stage passes through one adder or comparison at most
(compare computes both differences so that the next stage only selects), which is
what lets the lane close timing; the stages cost latency only, which the schedule
hides (`SoftmaxLane.stages`).

Either m - m_new or x - m_new is zero, and exp2(0) is exactly one, so one exp2
per row gives both alpha and P bit for bit as the format's twins do (one EXP
module per lane, hence E = number of lanes). On the block's first row (`first`)
m and l read as m_init and 0, so nothing is cleared between blocks.

Causal masking (`mask`, the block's, `attenio.hdl.kv_buffer.mask_layout`): the
pass of K_j masks block row i when i < step * (j - diag): a block holds the same
rows of `step` query heads row-major, and step * diag (`gdiag`) comes with the mask,
so nothing multiplies. A row's block index is slot*G + `row_base` + mac (G =
`slot_stride`, the array's groups), so each lane counts a threshold per pass,
-(gdiag + row_base) on the block's first, `step` more on each next. Beside its
counters it steps the threshold less the row's offset slot*G + mac and compares it a
row ahead, so that the row's mask is a register at issue (one subtraction or
comparison a cycle). A masked row's selected score is m_init (-inf for a float
format), so its max does not move
(up = 0, m unchanged), and its e is forced to 0 where it leaves exp2: P = 0,
alpha = 1, l and O add zero.

A pass on bank b ends with `ready[b]` set as its last row's (up, e) reach the
MACs' (bank, slot) registers, a cycle after their bus registers
(`SoftmaxLane.ready_stage`), so a MAC selects a V word's pair from those
registers alone; the core clears it
(`consume[b]`) as V_j enters the array, the single interlock of the schedule. A pass starts when
the previous one has issued its last row and at least S + 1 cycles after the
previous start (S = `SoftmaxLane.stages`), so each row reads m and l after the previous
pass wrote them; a start pulse arriving earlier waits in a pending queue of B - 1
starts. That is as many as can wait: the scores of K_(j+B) go into bank j only after
V_j has entered the array, so after pass j's `ready`, by when pass j + 1 has started
(its start came with K_(j+1), before V_j); the starts of passes j + 2 .. j + B are all
that may have come and not started.
Between blocks the `l` memory's read port serves the drain (`drain_u`, `l_rd`).

A float format (`FloatArith`) keeps m in fp32 and runs the row as

    issue, select  as above (m_init = -inf and l = 0 on the block's first row), but
                 the score read from each group's block RAM at the row's (bank, slot)
                 a cycle ahead (`attenio.hdl.mac.ScoreBanks`), the row's MAC selected
    scale        x = fmul(S, c)                     `FloatArith.scale`, `scale_latency`
    exp_arg      z = to_fixed(-|x - m_old|), up = x > m_old; beside it
                 m_new = maximum(m_old, x)          `FloatArith.exp_arg`, `exp_arg_latency`
                                                    (`maximum`)
    exp2         e = exp2(z)                        the int8 format's, `exp2_latency`
    to_float     fp32(e)                            `FloatArith.to_float`, `to_float_latency`
    bus, ready   (up, fp32(e)) onto the bus, as above
    update_l     l = update_l(up, e, l_old), beside to_float (fixed point, as int8)
                                                    `FloatArith.update_l`, `update_l_latency`
    write-back   m_new and l, once l is updated and the bus register holds the row
                 (`SoftmaxLane.stages`)

and the drain also reads m (`m_rd`): a row whose max ends NaN or +inf outputs NaN.
"""

from dataclasses import dataclass

from amaranth.hdl import Array, Cat, Module, Mux, Shape, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from attenio import validate
from attenio.regmap import MAX_HEAD_GROUP

from .formats import FloatArith, check_arith
from .formats.dsp import Stages, force, or_all
from .kv_buffer import mask_layout

__all__ = ["pa_layout", "score_at_layout", "start_layout", "SoftmaxLane"]

#: score bits selected by each copy of a lane's one-hot score selection register
SCORE_SEL_BITS = 5


def pa_layout(*, arith, macs_per_lane, rows_per_mac, banks=2):
    """The lane's write bus to its MACs: (P, alpha) of row (`mac`, `slot`) in bank `bank`
    (of `banks`), as (`up`, `e`): (alpha, P) = (e, 1) if up else (1, e). The lane drives
    it from its pipeline's last stage without a register; each MAC registers it on
    arrival (`MAC`)."""
    return data.StructLayout({
        "valid": 1, "mac": range(macs_per_lane), "slot": range(rows_per_mac),
        "bank": range(banks),
        "up": 1, "e": arith.factor_shape,
    })


def score_at_layout(*, rows_per_mac, banks=2):
    """A float lane's read of its groups' score banks (`attenio.hdl.mac.ScoreBanks`): the
    (bank, slot) whose score each group puts out a cycle later."""
    return data.StructLayout({"bank": range(banks), "slot": range(rows_per_mac)})


def start_layout(*, banks=2):
    """The line's start pulse: scores of bank `bank` (of `banks`) are complete; `first`:
    row 0 of the block."""
    return data.StructLayout({"valid": 1, "bank": range(banks), "first": 1})


class SoftmaxLane(wiring.Component):
    """One EXP lane over `macs_per_lane` MACs with `rows_per_mac` rows each, whose MACs
    keep `banks` (B) banks of scores and of (P, alpha).

    Ports: `scores` the MACs' score registers (index (mac * B + bank) * r + slot); a float
    lane reads its groups' score memories instead, at `score_at` (`score_at_layout`),
    each group's score on `score_rd` a cycle later;
    `start` the line's pulse, and `start_next` what `start` will be in the next cycle
    (the lane registers its decision to start a pass); `c` the softmax constant
    (`lane_c_shape`: `FloatArith` normalizes an fp16 c once for the array); `mask`
    the block's causal mask and `row_base` the block row of the lane's first row (slot 0
    of its first MAC group), whose slot s rows lie `slot_stride` * s further; `pa` the
    write bus (unregistered, `pa_layout`); `ready`/`consume` the per-bank done flags;
    `active` a row is in flight (issued and not yet written back: r*q/L + `stages` cycles
    per pass);
    `drain_u`/`l_rd` the drain's read of l (one cycle latency, only while the lane is idle),
    and with a float format `m_rd` its read of m.
    Row u of the lane is MAC u mod q/L, slot u div q/L.
    """

    def __init__(self, *, arith, macs_per_lane, rows_per_mac, slot_stride=None, banks=2):
        check_arith("SoftmaxLane", arith)
        validate.positive("SoftmaxLane", macs_per_lane=macs_per_lane, rows_per_mac=rows_per_mac)
        validate.integer("SoftmaxLane", "banks", banks, lo=2)
        self._arith, self._banks = arith, banks
        self._macs_per_lane, self._rows_per_mac = macs_per_lane, rows_per_mac
        rows = macs_per_lane * rows_per_mac
        self._slot_stride = macs_per_lane if slot_stride is None else slot_stride
        validate.integer("SoftmaxLane", "slot_stride", self._slot_stride, lo=macs_per_lane)
        block = self._slot_stride * rows_per_mac      # block rows of the whole array
        if isinstance(arith, FloatArith):
            scores = {"score_at": Out(score_at_layout(rows_per_mac=rows_per_mac, banks=banks)),
                      "score_rd": In(data.ArrayLayout(arith.score_shape, macs_per_lane))}
        else:
            scores = {"scores": In(data.ArrayLayout(arith.score_shape, banks * rows))}
        super().__init__({
            **scores,
            "start": In(start_layout(banks=banks)),
            "start_next": In(start_layout(banks=banks)),
            "c": In(arith.lane_c_shape),
            "mask": In(mask_layout(max_seq_len=arith.max_seq_len)),
            "row_base": In(range(block)),
            "pa": Out(pa_layout(arith=arith, macs_per_lane=macs_per_lane,
                                rows_per_mac=rows_per_mac, banks=banks)),
            "ready": Out(banks),
            "consume": In(banks),
            "active": Out(1),
            "drain_u": In(range(rows)),
            "l_rd": Out(arith.l_shape),
            **({"m_rd": Out(arith.score_shape)} if isinstance(arith, FloatArith) else {}),
        })

    @property
    def arith(self):
        return self._arith

    @property
    def macs_per_lane(self):
        return self._macs_per_lane

    @property
    def rows_per_mac(self):
        return self._rows_per_mac

    @property
    def slot_stride(self):
        return self._slot_stride

    @property
    def banks(self):
        return self._banks

    @property
    def rows(self):
        return self._macs_per_lane * self._rows_per_mac

    #: cycles from a start pulse to the pass's first row in flight (the run register)
    start_latency = 1

    @staticmethod
    def stage_table(arith):
        """The row's pipeline as in the module docstring: (step, first stage, last stage)
        per step, in cycles after the row's issue (stage 0), each step's registers holding
        the row from its first stage to its last, where its result is; built from the
        format's latencies one step after the other. `e_stage`, `bus_stage`, `ready_stage`
        and `stages` read their stages from it, so a step added here moves them all."""
        if isinstance(arith, FloatArith):
            chain = [("issue", 1), ("select", 1), ("scale", arith.scale_latency),
                     ("exp_arg", arith.exp_arg_latency), ("exp2", arith.exp2_latency)]
            after_exp2 = [("to_float", arith.to_float_latency)]
            update = ("update_l", arith.update_l_latency)
        else:
            chain = [("issue", 1), ("select", 1), ("compare", 1), ("scale", arith.scale_latency),
                     ("exp2", arith.exp2_latency)]
            after_exp2 = []
            update = ("update", arith.update_latency)
        table, stage = [], 0
        for step, length in chain + after_exp2:
            table.append((step, stage, stage + length - 1))
            stage += length
        e_last = table[len(chain) - 1][2]
        bus = stage                       # the MACs' bus registers: a stage after exp2's e
        table += [("bus", bus, bus), ("ready", bus + 1, bus + 1),
                  (update[0], e_last + 1, e_last + update[1])]
        # a float format's write-back also waits for the bus register (`active` covers it)
        write = e_last + update[1] if not after_exp2 else max(e_last + update[1], bus)
        table.append(("write-back", write, write))
        return table

    @staticmethod
    def _step(arith, step):
        """(first, last) stage of `step` in `stage_table(arith)`."""
        return next((first, last) for name, first, last in SoftmaxLane.stage_table(arith)
                    if name == step)

    @staticmethod
    def e_stage(arith):
        """The stage at which a row's e (fixed point) comes out of exp2."""
        return SoftmaxLane._step(arith, "exp2")[1]

    @staticmethod
    def stages(arith):
        """S, the valid stages after a row's issue (to exp2, then l's update and the
        write-back; a float format also waits for the bus's fp32 e): a row issued in
        cycle 0 writes m and l in cycle S, and a lane is busy (`active`) until S cycles
        after issuing its last row."""
        return SoftmaxLane._step(arith, "write-back")[0]

    @staticmethod
    def bus_stage(arith):
        """The stage at which a row's (up, e) is in the MACs' bus registers (cycles after
        issue): to exp2, a float format's conversion to fp32, the bus register."""
        return SoftmaxLane._step(arith, "bus")[0]

    @staticmethod
    def ready_stage(arith):
        """The stage at which `ready` shows a pass's last row: with its (up, e) in the
        MACs' (bank, slot) registers, a cycle after their bus registers."""
        return SoftmaxLane._step(arith, "ready")[0]

    def elaborate(self, platform):
        m = Module()
        arith, rows = self._arith, self.rows
        # a float lane's m and l in block RAMs: a LUT RAM cell takes about seven LUT sites
        # once placed, which a float design runs out of first (int8's stay as they were)
        ram = {"ram_style": "block"} if isinstance(arith, FloatArith) else None
        m.submodules.m_mem = m_mem = Memory(shape=arith.score_shape, depth=rows, init=[],
                                            attrs=ram)
        m.submodules.l_mem = l_mem = Memory(shape=arith.l_shape, depth=rows, init=[], attrs=ram)
        m_wr, l_wr = m_mem.write_port(), l_mem.write_port()
        m_rd, l_rd = m_mem.read_port(), l_mem.read_port()

        control = self._pass_control(m)
        below = self._causal_threshold(m, control)
        if isinstance(arith, FloatArith):
            score = self._score_read(m, control)
        else:
            score = self._score_selection(m, control)
        self._read_ports(m, control, m_rd, l_rd)
        ctrl, x1, mask1 = self._stage_one(m, control, score, below)
        row = self._float_row if isinstance(arith, FloatArith) else self._int8_row
        bus_valid, bus_u, bus_bank, u_w, m_new_w, l_new = row(
            m, control.valid, x1, m_rd.data, l_rd.data, ctrl.first,
            [ctrl.u, ctrl.mac, ctrl.slot, ctrl.bank], mask1)
        self._write_back(m, control, m_wr, l_wr, u_w, m_new_w, l_new)
        self._ready_flags(m, bus_valid, bus_u, bus_bank)
        return m

    def _pass_control(self, m):
        """The pass's control: the start pulse, the pending starts, `go` and `run`, the row
        counters (u, and its mac and slot), the valid flag of each stage, the hold that
        spaces the passes, and `active`. Returns them as a `_Pass`."""
        stages, rows, macs_per_lane = self.stages(self._arith), self.rows, self._macs_per_lane
        banks = self._banks
        run = Signal()
        u = Signal(range(rows))
        mac = Signal(range(macs_per_lane))
        slot = Signal(range(self._rows_per_mac))
        bank = Signal(range(banks))
        first = Signal()
        # The pending starts, oldest in slot 0: slot k holds one while pend[k] (which
        # implies pend[k - 1]), B - 1 slots (see the module docstring).
        depth = banks - 1
        pend = [Signal(name="pend" + (f"{k}" if k else "")) for k in range(depth)]
        pend_bank = [Signal(range(banks), name="pend_bank" + (f"{k}" if k else ""))
                     for k in range(depth)]
        pend_first = [Signal(name="pend_first" + (f"{k}" if k else "")) for k in range(depth)]
        valid = [Signal(name=f"v{stage}") for stage in range(1, stages + 1)]   # stages 1..S
        m.d.sync += [valid[k].eq(valid[k - 1]) for k in range(1, stages)]
        # A pass may start in the cycle the previous one issues its last row, and S + 1
        # cycles after the previous start at the earliest: its row u then reads m and l
        # after the previous pass wrote them (`hold` counts that down). `go`, a pass
        # starts, restarts every counter and the score selection across the lane, so it is
        # a register: loaded with its own next value, from the next values of its terms
        # (below) and `start_next`.
        hold = Signal(range(stages + 1))
        held = Signal(init=1)                    # hold == 0
        u_last = Signal()                        # u == rows - 1, while `run`
        # Copies of u and run, kept, for l's read address (and m's, for float), which the
        # drain reads too: they sit beside the memory, which may sit across the line from
        # the lane's control, so the address multiplexer has no long route from `u`.
        u_rd = Signal.like(u, name="u_rd", attrs={"keep": 1})
        run_rd = Signal(name="run_rd", attrs={"keep": 1})
        with m.If(~held):
            m.d.sync += [hold.eq(hold - 1), held.eq(hold == 1)]
        with m.If(run):
            m.d.sync += [u.eq(u + 1), u_last.eq(u == rows - 2 if rows > 1 else 1),
                         u_rd.eq(u_rd + 1)]
            with m.If(mac == macs_per_lane - 1):
                m.d.sync += [mac.eq(0), slot.eq(slot + 1)]
            with m.Else():
                m.d.sync += mac.eq(mac + 1)
            with m.If(u_last):
                m.d.sync += [run.eq(0), run_rd.eq(0)]
        # go = (~run | u_last) & held & (pend | start.valid), a cycle ahead. A start is
        # never followed by another (it clears held), and otherwise run becomes
        # run & ~u_last, u_last (while run) u == rows - 2, held held | hold == 1, pend
        # pend | start.valid, and start.valid start_next.valid.
        go = Signal()
        start_valid, start_next_valid = self.start.valid, self.start_next.valid
        ends_next = ~run | u_last | (u == rows - 2) if rows > 1 else 1
        go_next = ~go & ends_next & (held | (hold == 1)) & (pend[0] | start_valid | start_next_valid)
        m.d.sync += go.eq(go_next)
        # the bank a start at the next cycle takes: Mux(pend, pend_bank, start.bank) then,
        # with slot 0 as it will be after this cycle, in which no pass starts
        if depth == 1:          # the one slot takes every start (see `_pending` below)
            bank0_next = Mux(start_valid, self.start.bank, pend_bank[0])
        else:
            bank0_next = Mux(pend[0], pend_bank[0], self.start.bank)
        bank_next = Mux(pend[0] | start_valid, bank0_next, self.start_next.bank)
        pass_first = Mux(pend[0], pend_first[0], self.start.first)
        with m.If(go):
            m.d.sync += [run.eq(1), u.eq(0), u_last.eq(rows == 1), mac.eq(0), slot.eq(0),
                         run_rd.eq(1), u_rd.eq(0),
                         hold.eq(stages), held.eq(0),
                         bank.eq(Mux(pend[0], pend_bank[0], self.start.bank)),
                         first.eq(pass_first)]
            # the queue moves down a slot, behind the start of this cycle if it stays
            m.d.sync += [pend[k].eq(pend[k + 1] | (pend[k] & start_valid)) if k + 1 < depth
                         else pend[k].eq(pend[k] & start_valid) for k in range(depth)]
        with m.Elif(start_valid):               # into the first free slot
            m.d.sync += [pend[k].eq(pend[k - 1] if k else 1) for k in range(depth)]
        self._pending(m, go, pend, pend_bank, pend_first)
        # A row in flight, issue to write-back: run | v1 | ... | vS as a register of its
        # own, loaded with that OR's next value (run's is go | run & ~u_last, v1's run,
        # v[k]'s v[k-1]), so the OR of every lane's flag into the controller starts from
        # flip-flops free to sit towards it rather than from `run`.
        m.d.sync += self.active.eq(go | run | or_all(valid[:-1]))
        return _Pass(run=run, u=u, mac=mac, slot=slot, bank=bank, first=first, go=go,
                     go_next=go_next, bank_next=bank_next, pass_first=pass_first, valid=valid,
                     u_rd=u_rd, run_rd=run_rd)

    def _pending(self, m, go, pend, pend_bank, pend_first):
        """The pending queue's slots (its flags `pend` step in `_pass_control`): a pass
        starting (`go`) takes slot 0's start, or the start of this cycle if none waits, and
        the others move down a slot; a start of this cycle that no pass takes goes into the
        first free slot."""
        start, depth = self.start, len(pend)
        for k in range(depth):
            take = [pend_bank[k].eq(start.bank), pend_first[k].eq(start.first)]
            if k == depth - 1:
                # every start: the slot is free unless the queue is full, when no start
                # comes (see the module docstring)
                with m.If(start.valid):
                    m.d.sync += take
                continue
            with m.If(go & pend[k + 1]):
                m.d.sync += [pend_bank[k].eq(pend_bank[k + 1]), pend_first[k].eq(pend_first[k + 1])]
            with m.Elif(~go & pend[k]):
                pass                    # holds its start
            with m.Elif(start.valid):
                m.d.sync += take

    def _causal_threshold(self, m, control):
        """The causal mask's per-pass threshold: pass j masks the rows whose offset
        slot*G + mac is below it (G the slot stride). Returns `below`, the registered
        comparison for row u (a flip-flop at stage 0, not a comparison before the score
        register)."""
        # `gap` is the threshold less row u's offset, stepped beside the counters (-1
        # along a slot, -G to the next: `slot_gap` is the threshold less slot*G), and
        # `below` is the comparison for the row the counters hold next, registered.
        slot_stride, max_seq_len = self._slot_stride, self._arith.max_seq_len
        block = slot_stride * self._rows_per_mac
        head_group = MAX_HEAD_GROUP
        thr = Signal(range(-(head_group * max_seq_len + block), head_group * max_seq_len + 1))
        # thr + step, the next pass's threshold, a cycle behind thr and the mask: passes
        # start S + 1 cycles apart at least, and a block's mask before its first pass
        thr_step = Signal.like(thr)
        base = Signal(range(head_group * max_seq_len + block))
        gap = Signal(range(-(head_group * max_seq_len + 2 * block + slot_stride),
                           head_group * max_seq_len + 1))
        slot_gap = Signal.like(gap)
        below = Signal()                           # row u's offset is below the threshold
        m.d.sync += [base.eq(self.mask.gdiag + self.row_base), thr_step.eq(thr + self.mask.step)]
        with m.If(control.run):
            with m.If(control.mac == self._macs_per_lane - 1):
                m.d.sync += [slot_gap.eq(slot_gap - slot_stride), gap.eq(slot_gap - slot_stride),
                             below.eq(slot_gap > slot_stride)]
            with m.Else():
                m.d.sync += [gap.eq(gap - 1), below.eq(gap > 1)]
        with m.If(control.go):
            # a block's first threshold is -base <= 0: no row is below it
            thr_new = Mux(control.pass_first, -base, thr_step)
            m.d.sync += [thr.eq(thr_new), gap.eq(thr_new), slot_gap.eq(thr_new),
                         below.eq(~control.pass_first & (thr_step > 0))]
        return below

    def _score_selection(self, m, control):
        """Stage 0's score multiplexer: row u's score out of the MACs' banks, selected by
        one-hot registers that follow the pass. Returns the selected score (combinational,
        `arith.score_shape` bits)."""
        # The score of row u is selected by a one-hot register of its own, kept, whose
        # bit moves from row to row as the pass runs: the selection is B*R wide for each of
        # a score's bits, one AND-OR per bit, no decode before it. One copy of the register
        # for each SCORE_SEL_BITS bits of the score, so that each sits beside its few
        # AND-ORs and none fans out across the whole score. It shifts every cycle, with no
        # enable: the pass's last row shifts its bit out, so between passes it holds
        # zeros, and only the bank's first bit loads, from a kept pair of registers per
        # copy (go & the bank, set from their next values): a register beside the copy,
        # where the lane's control may sit across the line from its MACs.
        macs_per_lane, rows_per_mac, rows = self._macs_per_lane, self._rows_per_mac, self.rows
        banks = self._banks

        def at(mac, bank, slot):                 # the index of `scores`
            return (mac * banks + bank) * rows_per_mac + slot
        moves = [(at(mac, bank, slot), at(mac + 1, bank, slot) if mac < macs_per_lane - 1
                  else at(0, bank, slot + 1))
                 for mac in range(macs_per_lane) for bank in range(banks)
                 for slot in range(rows_per_mac)
                 if mac < macs_per_lane - 1 or slot < rows_per_mac - 1]  # row u's bit to u + 1's
        width = Shape.cast(self._arith.score_shape).width
        groups = [(lo, min(lo + SCORE_SEL_BITS, width))
                  for lo in range(0, width, SCORE_SEL_BITS)]
        parts = []
        for copy, (lo, hi) in enumerate(groups):
            sel = Signal(banks * rows, name=f"score_sel{copy}", attrs={"keep": 1})
            go_bank = [Signal(name=f"score_go{copy}_bank{b}", attrs={"keep": 1})
                       for b in range(banks)]
            m.d.sync += [go_bank[b].eq(control.go_next & _is_bank(control.bank_next, b, banks))
                         for b in range(banks)]
            step = [0] * (banks * rows)
            for src, dst in moves:
                step[dst] = sel[src]
            for b in range(banks):
                step[at(0, b, 0)] = go_bank[b]
            m.d.sync += sel.eq(Cat(*step))
            parts.append(or_all(Mux(sel[i], self.scores[i][lo:hi], 0)
                                for i in range(banks * rows)))
        return Cat(*parts)

    def _score_read(self, m, control):
        """A float lane's stage 0 score: its groups' score memories are read a cycle ahead,
        at the (bank, slot) of the row after the counters' (row 0 of the starting bank at
        `go`), so that row u's score comes out in the cycle the counters hold u, of each
        group; the row's MAC selects. The read address is a register of its own, a row
        ahead of the counters (loaded at `go_next`): a block RAM's address register must
        take it as it is, where a multiplexer with a constant before it would become a
        synchronous reset that the block has not. B r registers a group and their one-hot
        AND-OR (`_score_selection`) would be most of a float lane's flip-flops and a tenth
        of its LUTs, where a block RAM is free. Returns the score (combinational)."""
        groups = self._macs_per_lane
        at = self.score_at
        at_mac = Signal(range(groups), name="score_at_mac")
        at_slot = Signal.like(at.slot, name="score_at_slot")
        at_bank = Signal.like(at.bank, name="score_at_bank")
        with m.If(control.go_next):
            m.d.sync += [at_mac.eq(0), at_slot.eq(0), at_bank.eq(control.bank_next)]
        with m.Elif(at_mac == groups - 1):
            m.d.sync += [at_mac.eq(0), at_slot.eq(at_slot + 1)]
        with m.Else():
            m.d.sync += at_mac.eq(at_mac + 1)
        m.d.comb += [at.bank.eq(at_bank), at.slot.eq(at_slot)]
        if groups == 1:
            return self.score_rd[0]
        return Array(self.score_rd)[control.mac]

    def _read_ports(self, m, control, m_rd, l_rd):
        """The m and l read addresses: row u during a pass, else the drain's `drain_u`
        (l, and m with a float format, whose drain reads m too)."""
        drain_addr = Mux(control.run_rd, control.u_rd, self.drain_u)
        m.d.comb += [l_rd.addr.eq(drain_addr), self.l_rd.eq(l_rd.data)]
        if isinstance(self._arith, FloatArith):
            m.d.comb += [m_rd.addr.eq(drain_addr), self.m_rd.eq(m_rd.data)]
        else:
            m.d.comb += m_rd.addr.eq(control.u)

    def _stage_one(self, m, control, score, below):
        """Stage 1's registers: the score (m_init for a masked row), the row's control and
        its mask. Returns (the row's control as a `_Row` of u, mac, slot, bank and first,
        the score, the mask)."""
        arith = self._arith
        x1 = Signal(arith.score_shape)
        # named: a tuple of Signal.like takes no name from its targets
        u1 = Signal.like(control.u, name="u1")
        mac1 = Signal.like(control.mac, name="mac1")
        slot1 = Signal.like(control.slot, name="slot1")
        # passes overlap: each row carries its own
        bank1, first1 = Signal(range(self._banks)), Signal()
        masked = self.mask.causal & below
        mask1 = Signal()
        m.d.sync += [control.valid[0].eq(control.run), x1.eq(force(score, masked, arith.m_init)),
                     u1.eq(control.u), mac1.eq(control.mac), slot1.eq(control.slot),
                     bank1.eq(control.bank), first1.eq(control.first), mask1.eq(masked)]
        return _Row(u=u1, mac=mac1, slot=slot1, bank=bank1, first=first1), x1, mask1

    def _write_back(self, m, control, m_wr, l_wr, u_w, m_new_w, l_new):
        """The write-back stage: the row's new m and l into their memories."""
        valid = control.valid[self.stages(self._arith) - 1]
        m.d.comb += [
            m_wr.addr.eq(u_w), m_wr.data.eq(m_new_w), m_wr.en.eq(valid),
            l_wr.addr.eq(u_w), l_wr.data.eq(l_new), l_wr.en.eq(valid),
        ]

    def _ready_flags(self, m, bus_valid, bus_u, bus_bank):
        """`ready[b]`: set as the MACs' (bank, slot) registers hold the pass's last row,
        whose bus write is registered here beside the MACs' bus registers; cleared by
        `consume[b]`."""
        bus_last, bus_last_bank = Signal(), Signal(range(self._banks))
        m.d.sync += [bus_last.eq(bus_valid & (bus_u == self.rows - 1)),
                     bus_last_bank.eq(bus_bank)]
        for b in range(self._banks):
            with m.If(bus_last & (bus_last_bank == b)):
                m.d.sync += self.ready[b].eq(1)
            with m.Elif(self.consume[b]):
                m.d.sync += self.ready[b].eq(0)

    def _bus(self, m, valid, ctrl, up, e):
        """(up, e) of the row with `ctrl` onto the bus, which the MACs register."""
        u, mac, slot, bank = ctrl
        m.d.comb += [self.pa.valid.eq(valid), self.pa.mac.eq(mac), self.pa.slot.eq(slot),
                     self.pa.bank.eq(bank), self.pa.up.eq(up), self.pa.e.eq(e)]
        return valid, u, bank

    def _int8_row(self, m, valid, x1, m_rd, l_rd, first, ctrl, mask):
        """Stage 1 to the write-back of an int8 row: (bus valid, its u and bank, then the
        write-back's u, m and l); a `mask`ed row's e is 0. `m_rd`/`l_rd` are row u's m and
        l as read, `first` the block's first pass, whose m and l start at m_init and 0."""
        arith = self._arith
        stages, pipe = self.stages(arith), Stages(m)
        m_old = force(m_rd, first, arith.m_init)
        # l as read waits a cycle before the first pass's 0 is forced, from a kept copy of
        # `first` of its own: `first` is placed by m's comparison and differences, and its
        # route across the chip to l's first delay register was the int8 small preset's
        # worst path (10.7 ns). l still reaches the update `wait` + 1 cycles after stage 1.
        l_old = force(pipe.delay(l_rd, 1, "l_rd"), pipe.delay(first, 1, "first_l", keep=True), 0)
        # stage 1: the comparison and both differences, side by side (one carry chain deep)
        up = Signal(name="up")
        d_xm, d_mx = Signal(arith.diff_shape, name="d_xm"), Signal(arith.diff_shape, name="d_mx")
        x2, m_old2 = Signal.like(x1, name="x2"), Signal.like(x1, name="m_old2")
        m.d.sync += [up.eq(x1 > m_old), d_xm.eq(arith.sub(m, x1, m_old)),
                     d_mx.eq(arith.sub(m, m_old, x1)), x2.eq(x1), m_old2.eq(m_old)]
        # stage 2: select min - max (<= 0) into the scale's operand registers; the new max
        diff = Signal(arith.diff_shape, name="diff")
        m_new = Signal.like(x1, name="m_new")
        m.d.comb += diff.eq(Mux(up, d_mx, d_xm))
        m.d.sync += m_new.eq(Mux(up, x2, m_old2))
        # scale (pipelined: operands, products, sum, round and clamp), then exp2
        e = arith.exp2(m, arith.scale(m, diff, self.c))
        wait = arith.scale_latency + arith.exp2_latency        # from stage 2 to e
        up_e, m_new_e = pipe.delay(up, wait, "up"), pipe.delay(m_new, wait - 1, "m_new")
        l_old_e = pipe.delay(l_old, wait, "l_old")
        mask_e, *ctrl_e = (pipe.delay(value, wait + 1, name) for value, name in zip(
            [mask, *ctrl], ["mask", "u", "mac", "slot", "bank"]))
        e = Mux(mask_e, 0, e)
        # Either alpha or P is exactly one (see `Int8Arith.update`): one multiply for l.
        bus = self._bus(m, valid[stages - 1 - arith.update_latency], ctrl_e, up_e, e)
        l_new = arith.update(m, up_e, e, l_old_e, 1)
        u_w, m_new_w = (pipe.delay(value, arith.update_latency, name)
                        for value, name in ((ctrl_e[0], "u_w"), (m_new_e, "m_new_w")))
        return (*bus, u_w, m_new_w, l_new)

    def _float_row(self, m, valid, x1, m_rd, l_rd, first, ctrl, mask):
        """Stage 1 to the write-back of a float row (see the module docstring); a
        `mask`ed row's e is 0. `m_rd`/`l_rd` and `first` as `_int8_row` takes them."""
        arith = self._arith
        stages, pipe = self.stages(arith), Stages(m)
        mask = pipe.delay(mask, arith.scale_latency + arith.exp_arg_latency + arith.exp2_latency,
                          "mask_e")
        names = ["m_old", "l_old", "u", "mac", "slot", "bank"]
        x = arith.scale(m, x1, self.c)
        # the wide data (m, l) in memories where it waits long (`Stages.delay`'s ram), after
        # a register in the fabric: m and l leave the lane's block RAMs with their 5.6 ns
        # clock-to-output, and a delay's block RAM written straight from them is a route
        # across the chip (the fp16 2x2's worst path, 11.3 ns). The register takes the word
        # as read, and the first pass's m_init or 0 is forced after it: a LUT between the
        # block RAM and the register was the 2x2's worst path again (10.8 ns).
        first_in = pipe.delay(first, 1, "first_in")
        m_old, l_old = (pipe.delay(force(pipe.delay(value, 1, f"{name}_in"), first_in, init),
                                   arith.scale_latency - 1, name, ram=True)
                        for value, name, init in ((m_rd, "m_old", arith.m_init),
                                                  (l_rd, "l_old", 0)))
        ctrl = [pipe.delay(value, arith.scale_latency, name)
                for value, name in zip(ctrl, names[2:])]
        z, up = arith.exp_arg(m, x, m_old)
        m_new = pipe.delay(arith.maximum(m, m_old, x),
                           arith.exp_arg_latency - arith.maximum_latency, "m_new", ram=True)
        l_old = pipe.delay(l_old, arith.exp_arg_latency, "l_old", ram=True)
        ctrl = [pipe.delay(value, arith.exp_arg_latency, name)
                for value, name in zip(ctrl, names[2:])]
        e = Mux(mask, 0, arith.exp2(m, z))
        e_stage = self.e_stage(arith)
        m_new, l_old = (pipe.delay(value, arith.exp2_latency, name, ram=True)
                        for value, name in ((m_new, "m_new_e"), (l_old, "l_old")))
        up, *ctrl = (pipe.delay(value, arith.exp2_latency, name)
                     for value, name in zip([up, *ctrl], ["up_e", *names[2:]]))
        e32 = arith.to_float(m, e)
        ctrl_b = [pipe.delay(value, arith.to_float_latency, f"{name}_b")
                  for value, name in zip(ctrl, names[2:])]
        bus = self._bus(m, valid[e_stage + arith.to_float_latency - 1], ctrl_b,
                        pipe.delay(up, arith.to_float_latency, "up_b"), e32)
        l_new = pipe.delay(arith.update_l(m, up, e, l_old),
                           stages - e_stage - arith.update_l_latency, "l_new", ram=True)
        u_w = pipe.delay(ctrl[0], stages - e_stage, "u_w")
        m_new_w = pipe.delay(m_new, stages - e_stage, "m_new_w", ram=True)
        return (*bus, u_w, m_new_w, l_new)


def _is_bank(bank, b, banks):
    """`bank` == b, for two banks the bit or its complement."""
    if banks == 2:
        return bank if b else ~bank
    return bank == b


@dataclass(frozen=True)
class _Pass:
    """The pass control's signals, as `SoftmaxLane._pass_control` builds them: `run` a
    row is issued (stage 0), row `u` (`mac`, `slot`) of bank `bank`, `first` the block's
    first pass; `go` a pass starts (registered), `go_next` and `bank_next` its value and
    bank a cycle ahead, `pass_first` the starting pass's `first`; `valid` the valid flags
    of stages 1 .. S; `u_rd`/`run_rd` the kept copies of u and run for the read ports."""
    run: Signal
    u: Signal
    mac: Signal
    slot: Signal
    bank: Signal
    first: Signal
    go: Signal
    go_next: object
    bank_next: object
    pass_first: object
    valid: list
    u_rd: Signal
    run_rd: Signal


@dataclass(frozen=True)
class _Row:
    """A row's control in stage 1, which it carries down the pipeline (passes overlap)."""
    u: Signal
    mac: Signal
    slot: Signal
    bank: Signal
    first: Signal
