"""Progress bars (mining/console/progress.py): whole lines in a log, a redraw on a terminal."""

def test_progress_goes_to_a_log_as_whole_lines(monkeypatch):
    import io

    from mining.console.progress import bar

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("MINING_PROGRESS_SECONDS", "0")
    log, tty = io.StringIO(), Terminal()
    for stream in (log, tty):
        b = bar(total=5, desc="work", unit="img", stream=stream)
        for _ in range(5):
            b.update(1)
        b.close()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue() and len(lines) >= 2
    assert all(line.startswith("work:") for line in lines) and "5/5" in lines[-1]
    assert "\r" in tty.getvalue()  # a terminal keeps tqdm's redraw in place
    quiet = io.StringIO()
    b = bar(total=2, desc="x", stream=quiet, disable=True)
    b.update(2)
    b.close()
    assert quiet.getvalue() == ""
