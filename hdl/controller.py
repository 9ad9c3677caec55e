"""The run controller: checks a run's configuration, starts the sequencers, counts.

A run is started by the CSR START pulse. It latches the run's parameters the next
cycle (LATCH), with KV_LEN = 0 resolved to SEQ_LEN (so drivers that never write KV_LEN
run self-attention), and first checks what the hardware cannot serve (N = 0, N or N_kv
above the generated maximum, causal with N_kv < N, no heads, HEAD_GROUP = 0 or above
255, MODE.GROUPED with HEAD_GROUP above the block's rows, MODE.HEAD_SCALES with more
heads than SCALE_C_TABLE holds, a base address or stride that is not a multiple of the
AXI beat) and, if so, ends the run five cycles later with an
error code and done set, having moved no byte. Otherwise it clears the DMA's byte
counters and error status and derives what the sequencers need of the run
(`setup_layout`): gb, the query heads a block serves (HEAD_GROUP with MODE.GROUPED, else
1); a_g = a div gb and gb * a_g, by restoring division (a bit of a a cycle); N mod a_g,
the causal first block's rows of each head (a bit of N a cycle); HEADS mod gb (32
cycles: with MODE.GROUPED a remainder ends the run with HEADS_NOT_GROUPED, still
having moved no byte); and gb times N, N_kv - N and the Q and O head strides, by
shift-and-add over the 8 bits of gb. That is done one adder or comparison a cycle,
before LAUNCH, so it costs the run no counted cycle and the sequencers no multiplier
or divider.

A block range (Q_BLOCK_FIRST, Q_BLOCK_COUNT, not both 0; `attenio.analysis.block_range`)
is a run of its own: the controller rewrites the latched run into the rows of the range,
so the sequencers walk it as they walk any run and need no register of it. After N mod
a_g it walks the blocks one a cycle, adding each block's rows (short_h for a causal first
block, else a_g) to find the range's first row row0 and its end (BLOCK_RANGE when a block
of the range starts at or past N), then steps Q_BASE and O_BASE on by their row strides
once a cycle, row0 times, and sets SEQ_LEN to the range's rows, with the mask KV_LEN to the
keys its last row sees (rows aligned at the end keep every row's keys), and N mod a_g to
the range's rows mod a_g (0 unless it holds the short block: with the mask block 0, else
the last). That is FIRST + COUNT + row0 + 6 cycles, at most
about N + N / a_g: less than one block's pass over K and V, and uncounted, like the rest
of the setup. A batch refuses a range (BLOCK_RANGE_IN_BATCH): its runs are its
descriptors' sequences, whole. Then it starts the read and write sequencers, and ends the run when
every output row has been acknowledged and the core is idle. An AXI error
response does not hang the run: the data keep flowing and the run ends with
`AXI_READ` or `AXI_WRITE`.

Counters (64-bit, cleared at start): `cycles` while busy; `pe_busy` and
`exp_busy` from the core's strobes; `mem_stall` when the array waits for a row
that has not fully arrived and neither the array nor the lanes compute. The
strobes are registered before they are counted: they come from handshakes across
the chip, too far to also pass a 64-bit counter's enable and carry in one cycle.
The counts are the same, since the strobes are low in LAUNCH and in RUN's last
cycle (the core is idle then).
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from attenio import validate
from attenio.regmap import (DESCRIPTOR_BYTES, DESCRIPTOR_FIELDS, DescFlag, ErrorCode,
                            descriptor_stride)

from .dma import error_layout
from attenio.regmap import MAX_HEAD_GROUP, SCALE_TABLE_ENTRIES

from .sequencer import run_layout

__all__ = ["Controller"]


class Controller(wiring.Component):
    """Ports: `start` and `run` from the CSRs; `busy`, `done`, `error`, the counters to the
    CSRs; `seq_run` to both sequencers, `seq_start` to the read one and `seq_start_w`, the
    same pulse, to the write one; `dma_clear` to the DMA's error and counter clears (a
    cycle after LATCH or DECIDE asks for it); `finished`, `readers_busy`, `core_busy`,
    `dma_error` from below;
    `pe_active`, `exp_active`, `starved` strobes from the core.
    """

    #: cycles from `finished` (with the readers and the core idle) to `done`; the
    #: `cycles` counter runs from the LAUNCH cycle up to that edge
    done_latency = 1

    #: cycles from the readers' and the core's idleness to the register RUN reads: the
    #: core's is an OR of its units' flags from across the chip, and RUN's decision
    #: drives the CSRs' enables. Both fall cycles before the last write's response
    #: finishes the write sequencer (`attenio.hdl.top`'s `write_tail`), so the register
    #: delays no run that ends without an error
    idle_latency = 1

    #: bits of gb the setup's shift-and-add walks (`attenio.regmap.MAX_HEAD_GROUP`)
    group_bits = MAX_HEAD_GROUP.bit_length()

    #: cycles after START before the setup's division (LATCH, TEST, CHECK, DECIDE); a bad
    #: run is done (and idle) the cycle after them
    check_cycles = 4

    def __init__(self, *, addr_width, max_seq_len, beat_bytes, block_rows, page_rows=0):
        validate.positive("Controller", addr_width=addr_width, max_seq_len=max_seq_len,
                          block_rows=block_rows)
        validate.power_of_two("Controller", "beat_bytes", beat_bytes, lo=4, hi=64)
        if page_rows:
            validate.power_of_two("Controller", "page_rows", page_rows, hi=2 ** 16)
        self._addr_width, self._max_seq_len, self._beat_bytes = addr_width, max_seq_len, beat_bytes
        self._block_rows = block_rows
        self._page_rows = page_rows
        paged = {}
        if page_rows:
            # the batch: DESC_BASE and DESC_COUNT in, each descriptor read by the read
            # sequencer (`desc_fetch` at `desc_addr`; `desc_valid` with its words on `desc`)
            paged = {"page_error": In(1), "desc_base": In(addr_width), "desc_count": In(32),
                     "desc_index": Out(32), "desc_fetch": Out(1), "desc_addr": Out(addr_width),
                     "desc": In(8 * DESCRIPTOR_BYTES), "desc_valid": In(1)}
        super().__init__({
            **paged,
            "start": In(1),
            "run": In(run_layout(addr_width, paged=bool(page_rows))),
            # Q_BLOCK_FIRST, Q_BLOCK_COUNT: the run's blocks of every pass
            "block_first": In(32), "block_count": In(32),
            "busy": Out(1),
            "done": Out(1),
            "error": Out(8),
            "cycles": Out(64), "pe_busy": Out(64), "exp_busy": Out(64), "mem_stall": Out(64),
            "seq_start": Out(1), "seq_start_w": Out(1),
            "seq_run": Out(run_layout(addr_width, paged=bool(page_rows))),
            "dma_clear": Out(1),
            "finished": In(1),
            "readers_busy": In(1),
            "core_busy": In(1),
            "dma_error": In(error_layout()),
            "pe_active": In(1),
            "exp_active": In(1),
            "starved": In(1),
        })

    @property
    def max_seq_len(self):
        return self._max_seq_len

    @property
    def block_rows(self):
        return self._block_rows

    def setup_cycles(self):
        """Cycles between DECIDE and LAUNCH of a good run: a div gb, N mod a_g, HEADS mod gb
        and its check, the products."""
        return self.setup_cycles_of(block_rows=self._block_rows, max_seq_len=self._max_seq_len)

    @classmethod
    def setup_cycles_of(cls, *, block_rows, max_seq_len):
        """`setup_cycles` of a controller of these parameters."""
        return block_rows.bit_length() + max_seq_len.bit_length() + 32 + 1 + cls.group_bits

    #: a batch: FETCH, the one cycle that asks the read sequencer for the next descriptor
    fetch_cycles = 1

    def check(self, m, run):
        """The error code a run with parameters `run` ends with (0 if none), a cycle after
        them: each test is a register of its own (TEST), and the code their priority
        (CHECK). The latched run sits across the chip, and a test's carry chain and the
        priority after it did not fit in one cycle with the route from it."""
        code = Signal(8, name="check_code")
        mask = self._beat_bytes - 1
        misaligned = 0
        for t in (run.q, run.k, run.v, run.o):
            misaligned = misaligned | ((t.base | t.head_stride | t.row_stride) & mask).any()
        tests = [(run.seq_len == 0, ErrorCode.SEQ_LEN_ZERO)]
        if self._page_rows:
            tests.append((self._batch & (run.kv_len == 0), ErrorCode.KV_LEN_ZERO))
            misaligned = misaligned | (run.table & mask).any()
        tests += [(run.seq_len > self._max_seq_len, ErrorCode.SEQ_LEN_TOO_LARGE),
                  (run.kv_len > self._max_seq_len, ErrorCode.KV_LEN_TOO_LARGE)]
        if self._page_rows:
            # ceil(N_kv / P) pages > the table's entries (N_kv >= 1 here)
            lg = self._page_rows.bit_length() - 1
            tests.append((((run.kv_len - 1) >> lg) >= run.table_len, ErrorCode.TABLE_SHORT))
        tests += [(run.causal & (run.kv_len < run.seq_len), ErrorCode.CAUSAL_KV_SHORT),
                  (run.heads == 0, ErrorCode.HEADS_ZERO),
                  (run.group == 0, ErrorCode.HEAD_GROUP_ZERO),
                  (run.group > MAX_HEAD_GROUP, ErrorCode.HEAD_GROUP_TOO_LARGE),
                  (run.grouped & (run.group > self._block_rows), ErrorCode.GROUP_OVER_BLOCK),
                  (run.head_scales & (run.heads > SCALE_TABLE_ENTRIES),
                   ErrorCode.SCALE_TABLE_SHORT),
                  (misaligned, ErrorCode.MISALIGNED)]
        if self._page_rows:
            tests.append((self._batch & self._ranged, ErrorCode.BLOCK_RANGE_IN_BATCH))
        failed = [Signal(name=f"check_{error.name.lower()}") for _, error in tests]
        m.d.sync += [flag.eq(test) for flag, (test, _) in zip(failed, tests)]
        for k, (flag, (_, error)) in enumerate(zip(failed, tests)):
            with (m.If if k == 0 else m.Elif)(flag):
                m.d.comb += code.eq(error)
        return code

    def batch_states(self, m, batch_left, desc_ptr):
        """FETCH asks the read sequencer for the next descriptor; DESC waits for it and puts
        its fields in the run (the batch's shared ones stay as the registers latched them),
        then the run is checked and set up as one of the registers."""
        run = self.seq_run
        with m.State("FETCH"):
            m.d.comb += [self.desc_fetch.eq(1), self.desc_addr.eq(desc_ptr)]
            m.next = "DESC"
        with m.State("DESC"):
            with m.If(self.desc_valid):
                word = {name: self.desc[32 * i:32 * i + 32]
                        for i, (name, _) in enumerate(DESCRIPTOR_FIELDS)}
                m.d.sync += [
                    run.causal.eq(word["FLAGS"][DescFlag.CAUSAL.bit_length() - 1]),
                    run.grouped.eq(word["FLAGS"][DescFlag.GROUPED.bit_length() - 1]),
                    run.head_scales.eq(word["FLAGS"][DescFlag.HEAD_SCALES.bit_length() - 1]),
                    run.seq_len.eq(word["SEQ_LEN"]), run.kv_len.eq(word["KV_LEN"]),
                    run.heads.eq(word["HEADS"]), run.q.base.eq(word["Q_BASE"]),
                    run.o.base.eq(word["O_BASE"]), run.table.eq(word["TABLE"]),
                    run.table_len.eq(word["TABLE_LEN"]),
                    desc_ptr.eq(desc_ptr + descriptor_stride(self._beat_bytes)),
                    batch_left.eq(batch_left - 1)]
                m.next = "TEST"

    def range_loads(self, m, block_first, block_count):
        """The walk's registers (`range_walk` writes them), and its writes to the latched run.

        The walk writes the run only through kept flags of its own, as LATCH does (see
        `elaborate`): a state decode and a 32-bit comparison would otherwise drive the
        enables of some 200 flip-flops across the chip in one cycle. The range's N, N_kv,
        SKIP and N mod a_g follow row0 and row_end in registers of their own, both set a
        cycle or more before RANGE_ROWS ends; with the mask the range's last row sees
        row_end + SKIP keys, so its SKIP is SKIP + row0."""
        run, setup = self.seq_run, self.seq_run.setup
        # the row at which the next block starts, and the blocks (then rows) left to step
        self._walk_pos, self._walk_left = Signal(33, name="walk_pos"), Signal(32, name="walk_left")
        # the rows from the walk's row to N, and the next block's rows (short_h for a causal
        # first block, else a_g); whether the block at the walk's row does not exist (row
        # >= N) and whether no block (or row) is left to step, as registers set with the
        # row and the count: the walk's enables then start from flip-flops, not from a
        # 33-bit comparison with the latched N across the chip, and each step's test is
        # one comparison of two registers (after the step, row >= N when the rows to N
        # were at most the block's)
        self._walk_rest = Signal(32, name="walk_rest")
        self._walk_size = Signal(32, name="walk_size")
        self._walk_past, self._walk_none = Signal(name="walk_past"), Signal(name="walk_none")
        # FIRST == 0 and COUNT == 0, and whether the range ends at N (set with row_end):
        # registers, so that no 32-bit comparison of the latched run reaches an enable or
        # a reset (such as `range_short_h`'s) in the walk's cycle
        self._first_zero, self._count_zero = Signal(), Signal()
        self._ends_at_n = Signal()
        m.d.sync += [self._first_zero.eq(block_first == 0),
                     self._count_zero.eq(block_count == 0)]
        # the range's first row and its end
        self._row0, self._row_end = row0, row_end = Signal(32), Signal(32)
        self._walk = flags = {name: Signal(name=f"walk_{name}", attrs={"keep": 1})
                              for name in ("step_q", "step_o", "len", "kv_len", "skip", "short")}
        # in which of the walk's states the controller is (`range_states`), one-hot
        self._walk_in = {name: Signal(name=f"walk_in_{name[6:].lower()}", attrs={"keep": 1})
                         for name in ("RANGE_START", "RANGE_FIRST", "RANGE_SPAN", "RANGE_ROWS")}
        m.d.sync += [flag.eq(0) for flag in flags.values()]
        with m.If(flags["step_q"]):
            m.d.sync += run.q.base.eq(run.q.base + run.q.row_stride)
        with m.If(flags["step_o"]):
            m.d.sync += run.o.base.eq(run.o.base + run.o.row_stride)
        rows, kv_len, skip = Signal(32, name="range_rows"), Signal(32, name="range_kv_len"), \
            Signal(32, name="range_skip")
        # rows mod a_g: a short block in the range keeps its rows (with the mask the first
        # block, else the last)
        short = Signal.like(setup.short_h, name="range_short_h")
        keep = Mux(run.causal, self._first_zero, self._ends_at_n)
        # N_kv - row_end, set with row_end (`range_walk`): SKIP without the mask is then one
        # adder from registers, not two carry chains in a cycle after a route from the run
        self._kv_rest = kv_rest = Signal(32, name="range_kv_rest")
        m.d.sync += [rows.eq(row_end - row0), kv_len.eq(row_end + setup.skip),
                     skip.eq(Mux(run.causal, setup.skip, kv_rest) + row0),
                     short.eq(Mux(keep, setup.short_h, 0))]
        for name, target, value in [("len", run.seq_len, rows), ("kv_len", run.kv_len, kv_len),
                                    ("skip", setup.skip, skip), ("short", setup.short_h, short)]:
            with m.If(flags[name]):
                m.d.sync += target.eq(value)

    def range_walk(self, m, block_first, block_count):
        """The walk's registers (`range_states` sequences them).

        They are written under kept one-hot flags of their own (`walk_in`, set as each
        of the walk's states is entered), so their enables start from a flag, `past` and
        `none`, not from a decode of the controller's state, which lies across the chip
        from the walk's 32-bit registers."""
        run, setup = self.seq_run, self.seq_run.setup
        pos, left, rest, size = self._walk_pos, self._walk_left, self._walk_rest, self._walk_size
        past, none = self._walk_past, self._walk_none   # pos >= N, left == 0
        row0, row_end, flags, at = self._row0, self._row_end, self._walk, self._walk_in

        def count(value, zero):         # left = value, none = (value == 0) as `zero` says
            m.d.sync += [left.eq(value), none.eq(zero)]

        # block 0's rows (short_h for a causal first block, if not 0), registered every
        # cycle: N mod a_g is written as the walk begins (RANGE_SIZE), and its comparison
        # and the selection after a route from the latched run were a longest path
        first_size = Signal.like(size, name="walk_first_size")
        m.d.sync += first_size.eq(Mux(run.causal & (setup.short_h != 0), setup.short_h,
                                      setup.a_g))
        with m.If(at["RANGE_START"]):   # block 0 at row 0 (N >= 1, the check: it exists)
            m.d.sync += [pos.eq(0), rest.eq(run.seq_len), past.eq(0), size.eq(first_size)]
            count(block_first, self._first_zero)
        with m.If((at["RANGE_FIRST"] | at["RANGE_SPAN"]) & ~none & ~past):     # a block on
            m.d.sync += [pos.eq(pos + size), rest.eq(rest - size), past.eq(rest <= size),
                         size.eq(setup.a_g)]
        with m.If(at["RANGE_FIRST"] & none & ~past):
            m.d.sync += row0.eq(pos)
            count(block_count, self._count_zero)
        # N_kv - N and N_kv - pos from registers (the run is latched cycles before the walk
        # reaches RANGE_SPAN), so `kv_rest` selects a difference, not the 32-bit
        # subtraction after the selection of its operand (10.75 ns from the walk's flags,
        # int8's worst path on a seed)
        kv_after_n = Signal(32, name="range_kv_after_n")
        m.d.sync += kv_after_n.eq(run.kv_len - run.seq_len)
        with m.If(at["RANGE_SPAN"] & none):     # COUNT 0 and a short last block end at N
            ends = self._count_zero | past
            end = Mux(ends, run.seq_len, pos)
            m.d.sync += [row_end.eq(end),
                         self._kv_rest.eq(Mux(ends, kv_after_n, run.kv_len - pos)),
                         self._ends_at_n.eq(ends),
                         flags["step_q"].eq(row0 != 0), flags["step_o"].eq(row0 != 0)]
            count(row0, row0 == 0)
        with m.If(at["RANGE_ROWS"]):    # a step a cycle, row0 in all (the flags run ahead)
            with m.If(none):
                m.d.sync += [flags["len"].eq(1), flags["kv_len"].eq(run.causal),
                             flags["skip"].eq(1), flags["short"].eq(1)]
            with m.Else():
                m.d.sync += [flags["step_q"].eq(left > 1), flags["step_o"].eq(left > 1)]
        # a block (or row) stepped: the count's decrement, assigned last so that it is the
        # selection nearest the register (a LUT after the subtraction's carry chain, the
        # loads selected beside it): under the states' loads it was three LUTs deep after
        # the chain, a loop on the count that was int8's worst path on a seed
        step = Signal(name="walk_step")
        m.d.comb += step.eq(((at["RANGE_FIRST"] | at["RANGE_SPAN"]) & ~past | at["RANGE_ROWS"])
                            & ~none)
        with m.If(step):
            count(left - 1, left == 1)

    def range_states(self, m):
        """The block range's walk (see the module's docstring): RANGE_SIZE while block 0's
        rows are registered (N mod a_g was written the cycle before), RANGE_START at block 0,
        RANGE_FIRST to block FIRST's first row, RANGE_SPAN over COUNT blocks to the range's
        end, RANGE_ROWS the Q and O bases on by row0 rows (the step flags a cycle ahead),
        RANGE_CUT the range's N, N_kv, SKIP and N mod a_g loaded (`range_loads`); then
        DIV_H. The states decide as `range_walk` does; each entered sets its flag alone."""
        past, none, at = self._walk_past, self._walk_none, self._walk_in

        def enter(name):                # the next state, and its flag alone (IDLE: none)
            m.d.sync += [flag.eq(key == name) for key, flag in at.items()]
            m.next = name

        def fail():
            m.d.sync += [self.error.eq(ErrorCode.BLOCK_RANGE), self.done.eq(1), self.busy.eq(0)]
            enter("IDLE")

        with m.State("RANGE_SIZE"):     # the first block's rows registered (`range_walk`)
            enter("RANGE_START")
        with m.State("RANGE_START"):
            enter("RANGE_FIRST")
        with m.State("RANGE_FIRST"):
            with m.If(past):
                fail()
            with m.Elif(none):
                enter("RANGE_SPAN")
        with m.State("RANGE_SPAN"):
            with m.If(none):
                enter("RANGE_ROWS")
            with m.Elif(past):
                fail()
        with m.State("RANGE_ROWS"):
            with m.If(none):
                enter("RANGE_CUT")
        with m.State("RANGE_CUT"):      # the flags load the range's run
            m.next = "DIV_H"

    def elaborate(self, platform):
        m = Module()
        # a batch (DESC_COUNT > 0) under way: its runs take their fields from descriptors
        self._batch = Signal()
        # the block range as latched, and whether there is one (registered at LATCH's end)
        block_first, block_count = Signal(32), Signal(32)
        self._ranged = Signal()
        m.d.sync += self._ranged.eq((block_first != 0) | (block_count != 0))
        # The check runs on the latched parameters and its verdict is registered before
        # anything acts on it: the CSRs, the comparisons and the clears of the DMA's
        # 64-bit counters are far apart on a chip, too far for one cycle.
        code = self.check(m, self.seq_run)
        # the DMA's clear a cycle after the state that asks for it, from a register: a
        # decode of the state would have to reach the DMA's sticky error across the chip
        # in one cycle; nothing reaches the DMA before it (LAUNCH, or a descriptor's read,
        # come later)
        clear, dma_clear = Signal(), Signal(name="dma_clear_q", attrs={"keep": 1})
        m.d.comb += [clear.eq(0), self.dma_clear.eq(dma_clear)]
        m.d.sync += dma_clear.eq(clear)
        # the start pulse is a register, high in LAUNCH: it enables the sequencers' copies
        # of the run, some 300 flip-flops each, across the chip; one register each (kept,
        # so that Yosys does not merge them), placed beside its sequencer
        start_r = Signal(name="start_rseq", attrs={"keep": 1})
        start_w = Signal(name="start_wseq", attrs={"keep": 1})
        m.d.comb += [self.seq_start.eq(start_r), self.seq_start_w.eq(start_w)]
        m.d.sync += [start_r.eq(0), start_w.eq(0)]
        idle = Signal(name="units_idle")        # `idle_latency`
        m.d.sync += idle.eq(~self.readers_busy & ~self.core_busy)
        run, setup = self.seq_run, self.seq_run.setup
        a = self._block_rows
        na, nn = a.bit_length(), self._max_seq_len.bit_length()
        nw = max(na, nn)
        # restoring division, MSB of `num` first: one comparison (and its subtraction) a cycle;
        # the divisor (gb or a_g) has at most nw bits, the dividend (a, N or HEADS) up to 32
        # (the quotient has 32 bits: HEADS div gb is the number of passes)
        num, rem, quo, divisor = Signal(32), Signal(nw + 1), Signal(32), Signal(nw)
        div_i = Signal(range(33))
        shifted = Signal(nw + 1)
        rem_next, quo_next = Signal(nw + 1), Signal(32)
        m.d.comb += [shifted.eq((rem << 1) | num[-1]),
                     rem_next.eq(Mux(shifted >= divisor, shifted - divisor, shifted)),
                     quo_next.eq((quo << 1) | (shifted >= divisor))]

        def divide():
            m.d.sync += [num.eq(num << 1), rem.eq(rem_next), quo.eq(quo_next),
                         div_i.eq(div_i - 1)]

        # the strobes a cycle late, counted in RUN (see the module's docstring)
        pe_active, exp_active, stalled = Signal(), Signal(), Signal()
        m.d.sync += [pe_active.eq(self.pe_active), exp_active.eq(self.exp_active),
                     stalled.eq(self.starved & ~self.pe_active & ~self.exp_active)]
        # The counters' enables are registers of their own (LAUNCH or RUN, and RUN), set
        # and cleared with the state: a state decode would drive the 256 enables from
        # wherever the state machine is placed.
        counting, running = Signal(), Signal()
        with m.If(counting):
            m.d.sync += self.cycles.eq(self.cycles + 1)
        with m.If(running):
            m.d.sync += [
                self.pe_busy.eq(self.pe_busy + pe_active),
                self.exp_busy.eq(self.exp_busy + exp_active),
                self.mem_stall.eq(self.mem_stall + stalled),
            ]
        # LATCH copies the run (some 500 flip-flops) and clears the counters (256), each
        # field and counter by a kept load register of its own, set by START: one enable,
        # decoded from the state and START, cannot reach them all across the chip in a cycle.
        loads = {name: (getattr(self.seq_run, name), getattr(self.run, name))
                 for name, _ in self.run.shape() if name != "setup"}
        loads["kv_len"] = (self.seq_run.kv_len,
                           Mux(self.run.kv_len == 0, self.run.seq_len, self.run.kv_len))
        loads.update({name: (getattr(self, name), 0)
                      for name in ("cycles", "pe_busy", "exp_busy", "mem_stall")})
        loads.update({"block_first": (block_first, self.block_first),
                      "block_count": (block_count, self.block_count)})
        load = {name: Signal(name=f"load_{name}", attrs={"keep": 1}) for name in loads}
        m.d.sync += [flag.eq(0) for flag in load.values()]
        for name, (target, value) in loads.items():
            with m.If(load[name]):
                m.d.sync += target.eq(value)

        # gb, shifted out LSB first; a bit wider than gb, so that its bit 1 is 0 in MUL's
        # last cycle
        mul_b = Signal(self.group_bits + 1)
        a_mod = Signal(nw + 1)              # a mod gb
        # gb times each of these, by shift-and-add: name -> (product, multiplicand at DIV_N's end)
        products = {"gn": (setup.gn, run.seq_len), "gskip": (setup.gskip, setup.skip),
                    "q_group_stride": (setup.q_group_stride, run.q.head_stride),
                    "o_group_stride": (setup.o_group_stride, run.o.head_stride),
                    "short": (setup.short, setup.short_h)}
        mul_x = {name: Signal(len(acc), name=f"mul_{name}") for name, (acc, _) in products.items()}
        # Each product adds on a kept register of its own, set in the cycle before from the
        # next bit of gb (only in HEADS and MUL, so it is high only in MUL): the adds'
        # enables are then neither a decode of the state nor shared across the five
        # accumulators, which the seq_run copies spread over the chip. The multiplicands
        # shift every cycle; HEADS loads them.
        add = {name: Signal(name=f"mul_add_{name}", attrs={"keep": 1}) for name in products}
        for name, (acc, _) in products.items():
            m.d.sync += mul_x[name].eq(mul_x[name] << 1)
            with m.If(add[name]):
                m.d.sync += acc.eq(acc + mul_x[name])
        self.range_loads(m, block_first, block_count)
        self.range_walk(m, block_first, block_count)
        if self._page_rows:
            first = Signal()                # the launch's first run: it clears the DMA
            batch_left = Signal(32)         # descriptors not yet fetched
            desc_ptr = Signal(self._addr_width)     # the next descriptor's address
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [self.done.eq(0), self.busy.eq(1),
                                 *[flag.eq(1) for flag in load.values()]]
                    if self._page_rows:
                        m.d.sync += first.eq(1)
                    m.next = "LATCH"
            with m.State("LATCH"):
                m.next = "TEST"
                if self._page_rows:
                    m.d.sync += [self._batch.eq(self.desc_count != 0), batch_left.eq(
                        self.desc_count), desc_ptr.eq(self.desc_base), self.desc_index.eq(0)]
                    with m.If(self.desc_count != 0):
                        # the DMA's counters and errors cleared before the first descriptor
                        m.d.comb += clear.eq(1)
                        m.next = "FETCH"
            if self._page_rows:
                self.batch_states(m, batch_left, desc_ptr)
            with m.State("TEST"):       # the tests registered (`check`)
                m.next = "CHECK"
            with m.State("CHECK"):
                m.d.sync += [self.error.eq(code),
                             setup.gb.eq(Mux(run.grouped, run.group, 1)),
                             setup.kv_every.eq(Mux(run.grouped, 1, run.group)),
                             setup.skip.eq(run.kv_len - run.seq_len)]
                m.next = "DECIDE"
            with m.State("DECIDE"):
                with m.If(self.error != 0):
                    m.d.sync += [self.done.eq(1), self.busy.eq(0)]
                    if self._page_rows:     # a batch's counters stop at its failing run
                        m.d.sync += [counting.eq(0), running.eq(0)]
                    m.next = "IDLE"
                with m.Else():
                    # a batch clears the DMA's counters and errors before its first run only
                    m.d.comb += clear.eq(first & ~self._batch if self._page_rows else 1)
                    m.d.sync += [num.eq(a << (32 - na)), rem.eq(0), quo.eq(0), div_i.eq(na),
                                 divisor.eq(setup.gb)]
                    m.next = "DIV_A"
            with m.State("DIV_A"):      # a_g = a div gb
                divide()
                with m.If(div_i == 1):
                    m.d.sync += [num.eq(run.seq_len << (32 - nn)), rem.eq(0), quo.eq(0),
                                 div_i.eq(nn), divisor.eq(quo_next), setup.a_g.eq(quo_next),
                                 a_mod.eq(rem_next)]
                    m.next = "DIV_N"
            with m.State("DIV_N"):      # short_h = N mod a_g
                divide()
                with m.If(div_i == 1):
                    m.d.sync += [setup.short_h.eq(rem_next), num.eq(run.heads), rem.eq(0),
                                 quo.eq(0), div_i.eq(32), divisor.eq(setup.gb)]
                    with m.If(self._ranged):
                        m.next = "RANGE_SIZE"
                    with m.Else():
                        m.next = "DIV_H"
            self.range_states(m)
            with m.State("DIV_H"):      # passes = HEADS div gb, and HEADS mod gb
                divide()
                with m.If(div_i == 1):
                    m.d.sync += setup.passes.eq(quo_next)
                    m.next = "HEADS"
            with m.State("HEADS"):      # grouped: HEADS a multiple of gb
                # The products start whatever the check says (an error run never launches):
                # the check's 32-bit comparison stays out of the accumulators' enables.
                m.d.sync += [mul_b.eq(setup.gb), div_i.eq(self.group_bits)]
                for name, (acc, x) in products.items():
                    m.d.sync += [acc.eq(0), mul_x[name].eq(x)]
                with m.If(run.grouped & (rem != 0)):
                    m.d.sync += [self.error.eq(ErrorCode.HEADS_NOT_GROUPED), self.done.eq(1),
                                 self.busy.eq(0)]
                    if self._page_rows:
                        m.d.sync += [counting.eq(0), running.eq(0)]
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += [flag.eq(setup.gb[0]) for flag in add.values()]
                    m.next = "MUL"
            with m.State("MUL"):        # gb * (N, N_kv - N, strides, short_h), a bit of gb a cycle
                m.d.sync += [mul_b.eq(mul_b >> 1), div_i.eq(div_i - 1),
                             setup.a_full.eq(a - a_mod),
                             *[flag.eq(mul_b[1]) for flag in add.values()]]
                with m.If(div_i == 1):
                    m.d.sync += [start_r.eq(1), start_w.eq(1), counting.eq(1)]
                    if self._page_rows:
                        m.d.sync += first.eq(0)
                    m.next = "LAUNCH"
            with m.State("LAUNCH"):
                m.d.sync += running.eq(1)
                m.next = "RUN"
            with m.State("RUN"):
                with m.If(self.finished & idle):
                    m.d.sync += [self.busy.eq(0), self.done.eq(1), counting.eq(0), running.eq(0)]
                    m.next = "IDLE"
                    with m.If(self.dma_error.read):
                        m.d.sync += self.error.eq(ErrorCode.AXI_READ)
                    with m.Elif(self.dma_error.write):
                        m.d.sync += self.error.eq(ErrorCode.AXI_WRITE)
                    if self._page_rows:
                        with m.Elif(self.page_error):
                            m.d.sync += self.error.eq(ErrorCode.PAGE_OUT_OF_RANGE)
                        with m.Elif(self._batch & (batch_left != 0)):
                            # the next descriptor: the counters run on, one DONE at the end
                            m.d.sync += [self.busy.eq(1), self.done.eq(0), counting.eq(1),
                                         running.eq(1), self.desc_index.eq(self.desc_index + 1)]
                            m.next = "FETCH"
                        with m.Else():
                            m.d.sync += self.desc_index.eq(self.desc_index + self._batch)
        return m
