"""The real headless Chromium (Debian's, driven by Playwright) every browser test opens pages in."""

from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} missing: `apt-get install chromium` (make browser-deps)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        yield b
        b.close()
