"""Teams, their API tokens and the audit log (API.md "Teams and tokens")."""
