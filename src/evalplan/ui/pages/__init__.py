"""One module per page kind; each exposes ``router`` (see evalplan.ui.mount)."""
