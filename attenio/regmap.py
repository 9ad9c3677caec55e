"""The control and status register map: one description, many renderings.

The CSR block (`attenio.hdl.csr`), the C header, the JSON and Markdown maps
(`attenio.gen.regmap`) and the simulation drivers all read this one list. The
bus is AXI4-Lite with 32-bit data; a 64-bit register takes two words, low word
first, and reading the low word latches the high word so the pair is coherent.
Read-only hardware parameters take their values from the Plan.
"""

import enum
import re
from dataclasses import dataclass

from .formats import FORMAT_TABLE

__all__ = ["Access", "Register", "Window", "ErrorCode", "RegisterMap", "register_map", "FORMAT_IDS",
           "SCALE_TABLE_ENTRIES",
           "MAX_HEAD_GROUP", "TABLE_ENTRY_BYTES", "DESCRIPTOR_FIELDS", "DESCRIPTOR_BYTES",
           "DescFlag", "descriptor_stride", "pack_descriptor", "unpack_descriptor", "pack_table", "table_pages",
           "table_beats", "paged_row_addr"]

#: the largest HEAD_GROUP: the controller scales by it bit by bit (8 bits, 8 cycles), and
#: the lanes' scaled diagonal is that many times wider than a key count
MAX_HEAD_GROUP = 255
VERSION = 0x0001_0002   # 1.2: major in the upper half, minor in the lower
#: entries of SCALE_C_TABLE, the softmax constant of each query head (MODE.HEAD_SCALES): one
#: ECP5 block RAM of 32-bit words holds 512, a run of more heads takes one SCALE_C for all
SCALE_TABLE_ENTRIES = 256
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
    # paged K/V (a build with PAGE_ROWS > 0, docs/microarchitecture.md "Paged K/V")
    PAGE_OUT_OF_RANGE = 13  # a block-table entry at or past PAGE_LIMIT, or not beat-aligned:
                            # its rows are read from page address 0 instead, O of the
                            # sequence is garbage, nothing is written outside the O regions
    KV_LEN_ZERO = 14        # a descriptor with KV_LEN = 0 (a batch has no SEQ_LEN default)
    TABLE_SHORT = 15        # ceil(N_kv / PAGE_ROWS) pages needed, fewer table entries given
    # block ranges (Q_BLOCK_FIRST, Q_BLOCK_COUNT; docs/microarchitecture.md "Block ranges")
    BLOCK_RANGE = 16        # Q_BLOCK_FIRST at or past a pass's last Q block, or FIRST + COUNT
                            # past it: found after the setup's walk, nothing moved
    BLOCK_RANGE_IN_BATCH = 17   # a block range with DESC_COUNT > 0: a batch runs every
                                # sequence whole
    SCALE_TABLE_SHORT = 18  # MODE.HEAD_SCALES with HEADS above SCALE_TABLE_ENTRIES (256)


#: bytes of one block-table entry: the byte address of a page slot, u32 little-endian
TABLE_ENTRY_BYTES = 4


class DescFlag(enum.IntFlag):
    """The FLAGS word of a descriptor: the MODE bits of its sequence."""

    CAUSAL = 1
    GROUPED = 2
    HEAD_SCALES = 4


#: A sequence's descriptor in a batch (DESC_BASE, DESC_COUNT): eight u32 words, little
#: endian, in this order. What the batch shares (HEAD_GROUP, SCALE_C and SCALE_C_TABLE, the
#: strides, the K/V offsets in a page slot, PAGE_LIMIT) stays in the registers.
DESCRIPTOR_FIELDS = (
    ("FLAGS", "DescFlag: CAUSAL, GROUPED, HEAD_SCALES, as MODE's bits for this sequence"),
    ("SEQ_LEN", "query rows N (1 for a decode step, more for a chunked prefill)"),
    ("KV_LEN", "key/value rows N_kv, 1..MAX_SEQ_LEN (0 is KV_LEN_ZERO)"),
    ("HEADS", "query heads; query head h reads K/V head h div HEAD_GROUP"),
    ("Q_BASE", "byte address of Q[0][0][0] (strides: Q_HEAD_STRIDE, Q_ROW_STRIDE)"),
    ("O_BASE", "byte address of O[0][0][0] (strides: O_HEAD_STRIDE, O_ROW_STRIDE)"),
    ("TABLE", "byte address of the block table (beat-aligned)"),
    ("TABLE_LEN", "entries in the block table, at least ceil(KV_LEN / PAGE_ROWS)"),
)
DESCRIPTOR_BYTES = 4 * len(DESCRIPTOR_FIELDS)


