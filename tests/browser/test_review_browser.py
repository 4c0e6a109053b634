"""The review page in real headless Chromium: name, keyboard review, undo, reload, export."""

import json

import pyarrow.parquet as pq
import pytest
from review_world import make_world

from mining.cli import main
from mining.stages.review.app import create_app
from mining.stages.review.hosting import running

from paths import ROOT as REPO

pytestmark = pytest.mark.browser


def tile_votes(page):
    return page.eval_on_selector_all("#grid .tile", "ts => ts.map(t => t.dataset.vote)")


def cursor(page):
    return page.eval_on_selector("#grid .tile.cursor", "t => Number(t.dataset.index)")


def settle(page):
    page.wait_for_function("document.body.dataset.pending === '0'")


def open_as(browser, url, name, size):
    """The review page in a new browser context, the reviewer's name entered, ready; page errors
    are collected in the list returned."""
    ctx = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = ctx.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url + "/")
    page.fill("#name-input", name)
    page.press("#name-input", "Enter")
    page.wait_for_selector("body[data-ready='1']")
    return ctx, page, errors


def test_review_with_the_keyboard(tmp_path, browser):
    w = make_world(tmp_path, per_landmark=18)
    assert main(["review", "import", str(w["queue"]), "--db", str(w["db"])]) == 0
    app = create_app(db_path=w["db"], images=w["images"], landmarks=w["landmarks"])
    with running(app) as url:
        ctx, page, errors = open_as(browser, url, "alice", (1280, 820))
        assert page.text_content("#who") == "alice"
        assert page.input_value("#landmark") == "tower"
        assert len(page.query_selector_all("#grid .tile")) == 18
        assert len(page.query_selector_all("#queries img")) == 2
        assert cursor(page) == 0

        for key in ("y", "n", "u"):
            page.keyboard.press(key)
        settle(page)
        assert tile_votes(page)[:4] == ["y", "n", "u", ""] and cursor(page) == 3
        page.keyboard.press("z")                       # undo the "u" on the third tile
        settle(page)
        assert tile_votes(page)[:4] == ["y", "n", "", ""] and cursor(page) == 2
        page.keyboard.press("ArrowRight")
        page.keyboard.press("n")                       # fourth tile
        page.keyboard.press("ArrowLeft")
        page.keyboard.press("ArrowLeft")
        settle(page)
        assert cursor(page) == 2
        page.keyboard.press("Enter")                   # large view of the third tile
        settle(page)
        assert page.is_visible("#viewer")
        page.wait_for_function("document.getElementById('viewer-img').naturalWidth > 0")
        page.keyboard.press("Enter")
        settle(page)
        assert not page.is_visible("#viewer")
        assert "3 / 18" in page.text_content("#lm-progress")
        assert "3 / 36" in page.text_content("#all-progress")

        page.reload()                                  # name and votes survive; resume at first open
        page.wait_for_selector("body[data-ready='1']")
        assert page.is_hidden("#name-dialog")
        assert tile_votes(page)[:5] == ["y", "n", "", "n", ""]
        assert cursor(page) == 2
        page.wait_for_function(
            "[...document.querySelectorAll('#grid img')].slice(0, 6).every(i => i.complete && i.naturalWidth > 0)")
        shot = REPO / "test-artifacts" / "review.png"  # a test artifact; never a tracked file
        shot.parent.mkdir(exist_ok=True)
        page.screenshot(path=str(shot))

        page.select_option("#landmark", "bridge")      # landmark switcher
        settle(page)
        assert all(v == "" for v in tile_votes(page)) and cursor(page) == 0
        page.keyboard.press("y")
        settle(page)
        assert errors == []
        ctx.close()

    out = tmp_path / "decisions.parquet"
    assert main(["review", "export", "--db", str(w["db"]), "--out", str(out)]) == 0
    rows = {(r["landmark"], r["rank"]): r for r in pq.read_table(out).to_pylist()}
    assert sorted(rows) == [("bridge", 1), ("tower", 1), ("tower", 2), ("tower", 4)]
    assert json.loads(rows[("tower", 1)]["votes"]) == {"alice": "y"}
    assert [rows[k]["decision"] for k in sorted(rows)] == ["landmark", "landmark", "not_landmark", "not_landmark"]


