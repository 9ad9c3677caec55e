"""The parallel softmax: one `SoftmaxLane` per EXP module, L = E / p lanes per MAC line.

With b = 1 every softmax step is element-wise over the rows of the Q block, so
the EXP unit is E independent lanes. A lane owns `macs_per_lane` (q/L) MACs of
its line and keeps the running max m and sum l of their r*q/L rows in two small
lane-local memories. After the scores of K_j are in the MACs' bank j mod 2, a
start pulse from the line makes each lane stream over its rows, one per cycle:

    stage 0  read the score through a q/L*r:1 multiplexer; read m, l
    stage 1  m_new = max(m, x); d = min(m, x) - m_new; z = scale(d, c)
    stage 2-4  e = exp2(z)                   (`Int8Arith.exp2`, 3 stages)
    stage 5  alpha, P = (e, 1) if x > m else (1, e); l = update_l(alpha, l, P);
             write m, l; put (P, alpha) on the line-local bus to the MAC

Either m - m_new or x - m_new is zero, and exp2(0) is exactly one, so one exp2
per row gives both alpha and P bit for bit as the format's twins do (one EXP
module per lane, hence E = number of lanes). On the block's first row (`first`)
m and l read as m_init and 0, so nothing is cleared between blocks.

A pass on bank b ends with `ready[b]` set; the core clears it (`consume[b]`) as
V_j enters the array, the single interlock of the schedule. A pass starts only
when the previous one has left the pipeline (no read-after-write hazard on m and
l); a start pulse arriving while busy waits in a one-deep pending register.
Between blocks the `l` memory's read port serves the drain (`drain_u`, `l_rd`).
"""

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .formats import Int8Arith

__all__ = ["pa_layout", "start_layout", "SoftmaxLane", "LANE_LATENCY"]

#: cycles from a row's issue to its (P, alpha) on the bus (stage 0 .. the bus register)
LANE_LATENCY = 6


def pa_layout(*, arith, macs_per_lane, rows_per_mac):
    """The lane's write bus to its MACs: (P, alpha) of row (`mac`, `slot`) in bank `bank`."""
    return data.StructLayout({
        "valid": 1, "mac": range(macs_per_lane), "slot": range(rows_per_mac), "bank": 1,
        "p": arith.p_shape, "alpha": arith.p_shape,
    })


def start_layout():
    """The line's start pulse: scores of bank `bank` are complete; `first`: row 0 of the block."""
    return data.StructLayout({"valid": 1, "bank": 1, "first": 1})


