"""Render charts offline with vl-convert (Vega + Vega-Lite compiled into the wheel; no network).

vl-convert runs in worker processes, never in the serving process (issue 32 item 1): it aborts its
whole process on some inputs (a C0 control character in a label), which would take the API down. So:

* every string of a spec is made :func:`~evalplan.charts.safe_text.displayable` first (a control character
  is drawn as its control picture, U+001C as U+241C) and cut to ``MAX_TEXT`` characters, so stored text
  can trigger neither the known abort nor minutes of text layout;
* the render itself runs in one of ``RENDER_WORKERS`` warm worker processes
  (``evalplan.charts.render_worker``), each used by one request at a time; a worker that dies or takes
  longer than ``RENDER_TIMEOUT_S`` is killed and replaced, and that request gets :class:`RenderFailed`
  (503 problem+json; a page shows a note in place of the chart). The server stays up.

Rendering costs ~0.1-0.3 s per chart after a worker's one-off ~1.5 s warm-up, so identical specs are
cached (a finished coreset's chart never changes; a session's changes with every observation).
"""

from __future__ import annotations

import html
import json
import logging
import os
import queue
import re
import select
import subprocess
import sys
import threading
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from evalplan.charts.safe_text import displayable
from evalplan.charts.specs import themed

log = logging.getLogger(__name__)

CACHE_SIZE = 128
#: worker processes per serving process (each renders one chart at a time)
RENDER_WORKERS = 2
#: the longest one render may take (a cold worker's warm-up included)
RENDER_TIMEOUT_S = 20.0
#: the longest string of a spec (a label of 200,000 characters takes vl-convert minutes to lay out)
MAX_TEXT = 1000
#: the largest spec sent to a worker (the service's own charts are far smaller)
MAX_SPEC_BYTES = 64 << 20
WORKER_SCRIPT = Path(__file__).with_name("render_worker.py")
_ID = re.compile(r'\bid="([^"]+)"')


class RenderFailed(Exception):  # noqa: N818 - named like the kit's problems (NotFound, InvalidInput)
    """The chart renderer crashed, timed out or refused the chart: a server-side failure, answered as 503
    problem+json ``chart-render-failed`` (``evalplan.kit.problems``; charts sit below the kit's errors)."""

    status, title, slug = 503, "Chart rendering failed", "chart-render-failed"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class _Worker:
    """One render worker process and its pipes."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-I", str(WORKER_SCRIPT)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, close_fds=True)
        self._buffer = b""

    def _read(self, n: int | None, deadline: float) -> bytes:
        """``n`` bytes (``None``: up to and including the next newline) before ``deadline``."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:
            if n is None and b"\n" in self._buffer:
                line, _, self._buffer = self._buffer.partition(b"\n")
                return line
            if n is not None and len(self._buffer) >= n:
                out, self._buffer = self._buffer[:n], self._buffer[n:]
                return out
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise EOFError
            self._buffer += chunk

    def render(self, request: bytes, timeout: float) -> tuple[bool, bytes]:
        assert self.proc.stdin is not None
        deadline = time.monotonic() + timeout
        self.proc.stdin.write(request)
        self.proc.stdin.flush()
        status, _, size = self._read(None, deadline).partition(b" ")
        return status == b"OK", self._read(int(size), deadline)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


class RenderPool:
    """Up to ``size`` warm workers, started when first needed; one request uses one worker at a time."""

    def __init__(self, size: int = RENDER_WORKERS) -> None:
        self.size, self.started = size, 0
        self.idle: queue.LifoQueue[_Worker] = queue.LifoQueue()
        self.lock = threading.Lock()
        self.pid = os.getpid()

    def _take(self, timeout: float) -> _Worker:
        try:
            return self.idle.get_nowait()
        except queue.Empty:
            pass
        with self.lock:
            if self.started < self.size:
                self.started += 1
                try:
                    return _Worker()
                except OSError as exc:
                    self.started -= 1
                    raise RenderFailed(f"the chart renderer could not start: {exc}") from None
        try:
            return self.idle.get(timeout=timeout)
        except queue.Empty:
            raise RenderFailed(f"every chart renderer stayed busy for {timeout:g} s; retry") from None

    def _drop(self, worker: _Worker) -> None:
        worker.stop()
        with self.lock:
            self.started -= 1

    def render(self, fmt: str, spec_json: str, *, scale: float = 2.0, timeout: float = RENDER_TIMEOUT_S) -> bytes:
        """The SVG (UTF-8) or PNG bytes of a Vega-Lite spec, or :class:`RenderFailed`."""
        if len(spec_json) > MAX_SPEC_BYTES:
            raise RenderFailed(f"the chart's spec is {len(spec_json)} bytes, over {MAX_SPEC_BYTES}")
        request = json.dumps({"format": fmt, "spec": spec_json, "scale": scale}).encode() + b"\n"
        worker = self._take(timeout)
        try:
            ok, payload = worker.render(request, timeout)
        except TimeoutError:
            self._drop(worker)
            log.error("chart render timed out after %.0f s; worker killed", timeout)
            raise RenderFailed(f"the chart took longer than {timeout:g} s to render") from None
        except (EOFError, OSError, ValueError):
            self._drop(worker)
            code = worker.proc.returncode
            log.error("chart render worker died (exit status %s); a new one will start", code)
            raise RenderFailed(f"the chart renderer failed on this chart (worker exit status {code})") from None
        self.idle.put(worker)
        if not ok:
            raise RenderFailed(f"the chart renderer refused this chart: {payload.decode('utf-8', 'replace')[:300]}")
        return payload


