"""``evalplan admin create-team|create-token|delete-team|revoke-token``: teams and tokens straight in the database
(operators), audited as ``cli admin``, each answer printed as JSON.

Imported inside the command (kept out of ``evalplan --help``): the auth services and ``evalplan.kit.db``
(SQLAlchemy and the web app's problem types), and for ``delete-team`` the domains that register their part of a
team deletion (benchmarks, models, the sessions cache)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime

from evalplan.kit.errors import EvalplanError
from evalplan.kit.settings import get_settings


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    admin = sub.add_parser("admin", help="teams and tokens, directly in the database (operators)")
    admin_sub = admin.add_subparsers(dest="admin_command", required=True)
    team = admin_sub.add_parser("create-team", help="create a team and print it as JSON")
    team.add_argument("name")
    token = admin_sub.add_parser("create-token", help="issue a token of a team and print it (shown only once)")
    token.add_argument("team", help="team name or id")
    token.add_argument("--scopes", default="read,write", help="comma-separated among read, write, admin")
    token.add_argument("--name", default=None, help="what the token is for (default: <team>-<scopes>)")
    token.add_argument("--expires-at", default=None, help="ISO 8601 instant after which the token answers 401")
    drop = admin_sub.add_parser("delete-team", help="delete a team with everything it owns (refused while a "
                                                    "published coreset, another team or a running job depends on it)")
    drop.add_argument("team", help="team name or id")
    revoke = admin_sub.add_parser("revoke-token", help="revoke a token by id")
    revoke.add_argument("team", help="team name or id")
    revoke.add_argument("token_id")


def admin_command(args: argparse.Namespace) -> int:
    """Teams and tokens straight in the database (``evalplan admin ...``), audited as ``cli admin``."""
    from evalplan.auth import teams as team_service
    from evalplan.auth.caller import Caller
    from evalplan.auth.deletion import delete_team, write_first
    from evalplan.auth.scoping import bind_caller
    from evalplan.kit.db import make_engine, make_session_factory

    engine = make_engine(get_settings().database_url)
    operator = Caller(actor="cli admin", superuser=True)
    try:
        with make_session_factory(engine)() as session:
            bind_caller(session, operator)
            if args.admin_command == "delete-team":
                import evalplan.benchmark_selections.repository
                import evalplan.benchmarks.service
                import evalplan.coresets.repository
                import evalplan.models.service
                import evalplan.sessions.cache
                import evalplan.sessions.repository  # noqa: F401 - these register their parts of a team deletion

                write_first(session)  # SQLite: hold the write lock before the deletion's reads
            if args.admin_command == "create-team":
                row = team_service.create_team(session, args.name)
                session.commit()
                result: dict[str, object] = {"id": row.id, "name": row.name}
            else:
                team = team_service.get_team(session, args.team, operator)
                if args.admin_command == "delete-team":
                    counts = delete_team(session, team)
                    session.commit()
                    result = {"id": team.id, "name": team.name, "deleted": True, **counts}
                elif args.admin_command == "revoke-token":
                    team_service.revoke_token(session, team, args.token_id)
                    session.commit()
                    result = {"id": args.token_id, "revoked": True}
                else:
                    scopes = [s.strip() for s in args.scopes.split(",") if s.strip()]
                    expires = datetime.fromisoformat(args.expires_at.replace("Z", "+00:00")) if args.expires_at \
                        else None
                    row_token, secret = team_service.create_token(
                        session, team, name=args.name or f"{team.name}-{'-'.join(scopes)}", scopes=scopes,
                        expires_at=expires)
                    session.commit()
                    result = {"id": row_token.id, "team": team.name, "name": row_token.name,
                              "scopes": row_token.scopes, "token": secret}
    except EvalplanError as exc:
        print(f"evalplan admin: {exc.detail}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"evalplan admin: {exc}", file=sys.stderr)
        return 2
    finally:
        engine.dispose()
    print(json.dumps(result, indent=2))
    return 0
