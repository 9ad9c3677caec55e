"""A UART (8 data bits, no parity, one stop bit) with byte streams on both sides.

`divisor` is clock cycles per bit (25 MHz / 115200 baud -> 217). The receiver
synchronizes its pin through two flip-flops, waits for a start bit, checks it
again half a bit later (rejecting glitches) and samples each data bit in its
middle; a frame whose stop bit is low is dropped. The transmitter sends a byte
whenever one is offered and it is idle.
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from attenio import validate

__all__ = ["UARTRx", "UARTTx", "UART", "check_divisor"]


def check_divisor(owner, divisor):
    """`divisor`, the bit period in clock cycles, checked: at least 4."""
    return validate.integer(owner, "divisor (clock cycles per bit)", divisor, lo=4)


class _Timed(wiring.Component):
    """A part of the UART with a bit period of `divisor` clock cycles."""

    def __init__(self, members, *, divisor):
        self._divisor = check_divisor(type(self).__name__, divisor)
        super().__init__(members)

    @property
    def divisor(self):
        return self._divisor


class UARTRx(_Timed):
    """Pin `rx` (idle high) -> stream `o` of bytes."""

    def __init__(self, *, divisor):
        super().__init__({"rx": In(1, init=1), "o": Out(stream.Signature(8)),
                          "frame_error": Out(1)}, divisor=divisor)

    def elaborate(self, platform):
        m = Module()
        div = self._divisor
        rx = Signal(init=1)
        m.submodules.sync_rx = FFSynchronizer(self.rx, rx, init=1)
        timer = Signal(range(div + div // 2 + 1))
        bit = Signal(range(10))
        shreg = Signal(8)
        m.d.sync += self.frame_error.eq(0)
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(~rx):
                    m.d.sync += timer.eq(div // 2 - 1)
                    m.next = "START"
            with m.State("START"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Elif(rx):            # a glitch, not a start bit
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += [timer.eq(div - 1), bit.eq(0)]
                    m.next = "DATA"
            with m.State("DATA"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Else():
                    m.d.sync += [shreg.eq(Cat(shreg[1:], rx)), timer.eq(div - 1), bit.eq(bit + 1)]
                    with m.If(bit == 7):
                        m.next = "STOP"
            with m.State("STOP"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Else():
                    with m.If(rx):
                        m.d.sync += [self.o.payload.eq(shreg), self.o.valid.eq(1)]
                    with m.Else():
                        m.d.sync += self.frame_error.eq(1)
                    m.next = "IDLE"
        return m


class UARTTx(_Timed):
    """Stream `i` of bytes -> pin `tx` (idle high)."""

    def __init__(self, *, divisor):
        super().__init__({"i": In(stream.Signature(8)), "tx": Out(1, init=1)}, divisor=divisor)

    def elaborate(self, platform):
        m = Module()
        div = self._divisor
        timer = Signal(range(div))
        bits = Signal(range(11))
        shreg = Signal(10, init=0x3FF)
        m.d.comb += [self.tx.eq(shreg[0]), self.i.ready.eq(bits == 0)]
        with m.If(bits == 0):
            with m.If(self.i.valid):
                # start bit, 8 data bits LSB first, stop bit
                m.d.sync += [shreg.eq(Cat(0, self.i.payload, 1)), bits.eq(10), timer.eq(div - 1)]
        with m.Elif(timer != 0):
            m.d.sync += timer.eq(timer - 1)
        with m.Else():
            m.d.sync += [shreg.eq(Cat(shreg[1:], 1)), bits.eq(bits - 1), timer.eq(div - 1)]
        return m


class UART(_Timed):
    """Receiver and transmitter sharing one bit period."""

    def __init__(self, *, divisor):
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1),
                          "rx_data": Out(stream.Signature(8)), "tx_data": In(stream.Signature(8))},
                         divisor=divisor)

    def elaborate(self, platform):
        m = Module()
        m.submodules.rx = rx = UARTRx(divisor=self._divisor)
        m.submodules.tx = tx = UARTTx(divisor=self._divisor)
        m.d.comb += [rx.rx.eq(self.rx), self.tx.eq(tx.tx)]
        wiring.connect(m, rx.o, wiring.flipped(self.rx_data))
        wiring.connect(m, wiring.flipped(self.tx_data), tx.i)
        return m
