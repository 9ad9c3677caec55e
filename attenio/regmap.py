"""The control and status register map: one description, many renderings.

The CSR block (`attenio.hdl.csr`), the C header, the JSON and Markdown maps
(`attenio.gen.regmap`) and the simulation drivers all read this one list. The
bus is AXI4-Lite with 32-bit data; a 64-bit register takes two words, low word
first, and reading the low word latches the high word so the pair is coherent.
Read-only hardware parameters take their values from the Plan.
"""

import enum
from dataclasses import dataclass

from .formats import FORMAT_TABLE

__all__ = ["Access", "Register", "ErrorCode", "RegisterMap", "register_map", "FORMAT_IDS",
           "MAX_HEAD_GROUP"]

#: the largest HEAD_GROUP: the controller scales by it bit by bit (8 bits, 8 cycles), and
#: the lanes' scaled diagonal is that many times wider than a key count
MAX_HEAD_GROUP = 255
VERSION = 0x0001_0000   # 1.0: major in the upper half, minor in the lower
#: the FORMAT register's value of each number format (`attenio.formats.FORMAT_TABLE`)
FORMAT_IDS = {row.name: row.register_id for row in FORMAT_TABLE}


class Access(enum.Enum):
    RW = "rw"     # read and write
    RO = "ro"     # read only, driven by hardware
    W1 = "w1"     # write-one-to-act; reads as 0
    CONST = "const"  # read-only hardware parameter


class ErrorCode(enum.IntEnum):
    """Why a run ended without computing; the run ends with done set and nothing written."""

    NONE = 0
    SEQ_LEN_ZERO = 1        # N = 0
    SEQ_LEN_TOO_LARGE = 2   # N above the maximum the hardware was generated for
    HEADS_ZERO = 3          # no heads
    MISALIGNED = 4          # a base address or stride the DMA cannot serve (not bus-aligned)
    AXI_READ = 5            # a read answered with SLVERR or DECERR
    AXI_WRITE = 6           # a write answered with SLVERR or DECERR
    KV_LEN_TOO_LARGE = 7    # N_kv (KV_LEN, or SEQ_LEN when 0) above the generated maximum
    CAUSAL_KV_SHORT = 8     # causal with N_kv < N: the first query rows would see no key
    HEAD_GROUP_ZERO = 9     # HEAD_GROUP = 0: no query head to a K/V head
    HEAD_GROUP_TOO_LARGE = 10   # HEAD_GROUP above MAX_HEAD_GROUP (255)
    GROUP_OVER_BLOCK = 11   # MODE.GROUPED with HEAD_GROUP above BLOCK_ROWS: a Q block cannot
                            # hold a row of every query head of the group
    HEADS_NOT_GROUPED = 12  # MODE.GROUPED with HEADS not a multiple of HEAD_GROUP


@dataclass(frozen=True)
class Register:
    name: str
    offset: int
    access: Access
    width: int          # 32 or 64
    doc: str
    value: int = 0      # reset value; for CONST the value itself
    fields: tuple = ()  # (name, lsb, width, doc) of bit fields, if any

    @property
    def words(self):
        return self.width // 32


@dataclass(frozen=True)
class RegisterMap:
    registers: tuple
    data_width: int = 32

    @property
    def addr_width(self):
        """Byte-address bits the AXI4-Lite slave decodes."""
        end = max(r.offset + 4 * r.words for r in self.registers)
        return max(12, (end - 1).bit_length())

    def __getitem__(self, name):
        for r in self.registers:
            if r.name == name:
                return r
        raise KeyError(name)

    def __iter__(self):
        return iter(self.registers)

    def to_dict(self):
        return {
            "bus": "AXI4-Lite", "data_width": self.data_width, "addr_width": self.addr_width,
            "error_codes": {e.name: e.value for e in ErrorCode},
            "registers": [
                {"name": r.name, "offset": r.offset, "access": r.access.value, "width": r.width,
                 "doc": r.doc, "value": r.value,
                 "fields": [{"name": f[0], "lsb": f[1], "width": f[2], "doc": f[3]}
                            for f in r.fields]}
                for r in self.registers],
        }


_COUNTERS = [
    ("CYCLES", "cycles from start to done"),
    ("PE_BUSY", "cycles in which an element entered the PE array for scores or updates"),
    ("EXP_BUSY", "cycles in which at least one softmax lane processed a row"),
    ("MEM_STALL", "cycles waiting for memory while neither the array nor the lanes computed"),
    ("BYTES_READ", "bytes read over AXI"),
    ("BYTES_WRITTEN", "bytes written over AXI"),
]


