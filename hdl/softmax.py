"""The parallel softmax: one `SoftmaxLane` per EXP module, L = E / p lanes per MAC line.

With b = 1 every softmax step is element-wise over the rows of the Q block, so
the EXP unit is E independent lanes. A lane owns `macs_per_lane` (q/L) MACs of
its line and keeps the running max m and sum l of their r*q/L rows in two small
lane-local memories. After the scores of K_j are in the MACs' bank j mod 2, a
start pulse from the line makes each lane stream over its rows, one per cycle:

    stage 0      select the score (one-hot, from the bank's q/L*r); read m, l
    stage 1      up = x > m, and both x - m and m - x (three carry chains side by side)
    stage 2      d = min(m, x) - max(m, x) (m - x if up else x - m), selected into
                 the scale's operand registers; m_new = max(m, x)
    stage 3-7    z = scale(d, c)     (`Int8Arith.scale`: products, their sum in pairs,
                                      round beside the bounds' comparisons, clamp)
    stage 8-14   e = exp2(z)         (`Int8Arith.exp2`: table, its register, the
                                      product's operands, product and relay, sum, shift)
    stage 15-17  (up, e) onto the line-local bus, registered in each MAC (stage 15):
                 (alpha, P) = (e, 1) if up else (1, e); l = update(up, e, l)
                 (`Int8Arith.update`: operand, products, sum)
    stage 18     write m and l

Every multiply has a register before and after it (ECP5 MULT18X18D blocks with
fabric registers on both sides, their partial products summed in a stage of
their own), and every stage passes through one adder or comparison at most
(stage 1 computes both differences so that stage 2 only selects), which is what
lets the lane close timing; the stages cost latency only, which the schedule
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
row ahead, so that the row's mask is a register at stage 0 (one subtraction or
comparison a cycle). A masked row enters stage 1 with the score m_init (-inf for a
float format), so its max does not move
(up = 0, m unchanged), and its e is forced to 0 where it leaves exp2: P = 0,
alpha = 1, l and O add zero.

A pass on bank b ends with `ready[b]` set as its last row's (up, e) reach the
MACs' (bank, slot) registers, a cycle after their bus registers
(`SoftmaxLane.ready_stage`), so a MAC selects a V word's pair from those
registers alone; the core clears it
(`consume[b]`) as V_j enters the array, the single interlock of the schedule. A pass starts when
the previous one has issued its last row and at least S + 1 cycles after the
previous start (S = `SoftmaxLane.stages`), so each row reads m and l after the previous
pass wrote them; a start pulse arriving earlier waits in a one-deep pending
register.
Between blocks the `l` memory's read port serves the drain (`drain_u`, `l_rd`).

A float format (`FloatArith`) keeps m in fp32 and runs the row as

    stage 1      m_old, l_old (m_init = -inf and 0 on the block's first row)
    scale        x = fmul(S, c)                     (`FloatArith.scale`)
    exp_arg      z = to_fixed(-|x - m_old|), up = x > m_old; beside it
                 m_new = maximum(m_old, x)          (`FloatArith.exp_arg`, `maximum`)
    exp2         e = exp2(z)                        (the int8 format's)
    bus          (up, fp32(e)) onto the bus         (`FloatArith.to_float`), and
                 l = update_l(up, e, l_old)         (fixed point, as int8)
    write-back   m_new and l

and the drain also reads m (`m_rd`): a row whose max ends NaN or +inf outputs NaN.
"""

from amaranth.hdl import Cat, Module, Mux, Shape, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from attenio import validate
from attenio.regmap import MAX_HEAD_GROUP

from .formats import FloatArith, Int8Arith
from .formats.dsp import Stages, force, or_all
from .kv_buffer import mask_layout

__all__ = ["pa_layout", "start_layout", "SoftmaxLane"]

#: score bits selected by each copy of a lane's one-hot score selection register
SCORE_SEL_BITS = 5


