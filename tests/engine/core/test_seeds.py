"""derive_seed is the one seed derivation: its 32-bit form must stay the low bits of the 63-bit one."""

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import derive_seed


def _blake_63(*parts: object) -> int:
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def test_known_parts_give_the_blake2b_value() -> None:
    assert derive_seed(7, "judges") == _blake_63(7, "judges")
    assert derive_seed(7, "judges", bits=32) == _blake_63(7, "judges") % 4294967296


@given(st.lists(st.one_of(st.integers(), st.text(max_size=8)), max_size=4))
def test_thirty_two_bits_are_the_low_bits_of_sixty_three(parts: list[object]) -> None:
    full = derive_seed(*parts)
    low = derive_seed(*parts, bits=32)
    assert 0 <= full < 2**63
    assert 0 <= low < 2**32
    assert low == full & 0xFFFFFFFF


@pytest.mark.parametrize("bits", [0, 64, -1])
def test_bits_outside_one_to_sixty_three_are_refused(bits: int) -> None:
    with pytest.raises(ValueError, match="bits"):
        derive_seed(1, bits=bits)
