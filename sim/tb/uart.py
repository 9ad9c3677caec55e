"""A UART peer on a design's `rx`/`tx` pins: 8 data bits, no parity, one stop bit."""

import cocotb
from cocotb.queue import Queue
from cocotb.triggers import ClockCycles, FallingEdge

__all__ = ["UartPeer"]


class UartPeer:
    """Drives `dut.rx` and samples `dut.tx` at `divisor` clock cycles per bit.

    `send(bytes)` and `recv(n)` make it a link for `attenio.sim.host.AttenIOHost`;
    `bytes_sent` and `bytes_received` count the traffic.
    """

    def __init__(self, dut, divisor):
        self.dut, self.div = dut, divisor
        self.rx_bytes = Queue()
        self.bytes_sent = self.bytes_received = 0
        dut.rx.value = 1
        cocotb.start_soon(self._receiver())

    async def send(self, data):
        clk = self.dut.clk
        for byte in data:
            for bit in [0] + [(byte >> i) & 1 for i in range(8)] + [1]:
                self.dut.rx.value = bit
                await ClockCycles(clk, self.div)
            self.bytes_sent += 1

    async def recv(self, n):
        out = bytearray()
        for _ in range(n):
            out.append(await self.rx_bytes.get())
        return bytes(out)

    async def _receiver(self):
        clk, tx = self.dut.clk, self.dut.tx
        while True:
            await FallingEdge(tx)
            await ClockCycles(clk, self.div // 2)
            assert int(tx.value) == 0, "start bit did not hold for half a bit"
            byte = 0
            for i in range(8):
                await ClockCycles(clk, self.div)
                byte |= int(tx.value) << i
            await ClockCycles(clk, self.div)
            assert int(tx.value) == 1, "missing stop bit"
            self.bytes_received += 1
            self.rx_bytes.put_nowait(byte)
