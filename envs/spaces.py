"""A text space that holds any string (Gymnasium's ``Text`` only holds its charset)."""

from __future__ import annotations

import string
from typing import Any

from gymnasium import spaces

SAMPLE_CHARSET = string.printable


class AnyText(spaces.Text):
    """Every ``str`` up to ``max_length`` characters; samples from printable ASCII."""

    def __init__(self, max_length: int, min_length: int = 0, seed: int | None = None):
        super().__init__(max_length=max_length, min_length=min_length, charset=SAMPLE_CHARSET,
                         seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText(min_length={self.min_length}, max_length={self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, AnyText) and (self.min_length, self.max_length) == (
            other.min_length, other.max_length)


# --- async vector envs ----------------------------------------------------------------------
# Gymnasium's shared memory for Text stores charset indices and drops every character outside
# the charset. AnyText stores UTF-8 bytes with a length prefix instead, so any text survives.

class _SharedTexts(tuple):  # type: ignore[type-arg]
    """Strings cannot be views on shared memory, as arrays are: AsyncVectorEnv reads this
    object once and deep-copies it on every step (``copy=True``, its default), so the copy
    is where the current texts are read."""

    _reader: Any

    def __new__(cls, reader: Any) -> _SharedTexts:
        obj = super().__new__(cls, reader())
        obj._reader = reader
        return obj

    def __deepcopy__(self, memo: dict[int, Any]) -> tuple[str, ...]:
        return tuple(self._reader())


def _capacity(space: AnyText) -> int:
    return 8 + 4 * space.max_length


def _register_shared_memory() -> None:
    import multiprocessing as mp

    import numpy as np
    from gymnasium.vector.utils import shared_memory as sm

    @sm.create_shared_memory.register(AnyText)
    def _create(space: AnyText, n: int = 1, ctx: Any = mp) -> Any:
        return ctx.Array(np.dtype(np.uint8).char, n * _capacity(space))

    @sm.read_from_shared_memory.register(AnyText)
    def _read(space: AnyText, shared_memory: Any, n: int = 1) -> tuple[str, ...]:
        data = np.frombuffer(shared_memory.get_obj(), dtype=np.uint8).reshape(n, _capacity(space))

        def read() -> tuple[str, ...]:
            out = []
            for row in data:
                size = int.from_bytes(row[:8].tobytes(), "little")
                out.append(row[8 : 8 + size].tobytes().decode("utf-8", errors="surrogatepass"))
            return tuple(out)

        return _SharedTexts(read)

    @sm.write_to_shared_memory.register(AnyText)
    def _write(space: AnyText, index: int, values: str, shared_memory: Any) -> None:
        raw = values.encode("utf-8", errors="surrogatepass")[: _capacity(space) - 8]
        cap = _capacity(space)
        dest = np.frombuffer(shared_memory.get_obj(), dtype=np.uint8)
        start = index * cap
        dest[start : start + 8] = np.frombuffer(len(raw).to_bytes(8, "little"), dtype=np.uint8)
        dest[start + 8 : start + 8 + len(raw)] = np.frombuffer(raw, dtype=np.uint8)


_register_shared_memory()
