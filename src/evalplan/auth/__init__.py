"""Who may do what (API.md "Teams and tokens").

* ``caller``: tokens (sha256-stored), the :class:`~evalplan.auth.caller.Caller` of a request, scopes, and
  the failed-attempt limiter (per process, or shared through Redis);
* ``deps``: ``DbSession`` (the request's session, scoped to its caller) and ``CurrentCaller``;
* ``scoping``: team scoping of every ORM statement; ``naming``: resolving ``{benchmark}`` / ``{model}``
  references (id, name, ``team/name``) and new names per team; ``audit``: the audit log;
* ``teams``, ``routes``, ``schemas``: teams, tokens and the audit log over HTTP (``/v1/teams``, ``/v1/audit``);
* ``deletion``: deleting a team with everything it owns.
"""
