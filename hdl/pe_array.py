"""The PE array: `mac_lines` (p) lines of `macs_per_line` (q) MACs, each line with its softmax lanes.

The array is fed by one `word` per cycle (`attenio.hdl.mac.word_layout`): it
enters MAC 0 of every line and moves one MAC per cycle along the line
(systolic forwarding), so no K/V net spans more than one MAC and the only
array-wide net is the entry register's fan-out to the p lines.

Besides forwarding, a line chains the partial scores of each group of s MACs
(a row split over s MACs, `attenio.hdl.mac`), starts its L lanes
(`attenio.hdl.softmax.SoftmaxLane`, q/(L s) groups each) when its last MAC has
written the last slot's score, and it multiplexes the O accumulators of a
group (one chunk of s elements of a row) and the lanes' running sums l for the
normalizer's drain (`drain_signature`).
"""

from amaranth.hdl import Array, Module, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from attenio import validate

from . import hierarchy
from .formats import FloatArith
from .formats.dsp import and_all, or_all
from .kv_buffer import mask_layout
from .mac import MAC, check_arith, pick_layout, word_layout
from .softmax import SoftmaxLane, start_layout

#: bits of the drain's output per copy of its line select (`PEArray`)
DRAIN_SELECT_BITS = 8

__all__ = ["drain_signature", "MacLine", "PEArray"]


