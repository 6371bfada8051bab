"""Text a chart may be given (issue 32 item 1): what the renderer must never receive raw is drawn as a visible
stand-in. The request-side rules are ``evalplan.kit.text_rules`` (which re-exports :func:`displayable`)."""

from __future__ import annotations

ALLOWED_CONTROLS = frozenset("\t\n\r")


def _stand_in(code: int) -> str:
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: U+241C shows U+001C
    if code == 0x7F:
        return "\u2421"
    return "\ufffd"


_DISPLAYABLE = {c: _stand_in(c) for c in [*range(0, 0x20), 0x7F, *range(0x80, 0xA0), *range(0xD800, 0xE000)]
                if chr(c) not in ALLOWED_CONTROLS}


def displayable(text: str) -> str:
    """``text`` with every control character but TAB/LF/CR shown as its control picture (U+0000-U+001F ->
    U+2400-U+241F, DEL -> U+2421), C1 controls and lone surrogates as U+FFFD."""
    return text.translate(_DISPLAYABLE)


__all__ = ["displayable"]
