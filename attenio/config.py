"""The typed, frozen configuration every other part is derived from.

A `Config` is a workload (what to compute), a hardware budget (what to compute it
with) and a number format (how values are stored). Presets, TOML files and
command-line options all produce the same objects; `resolve` merges them in that
order, later sources overriding earlier ones.
"""

import os
import stat
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

from . import validate
from .errors import ConfigError
from .formats import FloatFormat, FP16Format, Int8Format, format_by_name
from .regmap import MAX_HEAD_GROUP

#: the largest value of a 32-bit run-time register (SEQ_LEN, KV_LEN, HEADS)
REGISTER_MAX = 2 ** 32 - 1

__all__ = ["Workload", "Budget", "Config", "PRESETS", "preset", "resolve", "load_toml"]


def _fields(obj, names):
    return {name: getattr(obj, name) for name in names}


@dataclass(frozen=True)
class Workload:
    """Attention of `heads` query heads of `seq_len` rows of width `head_dim` over `kv_len`
    key/value rows (None: seq_len) of `kv_heads` K/V heads (None: heads; each serves
    heads / kv_heads query heads, grouped-query attention); `causal`: query row i sees
    keys up to `attenio.analysis.causal_limit` only, rows aligned at the end (a decoder's
    cache holds the kv_len - seq_len keys before its queries). kv_len, the group and the
    mask are run-time registers of the hardware (KV_LEN, HEAD_GROUP, MODE.CAUSAL); here
    they set what the Plan counts and the runs it checks. The hardware is generated for
    `max_keys` keys."""

    seq_len: int
    head_dim: int
    heads: int = 1
    causal: bool = False
    kv_len: int | None = None
    kv_heads: int | None = None

    def __post_init__(self):
        validate.positive("workload", error=ConfigError,
                          **_fields(self, ("seq_len", "head_dim", "heads")))
        validate.flag("workload", "causal", self.causal, error=ConfigError)
        for key in ("kv_len", "kv_heads"):
            if getattr(self, key) is not None:
                validate.integer("workload", key, getattr(self, key), lo=1, error=ConfigError)
        # N, N_kv and the heads are 32-bit run-time registers (SEQ_LEN, KV_LEN, HEADS)
        for key in ("seq_len", "heads", "kv_len", "kv_heads"):
            if (getattr(self, key) or 0) > REGISTER_MAX:
                raise ConfigError(f"workload: {key} = {getattr(self, key)} is more than its "
                                  f"32-bit run-time register holds ({REGISTER_MAX})")
        if self.heads % self.n_kv_heads:
            raise ConfigError(f"workload: heads = {self.heads} must be a multiple of kv_heads = "
                              f"{self.kv_heads} (each K/V head serves the same number of "
                              f"query heads)")
        if self.group > MAX_HEAD_GROUP:
            raise ConfigError(f"workload: heads / kv_heads = {self.group} query heads a K/V head "
                              f"is more than the hardware's HEAD_GROUP holds ({MAX_HEAD_GROUP})")
        if self.causal and self.n_kv < self.seq_len:
            raise ConfigError(f"workload: causal attention needs kv_len >= seq_len, not "
                              f"{self.n_kv} < {self.seq_len} (the first rows would see no key)")

    @property
    def n_kv(self):
        """Key/value rows N_kv of a run (kv_len, or seq_len when None)."""
        return self.seq_len if self.kv_len is None else self.kv_len

    @property
    def n_kv_heads(self):
        """K/V heads (kv_heads, or heads when None)."""
        return self.heads if self.kv_heads is None else self.kv_heads

    @property
    def group(self):
        """g, the query heads that share one K/V head (the HEAD_GROUP register)."""
        return self.heads // self.n_kv_heads

    @property
    def max_keys(self):
        """The largest N or N_kv the hardware is generated for: its accumulator widths,
        its counters and MAX_SEQ_LEN (both SEQ_LEN and KV_LEN are refused above it)."""
        return max(self.seq_len, self.n_kv)


