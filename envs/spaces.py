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
