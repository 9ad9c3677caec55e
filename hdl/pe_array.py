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
from .formats import FloatArith, check_arith
from .formats.dsp import and_all, or_all
from .kv_buffer import mask_layout
from .mac import MAC, pick_layout, word_layout
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


def _line_signature(*, arith, mac_lines, macs_per_line, rows_per_mac, head_dim, lanes, split,
                    banks, c_shape):
    """The ports of a MAC line, and of the array of lines (see `MacLine`), c of `c_shape`."""
    word = word_layout(mac_lines=mac_lines, macs_per_line=macs_per_line,
                       rows_per_mac=rows_per_mac, head_dim=head_dim, split=split,
                       element=arith.word_shape, banks=banks)
    return {
        "wi": In(word),
        "pick_next": In(pick_layout(rows_per_mac=rows_per_mac, banks=banks)),
        "tail": Out(word),
        "c": In(c_shape),
        "mask": In(mask_layout(max_seq_len=arith.max_seq_len)),
        "ready": Out(banks),
        "consume": In(banks),
        "exp_active": Out(1),
        "drain": In(drain_signature(arith=arith, mac_lines=mac_lines, macs_per_line=macs_per_line,
                                    rows_per_mac=rows_per_mac, head_dim=head_dim, lanes=lanes,
                                    split=split)),
    }


