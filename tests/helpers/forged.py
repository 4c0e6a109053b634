"""Files that lie about themselves, for the tests of readers that must not believe them."""

from __future__ import annotations


def npy_header(shape: tuple[int, ...], descr: str = "<f2") -> bytes:
    """A .npy version 1.0 header (no data) declaring this array: followed by fewer bytes than it
    declares, it is a file whose header claims (say) 186 TiB in a few hundred bytes."""
    head = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode()
    head += b" " * (63 - (len(head) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(head).to_bytes(2, "little") + head
