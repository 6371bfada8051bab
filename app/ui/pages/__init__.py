"""One module per page kind; each exposes ``router`` (see app.ui.mount)."""
