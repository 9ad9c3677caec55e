"""Width converters between AXI beats and int8 element streams.

The DMA moves `data_width`-bit beats; the core consumes and produces one int8
element per cycle. Elements sit little-endian in a beat (element 0 in the low
byte), which is the byte order of memory, so a row of Q, K or V in memory is the
element order of the stream.
"""

from amaranth.hdl import Module, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from attenio import validate

__all__ = ["element_layout", "BeatUnpacker", "BeatPacker"]


def element_layout():
    """One int8 element; `last` ends the command (a row or a block) it belongs to."""
    return data.StructLayout({"value": signed(8), "last": unsigned(1)})


class _Converter(wiring.Component):
    """A converter between `data_width`-bit beats and int8 elements, `i` in and `o` out.

    A subclass names the two payloads (`_payloads`); both keep one beat in a register
    with the index of its current element and whether it holds data (`_beat_state`).
    """

    def __new__(cls, *, data_width):
        # Checked before the object exists: a refused converter is no unused elaboratable.
        validate.one_of(cls.__name__, "data_width", data_width, validate.AXI_DATA_WIDTHS)
        return super().__new__(cls)

    def __init__(self, *, data_width):
        self._data_width = data_width
        i, o = self._payloads(data_width)
        super().__init__({"i": In(stream.Signature(i)), "o": Out(stream.Signature(o))})

    @property
    def data_width(self):
        return self._data_width

    def _beat_state(self):
        """(elements per beat, the beat, the element index, the beat holds data)."""
        n = self._data_width // 8
        return n, Signal(self._data_width, name="beat"), Signal(range(n), name="index"), \
            Signal(name="full")


class BeatUnpacker(_Converter):
    """Beats {data, last} in, elements {value, last} out, one per cycle.

    `last` of a beat is carried to the beat's final element.
    """

    #: cycles from a beat accepted to its first element offered (the beat register)
    latency = 1

    @staticmethod
    def _payloads(data_width):
        return (data.StructLayout({"data": unsigned(data_width), "last": unsigned(1)}),
                element_layout())

    def elaborate(self, platform):
        m = Module()
        n, beat, index, full = self._beat_state()
        last = Signal()
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


class BeatPacker(_Converter):
    """Elements {value, last} in, beats {data} out; a beat leaves when its last byte arrives.

    The element count of every write is a multiple of the beat (the controller
    guarantees it), so no partial beat ever needs flushing and `last` (the end of
    the producer's block) is not needed to close one.
    """

    #: cycles from a beat's last element accepted to the beat offered (a register)
    latency = 1

    @staticmethod
    def _payloads(data_width):
        return element_layout(), data.StructLayout({"data": unsigned(data_width)})

    def elaborate(self, platform):
        m = Module()
        n, beat, index, full = self._beat_state()
        m.d.comb += [
            self.o.valid.eq(full),
            self.o.payload.data.eq(beat),
            self.i.ready.eq(~full | self.o.ready),
        ]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += full.eq(0)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [beat.word_select(index, 8).eq(self.i.payload.value), index.eq(index + 1)]
            with m.If(index == n - 1):
                m.d.sync += [index.eq(0), full.eq(1)]
        return m