def test_a_personal_link_names_the_reviewer(tmp_path, browser):
    """Opened from a per-reviewer link: no name to enter or change; votes and undo are alice's."""
    from mining.stages.review.access import Access

    w = make_world(tmp_path)
    assert main(["review", "import", str(w["queue"]), "--db", str(w["db"])]) == 0
    access = Access({"alice-personal-token": "alice", "bob-personal-token": "bob"}, personal=True)
    app = create_app(db_path=w["db"], images=w["images"], landmarks=w["landmarks"], access=access)
    with running(app) as url:
        ctx = browser.new_context(viewport={"width": 1280, "height": 820})
        page = ctx.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.add_init_script("localStorage.setItem('mining-review-name', 'mallory')")  # ignored
        page.goto(url + "/?token=alice-personal-token")
        page.wait_for_selector("body[data-ready='1']")
        assert page.text_content("#who") == "alice"
        assert page.is_hidden("#name-dialog") and page.is_hidden("#rename")
        assert "token" not in page.url                      # the token left the address bar
        for key in ("y", "n", "z", "u"):
            page.keyboard.press(key)
        settle(page)
        assert tile_votes(page)[:3] == ["y", "u", ""]
        page.reload()                                        # the cookie keeps the identity
        page.wait_for_selector("body[data-ready='1']")
        assert page.text_content("#who") == "alice" and tile_votes(page)[:3] == ["y", "u", ""]
        assert errors == []
        ctx.close()
    out = tmp_path / "decisions.parquet"
    assert main(["review", "export", "--db", str(w["db"]), "--out", str(out)]) == 0
    assert [r["voters"] for r in pq.read_table(out).to_pylist()] == [["alice"], ["alice"]]


def test_a_200_item_landmark_in_a_few_keypresses(tmp_path, browser):
    """R1M's pace: a landmark's 200 items decided with bulk actions; the votes recorded are
    exactly the keys pressed; undo takes a bulk decision back whole; the header never covers
    the cursor; the large view shows the best-matching query beside the candidate."""
    w = make_world(tmp_path, per_landmark=200)
    assert main(["review", "import", str(w["queue"]), "--db", str(w["db"])]) == 0
    app = create_app(db_path=w["db"], images=w["images"], landmarks=w["landmarks"])
    keys = []

    def press(page, key):
        keys.append(key)
        page.keyboard.press(key)
        settle(page)

    with running(app) as url:
        ctx, page, errors = open_as(browser, url, "alice", (900, 700))   # narrow: the header wraps
        assert page.input_value("#landmark") == "tower" and page.is_hidden("#done")

        press(page, "Enter")                      # large view: the candidate and its best query
        assert page.is_visible("#viewer-query") and "tower_001" in page.text_content("#viewer-qcap")
        assert page.eval_on_selector_all("#viewer-qothers img", "is => is.map(i => i.alt)") == ["tower_002"]
        page.wait_for_function("document.getElementById('viewer-qimg').naturalWidth > 0")
        press(page, "Enter")
        press(page, "y")                          # rank 1 shows the tower
        press(page, "y")                          # rank 2 shows the bridge: any landmark is a yes
        for _ in range(6):                        # down a few rows: the cursor stays below the header
            press(page, "ArrowDown")
        gap = page.evaluate("""() => document.querySelector('#grid .tile.cursor').getBoundingClientRect().top
                                     - document.querySelector('header').getBoundingClientRect().bottom""")
        assert gap >= 0, gap
        for _ in range(6):
            press(page, "ArrowUp")
        assert cursor(page) == 2
        press(page, "N")                          # the rest of page 1 from the cursor: not the landmark
        assert page.text_content("#range").startswith("101–200")
        press(page, "N")                          # all of page 2
        assert page.is_visible("#done") and "all 200 decided" in page.text_content("#done-text")
        press(page, "z")                          # one undo: the whole of page 2's bulk decision
        assert page.is_hidden("#done") and "100 / 200" in page.text_content("#lm-progress")
        press(page, "N")
        assert page.is_visible("#done")
        assert len(keys) < 30
        press(page, "g")                          # on to the next landmark with undecided items
        assert page.input_value("#landmark") == "bridge" and cursor(page) == 0
        assert errors == []
        ctx.close()

    from mining.stages.review import database, vote_log
    con = database.connect(w["db"])
    votes = dict(con.execute("""SELECT i.rank, c.vote FROM current c JOIN items i ON i.id = c.item_id
                                WHERE i.landmark = 'tower'"""))
    assert votes == {r: "y" if r <= 2 else "n" for r in range(1, 201)}      # exactly the keys pressed
    # the log: 2 votes + 98 + 100 (undone) + 100 bulk rows, 100 undo rows
    assert con.execute("SELECT COUNT(*) FROM votes WHERE vote = 'undo'").fetchone()[0] == 100
    assert vote_log.current_votes(con) == vote_log.replay_current(con)


