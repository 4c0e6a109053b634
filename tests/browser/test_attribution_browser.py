"""ATTRIBUTION.md of hostile metadata, rendered by a CommonMark renderer and opened in real
headless Chromium: no dialog, no script, no active element, one table row per photo."""

import pytest
from hostile import render_markdown
from selection import hostile_selection

pytestmark = pytest.mark.browser

# what a page of credits never needs; any of them means metadata became markup
ACTIVE = "script, iframe, frame, object, embed, img, svg, math, style, link, meta, base, form, input, " \
         "textarea, details, video, audio, source, template"


def test_rendered_attribution_of_hostile_metadata_runs_nothing(tmp_path, browser):
    out, want, meta = hostile_selection(tmp_path)
    body = render_markdown((out / "ATTRIBUTION.md").read_text())
    page_file = tmp_path / "attribution.html"
    page_file.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{body}</body></html>")
    ctx = browser.new_context(java_script_enabled=True)
    ctx.route("**/*", lambda route: route.abort() if not route.request.url.startswith("file:") else route.continue_())
    page = ctx.new_page()
    dialogs, errors = [], []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(page_file.as_uri())
    page.wait_for_load_state("load")
    # give event-handler payloads every chance: hover and focus everything, let loads fail
    page.evaluate("""() => { for (const el of document.querySelectorAll('*')) {
        for (const type of ['mouseover', 'mouseenter', 'focus', 'click', 'toggle', 'load', 'error'])
            el.dispatchEvent(new Event(type, {bubbles: false, cancelable: true}));
    } }""")
    page.wait_for_timeout(500)
    assert dialogs == [] and errors == []
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.evaluate(f"document.body.querySelectorAll('{ACTIVE}').length") == 0
    handlers = page.evaluate("""() => [...document.querySelectorAll('*')].flatMap(el =>
        [...el.attributes].filter(a => a.name.startsWith('on')).map(a => el.tagName + ' ' + a.name))""")
    assert handlers == []
    hrefs = page.eval_on_selector_all("a", "as => as.map(a => a.protocol)")
    assert hrefs and set(hrefs) <= {"http:", "https:"}
    # the browser sees the table the credits were written as: one row per photo, six cells
    cells = page.eval_on_selector_all("tbody tr", "trs => trs.map(tr => tr.querySelectorAll('td').length)")
    assert cells == [6] * len(want)
    paths = page.eval_on_selector_all("tbody tr td:nth-child(2)", "tds => tds.map(td => td.textContent)")
    from mining.settings.layout import image_relpath
    assert paths == [image_relpath(p) for p in want]
    titles = page.eval_on_selector_all("tbody tr td:nth-child(3)", "tds => tds.map(td => td.textContent)")
    assert any("<script>" in t for t in titles) and any(t.startswith("=HYPERLINK") for t in titles)
    ctx.close()
