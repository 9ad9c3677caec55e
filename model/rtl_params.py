"""`RtlParams`: the latencies of the generated RTL that the cycle model's schedule leaves open.

The schedule of docs/microarchitecture.md fixes the order of everything; how
many cycles each hand-over takes is the hardware's to say. `RtlParams.of(plan)`
asks the blocks the Plan generates (`attenio.hdl.core.CoreTiming`,
`attenio.hdl.top.TopTiming`), so the model follows any change of a pipeline
without a number to update here.
"""

from dataclasses import dataclass, fields

from attenio import validate

__all__ = ["RtlParams"]


@dataclass(frozen=True)
class RtlParams:
    """The latencies of the RTL that the schedule leaves open, as named knobs.

    `RtlParams.of(plan)` takes them from the hardware the Plan generates (each
    block publishes the latencies of the stages it builds); the defaults are the
    small preset's, for what-if runs of the model alone.

    lane_latency        U_j may enter line_skew + r*q/L + lane_latency cycles after
                        the cycle following S_j's last word at the array's entry (the
                        score's operand and product registers, the lane's stages to
                        the MACs' bus registers, the replay's reaction and entry
                        register)
    lane_busy_tail      cycles a lane still has a row in flight after issuing its last
                        one (what `exp_busy` counts)
    lane_start          cycles from the lanes' earliest read of S_j's scores (the model's
                        SM start) to their first row in flight (the start pulse's register,
                        the lane's run register)
    line_skew           cycles from MAC 0 to the last MAC of a line (None: q - 1)
    drain_start         cycles from the block's last V word at the last MAC to the
                        normalizer's first read (the O update written, the start)
    normalizer_latency  cycles from a drain read to its byte in the output FIFO
    read_start          the model's issue time of the first read (`TopTiming`: the
                        sequencer's first command through the burst splitter to AR,
                        plus the read path's offset to the array's clock)
    feed_start          cycles from LAUNCH to the KV buffer taking the first block (from
                        then on a starved array counts as `mem_stall`)
    write_tail          cycles from the last O byte entering the normalizer's FIFO to
                        `done`, beyond the memory's write response (`Memory.write_latency`)
    feed_pad_rows       True: the last, partial Q block would feed its rows past N as
                        zeros (Qload always a*d cycles); the core feeds only the valid
                        rows (rows_valid*d cycles), hence False
    row_issue           cycles from a row's launch to its first word at the array (the
                        replay's); the next block's first K row may launch in the
                        cycle after the drain's last read of O and l
    row_ready           cycles from a row's last element entering the KV buffer to its
                        launch at the earliest (the buffer's `row` from registers)
    row_refill          cycles from the replay's release of a KV buffer half (the cycle
                        of its last word's issue) to the half taking the next row's first
                        element at the earliest
    room_issue          cycles from a row's last beat leaving the read FIFO to the model's
                        issue of the row `depth` later (the reader's room register, then
                        the read path's offset: `TopTiming.read_offset`)
    beat_leave          a row's last beat leaves the read FIFO at the earliest this many
                        cycles before the model's arrival time of the row
    block_command       cycles from the core taking a block's command (the cycle after
                        the previous block's last element entered the KV buffer) to the
                        model's issue of the block's first read
    block_fill          cycles from the core taking a block's command to the KV buffer
                        taking its first element
    feed_lead           cycles by which a beat's last element leaves the unpacker before
                        the KV buffer takes it, when the buffer sets the pace (the feed's
                        register slice: `StreamSlice.lead`)
    block_gap           controller bubble cycles between U(N-1) and the next Qload
    burst_overhead      idle data-bus cycles per AXI burst (the DMA's per-burst cost)
    axi_rate_cap        a single AXI port moves one beat per cycle: the link rate is
                        min(bw, axi_data_bits / 8) (see `attenio.model.memmodel.Memory`)
    score_period        cycles per chunk of a K row (`CoreTiming.score_period`): None for
                        r (int8's slot-by-slot replay), max(r, L_acc) for a float format
    """

    lane_latency: int = 26
    lane_busy_tail: int = 20
    line_skew: int | None = None
    drain_start: int = 6
    normalizer_latency: int = 33
    read_start: int = 14
    feed_start: int = 4
    write_tail: int = 9
    feed_pad_rows: bool = False
    lane_start: int = 5
    row_issue: int = 3
    row_ready: int = 1
    row_refill: int = 1
    room_issue: int = 7
    beat_leave: int = 5
    block_command: int = 11
    block_fill: int = 1
    feed_lead: int = 1
    block_gap: int = 0
    burst_overhead: int = 0
    axi_rate_cap: bool = False
    score_period: int | None = None

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if f.type is bool or f.type == "bool":
                validate.flag("RtlParams", f.name, v)
            elif v is not None:
                validate.integer("RtlParams", f.name, v, lo=0)

    @classmethod
    def of(cls, plan, **overrides):
        """The latencies of the RTL generated for `plan`, from its blocks.

        A float format with the paper's 16-bit O accounting (analysis only, no RTL)
        takes the latencies of the fp32-O datapath the RTL builds."""
        import dataclasses

        from attenio.formats import FloatFormat
        from attenio.hdl.core import CoreTiming
        from attenio.hdl.formats import arith_of
        from attenio.hdl.top import TopTiming

        b, w = plan.budget, plan.workload
        fmt = plan.config.format
        if isinstance(fmt, FloatFormat) and fmt.o_acc_bits != 32:
            fmt = dataclasses.replace(fmt, o_acc_bits=32)
        arith = arith_of(fmt, max_seq_len=w.max_keys, head_dim=w.head_dim)
        lanes = max(1, b.exp_units // b.mac_lines)
        core = CoreTiming.of(arith, macs_per_line=b.macs_per_line,
                             rows_per_mac=plan.rows_per_mac, lanes=lanes, split=plan.split)
        top = TopTiming.of(plan)
        # every field of the two timings that is a knob here, by name
        knobs = {f.name for f in fields(cls)}
        kw = {f.name: getattr(timing, f.name) for timing in (core, top) for f in fields(timing)
              if f.name in knobs}
        kw.update(overrides)
        return cls(**kw)
