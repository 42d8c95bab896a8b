"""Bounded xz / gzip decompression: a small hostile file must not expand to gigabytes."""

from __future__ import annotations

import lzma
import zlib
from collections.abc import Callable
from typing import Protocol


class BadData(ValueError):
    """Not valid xz / gzip data, or cut short."""


class TooLarge(ValueError):
    """Decompresses to more than the limit."""


class _Decompressor(Protocol):
    @property
    def eof(self) -> bool: ...

    @property
    def unused_data(self) -> bytes: ...

    def decompress(self, data: bytes, max_length: int, /) -> bytes: ...


def _gzip() -> _Decompressor:
    return zlib.decompressobj(16 + zlib.MAX_WBITS)  # 16+: gzip header and trailer


_KINDS: dict[str, tuple[str, Callable[[], _Decompressor], type[Exception]]] = {
    "Packages.xz": ("xz", lzma.LZMADecompressor, lzma.LZMAError),
    "Packages.gz": ("gzip", _gzip, zlib.error),
}


def decompress(variant: str, body: bytes, limit: int) -> bytes:
    """`body` of the file named `variant` ("Packages", "Packages.xz", "Packages.gz"), unpacked.

    Concatenated streams are read in turn, as xz and gzip themselves do.
    """
    if variant not in _KINDS:
        if len(body) > limit:
            raise TooLarge(variant)
        return body
    kind, make, error = _KINDS[variant]
    out = bytearray()
    data = body
    try:
        while True:
            d = make()
            # Asking for one byte over the limit tells "too large" from "exactly the limit".
            out += d.decompress(data, limit + 1 - len(out))
            if len(out) > limit:
                raise TooLarge(variant)
            if not d.eof:
                raise BadData(f"truncated {kind} data")
            data = d.unused_data
            if not data.strip(b"\0"):  # gzip allows zero padding after the last member
                return bytes(out)
    except error as e:
        raise BadData(f"bad {kind} data ({e})") from None
