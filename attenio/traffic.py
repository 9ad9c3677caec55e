"""Off-chip traffic of a dataflow, tensor by tensor, reads and writes apart."""

from dataclasses import dataclass

__all__ = ["Transfer", "Traffic"]


@dataclass(frozen=True)
class Transfer:
    """`elements` of `tensor` moved in one direction, each `element_bytes` wide."""

    tensor: str
    elements: int
    element_bytes: int

    @property
    def bytes(self):
        return self.elements * self.element_bytes


@dataclass(frozen=True)
class Traffic:
    reads: tuple
    writes: tuple

    @property
    def read_elements(self):
        return sum(t.elements for t in self.reads)

    @property
    def write_elements(self):
        return sum(t.elements for t in self.writes)

    @property
    def elements(self):
        return self.read_elements + self.write_elements

    @property
    def read_bytes(self):
        return sum(t.bytes for t in self.reads)

    @property
    def write_bytes(self):
        return sum(t.bytes for t in self.writes)

    @property
    def bytes(self):
        return self.read_bytes + self.write_bytes

    def scaled(self, factor):
        """The same traffic repeated `factor` times (once per head)."""
        scale = lambda ts: tuple(Transfer(t.tensor, t.elements * factor, t.element_bytes) for t in ts)
        return Traffic(scale(self.reads), scale(self.writes))

    def to_dict(self):
        return {
            "offchip_read_elements": self.read_elements,
            "offchip_write_elements": self.write_elements,
            "offchip_elements": self.elements,
            "offchip_read_bytes": self.read_bytes,
            "offchip_write_bytes": self.write_bytes,
            "offchip_bytes": self.bytes,
            "reads": {t.tensor: t.bytes for t in self.reads},
            "writes": {t.tensor: t.bytes for t in self.writes},
        }