_pool: RenderPool | None = None
_pool_lock = threading.Lock()


def render_pool() -> RenderPool:
    """This process's pool (a forked child, e.g. a Celery worker, starts its own)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool.pid != os.getpid():
            _pool = RenderPool()
        return _pool


def _displayable(value: Any) -> Any:
    if isinstance(value, str):
        text = displayable(value)
        return text if len(text) <= MAX_TEXT else text[:MAX_TEXT - 1] + "\u2026"
    if isinstance(value, dict):
        return {displayable(str(k)): _displayable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_displayable(v) for v in value]
    return value


def spec_of(chart: Any) -> dict[str, Any]:
    """The themed Vega-Lite spec (a plain dict) of an altair chart; a dict passes through. Every string in
    it is :func:`~evalplan.charts.safe_text.displayable` (no control character reaches the renderer)."""
    spec = chart if isinstance(chart, dict) else themed(chart).to_dict()
    cleaned: dict[str, Any] = _displayable(spec)
    return cleaned


def _key(chart: Any) -> str:
    return json.dumps(spec_of(chart), sort_keys=True, separators=(",", ":"))


@lru_cache(maxsize=CACHE_SIZE)
def _svg(spec_json: str) -> str:
    return render_pool().render("svg", spec_json).decode("utf-8")


@lru_cache(maxsize=CACHE_SIZE // 4)
def _png(spec_json: str, scale: float) -> bytes:
    return render_pool().render("png", spec_json, scale=scale)


def to_svg(chart: Any) -> str:
    """A standalone SVG document (``image/svg+xml``)."""
    return _svg(_key(chart))


def to_png(chart: Any, *, scale: float = 2.0) -> bytes:
    """A PNG at ``scale`` x the chart's CSS size."""
    return _png(_key(chart), scale)


def to_inline_svg(chart: Any, *, label: str, prefix: str) -> str:
    """SVG markup to place inside an HTML page.

    ``prefix`` namespaces the SVG's element ids (several charts on one page must not share
    clip-path or gradient ids); ``label`` becomes the accessible name (``role="img"`` +
    ``<title>``). The chart's description is kept as ``aria-description``. When the renderer fails
    (:class:`RenderFailed`) the page gets a note in the chart's place instead of failing whole.
    """
    try:
        svg = to_svg(chart)
    except RenderFailed as exc:
        return (f'<p class="chart-failed" role="note" data-chart="{html.escape(prefix, quote=True)}">'
                f"{html.escape(label)}: the chart could not be drawn ({html.escape(exc.detail)}).</p>")
    ids = set(_ID.findall(svg))
    for old in ids:
        new = f"{prefix}-{old}"
        svg = svg.replace(f'id="{old}"', f'id="{new}"').replace(f"url(#{old})", f"url(#{new})")
        svg = svg.replace(f'href="#{old}"', f'href="#{new}"')
    description = spec_of(chart).get("description") or label
    opening = (f'<svg role="img" aria-label="{html.escape(displayable(label), quote=True)}" '
               f'aria-description="{html.escape(str(description), quote=True)}" data-chart="{prefix}" ')
    svg = svg.replace("<svg ", opening, 1)
    close = svg.index(">") + 1
    return svg[:close] + f"<title>{html.escape(displayable(label))}</title>" + svg[close:]
