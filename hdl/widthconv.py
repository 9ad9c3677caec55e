"""Width converters between AXI beats and int8 element streams.

The DMA moves `data_width`-bit beats; the core consumes and produces one int8
element per cycle. Elements sit little-endian in a beat (element 0 in the low
byte), which is the byte order of memory, so a row of Q, K or V in memory is the
element order of the stream.
"""

from amaranth.hdl import Module, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["element_layout", "BeatUnpacker", "BeatPacker"]


def element_layout():
    """One int8 element; `last` ends the command (a row or a block) it belongs to."""
    return data.StructLayout({"value": signed(8), "last": unsigned(1)})


def _check_width(component, data_width):
    if isinstance(data_width, bool) or data_width not in (32, 64, 128, 256, 512):
        component._MustUse__silence = True      # a refused component is no unused design
        raise ValueError(f"{type(component).__name__}: data_width must be one of 32, 64, 128, "
                         f"256, 512, not {data_width!r}")


class BeatUnpacker(wiring.Component):
    """Beats {data, last} in, elements {value, last} out, one per cycle.

    `last` of a beat is carried to the beat's final element.
    """

    def __init__(self, *, data_width):
        _check_width(self, data_width)
        self._data_width = data_width
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({"data": unsigned(data_width),
                                                        "last": unsigned(1)}))),
            "o": Out(stream.Signature(element_layout())),
        })

    @property
    def data_width(self):
        return self._data_width

    def elaborate(self, platform):
        m = Module()
        n = self._data_width // 8
        beat = Signal(self._data_width)
        last = Signal()
        index = Signal(range(n))
        full = Signal()
        m.d.comb += [
            self.o.valid.eq(full),
            self.o.payload.value.eq(beat.word_select(index, 8)),
            self.o.payload.last.eq(last & (index == n - 1)),
            self.i.ready.eq(~full | (self.o.ready & (index == n - 1))),
        ]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += index.eq(index + 1)
            with m.If(index == n - 1):
                m.d.sync += [index.eq(0), full.eq(0)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [beat.eq(self.i.payload.data), last.eq(self.i.payload.last), full.eq(1),
                         index.eq(0)]
        return m


class BeatPacker(wiring.Component):
    """Elements {value} in, beats {data} out; a beat leaves when its last byte arrives.

    The element count of every write is a multiple of the beat (the controller
    guarantees it), so no partial beat ever needs flushing.
    """

    def __init__(self, *, data_width):
        _check_width(self, data_width)
        self._data_width = data_width
        super().__init__({
            "i": In(stream.Signature(signed(8))),
            "o": Out(stream.Signature(data.StructLayout({"data": unsigned(data_width)}))),
        })

    @property
    def data_width(self):
        return self._data_width

    def elaborate(self, platform):
        m = Module()
        n = self._data_width // 8
        beat = Signal(self._data_width)
        index = Signal(range(n))
        full = Signal()
        m.d.comb += [
            self.o.valid.eq(full),
            self.o.payload.data.eq(beat),
            self.i.ready.eq(~full | self.o.ready),
        ]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += full.eq(0)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [beat.word_select(index, 8).eq(self.i.payload), index.eq(index + 1)]
            with m.If(index == n - 1):
                m.d.sync += [index.eq(0), full.eq(1)]
        return m