def drain_signature(*, arith, mac_lines, macs_per_line, rows_per_mac, head_dim, lanes, split=1):
    """The normalizer's read port into the array (from the normalizer's side): the O chunk
    at `addr` of group `mac` of line `line` (element g from the group's MAC g), and the
    running sum l of row `u` of lane `lane` of that line, answered on `o` and `l`
    `PEArray.drain_read_latency` cycles later; a float format also answers the row's
    running max on `m` (a row whose max ends NaN or +inf outputs NaN)."""
    extra = {"m": In(arith.score_shape)} if isinstance(arith, FloatArith) else {}
    return wiring.Signature({
        "addr": Out(range(rows_per_mac * head_dim // split)),
        "u": Out(range(rows_per_mac * (macs_per_line // lanes // split))),
        "mac": Out(range(macs_per_line // split)),
        "lane": Out(range(lanes)),
        "line": Out(range(mac_lines)),
        "o": In(data.ArrayLayout(arith.o_shape, split)),
        "l": In(arith.l_shape),
        **extra,
    })


def _line_signature(*, arith, mac_lines, macs_per_line, rows_per_mac, head_dim, lanes, split):
    """The ports of a MAC line, and of the array of lines (see `MacLine`)."""
    word = word_layout(mac_lines=mac_lines, macs_per_line=macs_per_line,
                       rows_per_mac=rows_per_mac, head_dim=head_dim, split=split,
                       element=arith.element_shape)
    return {
        "wi": In(word),
        "pick_next": In(pick_layout(rows_per_mac=rows_per_mac)),
        "tail": Out(word),
        "c": In(arith.c_shape),
        "mask": In(mask_layout(max_seq_len=arith.max_seq_len)),
        "ready": Out(2),
        "consume": In(2),
        "exp_active": Out(1),
        "drain": In(drain_signature(arith=arith, mac_lines=mac_lines, macs_per_line=macs_per_line,
                                    rows_per_mac=rows_per_mac, head_dim=head_dim, lanes=lanes,
                                    split=split)),
    }


class MacLine(wiring.Component):
    """One line of q MACs in groups of `split` and its L = `lanes` softmax lanes (q/L MACs,
    q/(L s) groups each). Every line is the same module: its index is an input.

    Ports: `line_id` the line's index (Q words are addressed by it); `row_base` the block
    row of its first group's slot 0 (line_id * q/s); `wi` the entry word, and `pick_next`
    its (bank, slot) address a cycle ahead (`RowReplay`), which the line registers for
    MAC 0's (up, e) read; `tail` the word leaving the last MAC; `c` the softmax
    constant and `mask` the block's causal mask for the lanes; `ready`/`consume` the
    lanes' per-bank "(P, alpha) written" flags, ANDed, and their clear strobes;
    `exp_active` some lane has a row in flight; `drain` the read port of the normalizer
    (its `line` is ignored here).
    """

    def __init__(self, *, arith, mac_lines, macs_per_line, rows_per_mac, head_dim, lanes,
                 split=1):
        check_arith("MacLine", arith)
        validate.positive("MacLine", mac_lines=mac_lines, macs_per_line=macs_per_line,
                          rows_per_mac=rows_per_mac, head_dim=head_dim, lanes=lanes)
        validate.lanes_per_line(exp_units=lanes * mac_lines, mac_lines=mac_lines,
                                macs_per_line=macs_per_line, owner="MacLine")
        validate.split("MacLine", split, head_dim=head_dim, macs_per_line=macs_per_line,
                       lanes=lanes)
        self._arith = arith
        self._p, self._q, self._r, self._d = mac_lines, macs_per_line, rows_per_mac, head_dim
        self._lanes, self._s = lanes, split
        super().__init__({"line_id": In(range(mac_lines)),
                          "row_base": In(range(mac_lines * macs_per_line // split * rows_per_mac)),
                          **_line_signature(
            arith=arith, mac_lines=mac_lines, macs_per_line=macs_per_line,
            rows_per_mac=rows_per_mac, head_dim=head_dim, lanes=lanes, split=split)})

    #: cycles from a drain address to its O and l on the line's outputs: the memories'
    #: synchronous read, then the MAC and lane selects registered
    drain_read_latency = 2

    def elaborate(self, platform):
        m = Module()
        A, q, r, L, s = self._arith, self._q, self._r, self._lanes, self._s
        ql = q // L
        gl = ql // s                             # groups per lane
        drain = self.drain
        # MAC 0's (up, e) read address, from a register of this line's own: the entry
        # word's fields are one register for every line, and the address is MAC 0's
        entry_pick = Signal.like(self.pick_next, name="entry_pick", attrs={"keep": 1})
        m.d.sync += entry_pick.eq(self.pick_next)
        macs = []
        for c in range(q):
            mac = MAC(arith=A, mac_lines=self._p, macs_per_line=q, rows_per_mac=r,
                      head_dim=self._d, macs_per_lane=ql, index=c, lane_index=(c // s) % gl,
                      split=s)
            m.submodules[f"mac{c}"] = mac
            m.d.comb += [mac.line_id.eq(self.line_id),
                         mac.wi.eq(self.wi if c == 0 else macs[-1].wo),
                         mac.pick_in.eq(entry_pick if c == 0 else macs[-1].pick_out)]
            if mac.position:
                m.d.comb += mac.chain_in.eq(macs[-1].chain_out)
            m.d.comb += mac.drain_addr.eq(drain.addr)
            macs.append(mac)
        groups = [macs[k:k + s] for k in range(0, q, s)]
        tail = macs[-1].wo
        m.d.comb += self.tail.eq(tail)

        # The last MAC writes the last slot's score `MAC.score_latency` cycles after its
        # word leaves it: the lanes may start then.
        start_d = [Signal(start_layout(), name=f"start_d{k}")
                   for k in range(MAC.score_latency(A, s) + 1)]
        m.d.comb += [
            start_d[0].valid.eq(tail.valid & tail.is_s & tail.klast & (tail.slot == r - 1)),
            start_d[0].bank.eq(tail.bank), start_d[0].first.eq(tail.first),
        ]
        m.d.sync += [start_d[k].eq(start_d[k - 1]) for k in range(1, len(start_d))]
        lanes = []
        for g in range(L):
            lane = SoftmaxLane(arith=A, macs_per_lane=gl, rows_per_mac=r,
                               slot_stride=self._p * q // s)
            m.submodules[f"lane{g}"] = lane
            for k, group in enumerate(groups[g * gl:(g + 1) * gl]):
                for i in range(2 * r):
                    m.d.comb += lane.scores[k * 2 * r + i].eq(group[-1].score[i])
                m.d.comb += [mac.pa.eq(lane.pa) for mac in group]
            m.d.comb += [lane.start.eq(start_d[-1]), lane.start_next.eq(start_d[-2]),
                         lane.c.eq(self.c), lane.mask.eq(self.mask),
                         lane.row_base.eq(self.row_base + g * gl),
                         lane.consume.eq(self.consume), lane.drain_u.eq(drain.u)]
            lanes.append(lane)
        m.d.comb += [self.ready[b].eq(and_all(lane.ready[b] for lane in lanes)) for b in range(2)]
        m.d.comb += self.exp_active.eq(or_all(lane.active for lane in lanes))

        # Drain: memories answer one cycle after the address; select the group, then register.
        mac_sel = Signal.like(drain.mac)
        lane_sel = Signal.like(drain.lane)
        m.d.sync += [mac_sel.eq(drain.mac), lane_sel.eq(drain.lane)]
        m.d.sync += [drain.o[g].eq(Array([group[g].o_rd for group in groups])[mac_sel])
                     for g in range(s)]
        m.d.sync += drain.l.eq(Array([lane.l_rd for lane in lanes])[lane_sel])
        if isinstance(A, FloatArith):
            m.d.sync += drain.m.eq(Array([lane.m_rd for lane in lanes])[lane_sel])
        return m


class PEArray(wiring.Component):
    """p MAC lines fed by one entry word, with E = `exp_units` lanes in all (E / p per line).

    The ports are `MacLine`'s but `line_id` and `row_base`, except that `ready` is
    ANDed over the lines and registered (the AND spans the array, and the replay's launch
    decision starts from it), `exp_active` ORed, `tail` is line 0's, and the drain's
    `line` selects the line (one more register). While Verilog is emitted the lines are
    one module, `LINE_MODULE`, instantiated p times (`attenio.hdl.hierarchy`).
    """

    #: the Verilog module name of a line when the array is emitted
    LINE_MODULE = "attenio_mac_line"
    #: cycles from every lane's `ready` to the array's (the AND's register)
    ready_latency = 1

    def __init__(self, *, arith, mac_lines, macs_per_line, rows_per_mac, head_dim, exp_units,
                 split=1):
        check_arith("PEArray", arith)
        validate.positive("PEArray", rows_per_mac=rows_per_mac, head_dim=head_dim)
        lanes = validate.lanes_per_line(exp_units=exp_units, mac_lines=mac_lines,
                                        macs_per_line=macs_per_line, owner="PEArray")
        validate.split("PEArray", split, head_dim=head_dim, macs_per_line=macs_per_line,
                       lanes=lanes)
        self._arith = arith
        self._p, self._q, self._r, self._d, self._lanes = (mac_lines, macs_per_line, rows_per_mac,
                                                          head_dim, lanes)
        self._s = split
        super().__init__({"line_id": In(range(mac_lines)),
                          "row_base": In(range(mac_lines * macs_per_line // split * rows_per_mac)),
                          **_line_signature(
            arith=arith, mac_lines=mac_lines, macs_per_line=macs_per_line,
            rows_per_mac=rows_per_mac, head_dim=head_dim, lanes=lanes, split=split)})

    #: cycles from a drain address to its O and l: the line's, then the line select
    drain_read_latency = MacLine.drain_read_latency + 1

    @property
    def lanes_per_line(self):
        return self._lanes

    def elaborate(self, platform):
        m = Module()
        drain = self.drain
        def new_line():
            return MacLine(arith=self._arith, mac_lines=self._p, macs_per_line=self._q,
                           rows_per_mac=self._r, head_dim=self._d, lanes=self._lanes,
                           split=self._s)
        proto = new_line()
        lines = []
        for i in range(self._p):
            if hierarchy.collecting():      # one module, instantiated
                line = proto.signature.create(path=(f"line{i}",))
                m.submodules[f"line{i}"] = hierarchy.instance(self.LINE_MODULE, proto, line)
            else:
                line = proto if i == 0 else new_line()
                m.submodules[f"line{i}"] = line
            m.d.comb += [line.line_id.eq(i), line.row_base.eq(i * (self._q // self._s)),
                         line.wi.eq(self.wi), line.pick_next.eq(self.pick_next),
                         line.c.eq(self.c), line.mask.eq(self.mask),
                         line.consume.eq(self.consume),
                         line.drain.addr.eq(drain.addr), line.drain.u.eq(drain.u),
                         line.drain.mac.eq(drain.mac), line.drain.lane.eq(drain.lane)]
            lines.append(line)
        m.d.comb += self.tail.eq(lines[0].tail)
        m.d.sync += [self.ready[b].eq(and_all(line.ready[b] for line in lines)) for b in range(2)]
        m.d.comb += self.exp_active.eq(or_all(line.exp_active for line in lines))
        # The line select follows the data through the line's registers, then one more here.
        # Its last register is copied (kept) for each DRAIN_SELECT_BITS bits it selects: one
        # register driving every multiplexer's select input took a 10.8 ns route.
        line_sel = [Signal.like(drain.line, name=f"drain_line_{k}")
                    for k in range(MacLine.drain_read_latency - 1)]
        prev = drain.line
        for sel in line_sel:
            m.d.sync += sel.eq(prev)
            prev = sel
        names = ["o", "l"] + (["m"] if isinstance(self._arith, FloatArith) else [])
        for name in names:
            out = Value.cast(getattr(drain, name))
            values = [getattr(line.drain, name) for line in lines]
            for lo in range(0, len(out), DRAIN_SELECT_BITS):
                hi = min(lo + DRAIN_SELECT_BITS, len(out))
                sel = Signal.like(drain.line, name=f"drain_line_{name}{lo}", attrs={"keep": 1})
                m.d.sync += [sel.eq(prev),
                             out[lo:hi].eq(Array([Value.cast(v)[lo:hi] for v in values])[sel])]
        return m