class MacLine(wiring.Component):
    """One line of q MACs in groups of `split` and its L = `lanes` softmax lanes (q/L MACs,
    q/(L s) groups each), with `banks` banks of scores and (P, alpha). Every line is the
    same module: its index is an input.

    Ports: `line_id` the line's index (Q words are addressed by it); `row_base` the block
    row of its first group's slot 0 (line_id * q/s); `wi` the entry word, and `pick_next`
    its (bank, slot) address a cycle ahead (`RowReplay`), which the line registers for
    MAC 0's (up, e) read; `tail` the word leaving the last MAC; `c` the softmax
    constant as the lanes take it (`lane_c_shape`) and `mask` the block's causal mask
    for the lanes; `ready`/`consume` the
    lanes' per-bank "(P, alpha) written" flags (`banks` of them), ANDed, and their clear
    strobes;
    `exp_active` some lane has a row in flight; `drain` the read port of the normalizer
    (its `line` is ignored here).
    """

    def __init__(self, *, arith, mac_lines, macs_per_line, rows_per_mac, head_dim, lanes,
                 split=1, banks=2):
        check_arith("MacLine", arith)
        validate.positive("MacLine", mac_lines=mac_lines, macs_per_line=macs_per_line,
                          rows_per_mac=rows_per_mac, head_dim=head_dim, lanes=lanes)
        validate.lanes_per_line(exp_units=lanes * mac_lines, mac_lines=mac_lines,
                                macs_per_line=macs_per_line, owner="MacLine")
        validate.split("MacLine", split, head_dim=head_dim, macs_per_line=macs_per_line,
                       lanes=lanes)
        validate.integer("MacLine", "banks", banks, lo=2)
        self._arith = arith
        self._p, self._q, self._r, self._d = mac_lines, macs_per_line, rows_per_mac, head_dim
        self._lanes, self._s, self._banks = lanes, split, banks
        super().__init__({"line_id": In(range(mac_lines)),
                          "row_base": In(range(mac_lines * macs_per_line // split * rows_per_mac)),
                          **_line_signature(
            arith=arith, mac_lines=mac_lines, macs_per_line=macs_per_line,
            rows_per_mac=rows_per_mac, head_dim=head_dim, lanes=lanes, split=split,
            banks=banks, c_shape=arith.lane_c_shape)})

    #: cycles from a drain address to its O and l on the line's outputs: the MACs' read
    #: (`MAC.drain_read_latency`), then the MAC and lane selects registered
    drain_read_latency = MAC.drain_read_latency + 1

    def elaborate(self, platform):
        m = Module()
        groups = self._macs(m)
        lanes = self._lanes_of(m, groups)
        self._drain(m, groups, lanes)
        return m

    def _macs(self, m):
        """The line's MACs, the word forwarded from each to the next: the groups (lists of
        `split` MACs)."""
        macs_per_line, split = self._q, self._s
        groups_per_lane = macs_per_line // self._lanes // split
        # MAC 0's (up, e) read address, from a register of this line's own: the entry
        # word's fields are one register for every line, and the address is MAC 0's
        entry_pick = Signal.like(self.pick_next, name="entry_pick", attrs={"keep": 1})
        m.d.sync += entry_pick.eq(self.pick_next)
        macs = []
        for index in range(macs_per_line):
            mac = MAC(arith=self._arith, mac_lines=self._p, macs_per_line=macs_per_line,
                      rows_per_mac=self._r, head_dim=self._d,
                      macs_per_lane=macs_per_line // self._lanes, index=index,
                      lane_index=(index // split) % groups_per_lane, split=split,
                      banks=self._banks)
            m.submodules[f"mac{index}"] = mac
            m.d.comb += [mac.line_id.eq(self.line_id),
                         mac.wi.eq(self.wi if index == 0 else macs[-1].wo),
                         mac.pick_in.eq(entry_pick if index == 0 else macs[-1].pick_out)]
            if mac.position:
                m.d.comb += mac.chain_in.eq(macs[-1].chain_out)
                if isinstance(self._arith, FloatArith):
                    m.d.comb += mac.ahead_in.eq(macs[-1].ahead_out)
            m.d.comb += mac.drain_addr.eq(self.drain.addr)
            macs.append(mac)
        m.d.comb += self.tail.eq(macs[-1].wo)
        return [macs[first:first + split] for first in range(0, macs_per_line, split)]

    def _lanes_of(self, m, groups):
        """The softmax lanes over `groups`, started by the line's last K word: the lanes."""
        arith, rows_per_mac, split, banks = self._arith, self._r, self._s, self._banks
        groups_per_lane = self._q // self._lanes // split
        tail = groups[-1][-1].wo
        # The last MAC writes the last slot's score `MAC.score_latency` cycles after its
        # word leaves it: the lanes may start then.
        start_d = [Signal(start_layout(banks=banks), name=f"start_d{k}")
                   for k in range(MAC.score_latency(arith, split, rows_per_mac=rows_per_mac,
                                                    head_dim=self._d) + 1)]
        m.d.comb += [
            start_d[0].valid.eq(tail.valid & tail.is_s & tail.klast
                                & (tail.slot == rows_per_mac - 1)),
            start_d[0].bank.eq(tail.bank), start_d[0].first.eq(tail.first),
        ]
        m.d.sync += [start_d[k].eq(start_d[k - 1]) for k in range(1, len(start_d))]
        lanes = []
        # A float lane's c from a register of its own (kept): c is the same for every lane,
        # so the lanes' first scale registers would otherwise merge into one that reaches
        # the DSPs of every line across the chip (the float 4x4's worst path, all route).
        # With the array's `lane_c`, a lane has a block's c `lane_c_latency` + 1 cycles
        # after its S_0's launch set it: before the block's first score, which is a MAC
        # product and sum later (asserted). int8's lanes take c as it comes: int8 closes
        # its timing so (docs/synthesis.md).
        lane_c = [self.c] * self._lanes
        if isinstance(arith, FloatArith):
            assert (arith.lane_c_latency + 1
                    < MAC.float_product_latency(arith) + arith.accumulate_latency)
            lane_c = [Signal(arith.lane_c_shape, name=f"lane{number}_c", attrs={"keep": 1})
                      for number in range(self._lanes)]
            m.d.sync += [c.eq(self.c) for c in lane_c]
        for number in range(self._lanes):
            lane = SoftmaxLane(arith=arith, macs_per_lane=groups_per_lane,
                               rows_per_mac=rows_per_mac, slot_stride=self._p * self._q // split,
                               banks=banks)
            m.submodules[f"lane{number}"] = lane
            mine = groups[number * groups_per_lane:(number + 1) * groups_per_lane]
            for k, group in enumerate(mine):
                if isinstance(arith, FloatArith):     # the group's `ScoreBanks`, read by the lane
                    m.d.comb += [group[-1].score_at.eq(lane.score_at),
                                 lane.score_rd[k].eq(group[-1].score_rd)]
                else:
                    for i in range(banks * rows_per_mac):
                        m.d.comb += lane.scores[k * banks * rows_per_mac + i].eq(
                            group[-1].score[i])
                m.d.comb += [mac.pa.eq(lane.pa) for mac in group]
            m.d.comb += [lane.start.eq(start_d[-1]), lane.start_next.eq(start_d[-2]),
                         lane.c.eq(lane_c[number]), lane.mask.eq(self.mask),
                         lane.row_base.eq(self.row_base + number * groups_per_lane),
                         lane.consume.eq(self.consume), lane.drain_u.eq(self.drain.u)]
            lanes.append(lane)
        m.d.comb += [self.ready[b].eq(and_all(lane.ready[b] for lane in lanes))
                     for b in range(banks)]
        m.d.comb += self.exp_active.eq(or_all(lane.active for lane in lanes))
        return lanes

    def _drain(self, m, groups, lanes):
        """The drain's read: the MACs answer `MAC.drain_read_latency` cycles after the
        address, the lanes' memories one: select the group (O) and the lane (l, m), then
        register (l and m a cycle more, beside O)."""
        drain = self.drain
        mac_sel = drain.mac
        for k in range(MAC.drain_read_latency):
            mac_sel, prev = Signal.like(drain.mac, name=f"mac_sel{k}"), mac_sel
            m.d.sync += mac_sel.eq(prev)
        lane_sel = Signal.like(drain.lane, name="lane_sel")
        m.d.sync += lane_sel.eq(drain.lane)
        m.d.sync += [drain.o[g].eq(Array([group[g].o_rd for group in groups])[mac_sel])
                     for g in range(self._s)]
        reads = [("l", "l_rd")] + ([("m", "m_rd")] if isinstance(self._arith, FloatArith) else [])
        for name, port in reads:
            out = getattr(drain, name)
            picked = Signal.like(out, name=f"drain_{name}_picked")
            m.d.sync += [picked.eq(Array([getattr(lane, port) for lane in lanes])[lane_sel]),
                         out.eq(picked)]


class PEArray(wiring.Component):
    """p MAC lines fed by one entry word, with E = `exp_units` lanes in all (E / p per line)
    and `banks` banks of scores and (P, alpha) (the K rows whose scores are held at once).

    The ports are `MacLine`'s but `line_id` and `row_base`, except that `c` is the
    softmax constant as the core has it (`c_shape`; the array makes it the lanes' once,
    `lane_c`, for every line), `ready` is
    ANDed over the lines and registered (the AND spans the array, and the replay's launch
    decision starts from it), `exp_active` ORed, `tail` is line 0's, and the drain's
    `line` selects the line, in a register of its own (`drain_read_latency`). While Verilog is emitted the lines are
    one module, `LINE_MODULE`, instantiated p times (`attenio.hdl.hierarchy`).
    """

    #: the Verilog module name of a line when the array is emitted
    LINE_MODULE = "attenio_mac_line"
    #: cycles from every lane's `ready` to the array's (the AND's register)
    ready_latency = 1

    def __init__(self, *, arith, mac_lines, macs_per_line, rows_per_mac, head_dim, exp_units,
                 split=1, banks=2):
        check_arith("PEArray", arith)
        validate.positive("PEArray", rows_per_mac=rows_per_mac, head_dim=head_dim)
        lanes = validate.lanes_per_line(exp_units=exp_units, mac_lines=mac_lines,
                                        macs_per_line=macs_per_line, owner="PEArray")
        validate.split("PEArray", split, head_dim=head_dim, macs_per_line=macs_per_line,
                       lanes=lanes)
        validate.integer("PEArray", "banks", banks, lo=2)
        self._arith, self._banks = arith, banks
        self._p, self._q, self._r, self._d, self._lanes = (mac_lines, macs_per_line, rows_per_mac,
                                                          head_dim, lanes)
        self._s = split
        super().__init__({"line_id": In(range(mac_lines)),
                          "row_base": In(range(mac_lines * macs_per_line // split * rows_per_mac)),
                          **_line_signature(
            arith=arith, mac_lines=mac_lines, macs_per_line=macs_per_line,
            rows_per_mac=rows_per_mac, head_dim=head_dim, lanes=lanes, split=split,
            banks=banks, c_shape=arith.c_shape)})

    #: cycles from a drain address to its O and l: the line's, then the line select
    drain_read_latency = MacLine.drain_read_latency + 1

    @property
    def lanes_per_line(self):
        return self._lanes

    @property
    def banks(self):
        return self._banks

    def elaborate(self, platform):
        m = Module()
        lines = self._lines(m)
        m.d.comb += self.tail.eq(lines[0].tail)
        m.d.sync += [self.ready[b].eq(and_all(line.ready[b] for line in lines))
                     for b in range(self._banks)]
        m.d.comb += self.exp_active.eq(or_all(line.exp_active for line in lines))
        self._drain_select(m, lines)
        return m

    def _lines(self, m):
        """The p lines, each fed the entry word and the drain's address: the lines."""
        drain = self.drain
        def new_line():
            return MacLine(arith=self._arith, mac_lines=self._p, macs_per_line=self._q,
                           rows_per_mac=self._r, head_dim=self._d, lanes=self._lanes,
                           split=self._s, banks=self._banks)
        proto = new_line()
        lane_c = self._arith.lane_c(m, self.c)
        lines = []
        for index in range(self._p):
            if hierarchy.collecting():      # one module, instantiated
                line = proto.signature.create(path=(f"line{index}",))
                m.submodules[f"line{index}"] = hierarchy.instance(self.LINE_MODULE, proto, line)
            else:
                line = proto if index == 0 else new_line()
                m.submodules[f"line{index}"] = line
            m.d.comb += [line.line_id.eq(index), line.row_base.eq(index * (self._q // self._s)),
                         line.wi.eq(self.wi), line.pick_next.eq(self.pick_next),
                         line.c.eq(lane_c), line.mask.eq(self.mask),
                         line.consume.eq(self.consume),
                         line.drain.addr.eq(drain.addr), line.drain.u.eq(drain.u),
                         line.drain.mac.eq(drain.mac), line.drain.lane.eq(drain.lane)]
            lines.append(line)
        return lines

    def _drain_select(self, m, lines):
        """The drain's answer: the lines' O, l (and m) selected by the drain's `line`."""
        drain = self.drain
        # The line select follows the data through the line's registers, then one more here.
        # Its last register is copied (kept) for each DRAIN_SELECT_BITS bits it selects, so
        # each copy sits beside its few multiplexers: one register driving every
        # multiplexer's select input is a route across the array.
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
