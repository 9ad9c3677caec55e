"""The DMA command sequencers: what to read and write, in the order the core needs it.

`ReadSequencer` walks heads, Q blocks and K/V rows and emits one read command per
row of Q, K or V, tagged with its kind, in exactly the order the core consumes
them (docs/microarchitecture.md): per block the valid Q rows, then its K/V rows in the
order of `attenio.hdl.kv_buffer.kv_order`: with B score banks (`banks`) the scores run
B - 1 rows ahead of the updates, K_0 .. K_(B-2), then K_j beside V_(j-B+1), then the
last B - 1 V rows (with B = 2: K_0, K_1, V_0, K_2, V_1, ..., K_(n-1), V_(n-2),
V_(n-1)); a block of fewer than B - 1 keys reads its K rows, then its V rows. n is
the block's key count: N_kv (the run's `kv_len`, which
the controller has resolved), or with causal masking (the run's `causal` bit) the
keys up to the block's last row, row0 + rows + N_kv - N (rows aligned at the end,
`attenio.analysis.causal_limit`); the short block then comes first
(`attenio.analysis.q_blocks`), since the first block reads the fewest keys; its size
comes with the run (`setup_layout`, derived by the controller before launch). Query
head h reads K/V head h div g (the run's `group`). A pass serves gb query heads (g
with MODE.GROUPED, else 1): its blocks hold the same rows of each, row-major (block
row t*gb + h is row t of head h), so each K/V row read serves them all; the Q reads
walk the gb heads of a row, then the next row. A down-counter steps the K/V head
pointers every g query heads (every pass when grouped). With the mask, each block
command carries gb times its first rows' last key (`gdiag`, a running register) and
gb (`step`) for the lanes. Because the DMA reads ahead as far as its buffer allows,
issuing commands in consumption order is what overlaps communication with
computation at all three levels: V_j is fetched while the scores of K_j run,
K_(j+1) while V_j updates O, and the next block's Q while this block's O drains.

`WriteSequencer` emits one write command per output row, in the core's order (row t
of each of a pass's gb heads in turn, `write_schedule`), and reports when every write
of the run has been acknowledged.

Addresses are formed by adding strides, never by multiplying.
"""

from contextlib import contextmanager

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from attenio import validate
from attenio.analysis import block_keys
from attenio.regmap import (DESCRIPTOR_BYTES, MAX_HEAD_GROUP, SCALE_TABLE_ENTRIES,
                            TABLE_ENTRY_BYTES, descriptor_stride, paged_row_addr, table_beats)

from .counter import DownCounter
# the core's feed, its K/V order and block command: one definition
from .kv_buffer import Kind, kv_order, start_layout
from .dma import command_layout, read_data_layout, write_done_layout

__all__ = ["Kind", "TABLE", "run_layout", "read_schedule", "write_schedule",
           "ReadSequencer", "WriteSequencer"]


def setup_layout(addr_width):
    """What the controller derives from a run before it launches it (`Controller`), so the
    sequencers need no multiplier and no divider: gb, the query heads a block serves (the
    group with MODE.GROUPED, else 1), and the block sizes and strides scaled by it."""
    return data.StructLayout({
        "gb": unsigned(8),
        "passes": unsigned(32),     # HEADS div gb
        "kv_every": unsigned(32),   # query-head passes per K/V head: 1 grouped, else g
        "a_g": unsigned(32),        # rows of each head in a full block, a div gb
        "a_full": unsigned(32),     # a full block's rows, gb * a_g
        "short_h": unsigned(32),    # N mod a_g: a causal first block's rows of each head
        "short": unsigned(32),      # gb * short_h
        "gn": unsigned(32),         # gb * N: the block rows of a pass
        "skip": unsigned(32),       # N_kv - N (causal: the keys every query row sees)
        "gskip": unsigned(32),      # gb * (N_kv - N)
        "q_group_stride": unsigned(addr_width),     # gb * Q_HEAD_STRIDE
        "o_group_stride": unsigned(addr_width),     # gb * O_HEAD_STRIDE
    })


def run_layout(addr_width, *, paged=False):
    """What one run needs to know; latched by the controller at start, `setup` derived.
    `paged`: the block table's address and length and the page limit too (KV_TABLE,
    KV_TABLE_LEN, PAGE_LIMIT), after the rest, so that a paged run's low bits are the
    contiguous run the write sequencer takes."""
    tensor = data.StructLayout({"base": unsigned(addr_width), "head_stride": unsigned(addr_width),
                                "row_stride": unsigned(addr_width)})
    fields = {"seq_len": unsigned(32), "heads": unsigned(32), "causal": 1,
              "grouped": 1, "kv_len": unsigned(32), "group": unsigned(32),
              # SCALE_C, and MODE.HEAD_SCALES: each pass's c from SCALE_C_TABLE instead
              "scale_c": unsigned(32), "head_scales": 1,
              "q": tensor, "k": tensor, "v": tensor, "o": tensor,
              "setup": setup_layout(addr_width)}
    if paged:
        fields.update({"table": unsigned(addr_width), "table_len": unsigned(32),
                       "page_limit": unsigned(addr_width)})
    return data.StructLayout(fields)


def run_setup(*, seq_len, heads, block_rows, causal=False, kv_len=None, group=1, grouped=False,
              q_head_stride=0, o_head_stride=0):
    """The Python twin of the controller's setup: `setup_layout`'s fields as a dict."""
    n_kv = seq_len if kv_len is None else kv_len
    gb = group if grouped else 1
    a_g = block_rows // gb
    short_h = seq_len % a_g
    skip = (n_kv - seq_len) % 2 ** 32
    return {"gb": gb, "passes": heads // gb, "kv_every": 1 if grouped else group, "a_g": a_g,
            "a_full": gb * a_g, "short_h": short_h, "short": gb * short_h, "gn": gb * seq_len,
            "skip": skip, "gskip": gb * skip % 2 ** 32,
            "q_group_stride": gb * q_head_stride % 2 ** 32,
            "o_group_stride": gb * o_head_stride % 2 ** 32}


