"""Hostile metadata: strings a stranger could put in a Flickr title, owner name or URL.

The payloads that can run script set `window.__pwned` and open a dialog, so a test in a real
browser sees either. Used by the attribution tests (unit: CSV and Markdown structure;
browser: the rendered Markdown in Chromium).
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.parquet as pq

PWN = "window.__pwned=1;alert(1)"
TEXT = [
    f"<script>{PWN}</script>",
    f'<img src=x onerror="{PWN}">',
    "<iframe src=\"javascript:window.top.__pwned=1;alert(1)\"></iframe>",
    f"<svg onload={PWN}>",
    f'<a href="javascript:{PWN}">click</a>',
    f"<details open ontoggle={PWN}>x</details>",
    f'"><script>{PWN}</script>',
    f"[click](javascript:{PWN})",
    f"![x](javascript:{PWN})",
    f"<javascript:{PWN}>",
    "<!-- an unclosed comment swallows the rest",
    "<style>body{display:none}</style><textarea>",
    "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &#60;b&#62;",
    "a | pipe | splits | cells",
    "back\\slash \\| escaped pipe \\\\| and a \\",
    "`code` ``x`` *bold* _em_ ~~gone~~ [ref] (paren) {brace} $x^2$ :smile: #1 !",
    "line one\r\nline two | x | y |",
    "lone\rCR and lone\nLF",
    "tab\there\tand there",
    "=HYPERLINK(\"http://evil.example/\",\"click me\")",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "+1+1",
    "-2+3",
    "\t=1+1",
    "\r=cmd",
    "   =1+1 after spaces",
    "\u202egnp.exe (RTL override)",
    "ctrl \x01\x07\x1b[31mred\x7f\x85 \u2028sep\u2029",
    "Zürich 東京 café 😀 مرحبا",
    "A" * 5000 + f"<script>{PWN}</script>",
    "",
]
URLS = [
    f"javascript:{PWN}",
    "JaVaScRiPt:alert(1)",
    " javascript:alert(1)",
    f"data:text/html,<script>{PWN}</script>",
    "vbscript:msgbox(1)",
    "file:///etc/passwd",
    "//evil.example/protocol-relative",
    "http:javascript:alert(1)",
    "http://example.com/a)(b\"onmouseover=alert(1)",
    f"https://example.com/x) [y](javascript:{PWN}",
    f"https://example.com/<script>{PWN}</script>",
    "http://example.com/a b|c `d` \\e",
    "http://example.com/\r\n| x | y |",
    "https://example.com/ok?a=1&b=2&lt;x#frag",
    "https://creativecommons.org/licenses/by/2.0/",
    "http://[::1",
]
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def value(corpus: list[str], i: int) -> str:
    return corpus[i % len(corpus)]


def shown(text: str) -> str:
    """What a credit should read as once rendered: one line, no bidi controls, trimmed."""
    return re.sub("[\u202a-\u202e\u2066-\u2069]", "", _CONTROL.sub(" ", text)).strip()


def make_hostile(candidates) -> dict[int, dict[str, str]]:
    """Replace titles, owners and URLs of a candidates Parquet file with the hostile corpus.

    Row k gets TEXT[k], TEXT[k+1], ... as title, nickname, nsid, licence name and URLS[k],
    URLS[k+1] as page and licence URL (cycling), so every string lands in every field.
    Returns the values by photo id.
    """
    table = pq.read_table(candidates)
    n = table.num_rows
    cols = {
        "title": [value(TEXT, k) for k in range(n)],
        "user_nickname": [value(TEXT, k + 1) for k in range(n)],
        "user_nsid": [value(TEXT, k + 2) for k in range(n)],
        "license_name": [value(TEXT, k + 3) for k in range(n)],
        "page_url": [value(URLS, k) for k in range(n)],
        "license_url": [value(URLS, k + 1) for k in range(n)],
    }
    for name, values in cols.items():
        table = table.set_column(table.schema.get_field_index(name), name, pa.array(values, pa.string()))
    pq.write_table(table, candidates)
    ids = table.column("photo_id").to_pylist()
    return {int(p): {name: values[k] for name, values in cols.items()} for k, p in enumerate(ids)}


def render_markdown(md: str) -> str:
    """CommonMark (raw HTML on) + GFM tables, as markdown-it-py renders it — with link
    validation off, like a lax renderer: a `javascript:` link in the input would stay one."""
    return markdown_parser().render(md)


def markdown_parser():
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    md.validateLink = lambda url: True
    return md
