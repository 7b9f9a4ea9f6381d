"""Managed API keys and what they may use: a store over the state database (``service.database``).

A key is ``mt-`` and 43 random URL-safe characters (256 bits), shown once, when it is made; the
database keeps only its SHA-256 digest, which a request's key is looked up by. (A slow password
hash protects keys a person could guess; these cannot be, and a request must find its key with one
indexed read.) A key is named in listings by its ``id``, the digest's first 12 hex digits, and by
the name it was given.

Each key may have two limits, both kept in the database, so that every replica counts against the
same numbers, each one atomic statement:

- ``characters_per_month``: the characters it may have translated in a calendar month (UTC).
  ``charge`` adds a request's characters only if the sum stays within the limit (an upsert whose
  update is conditional), so concurrent requests can never take a key past it, and a request that
  would is refused whole, with nothing counted; ``refund`` takes back a request's characters if it
  then fails.
- ``requests_per_minute``: a rate, kept as the generic cell rate algorithm keeps one, in one number
  per key (the theoretical arrival time): a request is let through if it would not put that time
  more than a minute ahead, so a key may send its whole minute's requests at once and then one
  every ``60 / requests_per_minute`` seconds, never more than the limit in any 60 seconds; a refusal
  says when the next request would be let through.

Characters are counted for every caller (``""`` for a request without a managed key), so that
DeepL's ``/v2/usage`` reports the same number on every replica.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from service.database import Database

KEY_PREFIX = "mt-"
KEY_CHARS = 43  # secrets.token_urlsafe(32): 256 bits
ID_CHARS = 12
RATE_PERIOD_S = 60.0
UNLIMITED = 1 << 62  # a quota no count reaches
_COLUMNS = "digest, id, name, characters_per_month, requests_per_minute, created, revoked"


@dataclass(frozen=True)
class ApiKey:
    digest: str
    id: str
    name: str
    characters_per_month: int | None  # None: no quota
    requests_per_minute: int | None  # None: no rate limit
    created: str
    revoked: str | None = None


@dataclass(frozen=True)
class Charge:
    """Characters counted for an owner in a month: what ``refund`` takes back."""

    owner: str
    month: str
    characters: int


@dataclass(frozen=True)
class OverQuota:
    """A charge refused: the characters counted already this month, and the limit."""

    used: int
    limit: int


def digest(key: str) -> str:
    """The SHA-256 of ``key``, in hex: what the database keeps of it, and whose glossaries it owns."""
    return hashlib.sha256(key.encode()).hexdigest()


def could_be_managed(key: str) -> bool:
    """Whether ``key`` has the form of a managed key (whether it is one, the database says)."""
    return key.startswith(KEY_PREFIX) and len(key) == len(KEY_PREFIX) + KEY_CHARS


def month_of(now: float) -> str:
    """The calendar month (UTC) of ``now`` (seconds since the epoch), as "2026-11"."""
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m")


def seconds_to_next_month(now: float) -> float:
    moment = datetime.fromtimestamp(now, UTC)
    following = datetime(moment.year + moment.month // 12, moment.month % 12 + 1, 1, tzinfo=UTC)
    return following.timestamp() - now


class KeyStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def create(
        self, name: str = "", *, characters_per_month: int | None = None, requests_per_minute: int | None = None
    ) -> tuple[ApiKey, str]:
        """A new key with these limits, and the key itself (which is not stored: shown once)."""
        secret = KEY_PREFIX + secrets.token_urlsafe(32)
        hashed = digest(secret)
        created = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        key = ApiKey(hashed, hashed[:ID_CHARS], name, characters_per_month, requests_per_minute, created)
        self.db.statement(
            "INSERT INTO api_keys (digest, id, name, characters_per_month, requests_per_minute, created)"
            " VALUES (:digest, :id, :name, :cpm, :rpm, :created)",
            {
                "digest": key.digest,
                "id": key.id,
                "name": name,
                "cpm": characters_per_month,
                "rpm": requests_per_minute,
                "created": created,
            },
        )
        return key, secret

    def list(self) -> list[ApiKey]:
        """Every key, revoked ones too, oldest first."""
        rows = self.db.statement(f"SELECT {_COLUMNS} FROM api_keys ORDER BY created, id")
        return [ApiKey(*row) for row in rows]

    def find(self, hashed: str) -> ApiKey | None:
        """The key whose digest is ``hashed``, unless there is none or it is revoked."""
        rows = self.db.statement(
            f"SELECT {_COLUMNS} FROM api_keys WHERE digest = :digest AND revoked IS NULL", {"digest": hashed}
        )
        return ApiKey(*rows[0]) if rows else None

    def revoke(self, key_id: str) -> ApiKey | None:
        """Revoke the key of ``key_id``; None if no key that is not revoked has it."""
        revoked = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        rows = self.db.statement(
            f"UPDATE api_keys SET revoked = :revoked WHERE id = :id AND revoked IS NULL RETURNING {_COLUMNS}",
            {"revoked": revoked, "id": key_id},
        )
        return ApiKey(*rows[0]) if rows else None

    def set_limits(
        self, key_id: str, *, characters_per_month: int | None, requests_per_minute: int | None
    ) -> ApiKey | None:
        """Give the key of ``key_id`` these limits (None: none); None if there is no such key."""
        rows = self.db.statement(
            "UPDATE api_keys SET characters_per_month = :cpm, requests_per_minute = :rpm"
            f" WHERE id = :id AND revoked IS NULL RETURNING {_COLUMNS}",
            {"cpm": characters_per_month, "rpm": requests_per_minute, "id": key_id},
        )
        return ApiKey(*rows[0]) if rows else None

    def take_request(self, key: ApiKey, now: float) -> float | None:
        """Count a request of ``key`` against its rate; None if it may be made, else the seconds
        until one may (nothing counted)."""
        if key.requests_per_minute is None:
            return None
        interval = RATE_PERIOD_S / key.requests_per_minute
        params = {"digest": key.digest, "now": now, "interval": interval, "period": RATE_PERIOD_S}
        # The later of the key's theoretical arrival time and now, plus one interval: its new
        # arrival time, which may not run more than a period ahead of now.
        later = "(CASE WHEN rate_tat > :now THEN rate_tat ELSE :now END) + :interval"
        taken = self.db.statement(
            f"UPDATE api_keys SET rate_tat = {later} WHERE digest = :digest AND {later} - :now <= :period"
            " RETURNING rate_tat",
            params,
        )
        if taken:
            return None
        rows = self.db.statement("SELECT rate_tat FROM api_keys WHERE digest = :digest", params)
        return max(0.0, rows[0][0] + interval - RATE_PERIOD_S - now) if rows else 0.0

    def charge(self, owner: str, characters: int, *, limit: int | None, now: float) -> Charge | OverQuota:
        """Count ``characters`` for ``owner`` in the month of ``now``, if the month's count stays
        within ``limit`` (None: none); otherwise count nothing and say how far it has got."""
        ceiling = UNLIMITED if limit is None else limit
        month = month_of(now)
        params = {"owner": owner, "month": month, "n": characters, "limit": ceiling}
        if characters <= ceiling:
            counted = self.db.statement(
                "INSERT INTO key_usage (owner, month, characters) VALUES (:owner, :month, :n)"
                " ON CONFLICT (owner, month) DO UPDATE SET characters = key_usage.characters + excluded.characters"
                " WHERE key_usage.characters + excluded.characters <= :limit RETURNING characters",
                params,
            )
            if counted:
                return Charge(owner, month, characters)
        return OverQuota(self.used(owner, now), ceiling)

    def refund(self, charge: Charge) -> None:
        """Take back what ``charge`` counted (its request failed)."""
        self.db.statement(
            "UPDATE key_usage SET characters = characters - :n WHERE owner = :owner AND month = :month",
            {"n": charge.characters, "owner": charge.owner, "month": charge.month},
        )

    def add(self, counts: dict[str, int], now: float) -> None:
        """Add characters (or take them back, counts below 0) for owners without a quota, in the
        month of ``now``."""
        for owner, n in counts.items():
            self.db.statement(
                "INSERT INTO key_usage (owner, month, characters) VALUES (:owner, :month, :n)"
                " ON CONFLICT (owner, month) DO UPDATE SET characters = key_usage.characters + excluded.characters",
                {"owner": owner, "month": month_of(now), "n": n},
            )

    def used(self, owner: str, now: float) -> int:
        """The characters counted for ``owner`` in the month of ``now``."""
        rows = self.db.statement(
            "SELECT characters FROM key_usage WHERE owner = :owner AND month = :month",
            {"owner": owner, "month": month_of(now)},
        )
        return int(rows[0][0]) if rows else 0
