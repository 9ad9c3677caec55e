"""`StreamSlice`: a register slice on a stream, so neither `valid` nor `ready` crosses it.

The core's feed handshake depends on its KV buffer and replay (`ready` is a few
LUTs from the replay's release), and the elements' `valid` on the read FIFO, the
unpacker and the tag join. Joined without a register, the two make one path from
the replay's state through the unpacker into the DMA read FIFO's level. The slice
is a two-entry FIFO (`amaranth.lib.fifo.SyncFIFO`): `i.ready` and `o.valid` are
compares of its level register, so each side's handshake ends at the slice. Two
entries keep one element a cycle through it; an element spends one cycle in it,
and while the consumer stalls it holds two, which the producer then gave up a
cycle before the consumer takes them (`lead`).
"""

from amaranth.hdl import Module, Shape
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

__all__ = ["StreamSlice"]


class StreamSlice(wiring.Component):
    """A stream of `payload_shape` in on `i`, out on `o`, one cycle later."""

    #: cycles from an element taken on `i` to it offered on `o`
    latency = 1
    #: cycles by which `i` takes an element before `o` gives it up, while `o` takes one
    #: a cycle after a stall (the slice's two entries: one in flight, one waiting)
    lead = 1

    def __init__(self, payload_shape):
        self._shape = payload_shape
        super().__init__({
            "i": In(stream.Signature(payload_shape)),
            "o": Out(stream.Signature(payload_shape)),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.fifo = fifo = SyncFIFO(width=Shape.cast(self._shape).width, depth=2)
        m.d.comb += [
            fifo.w_data.eq(self.i.payload), fifo.w_en.eq(self.i.valid),
            self.i.ready.eq(fifo.w_rdy),
            self.o.payload.eq(fifo.r_data), self.o.valid.eq(fifo.r_rdy),
            fifo.r_en.eq(self.o.ready),
        ]
        return m