@dataclass(frozen=True)
class Budget:
    """The hardware the accelerator may use.

    `mac_lines` x `macs_per_line` MACs (p x q), `exp_units` EXP modules, an
    on-chip cache of `cache_bytes` (it holds the Q block, the O accumulators, the
    softmax state and the staged K/V rows), a dedicated KV buffer of
    `kv_buffer_bytes`, an off-chip link of `bw_bytes_per_cycle` with
    `latency_cycles` of latency, a clock of `clock_mhz` and an AXI data bus of
    `axi_data_bits`. `page_rows` > 0 (a power of two) builds a read sequencer that walks a
    paged K/V cache through a block table, `page_rows` K/V rows a page (0: K and V
    contiguous, no table walk built).
    """

    mac_lines: int
    macs_per_line: int
    exp_units: int
    cache_bytes: int
    kv_buffer_bytes: int
    bw_bytes_per_cycle: int
    latency_cycles: int = 100
    clock_mhz: int = 1000
    axi_data_bits: int = 64
    page_rows: int = 0

    def __post_init__(self):
        validate.positive("budget", error=ConfigError, **_fields(
            self, ("mac_lines", "macs_per_line", "exp_units", "cache_bytes", "kv_buffer_bytes",
                   "bw_bytes_per_cycle", "clock_mhz")))
        validate.non_negative("budget", error=ConfigError, latency_cycles=self.latency_cycles)
        validate.one_of("budget", "axi_data_bits", self.axi_data_bits, validate.AXI_DATA_WIDTHS,
                        error=ConfigError)
        if self.page_rows != 0:
            validate.power_of_two("budget", "page_rows (0: contiguous K/V)", self.page_rows,
                                  hi=2 ** 16, error=ConfigError)

    @property
    def macs(self):
        return self.mac_lines * self.macs_per_line


@dataclass(frozen=True)
class Config:
    """One workload on one budget in one number format; `name` names build/<name>/.

    `split` is the number s of MACs that share one Q row, `rows_per_mac` the number
    r of rows each group of s MACs holds and `banks` the number B of score and (P, alpha)
    banks (`attenio.plan`): None lets the planner choose
    (`attenio.model.planner.choose_plan`), an int forces it.
    """

    workload: Workload
    budget: Budget
    format: object = field(default_factory=Int8Format)
    name: str = "custom"
    split: int | None = None
    rows_per_mac: int | None = None
    banks: int | None = None

    def __post_init__(self):
        if not isinstance(self.format, (Int8Format, FloatFormat)):
            raise ConfigError(f"config: format must be a format object, not {self.format!r}")
        validate.build_name("config", self.name, error=ConfigError)
        for key, low in (("split", 1), ("rows_per_mac", 1), ("banks", 2)):
            if getattr(self, key) is not None:
                validate.integer("config", key, getattr(self, key), lo=low, error=ConfigError)


def _preset(name, fmt, *, seq_len, head_dim, **budget):
    return Config(name=name, workload=Workload(seq_len=seq_len, head_dim=head_dim),
                  budget=Budget(**budget), format=fmt)


PRESETS = {c.name: c for c in (
    # The paper's evaluation hardware (Lu et al., ASPLOS 2026; docs/paper.md).
    _preset("paper", FP16Format(), seq_len=65536, head_dim=64,
            mac_lines=64, macs_per_line=32, exp_units=128, cache_bytes=512 * 1024,
            kv_buffer_bytes=256, bw_bytes_per_cycle=128, latency_cycles=100, clock_mhz=1000,
            axi_data_bits=512),
    # Small enough for RTL simulation in seconds and for an ECP5-85F. p_frac = 16 suits
    # N = 256 (the default 24 is sized for N = 16384) and narrows the multipliers that
    # hold P, alpha, l and O; docs/accuracy.md ("p_frac follows the largest N") has
    # its error bound and measured exactness.
    _preset("small", Int8Format(p_frac=16), seq_len=256, head_dim=16,
            mac_lines=4, macs_per_line=4, exp_units=4, cache_bytes=4 * 1024,
            kv_buffer_bytes=64, bw_bytes_per_cycle=8, latency_cycles=20, clock_mhz=100,
            axi_data_bits=64),
)}


def preset(name):
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(
            f"unknown preset {name!r}; choose one of {', '.join(sorted(PRESETS))}") from None


_SECTIONS = {"workload": fields(Workload), "budget": fields(Budget),
             "mapping": ("split", "rows_per_mac", "banks")}


#: The largest TOML file read (a configuration or a sweep spec is a page of text)
TOML_MAX_BYTES = 2 ** 20