def pa_layout(*, arith, macs_per_lane, rows_per_mac):
    """The lane's write bus to its MACs: (P, alpha) of row (`mac`, `slot`) in bank `bank`,
    as (`up`, `e`): (alpha, P) = (e, 1) if up else (1, e). The lane drives it from its
    pipeline's last stage without a register; each MAC registers it on arrival (`MAC`)."""
    return data.StructLayout({
        "valid": 1, "mac": range(macs_per_lane), "slot": range(rows_per_mac), "bank": 1,
        "up": 1, "e": arith.factor_shape,
    })


def start_layout():
    """The line's start pulse: scores of bank `bank` are complete; `first`: row 0 of the block."""
    return data.StructLayout({"valid": 1, "bank": 1, "first": 1})


class SoftmaxLane(wiring.Component):
    """One EXP lane over `macs_per_lane` MACs with `rows_per_mac` rows each.

    Ports: `scores` the MACs' score registers (index (mac * 2 + bank) * r + slot);
    `start` the line's pulse, and `start_next` what `start` will be in the next cycle
    (the lane registers its decision to start a pass); `c` the softmax constant; `mask`
    the block's causal mask and `row_base` the block row of the lane's first row (slot 0
    of its first MAC group), whose slot s rows lie `slot_stride` * s further; `pa` the
    write bus (unregistered, `pa_layout`); `ready`/`consume` the per-bank done flags;
    `active` a row is in flight (issued and not yet written back: r*q/L + `stages` cycles
    per pass);
    `drain_u`/`l_rd` the drain's read of l (one cycle latency, only while the lane is idle),
    and with a float format `m_rd` its read of m.
    Row u of the lane is MAC u mod q/L, slot u div q/L.
    """

    def __init__(self, *, arith, macs_per_lane, rows_per_mac, slot_stride=None):
        if not isinstance(arith, (Int8Arith, FloatArith)):
            raise TypeError(f"SoftmaxLane: arith must be an Int8Arith or a FloatArith, "
                            f"not {arith!r}")
        validate.positive("SoftmaxLane", macs_per_lane=macs_per_lane, rows_per_mac=rows_per_mac)
        self._arith = arith
        self._ql, self._r = macs_per_lane, rows_per_mac
        rows = macs_per_lane * rows_per_mac
        self._stride = macs_per_lane if slot_stride is None else slot_stride
        validate.integer("SoftmaxLane", "slot_stride", self._stride, lo=macs_per_lane)
        block = self._stride * rows_per_mac      # block rows of the whole array
        super().__init__({
            "scores": In(data.ArrayLayout(arith.score_shape, 2 * rows)),
            "start": In(start_layout()),
            "start_next": In(start_layout()),
            "c": In(arith.c_shape),
            "mask": In(mask_layout(max_seq_len=arith.max_seq_len)),
            "row_base": In(range(block)),
            "pa": Out(pa_layout(arith=arith, macs_per_lane=macs_per_lane,
                                rows_per_mac=rows_per_mac)),
            "ready": Out(2),
            "consume": In(2),
            "active": Out(1),
            "drain_u": In(range(rows)),
            "l_rd": Out(arith.l_shape),
            **({"m_rd": Out(arith.score_shape)} if isinstance(arith, FloatArith) else {}),
        })

    @property
    def rows(self):
        return self._ql * self._r

    #: cycles from a start pulse to the pass's first row in flight (the run register)
    start_latency = 1

    @staticmethod
    def _e_stage(arith):
        """The stage at which a row's e (fixed point) comes out of exp2."""
        if isinstance(arith, FloatArith):
            return 1 + arith.scale_latency + arith.exp_arg_latency + arith.exp2_latency
        return 2 + arith.scale_latency + arith.exp2_latency

    @staticmethod
    def stages(arith):
        """S, the valid stages after a row's issue (to exp2, then l's update and the
        write-back; a float format also waits for the bus's fp32 e): a row issued in
        cycle 0 writes m and l in cycle S, and a lane is busy (`active`) until S cycles
        after issuing its last row."""
        if isinstance(arith, FloatArith):
            return SoftmaxLane._e_stage(arith) + max(arith.update_l_latency,
                                                     arith.to_float_latency + 1)
        return SoftmaxLane._e_stage(arith) + arith.update_latency

    @staticmethod
    def bus_stage(arith):
        """The stage at which a row's (up, e) is in the MACs' bus registers (cycles after
        issue): to exp2, a float format's conversion to fp32, the bus register."""
        extra = arith.to_float_latency if isinstance(arith, FloatArith) else 0
        return SoftmaxLane._e_stage(arith) + extra + 1

    @staticmethod
    def ready_stage(arith):
        """The stage at which `ready` shows a pass's last row: with its (up, e) in the
        MACs' (bank, slot) registers, a cycle after their bus registers."""
        return SoftmaxLane.bus_stage(arith) + 1

    def elaborate(self, platform):
        m = Module()
        A, ql, r = self._arith, self._ql, self._r
        R = ql * r

        m.submodules.m_mem = m_mem = Memory(shape=A.score_shape, depth=R, init=[])
        m.submodules.l_mem = l_mem = Memory(shape=A.l_shape, depth=R, init=[])
        m_wr, l_wr = m_mem.write_port(), l_mem.write_port()
        m_rd, l_rd = m_mem.read_port(), l_mem.read_port()

        # -- pass control --------------------------------------------------------------
        run = Signal()
        u = Signal(range(R))
        mac = Signal(range(ql))
        slot = Signal(range(r))
        bank = Signal()
        first = Signal()
        pend = Signal()
        pend_bank = Signal()
        pend_first = Signal()
        S = self.stages(A)
        v = [Signal(name=f"v{s}") for s in range(1, S + 1)]   # valid of stages 1..S
        m.d.sync += [v[k].eq(v[k - 1]) for k in range(1, S)]
        # A pass may start in the cycle the previous one issues its last row, and S + 1
        # cycles after the previous start at the earliest: its row u then reads m and l
        # after the previous pass wrote them (`hold` counts that down). `go`, a pass
        # starts, restarts every counter and the score selection across the lane, so it is
        # a register: loaded with its own next value, from the next values of its terms
        # (below) and `start_next`.
        hold = Signal(range(S + 1))
        held = Signal(init=1)                    # hold == 0
        u_last = Signal()                        # u == R - 1, while `run`
        # Copies of u and run, kept, for l's read address (and m's, for float), which the
        # drain reads too: they sit beside the memory, which may sit across the line from
        # the lane's control (from `u` it was a 6.6 ns route to the address multiplexer).
        u_rd = Signal.like(u, name="u_rd", attrs={"keep": 1})
        run_rd = Signal(name="run_rd", attrs={"keep": 1})
        with m.If(~held):
            m.d.sync += [hold.eq(hold - 1), held.eq(hold == 1)]
        with m.If(run):
            m.d.sync += [u.eq(u + 1), u_last.eq(u == R - 2 if R > 1 else 1), u_rd.eq(u_rd + 1)]
            with m.If(mac == ql - 1):
                m.d.sync += [mac.eq(0), slot.eq(slot + 1)]
            with m.Else():
                m.d.sync += mac.eq(mac + 1)
            with m.If(u_last):
                m.d.sync += [run.eq(0), run_rd.eq(0)]
        # go = (~run | u_last) & held & (pend | start.valid), a cycle ahead. A start is
        # never followed by another (it clears held), and otherwise run becomes
        # run & ~u_last, u_last (while run) u == R - 2, held held | hold == 1, pend
        # pend | start.valid, and start.valid start_next.valid.
        go = Signal()
        sv, sv_next = self.start.valid, self.start_next.valid
        ends_next = ~run | u_last | (u == R - 2) if R > 1 else 1
        go_next = ~go & ends_next & (held | (hold == 1)) & (pend | sv | sv_next)
        m.d.sync += go.eq(go_next)
        # the bank a start at the next cycle takes: Mux(pend, pend_bank, start.bank) then
        bank_next = Mux(pend | sv, Mux(sv, self.start.bank, pend_bank), self.start_next.bank)
        # The causal threshold: pass j masks the rows whose offset slot*G + mac is below
        # it. `gap` is the threshold less row u's offset, stepped beside the counters (-1
        # along a slot, -G to the next: `slot_gap` is the threshold less slot*G), and
        # `below` is the comparison for the row the counters hold next, registered: row
        # u's mask is a flip-flop, not a comparison before the score register.
        G = self._stride
        n = A.max_seq_len
        block = G * r
        g = MAX_HEAD_GROUP
        thr = Signal(range(-(g * n + block), g * n + 1))
        # thr + step, the next pass's threshold, a cycle behind thr and the mask: passes
        # start S + 1 cycles apart at least, and a block's mask before its first pass
        thr_step = Signal.like(thr)
        base = Signal(range(g * n + block))
        gap = Signal(range(-(g * n + 2 * block + G), g * n + 1))
        slot_gap = Signal.like(gap)
        below = Signal()                           # row u's offset is below the threshold
        m.d.sync += [base.eq(self.mask.gdiag + self.row_base), thr_step.eq(thr + self.mask.step)]
        with m.If(run):
            with m.If(mac == ql - 1):
                m.d.sync += [slot_gap.eq(slot_gap - G), gap.eq(slot_gap - G),
                             below.eq(slot_gap > G)]
            with m.Else():
                m.d.sync += [gap.eq(gap - 1), below.eq(gap > 1)]
        pass_first = Mux(pend, pend_first, self.start.first)
        with m.If(go):
            # a block's first threshold is -base <= 0: no row is below it
            thr_new = Mux(pass_first, -base, thr_step)
            m.d.sync += [run.eq(1), u.eq(0), u_last.eq(R == 1), mac.eq(0), slot.eq(0),
                         run_rd.eq(1), u_rd.eq(0),
                         hold.eq(S), held.eq(0),
                         bank.eq(Mux(pend, pend_bank, self.start.bank)),
                         first.eq(pass_first), thr.eq(thr_new), gap.eq(thr_new),
                         slot_gap.eq(thr_new), below.eq(~pass_first & (thr_step > 0))]
            m.d.sync += pend.eq(pend & self.start.valid)
        with m.Elif(self.start.valid):
            m.d.sync += pend.eq(1)
        with m.If(self.start.valid):
            m.d.sync += [pend_bank.eq(self.start.bank), pend_first.eq(self.start.first)]
        # A row in flight, issue to write-back: run | v1 | ... | vS as a register of its
        # own, loaded with that OR's next value (run's is go | run & ~u_last, v1's run,
        # v[k]'s v[k-1]), so the OR of every lane's flag into the controller starts from
        # flip-flops free to sit towards it (from `run` it was an 8.8 ns route).
        m.d.sync += self.active.eq(go | run | or_all(v[:-1]))

        # -- stage 0: score multiplexer, m/l read ----------------------------------------
        # The score of row u is selected by a one-hot register of its own, kept, whose
        # bit moves from row to row as the pass runs: the selection is 2R wide for each of
        # a score's bits, one AND-OR per bit, no decode before it. One copy of the register
        # for each SCORE_SEL_BITS bits of the score, so that each sits beside its few
        # AND-ORs (one copy for all 20 bits was a 5.9 ns route). It shifts every cycle,
        # with no enable: the pass's last row shifts its bit out, so between passes it
        # holds zeros, and only the bank's first bit loads, from a kept pair of registers
        # per copy (go & the bank, set from their next values): a register beside the
        # copy, where the lane's control may sit across the line from its MACs.
        def at(k, b, t):                         # the index of `scores`
            return (k * 2 + b) * r + t
        moves = [(at(k, b, t), at(k + 1, b, t) if k < ql - 1 else at(0, b, t + 1))
                 for k in range(ql) for b in range(2) for t in range(r)
                 if k < ql - 1 or t < r - 1]     # row u's bit to row u + 1's
        width = Shape.cast(A.score_shape).width
        groups = [(lo, min(lo + SCORE_SEL_BITS, width))
                  for lo in range(0, width, SCORE_SEL_BITS)]
        x0 = []
        for g, (lo, hi) in enumerate(groups):
            sel = Signal(2 * R, name=f"score_sel{g}", attrs={"keep": 1})
            go_bank = [Signal(name=f"score_go{g}_bank{b}", attrs={"keep": 1}) for b in range(2)]
            m.d.sync += [go_bank[0].eq(go_next & ~bank_next), go_bank[1].eq(go_next & bank_next)]
            step = [0] * (2 * R)
            for src, dst in moves:
                step[dst] = sel[src]
            step[at(0, 0, 0)], step[at(0, 1, 0)] = go_bank
            m.d.sync += sel.eq(Cat(*step))
            x0.append(or_all(Mux(sel[i], self.scores[i][lo:hi], 0) for i in range(2 * R)))
        x0 = Cat(*x0)
        drain_addr = Mux(run_rd, u_rd, self.drain_u)
        m.d.comb += [l_rd.addr.eq(drain_addr), self.l_rd.eq(l_rd.data)]
        if isinstance(A, FloatArith):
            m.d.comb += [m_rd.addr.eq(drain_addr), self.m_rd.eq(m_rd.data)]
        else:
            m.d.comb += m_rd.addr.eq(u)
        x1 = Signal(A.score_shape)
        u1, mac1, slot1 = Signal.like(u), Signal.like(mac), Signal.like(slot)
        bank1, first1 = Signal(), Signal()      # passes overlap: each row carries its own
        masked = self.mask.causal & below
        mask1 = Signal()
        m.d.sync += [v[0].eq(run), x1.eq(force(x0, masked, A.m_init)), u1.eq(u), mac1.eq(mac),
                     slot1.eq(slot), bank1.eq(bank), first1.eq(first), mask1.eq(masked)]

        row = self._float_row if isinstance(A, FloatArith) else self._int8_row
        ctrl = [u1, mac1, slot1, bank1]
        bus_valid, bus_u, bus_bank, u_w, m_new_w, l_new = row(
            m, v, x1, force(m_rd.data, first1, A.m_init), force(l_rd.data, first1, 0), ctrl,
            mask1)

        # -- write-back stage: the new m and l ------------------------------------------------
        m.d.comb += [
            m_wr.addr.eq(u_w), m_wr.data.eq(m_new_w), m_wr.en.eq(v[S - 1]),
            l_wr.addr.eq(u_w), l_wr.data.eq(l_new), l_wr.en.eq(v[S - 1]),
        ]
        # The pass's last row on the bus, registered beside the MACs' bus registers; `ready`
        # rises as their (bank, slot) registers hold it
        bus_last, bus_last_bank = Signal(), Signal()
        m.d.sync += [bus_last.eq(bus_valid & (bus_u == R - 1)), bus_last_bank.eq(bus_bank)]
        for b in range(2):
            with m.If(bus_last & (bus_last_bank == b)):
                m.d.sync += self.ready[b].eq(1)
            with m.Elif(self.consume[b]):
                m.d.sync += self.ready[b].eq(0)
        return m

    def _bus(self, m, valid, ctrl, up, e):
        """(up, e) of the row with `ctrl` onto the bus, which the MACs register."""
        u, mac, slot, bank = ctrl
        m.d.comb += [self.pa.valid.eq(valid), self.pa.mac.eq(mac), self.pa.slot.eq(slot),
                     self.pa.bank.eq(bank), self.pa.up.eq(up), self.pa.e.eq(e)]
        return valid, u, bank

    def _int8_row(self, m, v, x1, m_old, l_old, ctrl, mask):
        """Stage 1 to the write-back of an int8 row: (bus valid, its u and bank, then the
        write-back's u, m and l); a `mask`ed row's e is 0."""
        A, S = self._arith, self.stages(self._arith)
        st = Stages(m)
        # stage 1: the comparison and both differences, side by side (one carry chain deep)
        up = Signal(name="up")
        d_xm, d_mx = Signal(A.diff_shape, name="d_xm"), Signal(A.diff_shape, name="d_mx")
        x2, m_old2 = Signal.like(x1, name="x2"), Signal.like(x1, name="m_old2")
        m.d.sync += [up.eq(x1 > m_old), d_xm.eq(A.sub(m, x1, m_old)),
                     d_mx.eq(A.sub(m, m_old, x1)), x2.eq(x1), m_old2.eq(m_old)]
        # stage 2: select min - max (<= 0) into the scale's operand registers; the new max
        diff = Signal(A.diff_shape, name="diff")
        m_new = Signal.like(x1, name="m_new")
        m.d.comb += diff.eq(Mux(up, d_mx, d_xm))
        m.d.sync += m_new.eq(Mux(up, x2, m_old2))
        # scale (pipelined: operands, products, sum, round and clamp), then exp2
        e = A.exp2(m, A.scale(m, diff, self.c))
        wait = A.scale_latency + A.exp2_latency        # from stage 2 to e
        up_e, m_new_e = st.delay(up, wait, "up"), st.delay(m_new, wait - 1, "m_new")
        l_old_e, mask_e, *ctrl_e = (st.delay(x, wait + 1, name) for x, name in zip(
            [l_old, mask, *ctrl], ["l_old", "mask", "u", "mac", "slot", "bank"]))
        e = Mux(mask_e, 0, e)
        # Either alpha or P is exactly one (see `Int8Arith.update`): one multiply for l.
        bus = self._bus(m, v[S - 1 - A.update_latency], ctrl_e, up_e, e)
        l_new = A.update(m, up_e, e, l_old_e, 1)
        u_w, m_new_w = (st.delay(x, A.update_latency, n) for x, n in ((ctrl_e[0], "u_w"),
                                                                     (m_new_e, "m_new_w")))
        return (*bus, u_w, m_new_w, l_new)

    def _float_row(self, m, v, x1, m_old, l_old, ctrl, mask):
        """Stage 1 to the write-back of a float row (see the module docstring); a
        `mask`ed row's e is 0."""
        A, S = self._arith, self.stages(self._arith)
        st = Stages(m)
        mask = st.delay(mask, A.scale_latency + A.exp_arg_latency + A.exp2_latency, "mask_e")
        names = ["m_old", "l_old", "u", "mac", "slot", "bank"]
        x = A.scale(m, x1, self.c)
        m_old, l_old, *ctrl = (st.delay(y, A.scale_latency, n)
                               for y, n in zip([m_old, l_old, *ctrl], names))
        z, up = A.exp_arg(m, x, m_old)
        m_new = st.delay(A.maximum(m, m_old, x), A.exp_arg_latency - A.maximum_latency, "m_new")
        l_old, *ctrl = (st.delay(y, A.exp_arg_latency, n) for y, n in zip([l_old, *ctrl],
                                                                         names[1:]))
        e = Mux(mask, 0, A.exp2(m, z))
        e_stage = self._e_stage(A)
        up, m_new, l_old, *ctrl = (st.delay(y, A.exp2_latency, n) for y, n in zip(
            [up, m_new, l_old, *ctrl], ["up_e", "m_new_e", *names[1:]]))
        e32 = A.to_float(m, e)
        ctrl_b = [st.delay(y, A.to_float_latency, f"{n}_b") for y, n in zip(ctrl, names[2:])]
        bus = self._bus(m, v[e_stage + A.to_float_latency - 1], ctrl_b,
                        st.delay(up, A.to_float_latency, "up_b"), e32)
        l_new = st.delay(A.update_l(m, up, e, l_old), S - e_stage - A.update_l_latency, "l_new")
        u_w, m_new_w = (st.delay(y, S - e_stage, n) for y, n in ((ctrl[0], "u_w"),
                                                                (m_new, "m_new_w")))
        return (*bus, u_w, m_new_w, l_new)
