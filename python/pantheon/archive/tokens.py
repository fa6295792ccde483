"""Upload tokens. A token is 32 random bytes (secrets, the OS's CSPRNG), shown once as text; the
database keeps only its sha256, so a copy of the database lets nobody upload. A token this random
needs no slow password hash: sha256 of it cannot be inverted by search. Revoking keeps the row (the
results it uploaded still name it) and makes the hash useless.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from pantheon.archive.models import Token
from pantheon.errors import PantheonError

TOKEN_BYTES = 32
LOCAL_NAME = "local"
"""The name of the token a loopback server makes for its machine's user (write_local)."""
PREFIX = "pantheon_"
"""Marks the text as a Pantheon archive token (for secret scanners and for people)."""


class TokenError(PantheonError):
    """A token command that cannot be done (a name in use, no such token)."""


def now_utc() -> datetime:
    """The time now, UTC, without a zone (every time in the database is UTC)."""
    return datetime.now(UTC).replace(tzinfo=None)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create(session: Session, name: str) -> str:
    """A new token for NAME; the caller shows it once. Names are unique among tokens not revoked."""
    name = name.strip()
    if not name:
        raise TokenError("a token needs a name (who holds it: a person, a lab, a CI job)")
    if session.scalar(select(Token).where(Token.name == name, Token.revoked_at.is_(None))):
        raise TokenError(f"a token named {name!r} exists; revoke it first (pantheon archive token revoke {name}) or pick another name")
    token = PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
    session.add(Token(name=name, hash=token_hash(token), created_at=now_utc()))
    session.commit()
    return token


def write_local(session: Session, path: Path) -> bool:
    """On an archive without any token, makes one named "local" and writes it to `path`, readable by
    this user only; whether it did. For a server only this machine reaches (see cli.py)."""
    if session.scalar(select(Token.id).limit(1)) is not None:
        return False
    token = create(session, LOCAL_NAME)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(token + "\n")
    return True


def revoke(session: Session, name: str) -> None:
    token = session.scalar(select(Token).where(Token.name == name, Token.revoked_at.is_(None)))
    if token is None:
        raise TokenError(f"no token named {name!r} is in use (revoked already, or never made)")
    token.revoked_at = now_utc()
    session.commit()


def holder(session: Session, presented: str) -> Token | None:
    """The token not revoked whose hash is that of the presented text, or None. The lookup is by
    hash, so timing reveals nothing of a token; compare_digest keeps the final check constant-time."""
    wanted = token_hash(presented)
    token = session.scalar(select(Token).where(Token.hash == wanted))
    if token is None or token.revoked_at is not None or not hmac.compare_digest(token.hash, wanted):
        return None
    return token
