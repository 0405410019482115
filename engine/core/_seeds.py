"""The one way a seed is derived, so every layer and plug-in draws from the same reproducible tree of streams."""

from __future__ import annotations

import hashlib

__all__ = ("derive_seed",)


def derive_seed(*parts: object, bits: int = 63) -> int:
    """A seed from any parts; the same parts always give the same seed, on any machine.

    `bits=32` suits numpy's legacy and scipy's `random_state`, which reject seeds of 2**32 and above; it keeps the
    low 32 bits of the 63-bit seed, so a 32-bit stream and its 63-bit parent stay one derivation."""
    if not 1 <= bits <= 63:
        raise ValueError(f"bits must be in 1..63, got {bits}")
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") >> 1) & ((1 << bits) - 1)