def tile_ranks(page):
    return page.eval_on_selector_all("#grid .tile .meta span:first-child", "ls => ls.map(l => Number(l.textContent.slice(1)))")


def test_filters_undecided_disputed_and_mine(tmp_path, browser):
    """The Show filter: alice sees bob's disagreements, her own decisions, and only what she has
    not decided, page after page: a bulk decision in "undecided" moves on to the next undecided
    items, none skipped (an offset counted before the votes would skip 100)."""
    from mining.stages.review import database, vote_log

    w = make_world(tmp_path, per_landmark=150)
    assert main(["review", "import", str(w["queue"]), "--db", str(w["db"])]) == 0
    con = database.connect(w["db"])
    ids = {r: i for r, i in con.execute("SELECT rank, id FROM items WHERE landmark = 'tower'")}
    for r, v in ((1, "y"), (2, "n"), (3, "y"), (4, "u")):
        vote_log.vote(con, ids[r], "alice", v)
    for r, v in ((1, "y"), (2, "y"), (3, "n"), (5, "n")):
        vote_log.vote(con, ids[r], "bob", v)
    app = create_app(db_path=w["db"], images=w["images"], landmarks=w["landmarks"])
    with running(app) as url:
        ctx, page, errors = open_as(browser, url, "alice", (1280, 820))

        def show(value):
            page.select_option("#show", value)
            settle(page)

        show("disputed")
        assert tile_ranks(page) == [2, 3] and "(disputed)" in page.text_content("#range")
        show("mine")
        assert tile_ranks(page) == [1, 2, 3, 4] and tile_votes(page) == ["y", "n", "y", "u"]
        show("undecided")
        assert tile_ranks(page)[:2] == [5, 6] and len(tile_ranks(page)) == 100    # 146 undecided: ranks 5..104
        assert page.text_content("#range").startswith("1–100 of 146")
        page.keyboard.press("y")                                                 # rank 5: a yes
        page.keyboard.press("N")                                                 # ranks 6..104: no
        settle(page)
        assert tile_ranks(page) == list(range(105, 151)) and cursor(page) == 0     # the next undecided, none skipped
        page.keyboard.press("N")
        settle(page)
        assert page.is_visible("#done") and "all 150 decided" in page.text_content("#done-text")
        show("undecided")
        assert tile_ranks(page) == [] and "nothing to show here" in page.text_content("#grid")
        show("all")                                            # back where "all" resumes: the last page
        assert tile_ranks(page) == list(range(101, 151)) and page.text_content("#range") == "101–150 of 150"
        assert errors == []
        ctx.close()
    votes = dict(con.execute("""SELECT i.rank, c.vote FROM current c JOIN items i ON i.id = c.item_id
                                JOIN reviewers r ON r.id = c.reviewer_id WHERE r.name = 'alice'
                                AND i.landmark = 'tower'"""))
    assert votes == {1: "y", 2: "n", 3: "y", 4: "u", 5: "y"} | {r: "n" for r in range(6, 151)}


def test_the_inlier_sort_and_the_matched_keypoints(tmp_path, browser):
    """A planted city's queue: sorted by inliers, the landmark's planted photos come first,
    flagged; the large view draws their matched keypoints."""
    from planted import make_city, scored

    city = make_city(tmp_path)
    scored(city, tmp_path, {"top_k": 100, "min_inliers": 15})
    db = tmp_path / "review.sqlite"
    assert main(["review", "import", str(tmp_path / "scores" / "review_queue.parquet"), "--db", str(db)]) == 0
    app = create_app(db_path=db, images=city["images"], landmarks=city["gnd"])
    with running(app) as url:
        ctx, page, errors = open_as(browser, url, "alice", (1280, 820))
        page.select_option("#landmark", "lm1_q")
        settle(page)
        page.select_option("#sort", "inliers")
        settle(page)
        labels = page.eval_on_selector_all("#grid .tile", "ts => ts.map(t => [t.classList.contains('geo'), "
                                                         "t.querySelector('.inliers').textContent])")
        mine = sum(owner == "lm1_q" for owner in city["planted"].values())
        assert [flag for flag, _ in labels[:mine]] == [True] * mine and not any(f for f, _ in labels[mine:])
        counts = [int(text.split()[1]) for _, text in labels]
        assert counts == sorted(counts, reverse=True) and counts[0] >= 15
        page.keyboard.press("Enter")
        settle(page)
        assert page.is_visible("#viewer-geo")
        page.wait_for_function("document.getElementById('viewer-geo-img').naturalWidth > 0")
        assert "inliers with" in page.text_content("#viewer-geo-cap")
        assert errors == []
        ctx.close()
