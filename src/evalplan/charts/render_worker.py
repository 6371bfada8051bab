"""The chart render worker: a separate process that owns vl-convert (issue 32 item 1).

vl-convert embeds a JavaScript runtime in native code, and some inputs make it abort its whole process
("non-unwinding panic. aborting"), which no ``try`` can catch. So the serving process never calls it: it
runs this file as a child process (``python -I render_worker.py``: run by path, so it imports nothing of
evalplan) and speaks a line protocol over its stdin/stdout (``evalplan.charts.render``):

* request: one line of JSON ``{"format": "svg" | "png", "spec": "<Vega-Lite JSON>", "scale": 2.0}``;
* answer: ``OK <n>\\n`` then ``n`` bytes (the SVG as UTF-8, or the PNG), or ``ER <n>\\n`` then an
  ``n``-byte message when vl-convert raised.

The worker ends when its stdin closes (the serving process exited or gave it up).
"""

from __future__ import annotations

import json
import sys
from typing import IO


def serve(stdin: IO[bytes] | None = None, stdout: IO[bytes] | None = None) -> None:
    import vl_convert  # noqa: PLC0415 - the worker is the only importer

    source = stdin or sys.stdin.buffer
    sink = stdout or sys.stdout.buffer
    for line in source:
        try:
            request = json.loads(line)
            if request["format"] == "svg":
                payload = str(vl_convert.vegalite_to_svg(request["spec"])).encode("utf-8")
            else:
                payload = bytes(vl_convert.vegalite_to_png(request["spec"], scale=float(request.get("scale", 2.0))))
            status = b"OK"
        except Exception as exc:  # noqa: BLE001 - reported to the serving process, which answers the problem
            payload, status = f"{type(exc).__name__}: {exc}"[:2000].encode("utf-8", "replace"), b"ER"
        sink.write(status + b" " + str(len(payload)).encode() + b"\n")
        sink.write(payload)
        sink.flush()


if __name__ == "__main__":
    serve()