def register_map(plan):
    """The register map of the accelerator generated for `plan`."""
    w, b = plan.workload, plan.budget
    regs = [
        Register("CTRL", 0x000, Access.W1, 32, "write 1 to bit 0 to start a run (ignored while busy)",
                 fields=(("START", 0, 1, "start a run"),)),
        Register("STATUS", 0x004, Access.RO, 32, "run status",
                 fields=(("BUSY", 0, 1, "a run is under way"),
                         ("DONE", 1, 1, "the last run has ended (cleared by START)"))),
        Register("ERROR", 0x008, Access.RO, 32, "error code of the last run (ErrorCode)"),
        Register("SEQ_LEN", 0x00C, Access.RW, 32,
                 "query rows N of the run, 1..MAX_SEQ_LEN"),
        Register("HEADS", 0x010, Access.RW, 32, "number of query heads of the run", value=1),
        Register("SCALE_C", 0x014, Access.RW, 32,
                 plan.config.format.SCALE_C_DOC),
        Register("MODE", 0x018, Access.RW, 32, "how the run computes attention",
                 fields=(("CAUSAL", 0, 1, "causal masking: query row i sees keys 0..i only; "
                          "a Q block reads K and V up to its last row"),
                         ("GROUPED", 1, 1, "a Q block holds the same rows of all HEAD_GROUP "
                          "query heads of a K/V head (row t of head h at block row "
                          "t*HEAD_GROUP + h), so each K/V row read serves the whole group; "
                          "HEADS must be a multiple of HEAD_GROUP, and HEAD_GROUP at most "
                          "BLOCK_ROWS (else HEADS_NOT_GROUPED, GROUP_OVER_BLOCK)"))),
        Register("KV_LEN", 0x01C, Access.RW, 32,
                 "key/value rows N_kv of the run, 1..MAX_SEQ_LEN; 0: equal to SEQ_LEN. Causal "
                 "rows are aligned at the end: query row i sees keys up to i + N_kv - N"),
    ]
    offset = 0x020
    for t in ("Q", "K", "V", "O"):
        regs.append(Register(f"{t}_BASE", offset, Access.RW, 32, f"byte address of {t}[0][0][0]"))
        regs.append(Register(f"{t}_HEAD_STRIDE", offset + 4, Access.RW, 32,
                             f"bytes from {t}[h][0][0] to {t}[h+1][0][0]"))
        fmt = plan.config.format
        regs.append(Register(f"{t}_ROW_STRIDE", offset + 8, Access.RW, 32,
                             f"bytes from {t}[h][i][0] to {t}[h][i+1][0]",
                             value=w.head_dim * (fmt.out_bytes if t == "O" else fmt.element_bytes)))
        offset += 0x10
    regs.append(Register("HEAD_GROUP", 0x060, Access.RW, 32,
                         "query heads g per K/V head, 1..255: query head h reads K and V of "
                         "head h div g (K_BASE + (h div g) * K_HEAD_STRIDE)", value=1))
    params = [
        ("VERSION", VERSION, "register map version"),
        ("MAX_SEQ_LEN", w.max_keys, "largest N and N_kv the hardware was generated for"),
        ("HEAD_DIM", w.head_dim, "head dimension d"),
        ("BLOCK_ROWS", plan.a, "rows a of a Q block"),
        ("ROWS_PER_MAC", plan.rows_per_mac, "rows r per MAC"),
        ("MAC_LINES", b.mac_lines, "MAC lines p"),
        ("MACS_PER_LINE", b.macs_per_line, "MACs per line q"),
        ("EXP_UNITS", b.exp_units, "EXP modules E"),
        ("AXI_DATA_BITS", b.axi_data_bits, "AXI4 data width of the memory port"),
        ("FORMAT", FORMAT_IDS[plan.config.format.name], "number format ("
         + ", ".join(f"{v} = {k}" for k, v in FORMAT_IDS.items()) + ")"),
    ]
    for i, (name, value, doc) in enumerate(params):
        regs.append(Register(name, 0x080 + 4 * i, Access.CONST, 32, doc, value=value))
    for i, (name, doc) in enumerate(_COUNTERS):
        regs.append(Register(name, 0x100 + 8 * i, Access.RO, 64, doc))
    return RegisterMap(tuple(regs))
