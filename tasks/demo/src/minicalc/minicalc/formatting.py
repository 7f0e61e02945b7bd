"""How results are shown to people."""

from __future__ import annotations

__all__ = ["format_number"]


def format_number(value: int | float, precision: int = 12) -> str:
    """Formats a result for display.

    - Integers are written out in full, with no grouping: ``1234567``, ``-5``.
    - ``nan`` and the infinities are written ``nan``, ``inf`` and ``-inf``.
    - A float with no fractional part whose magnitude is below ``10 ** precision`` is written
      like an integer: ``3.0`` gives ``3``; ``-0.0`` gives ``0``.
    - Any other float is written with at most ``precision`` significant digits and no
      trailing zeros, switching to exponent notation where Python's ``g`` format does:
      ``0.1 + 0.2`` gives ``0.3``, ``1 / 3`` gives ``0.333333333333``, ``1e20`` gives
      ``1e+20``, ``1.5e-7`` gives ``1.5e-07``.

    Raises ``ValueError`` when ``precision`` is less than 1.
    """
    raise NotImplementedError
