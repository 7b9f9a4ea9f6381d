"""``python -m service keys ...``: make, list, revoke and limit the managed API keys
(``service.keys``) in the database the service uses (MT_DATABASE_URL, else SQLite in MT_DATA_DIR).

``keys create`` prints the new key as its last line of output, alone, so that a script can take it
with ``| tail -n1``; it is shown this once (the database keeps only its digest).
"""

from __future__ import annotations

import argparse
import sys
import time

from engine.cli import HelpFormatter
from service.database import migrate, open_database
from service.keys import ApiKey, KeyStore

NO_LIMIT = "none"


def _limit(value: str) -> int | None:
    """A limit as the options take it: a positive whole number, or "none"."""
    if value.strip().lower() == NO_LIMIT:
        return None
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number or {NO_LIMIT!r}: {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, or {NO_LIMIT!r} (got {number})")
    return number


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"{prog} keys", description=__doc__, formatter_class=HelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create", help="make a key and print it (its last line of output)")
    create.add_argument("--name", default="", help="what the key is for: a team, a client")
    for command in (create, limits := commands.add_parser("limits", help="change a key's limits")):
        # Left out: none (create), unchanged (limits).
        command.add_argument(
            "--characters-per-month",
            type=_limit,
            default=argparse.SUPPRESS,
            help=f"characters it may translate a calendar month (UTC), or {NO_LIMIT}",
        )
        command.add_argument(
            "--requests-per-minute",
            type=_limit,
            default=argparse.SUPPRESS,
            help=f"requests it may make a minute, or {NO_LIMIT}",
        )
    limits.add_argument("id", help="the key's id, as `keys list` shows it")
    commands.add_parser("list", help="every key: id, name, limits, characters this month, revoked or not")
    revoke = commands.add_parser("revoke", help="revoke a key: refused on every replica within 10 seconds")
    revoke.add_argument("id", help="the key's id, as `keys list` shows it")
    return parser


def main(argv: list[str], prog: str) -> int:
    from service.settings import Settings

    args = build_parser(prog).parse_args(argv)
    settings = Settings()
    db = open_database(settings.database_url, settings.data_dir)
    try:
        migrate(db)
        return _run(KeyStore(db), args)
    finally:
        db.close()


def _run(store: KeyStore, args: argparse.Namespace) -> int:
    if args.command == "create":
        key, secret = store.create(
            args.name,
            characters_per_month=getattr(args, "characters_per_month", None),
            requests_per_minute=getattr(args, "requests_per_minute", None),
        )
        _say(f"made key {key.id} ({_limits(key)}); it is shown once:")
        _say(secret)
        return 0
    if args.command == "list":
        now = time.time()
        for key in store.list():
            state = (
                f"revoked {key.revoked}" if key.revoked else f"{store.used(key.digest, now):,} characters this month"
            )
            _say(f"{key.id}  {key.name or '-'}  {_limits(key)}  created {key.created}  {state}")
        return 0
    if args.command == "revoke":
        revoked = store.revoke(args.id)
        return _done(revoked, args.id, "revoked")
    current = next((k for k in store.list() if k.id == args.id and not k.revoked), None)
    if current is None:
        return _done(None, args.id, "")
    changed = store.set_limits(
        args.id,
        characters_per_month=getattr(args, "characters_per_month", current.characters_per_month),
        requests_per_minute=getattr(args, "requests_per_minute", current.requests_per_minute),
    )
    return _done(changed, args.id, "now has")


def _done(key: ApiKey | None, key_id: str, what: str) -> int:
    if key is None:
        print(f"no key {key_id!r} that is not revoked: see `keys list`", file=sys.stderr)  # noqa: T201
        return 1
    _say(f"key {key.id} {what} ({_limits(key)})")
    return 0


def _limits(key: ApiKey) -> str:
    characters = f"{key.characters_per_month:,}" if key.characters_per_month is not None else "unlimited"
    requests = f"{key.requests_per_minute:,}" if key.requests_per_minute is not None else "unlimited"
    return f"characters a month: {characters}, requests a minute: {requests}"


def _say(line: str) -> None:
    print(line)  # noqa: T201
