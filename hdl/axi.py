"""AXI4 (full) bus signatures, seen from the master.

Members carry the AXI signal names (``awvalid``, ``rdata``, ...) flat, one level
below the port, so that a component port ``m_axi: Out(AXI4Signature(...))`` is
emitted as ``m_axi__awvalid``, ``m_axi__rdata``, ... and cocotbext-axi binds it
with ``AxiBus.from_prefix(dut, "m_axi", bus_separator="__")``.

Only what a DMA master needs is carried: the ID, address, burst and data signals
and the constant attributes a memory controller may look at (``lock``, ``cache``,
``prot``); QoS, region and user signals are left out.
"""

import enum

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from attenio import validate

__all__ = ["AXIBurst", "AXIResp", "AXI_4KB", "AXI_MAX_BURST_BEATS",
           "AXI4ReadSignature", "AXI4WriteSignature", "AXI4Signature", "AXI4LiteSignature"]

#: No INCR burst may cross a 4 KB address boundary (AXI4 A3.4.1).
AXI_4KB = 4096
#: AXI4 INCR bursts have at most 256 beats (AxLEN is 8 bits).
AXI_MAX_BURST_BEATS = 256


class AXIBurst(enum.IntEnum):
    FIXED = 0b00
    INCR = 0b01
    WRAP = 0b10


class AXIResp(enum.IntEnum):
    OKAY = 0b00
    EXOKAY = 0b01
    SLVERR = 0b10
    DECERR = 0b11


def _check_widths(owner, addr_width, data_width, id_width):
    validate.integer(owner, "addr_width", addr_width, lo=12, hi=64)
    validate.power_of_two(owner, "data_width", data_width, lo=8, hi=1024)
    # cocotbext-axi requires the ID signals, so a zero-width ID is not offered.
    validate.integer(owner, "id_width", id_width, lo=1, hi=32)


def _address_members(prefix, addr_width, id_width):
    return {
        f"{prefix}id": Out(id_width),
        f"{prefix}addr": Out(addr_width),
        f"{prefix}len": Out(8),
        f"{prefix}size": Out(3),
        f"{prefix}burst": Out(2),
        f"{prefix}lock": Out(1),
        f"{prefix}cache": Out(4),
        f"{prefix}prot": Out(3),
        f"{prefix}valid": Out(1),
        f"{prefix}ready": In(1),
    }


def _read_members(addr_width, data_width, id_width):
    return {
        **_address_members("ar", addr_width, id_width),
        "rid": In(id_width),
        "rdata": In(data_width),
        "rresp": In(2),
        "rlast": In(1),
        "rvalid": In(1),
        "rready": Out(1),
    }


def _write_members(addr_width, data_width, id_width):
    return {
        **_address_members("aw", addr_width, id_width),
        "wdata": Out(data_width),
        "wstrb": Out(data_width // 8),
        "wlast": Out(1),
        "wvalid": Out(1),
        "wready": In(1),
        "bid": In(id_width),
        "bresp": In(2),
        "bvalid": In(1),
        "bready": Out(1),
    }


class _BusSignature(wiring.Signature):
    """A signature made from keyword parameters, which it keeps: two of one type with
    the same parameters are equal."""

    def __init__(self, members, **params):
        self._params = params
        super().__init__(members)

    addr_width = property(lambda self: self._params["addr_width"])
    data_width = property(lambda self: self._params["data_width"])

    def __eq__(self, other):
        return type(self) is type(other) and self._params == other._params

    def __hash__(self):
        return hash((type(self), *self._params.items()))

    def __repr__(self):
        params = ", ".join(f"{name}={value}" for name, value in self._params.items())
        return f"{type(self).__name__}({params})"


class _AXI4SignatureBase(_BusSignature):
    _members = None  # set by subclasses

    def __init__(self, *, addr_width, data_width, id_width=1):
        _check_widths(type(self).__name__, addr_width, data_width, id_width)
        super().__init__(type(self)._members(addr_width, data_width, id_width),
                         addr_width=addr_width, data_width=data_width, id_width=id_width)

    id_width = property(lambda self: self._params["id_width"])

    @property
    def bytes_per_beat(self):
        return self.data_width // 8


class AXI4ReadSignature(_AXI4SignatureBase):
    """The AR and R channels of an AXI4 master port."""
    _members = staticmethod(_read_members)


class AXI4WriteSignature(_AXI4SignatureBase):
    """The AW, W and B channels of an AXI4 master port."""
    _members = staticmethod(_write_members)


class AXI4Signature(_AXI4SignatureBase):
    """A whole AXI4 master port: AW, W, B, AR and R.

    Its members are the union of `AXI4WriteSignature` and `AXI4ReadSignature`
    with the same names, so a read-only and a write-only master can share one
    port member by member (see `attenio.hdl.dma.DMA`).
    """
    _members = staticmethod(lambda a, d, i: {**_write_members(a, d, i), **_read_members(a, d, i)})


class AXI4LiteSignature(_BusSignature):
    """An AXI4-Lite port seen from the master; members carry the AXI names."""

    def __init__(self, *, addr_width, data_width=32):
        validate.one_of("AXI4LiteSignature", "data_width", data_width, (32, 64))
        validate.integer("AXI4LiteSignature", "addr_width", addr_width, lo=3, hi=64)
        super().__init__({
            "awaddr": Out(addr_width), "awprot": Out(3), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wvalid": Out(1),
            "wready": In(1),
            "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "araddr": Out(addr_width), "arprot": Out(3), "arvalid": Out(1), "arready": In(1),
            "rdata": In(data_width), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
        }, addr_width=addr_width, data_width=data_width)