#: the kind of a block-table read in `read_schedule` (its beat goes to the sequencer, not
#: to the core, so it has no `Kind`)
TABLE = "table"


def read_schedule(*, seq_len, heads, block_rows, q, k, v, causal=False, kv_len=None, group=1,
                  grouped=False, banks=2, page_rows=0, table=None, table_base=0, beat_bytes=8,
                  page_limit=0):
    """The Python twin of `ReadSequencer`: ([(kind, addr)], [(rows_valid, n_keys, gdiag)]).

    `q`, `k`, `v` are (base, head_stride, row_stride) triples; `kv_len` N_kv (None: N);
    query head h reads K/V head h // `group`. `grouped`: a block holds the same rows of
    the `group` query heads of a K/V head, row-major (block row t*g + h is row t of head
    h), a // g rows of each. `gdiag` (causal only, else 0) is gb times the block's first
    rows' last key. `banks`: the K/V order's (`kv_order`).

    `page_rows` > 0: K and V in pages of that many rows, page p's slot at `table`[p] (the
    block table, at `table_base`); K row j of K/V head g at `paged_row_addr` (k's base an
    offset in a slot). Each block reads its table in whole beats of `beat_bytes`
    (`(TABLE, addr)` commands): beat 0 before its Q rows, beat b + 1 after the K command
    that opens beat b's first page. An entry at or past `page_limit` (0: none) or not
    beat-aligned reads as page 0 (and the run ends with PAGE_OUT_OF_RANGE).
    """
    n_kv = seq_len if kv_len is None else kv_len
    gb = group if grouped else 1
    cmds, blocks = [], []
    for h0 in range(0, heads, gb):
        g = h0 // group
        for row0, rows, n in block_keys(seq_len, block_rows // gb, causal=causal, n_kv=n_kv):
            blocks.append((gb * rows, n, gb * (n - rows) if causal else 0))
            if page_rows:
                cmds.append((TABLE, table_base))
            cmds += [(Kind.Q, q[0] + (h0 + h) * q[1] + (row0 + t) * q[2])
                     for t in range(rows) for h in range(gb)]
            tensor = {Kind.K: k, Kind.V: v}
            if not page_rows:
                cmds += [(kind, tensor[kind][0] + g * tensor[kind][1] + j * tensor[kind][2])
                         for kind, j in kv_order(n, banks=banks)]
                continue
            pages = [0 if (page_limit and p >= page_limit) or p % beat_bytes else p
                     for p in table]
            per_beat = (beat_bytes // TABLE_ENTRY_BYTES) * page_rows    # rows a table beat
            beats = table_beats(n, page_rows, beat_bytes)
            for kind, j in kv_order(n, banks=banks):
                base, head_stride, row_stride = tensor[kind]
                cmds.append((kind, paged_row_addr(pages, j, page_rows=page_rows, base=base,
                                                  head=g, head_stride=head_stride,
                                                  row_stride=row_stride)))
                if kind is Kind.K and j % per_beat == 0 and j // per_beat + 1 < beats:
                    cmds.append((TABLE, table_base + (j // per_beat + 1) * beat_bytes))
    return cmds, blocks


def write_schedule(*, seq_len, heads, o, group=1, grouped=False):
    """The Python twin of `WriteSequencer`: the address of every output row, in order (with
    `grouped`, row t of the group's heads in turn, as the core's blocks hold them)."""
    gb = group if grouped else 1
    return [o[0] + (h0 + h) * o[1] + t * o[2]
            for h0 in range(0, heads, gb) for t in range(seq_len) for h in range(gb)]


class ReadSequencer(wiring.Component):
    """Read commands (with their kinds, in order) and block descriptors for one run.

    Ports: `start` (pulse, with `run` valid), `cmd` (to the DMA reader), `kind`
    (one per command, to whoever tags the data), `block` (one per Q block, to the
    core) and `block_c` (its softmax constant, a register), `busy`; `scale_addr` out and
    `scale_data` in (a cycle later): the read port of SCALE_C_TABLE, whose entry for the
    pass's first query head is `block_c` under the run's `head_scales`, else the run's
    `scale_c`. `banks`: the array's score banks B, which set the K/V order (B - 1 K rows
    ahead, `attenio.hdl.kv_buffer.kv_order`).
    """

    #: cycles from `start` to the first block offered on `block`: the run latched, the
    #: first pass's counters loaded from it, then the block sized in a cycle of its own
    block_latency = 3
    #: cycles from `start` to the first command offered on `cmd` (the block first)
    command_latency = 4
    #: paged: cycles from a table beat offered on `data_in` to the K row command it
    #: gives the page of (the table beats' FIFO, then the page loader's k_ok)
    table_latency = 2
    #: a batch: cycles from `desc_fetch` to the descriptor's read offered on `cmd` (DESC),
    #: and from its last beat on `data_in` to `desc_valid` (the descriptor's register)
    desc_command_latency = 1
    desc_latency = 1

    def __init__(self, *, addr_width, block_rows, row_bytes, max_seq_len, tag_depth=16,
                 banks=2, page_rows=0, data_width=64):
        validate.positive("ReadSequencer", addr_width=addr_width, block_rows=block_rows,
                          row_bytes=row_bytes, max_seq_len=max_seq_len)
        # at least 2: `tag_room` stands for the FIFO's w_rdy from a FIFO of 3 slots up
        validate.integer("ReadSequencer", "tag_depth", tag_depth, lo=2)
        validate.integer("ReadSequencer", "banks", banks, lo=2)
        if page_rows:
            validate.power_of_two("ReadSequencer", "page_rows", page_rows, hi=2 ** 16)
            validate.power_of_two("ReadSequencer", "data_width", data_width, lo=32, hi=512)
        self._banks = banks
        self._addr_width, self._block_rows = addr_width, block_rows
        self._row_bytes, self._tag_depth = row_bytes, tag_depth
        self._max_seq_len = max_seq_len
        self._page_rows, self._data_width = page_rows, data_width
        members = {
            "start": In(1),
            "run": In(run_layout(addr_width, paged=bool(page_rows))),
            "cmd": Out(stream.Signature(command_layout(addr_width))),
            "kind": Out(stream.Signature(Kind)),
            "block": Out(stream.Signature(start_layout(rows=block_rows,
                                                       max_seq_len=max_seq_len))),
            "block_c": Out(32),
            "scale_addr": Out(range(SCALE_TABLE_ENTRIES)), "scale_data": In(32),
            "busy": Out(1),
        }
        if page_rows:
            # the DMA's read beats pass through: a table beat stays here, the rest go on
            beats = stream.Signature(read_data_layout(data_width))
            members.update({"data_in": In(beats), "data_out": Out(beats), "page_error": Out(1),
                            # a batch's descriptor: read at `desc_addr` on `desc_fetch`
                            # (while idle), its words on `desc` with `desc_valid`
                            "desc_fetch": In(1), "desc_addr": In(addr_width),
                            "desc": Out(8 * DESCRIPTOR_BYTES), "desc_valid": Out(1)})
        super().__init__(members)

    @property
    def page_rows(self):
        return self._page_rows

    @property
    def block_rows(self):
        return self._block_rows

    @property
    def banks(self):
        return self._banks

    def elaborate(self, platform):
        m = Module()
        walk = _ReadWalk(self, m)
        walk.tag_fifo()
        walk.walk_registers()
        walk.command_port()
        if self._page_rows:
            walk.page_walk()
        # The controller's `start` (from across the chip) enables the run's copy (whatever
        # the state) and the state's move only: LOAD, a cycle later, loads the first pass's hundreds of
        # flip-flops from that copy, their enables decoded from the state as PASS's are
        # (the head pointers' from kept flags set with the state, `walk_registers`).
        with m.FSM():
            walk.setup()                # IDLE, LOAD
            walk.block_command()        # SIZE, BLOCK
            walk.block_reads()          # Q, K_FIRST, KV_K, KV_V, V_LAST
            walk.head_advance()         # PASS
        return m


class _ReadWalk:
    """The pieces of one `ReadSequencer` elaboration into the module `m`: the registers
    of the walk over passes, blocks and rows, and the states that step them."""

    def __init__(self, sequencer, m):
        self.sequencer, self.m = sequencer, m
        self.addr_width = sequencer._addr_width
        self.block_rows = sequencer._block_rows
        self.max_seq_len = sequencer._max_seq_len
        self.lead = sequencer._banks - 1       # K rows read ahead of the V rows
        self.paged = bool(sequencer._page_rows)
        self.run = run = Signal(run_layout(self.addr_width, paged=self.paged))
        self.setup_fields = run.setup
        if self.paged:
            self.block_taken = Signal()     # BLOCK's command taken: the block's reads start
            self.route_room = Signal()  # the route FIFO has room (registered, as tag_room)
            self.table_taken = Signal()
            self.k_ok, self.v_ok = Signal(), Signal()   # K's (V's) page address is in
            self.desc_state = Signal()      # DESC: the command is the descriptor's read
            self.desc_ptr = Signal(self.addr_width)

    def tag_fifo(self):
        """The FIFO of the kinds of the commands taken, read out on `kind`, and `tag_room`,
        the registered room in it that the command handshake waits on."""
        m, seq = self.m, self.sequencer
        # One slot more than `tag_depth`, so that `tag_room` (the level a cycle ago below
        # tag_depth: one write at most since, and with 3 slots or more the buffered FIFO's
        # inner store cannot fill in that write) can stand for the FIFO's w_rdy as a
        # register: the command handshake, and each counter it steps, then waits on no
        # comparison of the level.
        depth = seq._tag_depth + 1
        m.submodules.tags = tags = SyncFIFOBuffered(width=Kind.as_shape().width, depth=depth)
        tag_room = Signal()
        m.d.sync += tag_room.eq(tags.level < depth - 1)
        m.d.comb += [seq.kind.valid.eq(tags.r_rdy), seq.kind.payload.eq(tags.r_data),
                     tags.r_en.eq(seq.kind.ready)]
        self.tags, self.tag_room = tags, tag_room

    def walk_registers(self):
        """The loop counters and the registers of the walk: the rows left of a pass, the
        next block's size and keys, the head and row pointers of Q, K and V."""
        m, run, setup = self.m, self.run, self.setup_fields
        block_rows, max_seq_len = self.block_rows, self.max_seq_len
        # Loop ends are tested on down-counters whose `last` is a register (`DownCounter`),
        # never on a count plus one compared with a run parameter (two carry chains in the
        # handshake path). A pass serves gb query heads (`setup_layout`): its blocks hold
        # rows_h rows of each, row-major, rows_valid = gb * rows_h block rows. Both are
        # kept, so nothing divides.
        m.submodules.passes_left = self.passes_left = DownCounter(32)  # this one included
        # passes to read this K/V head: kv_every, 1 or the group (at most MAX_HEAD_GROUP)
        m.submodules.group_left = self.group_left = DownCounter(MAX_HEAD_GROUP.bit_length())
        # this block's Q rows to issue
        m.submodules.q_left = self.q_left = DownCounter(block_rows.bit_length())
        # this Q row's heads
        m.submodules.q_heads = self.q_heads = DownCounter(8, init_last=True)
        # K/V pairs to issue after K_0
        m.submodules.kv_left = self.kv_left = DownCounter(max_seq_len.bit_length())
        self.rows_left = Signal(32)      # block rows of this pass not yet in a block
        self.rows_left_h = Signal(32)    # the same, rows of each head
        # the next block's rows, min(rows_left, a_full)
        self.rows_valid = Signal(range(block_rows + 1))
        self.rows_h = Signal(range(block_rows + 1))      # of each head, rows_valid / gb
        # causal: the last key of the rows already in blocks, rows_done + N_kv - N, kept
        # running so that a block's keys are one addition (the controller refused N_kv < N);
        # gb times it beside, the lanes' scaled diagonal of the next block
        self.keys_end = Signal(range(max_seq_len + 1))
        self.gkeys_end = Signal(range(MAX_HEAD_GROUP * max_seq_len + 1))
        # this block's K/V rows less the lead, kv_left's start (unused when no pair is left)
        self.block_pairs = Signal(range(max_seq_len + 1))
        # this block reads no (K, V) pair, n <= lead (one key, with a lead of one row)
        self.one_key = Signal()
        if self.lead > 1:
            # the K rows of the lead, then the V rows left at the end: min(lead, n) each
            m.submodules.k_lead = self.k_lead = DownCounter(self.lead.bit_length())
            m.submodules.v_lead = self.v_lead = DownCounter(self.lead.bit_length())
        # the next block's K/V rows, sized in SIZE
        self.size_keys = Signal(range(max_seq_len + 1))
        self.head_first = Signal()              # the next block is its pass's first
        # V_LAST's decision on rows, registered every cycle: rows_left changes only on
        # leaving BLOCK, and Q and K_FIRST take a cycle each before the next V_LAST, so the
        # flag is current there
        self.more_rows = Signal()
        m.d.sync += self.more_rows.eq(self.rows_left != 0)
        # SIZE's two decisions, registered the same way (rows_left and head_first change on
        # leaving BLOCK, at least two cycles before the next SIZE), and set from their
        # sources where IDLE and PASS load them for the very next cycle: SIZE is then one
        # carry chain (keys_end + rows_h) and the selection, not the 32-bit comparison too
        self.full = Signal()
        self.short = Signal()
        m.d.sync += [self.full.eq(self.rows_left >= setup.a_full),
                     self.short.eq(run.causal & self.head_first & (setup.short_h != 0))]
        self.q_head, self.k_head, self.v_head = (Signal(self.addr_width, name=f"{t}_head")
                                                 for t in "qkv")
        self.q_ptr, self.k_ptr, self.v_ptr = (Signal(self.addr_width, name=f"{t}_ptr")
                                              for t in "qkv")
        self.q_row = Signal(self.addr_width)    # this Q row of the pass's first head
        # The run's copy, latched on `start` whatever the state: the controller starts a run
        # only while the sequencer is idle (tests/formal/test_sequencer.py assumes it), and
        # the copy's enable is then the start register alone, kept beside it. A decode of
        # the state with it drove the enables of its some 300 flip-flops (12.14 ns, 7.30
        # of it routing, the fp16 2x2's worst path on a seed).
        with m.If(self.sequencer.start):
            m.d.sync += run.eq(self.sequencer.run)
        # LOAD and PASS move the head pointers (and Q's row pointers with them) through
        # kept flags, one per tensor, set as the state is entered: a decode of the state
        # drove their enables across the chip (the fp16 2x2's worst path, 11.24 ns)
        self.heads_load, self.heads_pass = (
            {t: Signal(name=f"heads_{kind}_{t}", attrs={"keep": 1}) for t in "qkv"}
            for kind in ("load", "pass"))
        m.d.sync += [flag.eq(0) for flags in (self.heads_load, self.heads_pass)
                     for flag in flags.values()]
        for t in "qkv":
            with m.If(self.heads_load[t]):
                m.d.sync += getattr(self, f"{t}_head").eq(getattr(run, t).base)
        next_head = self.q_head + setup.q_group_stride
        with m.If(self.heads_pass["q"]):
            m.d.sync += self.q_head.eq(next_head)
        # Q's row pointers: each register's data is selected by registers alone (the kept
        # flags, q_heads' last), and the handshake (`q_issued`, state Q's command taken)
        # reaches only their enables: a select merged from `issued` and the head flags was
        # two long routes from the command's handshake (12.35 ns, int8's worst path on a
        # seed). The flags and state Q are never at once.
        self.q_issued = Signal()
        load, step = self.heads_load["q"], self.heads_pass["q"]
        row_next = self.q_row + run.q.row_stride
        first = Mux(load, run.q.base, next_head)
        with m.If(load | step | (self.q_issued & self.q_heads.last)):
            m.d.sync += self.q_row.eq(Mux(load | step, first, row_next))
        with m.If(load | step | self.q_issued):
            m.d.sync += self.q_ptr.eq(Mux(load | step, first,
                                          Mux(self.q_heads.last, row_next,
                                              self.q_ptr + run.q.head_stride)))
        for t in "kv":                  # set only when the pass moves to the next K/V head
            with m.If(self.heads_pass[t]):
                m.d.sync += getattr(self, f"{t}_head").eq(
                    getattr(self, f"{t}_head") + getattr(run, t).head_stride)
        self.scale_walk()

    def scale_walk(self):
        """The pass's softmax constant, `block_c`: loaded in the SIZE after LOAD or PASS
        (`c_load`, a kept flag set with those states) from the table's word for the pass's
        first query head, whose index `scale_addr` holds from `start` (0) or the previous
        load (+ gb) on, so the word is read in LOAD or PASS and the table's read port and
        the selection are all that lie before the register."""
        m, seq, run, setup = self.m, self.sequencer, self.run, self.setup_fields
        self.c_load = Signal(name="scale_c_load", attrs={"keep": 1})
        m.d.sync += self.c_load.eq(0)
        with m.If(seq.start):
            m.d.sync += seq.scale_addr.eq(0)
        with m.If(self.c_load):
            m.d.sync += [seq.block_c.eq(Mux(run.head_scales, seq.scale_data, run.scale_c)),
                         seq.scale_addr.eq(seq.scale_addr + setup.gb)]

    def command_port(self):
        """`cmd` and the kinds' FIFO write: the command of the state in hand (`issue_row`),
        offered while `issuing` and the FIFO has room; `issued` when the DMA takes it."""
        m, seq, setup = self.m, self.sequencer, self.setup_fields
        self.issue_addr = Signal(self.addr_width)
        self.issue_kind = Signal(Kind)
        # The states Q to V_LAST issue a command each cycle the DMA takes one: `issuing`
        # is that, a register set on entering Q and cleared on leaving V_LAST, so the
        # handshake is a gate of registers with no decode of the state before it.
        self.issuing = Signal()
        self.issued = Signal()
        gb_one = Signal()           # setup.gb == 1, registered: q_heads' verdict on its init
        m.d.sync += gb_one.eq(setup.gb == 1)
        # A command offered and not taken stays offered (the stream rules), even when
        # `tag_room`, a cycle late, falls behind the command taken the cycle before: the
        # kinds' FIFO has the slot for it (tests/formal/test_sequencer.py).
        held = Signal()
        m.d.sync += held.eq(seq.cmd.valid & ~seq.cmd.ready)
        m.d.comb += [
            seq.cmd.payload.addr.eq(self.issue_addr),
            seq.cmd.payload.length.eq(seq._row_bytes),
            seq.cmd.valid.eq(self.issuing & (self.tag_room | held)),
            self.tags.w_data.eq(self.issue_kind),
            self.tags.w_en.eq(seq.cmd.valid & seq.cmd.ready),
            self.issued.eq(seq.cmd.valid & seq.cmd.ready),
            self.q_heads.init.eq(setup.gb), self.q_heads.init_last.eq(gb_one),
        ]
        if self.paged:
            # a table read, when due, goes before the state's row (which waits, its state
            # unmoved); a row waits for its page's address (`row_ok`, set by the state)
            self.table_due = Signal()
            self.row_ok = Signal(init=1)
            self.table_ptr = Signal(self.addr_width)
            taken = seq.cmd.valid & seq.cmd.ready
            m.d.comb += [
                seq.cmd.valid.eq(self.issuing & (self.tag_room | held) & self.route_room
                                 & (self.table_due | self.row_ok)),
                self.tags.w_en.eq(taken & ~self.table_due),
                self.issued.eq(taken & ~self.table_due),
                self.table_taken.eq(taken & self.table_due),
            ]
            with m.If(self.table_due):
                m.d.comb += [seq.cmd.payload.addr.eq(self.table_ptr),
                             seq.cmd.payload.length.eq(seq._data_width // 8)]
            # a descriptor's read (whole beats: a beat wider than it reads one beat)
            with m.If(self.desc_state):
                m.d.comb += [seq.cmd.payload.addr.eq(self.desc_ptr),
                             seq.cmd.payload.length.eq(
                                 descriptor_stride(seq._data_width // 8)),
                             seq.cmd.valid.eq((self.tag_room | held) & self.route_room),
                             self.tags.w_en.eq(0), self.issued.eq(0), self.table_taken.eq(0)]

    def page_walk(self):
        """Paged K/V (docs/microarchitecture.md, "Paged K/V"): the route of each command's
        beats (a table beat stays here), the table's beats, and the page addresses K takes
        from them and hands to V. Each block reads its table from KV_TABLE: beat 0 before
        its Q rows, beat b + 1 after the K command that opens beat b's first page, so at
        most two beats wait here and the route never blocks the rows behind them."""
        m, seq, run = self.m, self.sequencer, self.run
        page_rows, width = seq._page_rows, seq._data_width
        lg = page_rows.bit_length() - 1
        beat_bytes = width // 8
        per_beat = beat_bytes // TABLE_ENTRY_BYTES
        lg_e = per_beat.bit_length() - 1
        # one bit a command taken, in order: a table read? Popped with its last beat.
        depth = 2 * seq._tag_depth + 2
        # (bit 1: a descriptor's beats, kept here too)
        m.submodules.route = route = SyncFIFOBuffered(width=2, depth=depth)
        m.submodules.table_beats = beats = SyncFIFO(width=width, depth=2)
        is_table, is_desc = route.r_data[0], route.r_data[1]
        data_in, data_out = seq.data_in, seq.data_out
        m.d.sync += self.route_room.eq(route.level < depth - 1)
        m.d.comb += [
            route.w_en.eq(seq.cmd.valid & seq.cmd.ready),
            route.w_data.eq(Cat(self.table_due, self.desc_state)),
            data_out.payload.eq(data_in.payload),
            data_out.valid.eq(data_in.valid & route.r_rdy & ~is_table & ~is_desc),
            beats.w_data.eq(data_in.payload.data),
            beats.w_en.eq(data_in.valid & route.r_rdy & is_table),
            data_in.ready.eq(route.r_rdy & Mux(is_table, beats.w_rdy,
                                               Mux(is_desc, 1, data_out.ready))),
            route.r_en.eq(data_in.valid & data_in.ready & data_in.payload.last),
        ]
        # a descriptor's beats shift in from the top, the first beat ending lowest
        desc_bits = 8 * DESCRIPTOR_BYTES
        take_desc = data_in.valid & route.r_rdy & is_desc
        m.d.sync += seq.desc_valid.eq(take_desc & data_in.payload.last)
        with m.If(take_desc):
            if width >= desc_bits:
                m.d.sync += seq.desc.eq(data_in.payload.data[:desc_bits])
            else:
                m.d.sync += seq.desc.eq(Cat(seq.desc[width:], data_in.payload.data))
        # K's page: the next entry of the head beat once the previous page has ended; its
        # address goes to V through a FIFO (V runs the lead's rows behind)
        m.submodules.v_pages = v_pages = SyncFIFO(width=self.addr_width,
                                                  depth=max(2, self.lead // page_rows + 2))
        k_in = Signal(max(lg, 1))           # K's (V's) row in its page
        v_in = Signal(max(lg, 1))
        k_entry = Signal(max(lg_e, 1))      # the head beat's next entry
        k_first = Signal()                  # K's page came from its beat's first entry
        k_pages = Signal(range(self.max_seq_len + 1))     # the block's pages K has to take
        table_left = Signal(range(self.max_seq_len + 1))  # its table beats left to read
        entry = beats.r_data.word_select(k_entry, 32) if per_beat > 1 else beats.r_data[:32]
        bad = (((run.page_limit != 0) & (entry >= run.page_limit))
               | (entry[:beat_bytes.bit_length() - 1] != 0))
        page = Mux(bad, 0, entry)
        with m.If(self.block_taken):
            m.d.sync += [k_pages.eq(((self.size_keys - 1) >> lg) + 1),
                         table_left.eq(((self.size_keys - 1) >> (lg + lg_e)) + 1),
                         self.table_due.eq(1), self.table_ptr.eq(run.table),
                         self.k_ok.eq(0), self.v_ok.eq(0), k_in.eq(0), v_in.eq(0),
                         k_entry.eq(0)]
        with m.If(self.table_taken):
            m.d.sync += [self.table_ptr.eq(self.table_ptr + beat_bytes),
                         table_left.eq(table_left - 1), self.table_due.eq(0)]
        k_end = (k_in == page_rows - 1) if lg else 1
        v_end = (v_in == page_rows - 1) if lg else 1
        with m.If(self.issued & (self.issue_kind == Kind.K)):
            m.d.sync += k_in.eq(k_in + 1)
            with m.If(k_end):
                m.d.sync += self.k_ok.eq(0)
            with m.If((k_in == 0) & k_first & (table_left != 0)):
                m.d.sync += self.table_due.eq(1)
        with m.If(self.issued & (self.issue_kind == Kind.V)):
            m.d.sync += v_in.eq(v_in + 1)
            with m.If(v_end):
                m.d.sync += self.v_ok.eq(0)
        with m.If(~self.k_ok & beats.r_rdy & (k_pages != 0) & v_pages.w_rdy):
            m.d.comb += [v_pages.w_en.eq(1), v_pages.w_data.eq(page)]
            m.d.sync += [self.k_ptr.eq(page + self.k_head), self.k_ok.eq(1),
                         k_pages.eq(k_pages - 1), k_first.eq(k_entry == 0)]
            with m.If(bad):
                m.d.sync += seq.page_error.eq(1)
            with m.If((k_entry == per_beat - 1) | (k_pages == 1)):
                m.d.comb += beats.r_en.eq(1)
                m.d.sync += k_entry.eq(0)
            with m.Else():
                m.d.sync += k_entry.eq(k_entry + 1)
        with m.If(~self.v_ok & v_pages.r_rdy):
            m.d.comb += v_pages.r_en.eq(1)
            m.d.sync += [self.v_ptr.eq(v_pages.r_data + self.v_head), self.v_ok.eq(1)]
        with m.If(seq.start):
            m.d.sync += seq.page_error.eq(0)

    def issue_row(self, kind, ptr, tensor=None):
        """In this state, read the row of `kind` at `ptr`; once the command is taken,
        `ptr` steps on by the row stride of `tensor` (None: it stays). Paged, a K or V row
        waits for its page's address."""
        m = self.m
        m.d.comb += [self.sequencer.busy.eq(1), self.issue_addr.eq(ptr),
                     self.issue_kind.eq(kind)]
        if self.paged and kind is not Kind.Q:
            m.d.comb += self.row_ok.eq(self.k_ok if kind is Kind.K else self.v_ok)
        if tensor is not None:
            with m.If(self.issued):
                m.d.sync += ptr.eq(ptr + tensor.row_stride)

    def count_down(self, counter, state):
        """Once the command is taken, `counter` counts it; the one taken at 1 moves to
        `state` (a later `m.next` in the same state yields to this one)."""
        m = self.m
        with m.If(self.issued):
            m.d.comb += counter.step.eq(1)
            with m.If(counter.last):
                m.next = state

    def first_block_of_pass(self):
        """LOAD's and PASS's loads for a pass's first block, from the latched run."""
        run, setup = self.run, self.setup_fields
        self.m.d.sync += [self.rows_left.eq(setup.gn), self.rows_left_h.eq(run.seq_len),
                          self.keys_end.eq(setup.skip), self.gkeys_end.eq(setup.gskip),
                          self.head_first.eq(1), self.full.eq(setup.gn >= setup.a_full),
                          self.short.eq(run.causal & (setup.short_h != 0))]

    def setup(self):
        """IDLE latches the run on `start`; LOAD loads the first pass's counters and the
        head pointers from that copy."""
        m, seq, run, setup = self.m, self.sequencer, self.run, self.setup_fields
        with m.State("IDLE"):
            with m.If(seq.start):       # the run's copy: `walk_registers`
                m.d.sync += [flag.eq(1) for flag in self.heads_load.values()]
                m.next = "LOAD"
            if self.paged:
                with m.Elif(seq.desc_fetch):
                    m.d.sync += self.desc_ptr.eq(seq.desc_addr)
                    m.next = "DESC"
        if self.paged:
            with m.State("DESC"):       # a batch's next descriptor, one command
                m.d.comb += [seq.busy.eq(1), self.desc_state.eq(1)]
                with m.If(seq.cmd.valid & seq.cmd.ready):
                    m.next = "IDLE"
        with m.State("LOAD"):
            m.d.sync += self.c_load.eq(1)
            m.d.comb += [seq.busy.eq(1),
                         self.passes_left.load.eq(1), self.passes_left.init.eq(setup.passes),
                         self.group_left.load.eq(1), self.group_left.init.eq(setup.kv_every)]
            self.first_block_of_pass()      # the head pointers: `heads_load`
            m.next = "SIZE"

    def block_command(self):
        """SIZE sizes the next block (its rows and keys) in a cycle of its own; BLOCK
        offers it on `block` and, once taken, starts its reads."""
        m, seq, run, setup = self.m, self.sequencer, self.run, self.setup_fields
        full, short, keys_end = self.full, self.short, self.keys_end
        with m.State("SIZE"):           # one cycle per block to size it
            m.d.comb += seq.busy.eq(1)
            # causal: keys_end + rows_h, the three sums side by side and selected by
            # the registered decisions, so that the block command's n_keys comes from a
            # register: the KV buffer checks it and loads its counters from it in the
            # cycle it takes the command (the controller refused a seq_len or kv_len
            # above max_seq_len)
            m.d.sync += [
                self.rows_valid.eq(Mux(short, setup.short,
                                       Mux(full, setup.a_full, self.rows_left))),
                self.rows_h.eq(Mux(short, setup.short_h,
                                   Mux(full, setup.a_g, self.rows_left_h))),
                self.size_keys.eq(Mux(run.causal, Mux(short, keys_end + setup.short_h,
                                                      Mux(full, keys_end + setup.a_g,
                                                          keys_end + self.rows_left_h)),
                                      run.kv_len))]
            m.next = "BLOCK"
        with m.State("BLOCK"):
            m.d.comb += [seq.busy.eq(1), seq.block.valid.eq(1),
                         seq.block.payload.rows_valid.eq(self.rows_valid),
                         seq.block.payload.n_keys.eq(self.size_keys),
                         seq.block.payload.causal.eq(run.causal),
                         seq.block.payload.gdiag.eq(Mux(run.causal, self.gkeys_end, 0)),
                         seq.block.payload.step.eq(setup.gb)]
            with m.If(seq.block.ready):
                m.d.comb += [self.q_left.load.eq(1), self.q_left.init.eq(self.rows_valid),
                             self.q_heads.load.eq(1)]
                if self.paged:
                    m.d.comb += self.block_taken.eq(1)
                m.d.sync += [self.k_ptr.eq(self.k_head), self.v_ptr.eq(self.v_head),
                             self.rows_left.eq(self.rows_left - self.rows_valid),
                             self.rows_left_h.eq(self.rows_left_h - self.rows_h),
                             self.block_pairs.eq(self.size_keys - self.lead),
                             # n >= 1: with a lead of one row, n <= lead is n == 1
                             self.one_key.eq(self.size_keys == 1 if self.lead == 1
                                             else self.size_keys <= self.lead),
                             keys_end.eq(self.size_keys),
                             self.gkeys_end.eq(self.gkeys_end + self.rows_valid),
                             self.head_first.eq(0), self.issuing.eq(1)]
                if self.lead > 1:       # the lead's K rows, and the V rows left: min(lead, n)
                    rows = Mux(self.size_keys < self.lead, self.size_keys, self.lead)
                    m.d.comb += [assign for counter in (self.k_lead, self.v_lead)
                                 for assign in (counter.load.eq(1), counter.init.eq(rows))]
                m.next = "Q"

    def block_reads(self):
        """The reads of one block, a command a state per cycle taken: its Q rows (row t of
        each of the pass's heads, then t + 1), then the K/V pass in `kv_order`: K_FIRST the
        lead's K rows, KV_K and KV_V the pairs, V_LAST the V rows left, after which it goes
        on to the next block, the next pass, or IDLE."""
        m, run = self.m, self.run
        with m.State("Q"):              # row t of each of the pass's heads, then t + 1
            self.issue_row(Kind.Q, self.q_ptr)
            with m.If(self.issued):     # the pointers move in `walk_registers`
                m.d.comb += [self.q_heads.step.eq(1), self.q_heads.load.eq(self.q_heads.last),
                             self.q_issued.eq(1)]
            self.count_down(self.q_left, "K_FIRST")
        with m.State("K_FIRST"):
            self.issue_row(Kind.K, self.k_ptr, run.k)
            with m.If(self.issued):
                m.d.comb += [self.kv_left.load.eq(1), self.kv_left.init.eq(self.block_pairs)]
                with self.lead_end(self.k_lead if self.lead > 1 else None):
                    with m.If(self.one_key):
                        m.next = "V_LAST"
                    with m.Else():
                        m.next = "KV_K"
        with m.State("KV_K"):
            self.issue_row(Kind.K, self.k_ptr, run.k)
            with m.If(self.issued):
                m.next = "KV_V"
        with m.State("KV_V"):
            self.issue_row(Kind.V, self.v_ptr, run.v)
            with m.If(self.issued):
                m.next = "KV_K"
            self.count_down(self.kv_left, "V_LAST")
        with m.State("V_LAST"):
            self.issue_row(Kind.V, self.v_ptr, run.v if self.lead > 1 else None)
            with m.If(self.issued), self.lead_end(self.v_lead if self.lead > 1 else None):
                m.d.sync += self.issuing.eq(0)
                with m.If(self.more_rows):
                    m.next = "SIZE"
                with m.Elif(self.passes_left.last):
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += [self.heads_pass["q"].eq(1),
                                 *[self.heads_pass[t].eq(self.group_left.last) for t in "kv"]]
                    m.next = "PASS"

    @contextmanager
    def lead_end(self, counter):
        """Within a taken command: step `counter` (the lead's K or V rows) and enter the
        body at its last; None (a lead of one row): enter it at once."""
        if counter is None:
            yield
            return
        self.m.d.comb += counter.step.eq(1)
        with self.m.If(counter.last):
            yield

    def head_advance(self):
        """PASS moves the pointers to the next pass's query heads (and every `kv_every`
        passes to the next K/V head) and loads its first block."""
        m, seq, run, setup = self.m, self.sequencer, self.run, self.setup_fields
        with m.State("PASS"):           # the next pass's heads, a cycle after V_LAST's
            # command is taken: its hundreds of enables then come from the state (the head
            # pointers' from flags set with it), not from the handshake and the decisions
            # behind it
            m.d.sync += self.c_load.eq(1)
            m.d.comb += [seq.busy.eq(1), self.passes_left.step.eq(1),
                         self.group_left.step.eq(1),
                         self.group_left.load.eq(self.group_left.last),
                         self.group_left.init.eq(setup.kv_every)]
            self.first_block_of_pass()      # the head pointers: `heads_pass`
            m.next = "SIZE"


class WriteSequencer(wiring.Component):
    """One write command per output row, in row order, at most one every other cycle;
    `finished` once all are acknowledged.

    Ports: `start` (pulse, with `run` valid), `cmd` (to the DMA writer), `done`
    (the writer's completions), `finished` (level, until the next start), `error`
    (a completion reported an error), `busy`.
    """

    #: cycles from the last completion on `done` to `finished`: the outstanding count,
    #: then the finished register
    finish_latency = 2

    def __init__(self, *, addr_width, row_bytes):
        validate.positive("WriteSequencer", addr_width=addr_width, row_bytes=row_bytes)
        self._addr_width, self._row_bytes = addr_width, row_bytes
        super().__init__({
            "start": In(1),
            "run": In(run_layout(addr_width)),
            "cmd": Out(stream.Signature(command_layout(addr_width))),
            "done": In(stream.Signature(write_done_layout())),
            "finished": Out(1),
            "error": Out(1),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        addr_width = self._addr_width
        run = Signal(run_layout(addr_width))
        setup = run.setup
        # a pass of gb heads writes row t of each in turn; the ends are registers
        # (`DownCounter`), since the DMA's `ready` enables everything they decide
        m.submodules.o_heads = o_heads = DownCounter(8, init_last=True)  # this row's heads
        m.submodules.rows_left = rows_left = DownCounter(32, init_last=True)  # this pass's rows
        m.submodules.passes_left = passes_left = DownCounter(32)
        o_head = Signal(addr_width)     # this pass's first head, row 0
        o_row = Signal(addr_width)      # this row of the pass's first head
        o_ptr = Signal(addr_width)      # the next command's row
        issuing = Signal()
        started = Signal()
        outstanding = Signal(33)
        # A command's counters and pointers step the cycle after it is taken, from this
        # register, and no command is offered in that cycle: the DMA's `ready` (the
        # command slice's level) then ends at one flip-flop, not at the enables of three
        # address registers through the counters' ends. The writer takes a command a row,
        # so a command every other cycle keeps ahead of it.
        taken = Signal()
        # the run's last command taken, registered beside `taken` from the counters' ends
        # as they are when it is issued: `issuing`'s enable then starts at one register,
        # not at `taken` through three ends (a LUT chain ABC shares with the counters'
        # loads, spread across the sequencer)
        final_taken = Signal()
        # whether the latched run has one row and one head a pass, compared as it is
        # latched: compared at a pass's end, a 32-bit comparison from the latched N came
        # before the counters' ends (int8's worst path on a seed)
        one_row, one_head = Signal(name="run_one_row"), Signal(name="run_one_head")

        issued = self.cmd.valid & self.cmd.ready
        acked = self.done.valid & self.done.ready
        row_end = taken & o_heads.last
        pass_end = row_end & rows_left.last
        m.d.sync += [taken.eq(issued),
                     final_taken.eq(issued & o_heads.last & rows_left.last & passes_left.last)]
        m.d.comb += [
            self.cmd.valid.eq(issuing & ~taken),
            self.cmd.payload.addr.eq(o_ptr),
            self.cmd.payload.length.eq(self._row_bytes),
            self.done.ready.eq(1),
            self.busy.eq(issuing | (outstanding != 0)),
            # a start (which the controller gives only between runs) loads all three
            o_heads.load.eq(self.start | row_end), o_heads.step.eq(taken),
            o_heads.init.eq(Mux(self.start, self.run.setup.gb, setup.gb)),
            o_heads.init_last.eq(Mux(self.start, self.run.setup.gb == 1, one_head)),
            rows_left.load.eq(self.start | pass_end), rows_left.step.eq(row_end),
            rows_left.init.eq(Mux(self.start, self.run.seq_len, run.seq_len)),
            # compared, then selected: the start pulse comes from the controller, far away
            rows_left.init_last.eq(Mux(self.start, self.run.seq_len == 1, one_row)),
            passes_left.load.eq(self.start), passes_left.step.eq(pass_end),
            passes_left.init.eq(self.run.setup.passes),
        ]
        with m.If(taken & ~acked):
            m.d.sync += outstanding.eq(outstanding + 1)
        with m.Elif(acked & ~taken):
            m.d.sync += outstanding.eq(outstanding - 1)
        with m.If(acked & self.done.payload.error):
            m.d.sync += self.error.eq(1)
        with m.If(taken):
            m.d.sync += o_ptr.eq(o_ptr + run.o.head_stride)
            with m.If(o_heads.last):
                m.d.sync += [o_row.eq(o_row + run.o.row_stride),
                             o_ptr.eq(o_row + run.o.row_stride)]
                with m.If(rows_left.last):
                    next_head = o_head + setup.o_group_stride
                    m.d.sync += [o_head.eq(next_head), o_row.eq(next_head),
                                 o_ptr.eq(next_head)]
        with m.If(final_taken):
            m.d.sync += issuing.eq(0)
        with m.If(self.start):
            m.d.sync += [run.eq(self.run), one_row.eq(self.run.seq_len == 1),
                         one_head.eq(self.run.setup.gb == 1),
                         o_head.eq(self.run.o.base), o_row.eq(self.run.o.base),
                         o_ptr.eq(self.run.o.base), issuing.eq(1), started.eq(1),
                         self.error.eq(0), self.finished.eq(0)]
        with m.Elif(~issuing & (outstanding == 0) & started):
            m.d.sync += self.finished.eq(1)
        return m
