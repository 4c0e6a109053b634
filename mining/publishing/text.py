"""Untrusted text (YFCC titles, owner names, URLs: written by strangers) made safe for the
files the project publishes: a Markdown table that renderers turn into HTML, and a CSV that
people open in spreadsheets.

Markdown (CommonMark + GFM tables; CommonMark passes raw HTML through): in a text cell every
character with a meaning is neutralised — `&`, `<`, `>` become entities (so no raw HTML,
entity or autolink survives, whatever the renderer), every other ASCII punctuation character
that starts inline syntax is backslash-escaped (emphasis, code, links, images, `|` cell
breaks, GitHub math and emoji), control characters (CR, LF, TAB, NUL, DEL, C1) become spaces
so a value can never end its table row, and bidi embedding/override/isolate controls are
dropped (in the raw file they would visually reorder the rest of the row, putting a credit on
the wrong photo). A URL becomes a link only when it is an absolute http(s) URL with a host;
its destination is percent-encoded outside a conservative set (no space, `(`, `)`, `<`, `>`,
`|`, quotes, backslash, backtick can end or break it) and `&` is written as `&amp;` (decoded
back by CommonMark). Anything else is shown as escaped text, not linked.

CSV: one physical line per record (control characters become spaces, so even readers that
do not accept quoted newlines, like `pyarrow.csv`'s default, see one record per photo), and
a value that a spreadsheet would run as a formula — starting with `=`, `+`, `-`, `@`, TAB or
CR, also after leading spaces — is prefixed with a single quote (OWASP "CSV injection").
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote, urlsplit

# C0 controls, DEL, C1 controls, Unicode line/paragraph separators
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# explicit bidi embeddings, overrides and isolates (LRE RLE PDF LRO RLO, LRI RLI FSI PDI)
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")
_MD_ENTITY = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
# ASCII punctuation that starts no inline syntax in CommonMark, GFM or common extensions
_MD_QUIET = set(",.;?/'\"%-")
_MD_TEXT = {c: _MD_ENTITY.get(c, "\\" + c) for c in map(chr, range(33, 127))
            if not c.isalnum() and c not in _MD_QUIET}
_MD_TEXT_TABLE = str.maketrans(_MD_TEXT)
# kept as they are in a link destination; everything else is percent-encoded (UTF-8)
_URL_SAFE = "-._~:/?#[]@!$&+,;=%*"
_FORMULA_START = ("=", "+", "-", "@")


def plain(value: Any) -> str:
    """A value as one line of text: None → "", control characters → spaces."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return _CONTROL.sub(" ", str(value))


def md_text(value: Any) -> str:
    """Untrusted text as inert Markdown inline content (a table cell, a link text), trimmed."""
    return _BIDI.sub("", plain(value)).strip().translate(_MD_TEXT_TABLE)


def http_url(value: Any) -> str | None:
    """The value if it is an absolute http(s) URL with a host, else None."""
    if not isinstance(value, str) or not value or _CONTROL.search(value) or value != value.strip():
        return None
    try:
        parts = urlsplit(value)
    except ValueError:  # e.g. an invalid IPv6 host
        return None
    return value if parts.scheme.lower() in ("http", "https") and parts.hostname else None


def md_link(text: Any, url: Any) -> str:
    """`[text](url)` when url is http(s), else the escaped text (or the escaped URL)."""
    target = http_url(url)
    label = md_text(text)
    if target is None:
        return label or md_text(url)
    dest = quote(target, safe=_URL_SAFE).replace("&", "&amp;")
    return f"[{label or md_text(target)}]({dest})"


def csv_value(value: Any) -> str:
    """A value as one CSV-safe line: controls → spaces, formula starts neutralised with `'`."""
    raw = "" if value is None else str(value)
    text = plain(value)
    if raw[:1] in ("\t", "\r") or text.lstrip(" ").startswith(_FORMULA_START):
        text = "'" + text
    return text


def csv_text(header: list[str], rows: Iterable[Iterable[Any]]) -> str:
    """CSV (header first, `\\n` line ends, minimal quoting) with every value through csv_value."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    w.writerow(header)
    for row in rows:
        w.writerow([csv_value(v) for v in row])
    return buf.getvalue()


def pct(v: Any) -> str:
    """A fraction as a percentage with two decimals ("–" when missing or not finite), as the
    evaluation tables (evaluation.md, the report, the release card) print it."""
    return "–" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{100 * v:.2f}"


def fmt_interval(ci: Sequence[float | None] | None) -> str:
    """'[lo, hi]' in % with two decimals, '–' when unknown."""
    if not ci or ci[0] is None or ci[1] is None:
        return "–"
    return f"[{100 * ci[0]:.2f}, {100 * ci[1]:.2f}]"


def fmt_p(p: float | None) -> str:
    """A bootstrap p with three decimals; '< 0.0005' when it rounds to 0 (a share of
    resamples is no proof of 0)."""
    if p is None:
        return "–"
    return "< 0.0005" if round(p, 3) == 0 else f"{p:.3f}"
