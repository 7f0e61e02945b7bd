"""repogym."""