class SoftmaxLane(wiring.Component):
    """One EXP lane over `macs_per_lane` MACs with `rows_per_mac` rows each.

    Ports: `scores` the MACs' score registers (index (mac * 2 + bank) * r + slot);
    `start` the line's pulse; `c` the softmax constant; `pa` the write bus;
    `ready`/`consume` the per-bank done flags; `active` a row is in flight
    (issued and not yet written back: r*q/L + 5 cycles per pass); `drain_u`/`l_rd` the drain's read of l (one cycle latency, only while
    the lane is idle). Row u of the lane is MAC u mod q/L, slot u div q/L.
    """

    def __init__(self, *, arith, macs_per_lane, rows_per_mac):
        if not isinstance(arith, Int8Arith):
            raise TypeError(f"SoftmaxLane: arith must be an Int8Arith, not {arith!r}")
        for name, value in (("macs_per_lane", macs_per_lane), ("rows_per_mac", rows_per_mac)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"SoftmaxLane: {name} must be a positive integer, not {value!r}")
        self._arith = arith
        self._ql, self._r = macs_per_lane, rows_per_mac
        rows = macs_per_lane * rows_per_mac
        super().__init__({
            "scores": In(data.ArrayLayout(arith.score_shape, 2 * rows)),
            "start": In(start_layout()),
            "c": In(arith.c_shape),
            "pa": Out(pa_layout(arith=arith, macs_per_lane=macs_per_lane,
                                rows_per_mac=rows_per_mac)),
            "ready": Out(2),
            "consume": In(2),
            "active": Out(1),
            "drain_u": In(range(rows)),
            "l_rd": Out(arith.l_shape),
        })

    @property
    def rows(self):
        return self._ql * self._r

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
        v = [Signal(name=f"v{s}") for s in range(1, 6)]   # valid of stages 1..5
        busy = run | v[0] | v[1] | v[2] | v[3] | v[4]
        go = ~busy & (pend | self.start.valid)
        with m.If(go):
            m.d.sync += [run.eq(1), u.eq(0), mac.eq(0), slot.eq(0),
                         bank.eq(Mux(pend, pend_bank, self.start.bank)),
                         first.eq(Mux(pend, pend_first, self.start.first))]
            m.d.sync += pend.eq(pend & self.start.valid)
        with m.Elif(self.start.valid):
            m.d.sync += pend.eq(1)
        with m.If(self.start.valid):
            m.d.sync += [pend_bank.eq(self.start.bank), pend_first.eq(self.start.first)]
        with m.If(run):
            m.d.sync += u.eq(u + 1)
            with m.If(mac == ql - 1):
                m.d.sync += [mac.eq(0), slot.eq(slot + 1)]
            with m.Else():
                m.d.sync += mac.eq(mac + 1)
            with m.If(u == R - 1):
                m.d.sync += run.eq(0)
        m.d.comb += self.active.eq(busy)         # a row in flight, issue to write-back

        # -- stage 0: score multiplexer, m/l read ----------------------------------------
        scores = Array([self.scores[i] for i in range(2 * R)])
        x0 = scores[(mac * 2 + bank) * r + slot]
        m.d.comb += [m_rd.addr.eq(u), l_rd.addr.eq(Mux(run, u, self.drain_u)),
                     self.l_rd.eq(l_rd.data)]
        x1 = Signal(A.score_shape)
        u1, mac1, slot1 = Signal.like(u), Signal.like(mac), Signal.like(slot)
        m.d.sync += [v[0].eq(run), x1.eq(x0), u1.eq(u), mac1.eq(mac), slot1.eq(slot)]

        # -- stage 1: new max and the exp2 argument ---------------------------------------
        m_old = Mux(first, A.m_init, m_rd.data)
        l_old = Mux(first, 0, l_rd.data)
        up = x1 > m_old
        m_new = A.max(m, m_old, x1)
        z = A.scale(m, A.sub(m, Mux(up, m_old, x1), m_new), self.c)
        z2 = Signal(A.x_shape)
        stage = [(Signal(name="up2"), up), (Signal(A.score_shape, name="m_new2"), m_new),
                 (Signal(A.l_shape, name="l_old2"), l_old), (Signal.like(u, name="u2"), u1),
                 (Signal.like(mac, name="mac2"), mac1), (Signal.like(slot, name="slot2"), slot1)]
        m.d.sync += [v[1].eq(v[0]), z2.eq(z)] + [s.eq(val) for s, val in stage]

        # -- stages 2-4: exp2; carry the rest along --------------------------------------
        e = A.exp2(m, z2)
        carried = [s for s, _ in stage]
        for k in range(A.exp2_latency):
            nxt = [Signal.like(s, name=f"{s.name[:-1]}{3 + k}") for s in carried]
            m.d.sync += [n.eq(s) for n, s in zip(nxt, carried)]
            carried = nxt
        m.d.sync += [v[2].eq(v[1]), v[3].eq(v[2]), v[4].eq(v[3])]
        assert A.exp2_latency == 3, "the valid chain assumes a 3-stage exp2"
        up5, m_new5, l_old5, u5, mac5, slot5 = carried

        # -- stage 5: alpha and P, the new l, write back ----------------------------------
        alpha = Mux(up5, e, A.one)
        p = Mux(up5, A.one, e)
        m.d.comb += [
            m_wr.addr.eq(u5), m_wr.data.eq(m_new5), m_wr.en.eq(v[4]),
            l_wr.addr.eq(u5), l_wr.data.eq(A.update_l(m, alpha, l_old5, p)), l_wr.en.eq(v[4]),
        ]
        m.d.sync += [self.pa.valid.eq(v[4]), self.pa.mac.eq(mac5), self.pa.slot.eq(slot5),
                     self.pa.bank.eq(bank), self.pa.p.eq(p), self.pa.alpha.eq(alpha)]
        for b in range(2):
            with m.If(v[4] & (u5 == R - 1) & (bank == b)):
                m.d.sync += self.ready[b].eq(1)
            with m.Elif(self.consume[b]):
                m.d.sync += self.ready[b].eq(0)
        return m
