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
    if isinstance(addr_width, bool) or not isinstance(addr_width, int) \
            or not 12 <= addr_width <= 64:
        raise ValueError(f"{owner}: addr_width must be an integer from 12 to 64, "
                         f"not {addr_width!r}")
    if data_width not in (8, 16, 32, 64, 128, 256, 512, 1024) or isinstance(data_width, bool):
        raise ValueError(f"{owner}: data_width must be a power of two from 8 to 1024, "
                         f"not {data_width!r}")
    if isinstance(id_width, bool) or not isinstance(id_width, int) or not 1 <= id_width <= 32:
        # cocotbext-axi requires the ID signals, so a zero-width ID is not offered.
        raise ValueError(f"{owner}: id_width must be an integer from 1 to 32, not {id_width!r}")


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


class _AXI4SignatureBase(wiring.Signature):
    _members = None  # set by subclasses

    def __init__(self, *, addr_width, data_width, id_width=1):
        _check_widths(type(self).__name__, addr_width, data_width, id_width)
        self._addr_width = addr_width
        self._data_width = data_width
        self._id_width = id_width
        super().__init__(type(self)._members(addr_width, data_width, id_width))

    @property
    def addr_width(self):
        return self._addr_width

    @property
    def data_width(self):
        return self._data_width

    @property
    def id_width(self):
        return self._id_width

    @property
    def bytes_per_beat(self):
        return self._data_width // 8

    def __eq__(self, other):
        return (type(self) is type(other) and self.addr_width == other.addr_width
                and self.data_width == other.data_width and self.id_width == other.id_width)

    def __hash__(self):
        return hash((type(self), self.addr_width, self.data_width, self.id_width))

    def __repr__(self):
        return (f"{type(self).__name__}(addr_width={self.addr_width}, "
                f"data_width={self.data_width}, id_width={self.id_width})")


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


class AXI4LiteSignature(wiring.Signature):
    """An AXI4-Lite port seen from the master; members carry the AXI names."""

    def __init__(self, *, addr_width, data_width=32):
        if data_width not in (32, 64):
            raise ValueError(f"AXI4LiteSignature: data_width must be 32 or 64, not {data_width!r}")
        if isinstance(addr_width, bool) or not isinstance(addr_width, int) or not 3 <= addr_width <= 64:
            raise ValueError(f"AXI4LiteSignature: addr_width must be 3..64, not {addr_width!r}")
        self._addr_width, self._data_width = addr_width, data_width
        super().__init__({
            "awaddr": Out(addr_width), "awprot": Out(3), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wvalid": Out(1),
            "wready": In(1),
            "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "araddr": Out(addr_width), "arprot": Out(3), "arvalid": Out(1), "arready": In(1),
            "rdata": In(data_width), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
        })

    @property
    def addr_width(self):
        return self._addr_width

    @property
    def data_width(self):
        return self._data_width
