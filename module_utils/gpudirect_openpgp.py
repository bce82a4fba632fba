"""Fingerprints of the primary keys in an OpenPGP public key file (RFC 4880 / RFC 9580).

Used by ``library/gpudirect_repo_key.py`` to check a repository signing key against
pinned fingerprints before apt or dnf trust it, with no gpg needed on the node.

``primary_fingerprints(data)`` takes the file's bytes, ASCII-armoured
(``-----BEGIN PGP PUBLIC KEY BLOCK-----``, as NVIDIA's ``3bf863cc.pub`` and
``GPG-KEY-Mellanox.pub`` are) or binary, and returns the upper-case hex
fingerprints of its primary keys (packet tag 6), in file order:
v4 = SHA-1 over ``0x99 || len16 || body`` (RFC 4880 12.2),
v6 = SHA-256 over ``0x9B || len32 || body`` (RFC 9580 5.5.4).
Subkeys (tag 14) are not returned: apt and dnf trust a key file by its primary keys.
Malformed input raises ``ValueError`` saying what is wrong.
"""

from __future__ import annotations

import base64
import binascii
import hashlib

_BEGIN = b"-----BEGIN PGP PUBLIC KEY BLOCK-----"
_END = b"-----END PGP PUBLIC KEY BLOCK-----"


def dearmor(data):
    """The binary packets of an armoured key block (several blocks are concatenated)."""
    out = b""
    rest = data
    while _BEGIN in rest:
        start = rest.index(_BEGIN) + len(_BEGIN)
        if _END not in rest[start:]:
            raise ValueError("armoured key block without its END line")
        end = rest.index(_END, start)
        lines = [ln.strip() for ln in rest[start:end].replace(b"\r", b"").split(b"\n")[1:]]
        # armour headers (Version:, Comment:) end at the first empty line
        if b"" in lines:
            blank = lines.index(b"")
            if all(b":" in ln for ln in lines[:blank]):
                lines = lines[blank + 1:]
        body = [ln for ln in lines if ln and not ln.startswith(b"=")]
        try:
            out += base64.b64decode(b"".join(body), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError("armoured key block is not valid base64: %s" % exc)
        rest = rest[end + len(_END):]
    return out


def packets(data):
    """(tag, body) of each packet, old and new packet formats (RFC 4880 4.2)."""
    pos = 0
    while pos < len(data):
        header = data[pos]
        if not header & 0x80:
            raise ValueError("byte %d is not an OpenPGP packet header (0x%02x)" % (pos, header))
        pos += 1
        if header & 0x40:        # new format
            tag = header & 0x3F
            if pos >= len(data):
                raise ValueError("truncated packet length")
            first = data[pos]
            if first < 192:
                length, pos = first, pos + 1
            elif first < 224:
                if pos + 1 >= len(data):
                    raise ValueError("truncated packet length")
                length, pos = ((first - 192) << 8) + data[pos + 1] + 192, pos + 2
            elif first == 255:
                if pos + 4 >= len(data):
                    raise ValueError("truncated packet length")
                length, pos = int.from_bytes(data[pos + 1:pos + 5], "big"), pos + 5
            else:
                raise ValueError("partial body lengths are not allowed in key packets")
        else:                    # old format
            tag = (header >> 2) & 0x0F
            size = (1, 2, 4, None)[header & 0x03]
            if size is None:
                raise ValueError("indeterminate packet length in a key file")
            if pos + size > len(data):
                raise ValueError("truncated packet length")
            length, pos = int.from_bytes(data[pos:pos + size], "big"), pos + size
        if pos + length > len(data):
            raise ValueError("packet of tag %d runs past the end of the file" % tag)
        yield tag, data[pos:pos + length]
        pos += length


def key_fingerprint(body):
    """Fingerprint of one public-key packet body (v4 or v6)."""
    if not body:
        raise ValueError("empty public-key packet")
    version = body[0]
    if version == 4:
        return hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest().upper()
    if version == 6:
        return hashlib.sha256(b"\x9b" + len(body).to_bytes(4, "big") + body).hexdigest().upper()
    raise ValueError("public key version %d is not supported (v4 and v6 are)" % version)


def primary_fingerprints(data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    if _BEGIN in data:
        raw = dearmor(data)
    elif data[:1] and data[0] & 0x80:
        raw = data
    else:
        raise ValueError("neither an armoured key ('-----BEGIN PGP PUBLIC KEY BLOCK-----') nor a binary OpenPGP key "
                         "(starts with %r)" % data[:20])
    found = [key_fingerprint(body) for tag, body in packets(raw) if tag == 6]
    if not found:
        raise ValueError("no public key in the file")
    return found


def _crc24(data):
    """RFC 4880 6.1 armour checksum."""
    crc = 0xB704CE
    for byte in data:
        crc ^= byte << 16
        for _ in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= 0x1864CFB
    return crc & 0xFFFFFF


def armor(data):
    """ASCII armour for binary key packets (apt reads a signed-by file ending in .asc only armoured)."""
    body = base64.b64encode(data).decode("ascii")
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    checksum = base64.b64encode(_crc24(data).to_bytes(3, "big")).decode("ascii")
    return ("%s\n\n%s\n=%s\n%s\n" % (_BEGIN.decode(), "\n".join(lines), checksum, _END.decode())).encode("ascii")


def is_armored(data):
    return _BEGIN in data


def normalise(fingerprint):
    """Upper-case hex without blanks (fingerprints are often printed in groups of four)."""
    return "".join(str(fingerprint).split()).upper()
