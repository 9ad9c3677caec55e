"""The in-design memory model (`attenio.hdl.sim_memory`), loaded and read through its backdoor."""

import numpy as np

__all__ = ["BackdoorMemory"]


class BackdoorMemory:
    """Byte access to the model's `storage` array of `beat`-byte words."""

    def __init__(self, storage, beat):
        self.storage, self.beat = storage, beat

    def write(self, addr, blob):
        """Whole beats only: `addr` and `len(blob)` multiples of the beat."""
        assert addr % self.beat == 0 and len(blob) % self.beat == 0
        words = np.frombuffer(blob, dtype=f"<u{self.beat}") if self.beat <= 8 else None
        for i in range(len(blob) // self.beat):
            chunk = blob[i * self.beat:(i + 1) * self.beat]
            value = int(words[i]) if words is not None else int.from_bytes(chunk, "little")
            self.storage[addr // self.beat + i].value = value

    def load(self, segments):
        """(address, bytes) segments of any alignment, merged into whole beats (bytes of a
        beat that no segment covers are written as zero)."""
        image = {}
        for addr, blob in segments:
            for k, byte in enumerate(blob):
                image[addr + k] = byte
        words = {}
        for a, byte in image.items():
            words.setdefault(a // self.beat, bytearray(self.beat))[a % self.beat] = byte
        for w, chunk in sorted(words.items()):
            self.storage[w].value = int.from_bytes(chunk, "little")

    def read(self, addr, length):
        out = bytearray()
        for w in range(addr // self.beat, (addr + length + self.beat - 1) // self.beat):
            out += int(self.storage[w].value).to_bytes(self.beat, "little")
        start = addr % self.beat
        return bytes(out[start:start + length])
