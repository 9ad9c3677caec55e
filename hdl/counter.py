"""`DownCounter`: a loop counter whose end is a register of its own.

A sequencer steps its loop counters in the handshake that takes a command, and the
same handshake asks whether the counter is at its end. Compared there, a 32-bit
`count == 1` is three LUT levels between the handshake and every register the
decision enables. Here `last` is computed when the count is loaded or stepped, one
comparison into a flip-flop, so the handshake sees a single register.
"""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from attenio import validate

__all__ = ["DownCounter"]


class DownCounter(wiring.Component):
    """`count` loads `init` on `load` and counts down on `step` (`load` wins); `last` is
    `count == 1`, registered beside it. Counting below 1 is the user's error: at 0 the
    count wraps and `last` stays low.
    """

    def __init__(self, width):
        validate.positive("DownCounter", width=width)
        self._width = width
        super().__init__({"load": In(1), "init": In(width), "step": In(1),
                          "count": Out(width), "last": Out(1)})

    @property
    def width(self):
        return self._width

    def elaborate(self, platform):
        m = Module()
        with m.If(self.load):
            m.d.sync += [self.count.eq(self.init), self.last.eq(self.init == 1)]
        with m.Elif(self.step):
            m.d.sync += [self.count.eq(self.count - 1), self.last.eq(self.count == 2)]
        return m