def descriptor_stride(beat_bytes):
    """Bytes from one descriptor to the next in the list: a descriptor, or a whole AXI beat
    when the beat is wider (each is read whole, at a beat-aligned address)."""
    return max(DESCRIPTOR_BYTES, beat_bytes)


def pack_descriptor(**fields):
    """One descriptor's bytes from its fields (`DESCRIPTOR_FIELDS`' names, lower case)."""
    names = [name.lower() for name, _ in DESCRIPTOR_FIELDS]
    unknown = set(fields) - set(names)
    if unknown:
        raise ValueError(f"pack_descriptor: unknown field(s) {', '.join(sorted(unknown))}; "
                         f"expected {', '.join(names)}")
    out = bytearray()
    for name in names:
        value = int(fields.get(name, 0))
        if not 0 <= value < 2 ** 32:
            raise ValueError(f"pack_descriptor: {name} must fit 32 bits, not {value}")
        out += value.to_bytes(4, "little")
    return bytes(out)


def unpack_descriptor(raw):
    """The fields of one descriptor's bytes, as pack_descriptor takes them."""
    if len(raw) != DESCRIPTOR_BYTES:
        raise ValueError(f"unpack_descriptor: a descriptor is {DESCRIPTOR_BYTES} bytes, "
                         f"not {len(raw)}")
    return {name.lower(): int.from_bytes(raw[4 * i:4 * i + 4], "little")
            for i, (name, _) in enumerate(DESCRIPTOR_FIELDS)}


def pack_table(pages):
    """A block table's bytes: each page slot's byte address, u32 little-endian, in order."""
    return b"".join(int(p).to_bytes(TABLE_ENTRY_BYTES, "little") for p in pages)