def read_toml(path, where):
    """The TOML file at `path` as a dict; ConfigError naming it as `where` (e.g. "config
    file 'x.toml'") if it is missing, not a regular file (a directory, a FIFO, /dev/zero),
    larger than `TOML_MAX_BYTES`, not UTF-8, not TOML or nested past what the parser
    follows. The file is opened without blocking and measured before it is read, so no
    path makes this wait or grow."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ConfigError(f"{where} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"{where} cannot be read: {exc.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise ConfigError(f"{where} is not a regular file")
    with os.fdopen(fd, "rb") as f:
        if info.st_size > TOML_MAX_BYTES:
            raise ConfigError(f"{where} is {info.st_size} bytes, more than the "
                              f"{TOML_MAX_BYTES} a TOML file may hold here")
        try:
            body = f.read(TOML_MAX_BYTES + 1)
        except OSError as exc:
            raise ConfigError(f"{where} cannot be read: {exc.strerror}") from None
    if len(body) > TOML_MAX_BYTES:      # grew since it was measured
        raise ConfigError(f"{where} is more than the {TOML_MAX_BYTES} bytes a TOML file "
                          f"may hold here")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where} is not UTF-8 text (byte {exc.start})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where} is not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{where} nests arrays or tables too deeply") from None


def load_toml(path):
    """Read a TOML file into a dict of overrides: {preset?, name?, workload, budget, format,
    mapping}.

    `[mapping]` holds `split`, `rows_per_mac` and `banks`: an integer forces s (r, B; B at
    least 2), "auto" leaves it to the planner.
    """
    path = Path(path)
    raw = read_toml(path, f"config file {str(path)!r}")
    allowed = {"preset", "name", "workload", "budget", "format", "mapping", "batch"}
    unknown = set(raw) - allowed
    if unknown:
        raise ConfigError(f"config file {str(path)!r}: unknown key(s) {', '.join(sorted(unknown))}; "
                          f"expected {', '.join(sorted(allowed))}")
    for section, keys in _SECTIONS.items():
        table = raw.get(section, {})
        if not isinstance(table, dict):
            raise ConfigError(f"config file {str(path)!r}: [{section}] must be a table")
        names = {getattr(k, "name", k) for k in keys}
        bad = set(table) - names
        if bad:
            raise ConfigError(f"config file {str(path)!r}: [{section}] has unknown key(s) "
                              f"{', '.join(sorted(bad))}; expected {', '.join(sorted(names))}")
    for key, low in (("split", 1), ("rows_per_mac", 1), ("banks", 2)):
        value = raw.get("mapping", {}).get(key, "auto")
        if value != "auto" and (isinstance(value, bool) or not isinstance(value, int)
                                or value < low):
            what = "a positive integer" if low == 1 else f"an integer >= {low}"
            raise ConfigError(f"config file {str(path)!r}: [mapping] {key} must be {what} "
                              f"or \"auto\", not {value!r}")
    fmt = raw.get("format", {})
    if isinstance(fmt, str):
        raw["format"] = {"name": fmt}
    elif not isinstance(fmt, dict):
        raise ConfigError(f"config file {str(path)!r}: format must be a name or a table")
    # (a name that is not a string is refused with the rule for names, `validate.build_name`)
    for key, value in (("preset", raw.get("preset")),
                       ("format name", raw["format"].get("name") if "format" in raw else None)):
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"config file {str(path)!r}: {key} must be a string, not {value!r}")
    return raw


def resolve(*, preset_name=None, config_file=None, workload=None, budget=None, format_name=None,
            name=None, split=None, rows_per_mac=None, banks=None):
    """Merge preset < TOML file < explicit overrides into one `Config`.

    `workload` and `budget` are dicts of field overrides (None values ignored);
    `split`, `rows_per_mac` and `banks` are each an int (forced), "auto" (the planner
    chooses) or None (not given).
    """
    file = load_toml(config_file) if config_file else {}
    base = preset(preset_name or file.get("preset") or "small")
    w = {f.name: getattr(base.workload, f.name) for f in fields(Workload)}
    b = {f.name: getattr(base.budget, f.name) for f in fields(Budget)}
    w.update(file.get("workload", {}))
    b.update(file.get("budget", {}))
    w.update({k: v for k, v in (workload or {}).items() if v is not None})
    b.update({k: v for k, v in (budget or {}).items() if v is not None})
    fmt_table = dict(file.get("format", {}))
    fmt_name = format_name or fmt_table.pop("name", None) or base.format.name
    fmt_table.pop("name", None)
    if fmt_name == base.format.name and not fmt_table:
        fmt = base.format
    else:
        fmt = format_by_name(fmt_name, **fmt_table)
    mapping = file.get("mapping", {})
    s = mapping.get("split", base.split) if split is None else split
    r = mapping.get("rows_per_mac", base.rows_per_mac) if rows_per_mac is None else rows_per_mac
    nb = mapping.get("banks", base.banks) if banks is None else banks
    try:
        return Config(workload=Workload(**w), budget=Budget(**b), format=fmt,
                      name=name or file.get("name") or base.name,
                      split=None if s == "auto" else s, rows_per_mac=None if r == "auto" else r,
                      banks=None if nb == "auto" else nb)
    except TypeError as exc:
        raise ConfigError(f"configuration: {exc}") from None
