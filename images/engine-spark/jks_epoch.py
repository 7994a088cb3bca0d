"""Set every entry's date in a Java KeyStore (JKS) to SOURCE_DATE_EPOCH, for reproducible images.

    python3 jks_epoch.py /etc/ssl/certs/java/cacerts [PASSWORD]

Debian's ca-certificates-java writes the JRE's trust store as a JKS whose entries carry the
moment they were added, so two builds of the image differ there only. This rewrites each
entry's date (8 bytes, milliseconds) to ``SOURCE_DATE_EPOCH`` and recomputes the keyed SHA-1
at the end of the file (password ``changeit``, as ca-certificates-java uses); the certificates
and their order are kept. Trusted-certificate entries only (a trust store has no keys): any
other entry is refused, leaving the file unchanged.
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys

MAGIC = 0xFEEDFEED
TRUSTED_CERT = 2
WHITENER = b"Mighty Aphrodite"
DIGEST_LEN = 20


def _keyed_sha1(password: str, body: bytes) -> bytes:
    return hashlib.sha1(password.encode("utf-16-be") + WHITENER + body).digest()


def with_dates(data: bytes, millis: int, password: str = "changeit") -> bytes:
    """``data`` (a JKS file) with every entry dated ``millis``; raises ValueError if not JKS."""
    body, digest = bytearray(data[:-DIGEST_LEN]), data[-DIGEST_LEN:]
    magic, version, count = struct.unpack_from(">III", body, 0)
    if magic != MAGIC or version != 2:
        raise ValueError("not a version 2 Java KeyStore")
    if _keyed_sha1(password, bytes(body)) != digest:
        raise ValueError("keyed digest does not match (another password?)")
    pos = 12
    for number in range(count):
        (tag,) = struct.unpack_from(">I", body, pos)
        if tag != TRUSTED_CERT:
            raise ValueError(f"entry {number}: not a trusted certificate (tag {tag})")
        (alias_len,) = struct.unpack_from(">H", body, pos + 4)
        pos += 6 + alias_len
        struct.pack_into(">q", body, pos, millis)
        pos += 8
        (type_len,) = struct.unpack_from(">H", body, pos)
        pos += 2 + type_len
        (cert_len,) = struct.unpack_from(">I", body, pos)
        pos += 4 + cert_len
    if pos != len(body):
        raise ValueError(f"{len(body) - pos} bytes after the last entry")
    return bytes(body) + _keyed_sha1(password, bytes(body))


if __name__ == "__main__":
    path = sys.argv[1]
    try:
        with open(path, "rb") as f:
            fixed = with_dates(f.read(), int(os.environ["SOURCE_DATE_EPOCH"]) * 1000, *sys.argv[2:])
        with open(path, "wb") as f:
            f.write(fixed)
    except (OSError, ValueError, KeyError, struct.error) as e:
        sys.exit(f"jks_epoch: {path}: {e}")