def table_pages(n_keys, page_rows):
    """Pages (table entries) that hold `n_keys` K/V rows."""
    return -(-n_keys // page_rows)


def table_beats(n_keys, page_rows, beat_bytes):
    """Beats of the block table the read sequencer reads for a block of `n_keys` keys: the
    entries of its pages, `beat_bytes` // 4 a beat, each beat read whole."""
    return -(-table_pages(n_keys, page_rows) // (beat_bytes // TABLE_ENTRY_BYTES))


def paged_row_addr(table, j, *, page_rows, base, head, head_stride, row_stride):
    """The byte address of K (or V) row `j` of K/V head `head` in a paged cache: page slot
    table[j div page_rows], plus the tensor's offset in a slot (K_BASE or V_BASE), the
    head's and the row's within the page."""
    return (table[j // page_rows] + base + head * head_stride
            + (j % page_rows) * row_stride) % 2 ** 32


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
class Window:
    """A table of `entries` 32-bit words from `offset` (read and write), kept in a memory
    rather than in registers; entry i is the word at offset + 4 i, also named "NAME[i]"."""
    name: str
    offset: int
    entries: int
    doc: str

    def __post_init__(self):
        span = 4 * self.entries
        if span & (span - 1) or self.offset % span:
            raise ValueError(f"window {self.name}: {self.entries} entries at 0x{self.offset:x} "
                             f"are not a power of two aligned to their size")

    @property
    def index_bits(self):
        return (self.entries - 1).bit_length()


@dataclass(frozen=True)
class RegisterMap:
    registers: tuple
    data_width: int = 32
    windows: tuple = ()

    @property
    def addr_width(self):
        """Byte-address bits the AXI4-Lite slave decodes."""
        end = max([r.offset + 4 * r.words for r in self.registers]
                  + [w.offset + 4 * w.entries for w in self.windows])
        return max(12, (end - 1).bit_length())

    def __getitem__(self, name):
        for r in self.registers:
            if r.name == name:
                return r
        raise KeyError(name)

    def window(self, name):
        for w in self.windows:
            if w.name == name:
                return w
        raise KeyError(name)

    def offset(self, name):
        """The byte offset of register `name`, or of a window's entry "NAME[i]"."""
        m = re.fullmatch(r"(\w+)\[(\d+)\]", name)
        if m is None:
            return self[name].offset
        w, i = self.window(m[1]), int(m[2])
        if i >= w.entries:
            raise KeyError(f"{name}: {w.name} has {w.entries} entries")
        return w.offset + 4 * i

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
            "windows": [{"name": w.name, "offset": w.offset, "entries": w.entries,
                         "access": Access.RW.value, "doc": w.doc} for w in self.windows],
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
                 plan.config.format.SCALE_C_DOC + "; every head's, unless MODE.HEAD_SCALES"),
        Register("MODE", 0x018, Access.RW, 32, "how the run computes attention",
                 fields=(("CAUSAL", 0, 1, "causal masking: query row i sees keys 0..i only; "
                          "a Q block reads K and V up to its last row"),
                         ("GROUPED", 1, 1, "a Q block holds the same rows of all HEAD_GROUP "
                          "query heads of a K/V head (row t of head h at block row "
                          "t*HEAD_GROUP + h), so each K/V row read serves the whole group; "
                          "HEADS must be a multiple of HEAD_GROUP, and HEAD_GROUP at most "
                          "BLOCK_ROWS (else HEADS_NOT_GROUPED, GROUP_OVER_BLOCK)"),
                         ("HEAD_SCALES", 2, 1, "query head h takes its softmax constant from "
                          "SCALE_C_TABLE[h], not SCALE_C (a scale_q and scale_k per head); "
                          "with GROUPED a block takes its group's first head's, so a group's "
                          "heads share one. HEADS above the table's entries is "
                          "SCALE_TABLE_SHORT"))),
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
    if b.page_rows:
        regs += [
            Register("KV_TABLE", 0x064, Access.RW, 32,
                     "byte address of the run's block table (beat-aligned): entry p, u32, is "
                     "the byte address of page slot p; K row j of K/V head h is at "
                     "table[j div PAGE_ROWS] + K_BASE + h * K_HEAD_STRIDE + (j mod PAGE_ROWS) "
                     "* K_ROW_STRIDE (V likewise): K_BASE and V_BASE are offsets in a slot"),
            Register("KV_TABLE_LEN", 0x068, Access.RW, 32,
                     "entries of the block table; fewer than ceil(N_kv / PAGE_ROWS) is "
                     "TABLE_SHORT"),
            Register("PAGE_LIMIT", 0x06C, Access.RW, 32,
                     "page slots lie below this byte address: an entry at or past it (or not "
                     "beat-aligned) is read as 0 and the run ends with PAGE_OUT_OF_RANGE; 0: "
                     "no limit", value=0),
            Register("DESC_BASE", 0x070, Access.RW, 32,
                     "byte address of the batch's descriptor list (DESCRIPTOR_FIELDS, "
                     "beat-aligned)"),
            Register("DESC_COUNT", 0x074, Access.RW, 32,
                     "descriptors in the batch, run in order with one DONE; 0: the run of "
                     "the registers alone"),
            Register("DESC_INDEX", 0x078, Access.RO, 32,
                     "descriptors the last batch ran to the end (the failing one's index "
                     "when it ended with an error)"),
        ]
    regs += [
        Register("Q_BLOCK_FIRST", 0x0C0, Access.RW, 32,
                 "the first Q block the run computes, of every pass (the blocks of a pass "
                 "numbered in the order they run: with MODE.CAUSAL the short block is 0); "
                 "a block at or past the last is BLOCK_RANGE. With Q_BLOCK_COUNT 0 and this "
                 "0 the run computes every block"),
        Register("Q_BLOCK_COUNT", 0x0C4, Access.RW, 32,
                 "Q blocks the run computes from Q_BLOCK_FIRST on, of every pass; 0: to the "
                 "last. The range's O rows are written where the whole run writes them and "
                 "no other; past the last block is BLOCK_RANGE; nonzero range registers with "
                 "DESC_COUNT > 0 are BLOCK_RANGE_IN_BATCH"),
    ]
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
    if b.page_rows:     # only then: a contiguous build's registers stay as they were
        params.append(("PAGE_ROWS", b.page_rows, "K/V rows of a page of the paged K/V cache"))
    for i, (name, value, doc) in enumerate(params):
        regs.append(Register(name, 0x080 + 4 * i, Access.CONST, 32, doc, value=value))
    for i, (name, doc) in enumerate(_COUNTERS):
        regs.append(Register(name, 0x100 + 8 * i, Access.RO, 64, doc))
    windows = (Window("SCALE_C_TABLE", 0x400, SCALE_TABLE_ENTRIES,
                      "entry h: query head h's softmax constant under MODE.HEAD_SCALES, as "
                      "SCALE_C is written; read as each of the run's passes begins, so written "
                      "while no run is under way"),)
    return RegisterMap(tuple(regs), windows=windows)
