"""An upload's body, unpacked into a staging directory with every tar member checked before a byte
of it is written, and its MANIFEST.json verified. What is refused, and why:

- names that could land outside the directory or mean something else: absolute, '..' or '.' or
  empty components, backslashes, control characters, over MAX_NAME_CHARS, a name given twice;
- anything but a regular file or a directory: symbolic and hard links (a link to /etc/passwd, or
  one a later member writes through), devices, FIFOs, sparse files (small on the wire, huge on disk);
- a decompression bomb: the gzip stream is read through a counter that stops at the unpacked limit,
  so neither a member's contents nor a tar header (a PAX header is read into memory whole) can
  make the server read more than the limit; members are counted too;
- a manifest that does not cover exactly the other members, or a member whose sha256 differs.
Each refusal is a Refused with one line for the uploader; nothing of a refused upload is kept.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import re
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, cast

MANIFEST = "MANIFEST.json"
MAX_NAME_CHARS = 1000
"""The longest member name accepted (the files table's path column holds this many)."""
MAX_MANIFEST_BYTES = 16 << 20
CHUNK_BYTES = 1 << 20
SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class Refused(Exception):
    """An upload the archive will not take; status is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Limits:
    upload_bytes: int
    """The largest body accepted (compressed), bytes."""
    unpacked_bytes: int
    """The most the body may unpack to (the files' contents and the tar headers), bytes."""
    files: int
    """The most members one upload may have."""


@dataclass
class Unpacked:
    root: Path
    """The data dir as unpacked (without MANIFEST.json)."""
    files: dict[str, tuple[str, int]]
    """Relative path → (sha256 hex, size in bytes), every file of the data dir."""
    manifest_sha256: str
    """sha256 of the canonical manifest: sorted JSON of path → sha256, identical for the same data dir."""


def _too_large(limit_bytes: int) -> Refused:
    return Refused(f"the archive unpacks to more than the limit of {limit_bytes:,} bytes "
                   "(a decompression bomb, or a data dir too large for this archive)", 413)


class _Counted:
    """A read-only stream that refuses to give more than `limit` bytes of what it wraps."""

    def __init__(self, raw, limit: int) -> None:
        self.raw, self.limit, self.count = raw, limit, 0

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(CHUNK_BYTES if size is None or size < 0 else min(size, CHUNK_BYTES))
        self.count += len(data)
        if self.count > self.limit:
            raise _too_large(self.limit)
        return data


def check_name(name: str) -> str:
    """The member name if it is a plain relative path inside the data dir; Refused otherwise."""
    shown = name[:80].encode("unicode_escape").decode("ascii")
    if not name or len(name) > MAX_NAME_CHARS:
        raise Refused(f"a member's name is empty or longer than {MAX_NAME_CHARS} characters ({shown!r})")
    if name.startswith("/") or "\\" in name or CONTROL.search(name):
        raise Refused(f"member {shown!r} has an absolute name, a backslash or a control character")
    if any(part in ("", ".", "..") for part in name.split("/")):
        raise Refused(f"member {shown!r} has an empty, '.' or '..' component (path traversal)")
    return name


def _check_member(member: tarfile.TarInfo) -> None:
    if member.issym() or member.islnk():
        raise Refused(f"member {check_name(member.name)!r} is a link (to {member.linkname[:80]!r}); "
                      "an upload holds regular files only")
    if member.issparse() or not (member.isreg() or member.isdir()):
        raise Refused(f"member {check_name(member.name)!r} is not a regular file (a device, FIFO or sparse file)")


def _copy(source, target: Path, size: int) -> str:
    digest = hashlib.sha256()
    with target.open("xb") as out:
        left = size
        while left:
            chunk = source.read(min(CHUNK_BYTES, left))
            if not chunk:
                raise Refused(f"member {target.name!r} is cut short (the archive ends inside it)")
            digest.update(chunk)
            out.write(chunk)
            left -= len(chunk)
    return digest.hexdigest()


def _manifest(data: bytes) -> dict[str, str]:
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise Refused(f"{MANIFEST} is not JSON ({e})") from None
    files = document.get("files") if isinstance(document, dict) else None
    if not isinstance(files, dict):
        raise Refused(f'{MANIFEST} holds no "files" object (relative path → sha256)')
    for path, digest in files.items():
        check_name(path)
        if not isinstance(digest, str) or not SHA256_HEX.match(digest):
            raise Refused(f"{MANIFEST}: the hash of {path!r} is not 64 lower-case hex digits")
    return files


def canonical_manifest(files: dict[str, str]) -> bytes:
    return json.dumps({"files": dict(sorted(files.items()))}, sort_keys=True, separators=(",", ":")).encode()


def unpack(body: Path, into: Path, limits: Limits) -> Unpacked:
    """The data dir of an upload's body, unpacked under `into`, every member checked and every
    hash verified against the manifest; Refused on the first thing wrong."""
    root = into / "data"
    root.mkdir()
    found: dict[str, tuple[str, int]] = {}
    manifest: dict[str, str] | None = None
    seen: set[str] = set()
    declared_bytes = 0
    try:
        with body.open("rb") as raw, gzip.GzipFile(fileobj=raw, mode="rb") as unzipped, \
                tarfile.open(fileobj=cast(IO[bytes], _Counted(unzipped, limits.unpacked_bytes)), mode="r|") as tar:
            for member in tar:
                name = check_name(member.name.removesuffix("/") if member.isdir() else member.name)
                _check_member(member)
                if name in seen:
                    raise Refused(f"member {name!r} appears twice")
                seen.add(name)
                if len(seen) > limits.files:
                    raise Refused(f"the archive has more than {limits.files:,} members, the limit", 413)
                if member.isdir():
                    continue
                declared_bytes += member.size
                if declared_bytes > limits.unpacked_bytes:
                    raise _too_large(limits.unpacked_bytes)
                source = tar.extractfile(member)
                assert source is not None  # a regular file's contents
                if name == MANIFEST:
                    if member.size > MAX_MANIFEST_BYTES:
                        raise Refused(f"{MANIFEST} is larger than {MAX_MANIFEST_BYTES:,} bytes")
                    manifest = _manifest(source.read(member.size))
                    continue
                target = root / name
                if target.exists() or any(p.exists() and not p.is_dir() for p in target.parents):
                    raise Refused(f"member {name!r} clashes with another member (a file and a directory of one name)")
                target.parent.mkdir(parents=True, exist_ok=True)
                found[name] = (_copy(source, target, member.size), member.size)
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise Refused(f"the body is not a whole gzip-compressed tar archive ({e or type(e).__name__})") from None
    if manifest is None:
        raise Refused(f"the archive has no {MANIFEST} at its top level (pantheon archive upload writes it)")
    missing = sorted(set(manifest) - set(found))
    extra = sorted(set(found) - set(manifest))
    if missing or extra:
        raise Refused(f"{MANIFEST} does not match the members: " + "; ".join(filter(None, (
            f"listed but absent: {', '.join(missing[:3])}" if missing else "",
            f"present but not listed: {', '.join(extra[:3])}" if extra else ""))))
    for name, (digest, _) in found.items():
        if digest != manifest[name]:
            raise Refused(f"{name}: its sha256 is {digest}, the manifest says {manifest[name]} (changed or corrupted in transit)")
    if not found:
        raise Refused("the archive holds no files")
    return Unpacked(root, found, hashlib.sha256(canonical_manifest(manifest)).hexdigest())
