"""The ECP5 PLL (EHXPLLL): its divider settings for a wanted clock, and the instance.

EHXPLLL with CLKOP fed back (FEEDBK_PATH "CLKOP"): the phase detector compares
f_in / CLKI_DIV with f_out / CLKFB_DIV, so f_out = f_in * CLKFB_DIV / CLKI_DIV, and
the VCO runs at f_out * CLKOP_DIV. The ranges are those of Project Trellis's `ecppll`
(libtrellis/tools/ecppll.cpp), which follow Lattice's PLL calculator.
"""

import math
from dataclasses import dataclass
from fractions import Fraction

from amaranth.hdl import Instance, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from attenio import validate

__all__ = ["PLLSettings", "PLL_TOLERANCE", "ecp5_pll", "ECP5PLL"]

_PLL_LIMITS = {"pfd": (Fraction(3125, 1000), 400), "vco": (400, 800), "out": (10, 400)}  # MHz
_PLL_DIVS = {"clki_div": 128, "clkfb_div": 80, "clkop_div": 128}
_VCO_MID = 600_000_000
#: How far the PLL's clock may lie from the one asked (it makes a grid of frequencies).
PLL_TOLERANCE = Fraction(1, 100)


@dataclass(frozen=True)
class PLLSettings:
    """The dividers of one EHXPLLL setting for input `fin_hz`; frequencies are exact."""

    fin_hz: int
    clki_div: int
    clkfb_div: int
    clkop_div: int

    @property
    def fout_hz(self):
        return Fraction(self.fin_hz) * self.clkfb_div / self.clki_div

    @property
    def fvco_hz(self):
        return self.fout_hz * self.clkop_div

    @property
    def clkop_cphase(self):
        # CLKOP's coarse phase in VCO cycles: half an output period, as ecppll sets it.
        return self.clkop_div // 2


def ecp5_pll(fin_hz, fout_hz, *, tolerance=PLL_TOLERANCE):
    """The EHXPLLL setting whose CLKOP comes nearest `fout_hz` from `fin_hz`.

    Raises ValueError when the nearest frequency the PLL can make lies more than
    `tolerance` (relative) from `fout_hz`, naming the nearest ones it can make. Among
    equally near settings, the VCO nearest 600 MHz (the middle of its range) wins.
    """
    validate.integer("ecp5_pll", "fin_hz", fin_hz, lo=8_000_000, hi=400_000_000)
    want = Fraction(fout_hz)
    lo, hi = (x * 1_000_000 for x in _PLL_LIMITS["out"])
    if not lo <= want <= hi:
        raise ValueError(f"ecp5_pll: the ECP5 PLL makes {lo / 1e6:g} to {hi / 1e6:g} MHz, "
                         f"not {float(want) / 1e6:g} MHz")
    made = {}                   # f_out -> the best setting making it
    for clki_div in range(1, _PLL_DIVS["clki_div"] + 1):
        pfd = Fraction(fin_hz, clki_div)
        if not _in(pfd, "pfd"):
            continue
        for clkfb_div in range(1, _PLL_DIVS["clkfb_div"] + 1):
            fout = pfd * clkfb_div
            # CLKOP_DIV only sets the VCO: the one that puts it nearest 600 MHz.
            lo = max(1, math.ceil(_PLL_LIMITS["vco"][0] * 1_000_000 / fout))
            hi = min(_PLL_DIVS["clkop_div"], math.floor(_PLL_LIMITS["vco"][1] * 1_000_000 / fout))
            if not _in(fout, "out") or lo > hi:
                continue
            mid = _VCO_MID / fout
            clkop_div = min((d for d in (math.floor(mid), math.ceil(mid)) if lo <= d <= hi),
                            key=lambda d: (abs(fout * d - _VCO_MID), d),
                            default=lo if mid < lo else hi)
            s = PLLSettings(fin_hz, clki_div, clkfb_div, clkop_div)
            old = made.get(fout)
            if old is None or abs(s.fvco_hz - _VCO_MID) < abs(old.fvco_hz - _VCO_MID):
                made[fout] = s
    best = min(made, key=lambda f: (abs(f - want), f))
    if abs(best - want) > tolerance * want:
        below = max((f for f in made if f < want), default=None)
        above = min((f for f in made if f > want), default=None)
        near = " and ".join(f"{float(f) / 1e6:.3f}" for f in (below, above) if f is not None)
        raise ValueError(f"ecp5_pll: the ECP5 PLL cannot make {float(want) / 1e6:g} MHz from "
                         f"{fin_hz / 1e6:g} MHz within {float(tolerance):.0%}; the nearest it "
                         f"makes are {near} MHz")
    return made[best]


def _in(f_hz, what):
    lo, hi = _PLL_LIMITS[what]
    return lo * 1_000_000 <= f_hz <= hi * 1_000_000


class ECP5PLL(wiring.Component):
    """An EHXPLLL: `clk_in` -> `clk_out` at `settings.fout_hz`; `locked` once it has locked.

    Only the primary output (CLKOP) is used, fed back on itself, so nextpnr derives the
    constraint of `clk_out` from the input's and times the design at the PLL's clock.
    """

    def __init__(self, *, settings):
        if not isinstance(settings, PLLSettings):
            raise TypeError(f"ECP5PLL: settings must be a PLLSettings, not {settings!r}")
        self._settings = settings
        super().__init__({"clk_in": In(1), "clk_out": Out(1), "locked": Out(1)})

    @property
    def settings(self):
        return self._settings

    def elaborate(self, platform):
        m = Module()
        s = self._settings
        mhz = (lambda f: f"{float(f) / 1e6:g}")
        m.submodules.pll = Instance(
            "EHXPLLL",
            # Attributes read by nextpnr (the loop filter of ecppll's designs) and the
            # frequencies for documentation; the constraint itself is derived.
            a_FREQUENCY_PIN_CLKI=mhz(s.fin_hz), a_FREQUENCY_PIN_CLKOP=mhz(s.fout_hz),
            a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1",
            a_MFG_GMCREF_SEL="2",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_CLKOP_ENABLE="ENABLED",
            p_CLKI_DIV=s.clki_div, p_CLKFB_DIV=s.clkfb_div, p_CLKOP_DIV=s.clkop_div,
            p_CLKOP_CPHASE=s.clkop_cphase, p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP",
            i_CLKI=self.clk_in, i_CLKFB=self.clk_out, i_RST=0, i_STDBY=0,
            i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=0, i_PHASESTEP=0, i_PHASELOADREG=0,
            i_PLLWAKESYNC=0, i_ENCLKOP=0,
            o_CLKOP=self.clk_out, o_LOCK=self.locked)
        return m
