"""`DownCounter`: a loop counter whose end is a register of its own.

A sequencer steps its loop counters in the handshake that takes a command, and the
same handshake asks whether the counter is at its end. Compared there, a 32-bit
`count == 1` is three LUT levels between the handshake and every register the
decision enables. Here `last` is computed when the count is loaded or stepped, one
comparison into a flip-flop, so the handshake sees a single register.

Where `init` is a selection between several sources, the comparison after the selection
puts the selection's control in front of a carry chain's worth of LUTs; with
``init_last=True`` the user compares each source and selects the verdict beside the value.
"""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from attenio import validate

__all__ = ["DownCounter"]


class DownCounter(wiring.Component):
    """`count` loads `init` on `load` and counts down on `step` (`load` wins); `last` is
    `count == 1`, registered beside it. Counting below 1 is the user's error: at 0 the
    count wraps and `last` stays low. `init_last`: an `init_last` port, which the user
    drives with ``init == 1``, in place of the counter's own comparison.
    """

    def __init__(self, width, *, init_last=False):
        validate.positive("DownCounter", width=width)
        validate.flag("DownCounter", "init_last", init_last)
        self._width = width
        ports = {"load": In(1), "init": In(width), "step": In(1),
                 "count": Out(width), "last": Out(1)}
        if init_last:
            ports["init_last"] = In(1)
        super().__init__(ports)

    @property
    def width(self):
        return self._width

    def elaborate(self, platform):
        m = Module()
        init_last = getattr(self, "init_last", self.init == 1)
        with m.If(self.load):
            m.d.sync += [self.count.eq(self.init), self.last.eq(init_last)]
        with m.Elif(self.step):
            m.d.sync += [self.count.eq(self.count - 1), self.last.eq(self.count == 2)]
        return m
