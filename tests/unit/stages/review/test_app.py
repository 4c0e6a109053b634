"""Review API: pages, votes, input validation, image containment, token and host policy."""

import os

import pytest
from fastapi.testclient import TestClient
from review_world import make_world

from mining.errors import UserError
from mining.settings.layout import image_relpath
from mining.stages.review import database, queue_import, vote_log
from mining.stages.review.app import create_app
from mining.stages.review.access import resolve_token


@pytest.fixture
def served_world(tmp_path):
    """The tiny world with its queue imported and the database closed: the app opens it itself."""
    w = make_world(tmp_path)
    con = database.connect(w["db"], create=True)
    queue_import.import_queue(con, w["queue"], scores_fingerprint=None)
    con.close()
    return w


@pytest.fixture
def client(served_world):
    app = create_app(db_path=served_world["db"], images=served_world["images"], landmarks=served_world["landmarks"])
    return TestClient(app, base_url="http://127.0.0.1:8765")


def snapshot(path):
    con = database.connect(path)
    try:
        return [con.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall()
                for t in ("items", "reviewers", "votes", "current")]
    finally:
        con.close()


def test_landmarks_items_vote_resume_undo(client):
    lms = client.get("/api/landmarks", params={"reviewer": "ann"}).json()
    assert [x["landmark"] for x in lms["landmarks"]] == ["tower", "bridge"]
    assert lms["total"] == 12 and lms["mine"] == 0
    assert [q["name"] for q in lms["landmarks"][0]["queries"]] == ["tower_001", "tower_002"]
    page = client.get("/api/items", params={"landmark": "tower", "offset": 2, "limit": 3}).json()
    assert [i["rank"] for i in page["items"]] == [3, 4, 5] and page["total"] == 6
    first = client.get("/api/items", params={"landmark": "tower", "limit": 1}).json()["items"][0]
    r = client.post("/api/votes", json={"item_id": first["id"], "vote": "n", "reviewer": "ann"})
    assert r.status_code == 200, r.text
    assert client.get("/api/resume", params={"landmark": "tower", "reviewer": "ann"}).json()["position"] == 1
    assert client.get("/api/landmarks", params={"reviewer": "ann"}).json()["mine"] == 1
    u = client.post("/api/undo", json={"reviewer": "ann"}).json()["undone"]
    assert u == {"item_id": first["id"], "vote": None, "count": 1, "landmark": "tower", "position": 0}
    assert client.post("/api/undo", json={"reviewer": "ann"}).json() == {"undone": None}
    assert client.get("/api/items", params={"landmark": "nope"}).status_code == 404


def test_bulk_decision_on_the_rest_of_a_page(client):
    items = client.get("/api/items", params={"landmark": "tower", "reviewer": "cy"}).json()["items"]
    ids = [i["id"] for i in items]
    assert client.post("/api/votes", json={"item_id": ids[0], "vote": "y", "reviewer": "cy"}).status_code == 200
    r = client.post("/api/votes/bulk", json={"item_ids": ids, "vote": "n", "reviewer": "cy"})
    assert r.status_code == 200, r.text
    assert (r.json()["voted"], r.json()["skipped"]) == (len(ids) - 1, 1)
    votes = [i["vote"] for i in client.get("/api/items", params={"landmark": "tower", "reviewer": "cy"}).json()["items"]]
    assert votes == ["y"] + ["n"] * (len(ids) - 1)
    u = client.post("/api/undo", json={"reviewer": "cy"}).json()["undone"]
    assert u["count"] == len(ids) - 1 and u["position"] == 1
    votes = [i["vote"] for i in client.get("/api/items", params={"landmark": "tower", "reviewer": "cy"}).json()["items"]]
    assert votes == ["y"] + [None] * (len(ids) - 1)
    for bad in ({"item_ids": [], "vote": "n"}, {"item_ids": "1,2", "vote": "n"}, {"item_ids": [True], "vote": "n"},
                {"item_ids": [-1], "vote": "n"}, {"item_ids": ids, "vote": "maybe"},
                {"item_ids": list(range(501)), "vote": "n"}):
        assert client.post("/api/votes/bulk", json={**bad, "reviewer": "cy"}).status_code == 422, bad
    assert client.post("/api/votes/bulk", json={"item_ids": [ids[0], 999999], "vote": "n",
                                                "reviewer": "cy"}).status_code == 404


@pytest.mark.parametrize("body,headers,status", [
    ({"item_id": 999999, "vote": "y", "reviewer": "ann"}, None, 404),      # unknown item
    ({"item_id": 1, "vote": "maybe", "reviewer": "ann"}, None, 422),       # unknown vote
    ({"item_id": "1", "vote": "y", "reviewer": "ann"}, None, 422),         # id not an int
    ({"item_id": True, "vote": "y", "reviewer": "ann"}, None, 422),
    ({"item_id": -1, "vote": "y", "reviewer": "ann"}, None, 422),
    ({"item_id": 1, "vote": "y", "reviewer": ""}, None, 422),              # no name
    ({"item_id": 1, "vote": "y", "reviewer": "x" * 100}, None, 422),
    ({"item_id": 1, "vote": "y"}, None, 422),
    ({"item_id": 1, "vote": "y", "reviewer": "ann", "pad": "x" * 10_000}, None, 413),  # oversized
    ([1, 2], None, 400),
])
def test_bad_votes_are_refused_and_change_nothing(client, served_world, body, headers, status):
    before = snapshot(served_world["db"])
    r = client.post("/api/votes", json=body, headers=headers)
    assert r.status_code == status, r.text
    assert snapshot(served_world["db"]) == before


def test_bad_bodies_are_refused_and_change_nothing(client, served_world):
    before = snapshot(served_world["db"])
    ok = b'{"item_id": 1, "vote": "y", "reviewer": "ann"}'
    assert client.post("/api/votes", content=ok, headers={"content-type": "text/plain"}).status_code == 415
    assert client.post("/api/votes", content=b"{not json",
                       headers={"content-type": "application/json"}).status_code == 400

    def chunks():  # no Content-Length: the limit must hold while streaming
        for _ in range(100):
            yield b" " * 1000
        yield ok
    r = client.post("/api/votes", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert client.post("/api/undo", json={"reviewer": 7}).status_code == 422
    assert snapshot(served_world["db"]) == before


def test_images_thumbnails_and_query_crops(client, served_world):
    r = client.get("/thumb/1")
    assert r.status_code == 200 and r.headers["content-type"] == "image/jpeg"
    cached = list((served_world["db"].parent / "review.thumbs").rglob("*.jpg"))
    assert len(cached) == 1
    stamp = cached[0].stat().st_mtime_ns
    assert client.get("/thumb/1").content == r.content
    assert cached[0].stat().st_mtime_ns == stamp                  # generated once, then served
    full = client.get("/image/1")
    src = served_world["images"] / image_relpath(10000)
    assert full.status_code == 200 and full.content == src.read_bytes()
    q = client.get("/query/0")
    assert q.status_code == 200 and q.content[:2] == b"\xff\xd8"
    from io import BytesIO

    from PIL import Image
    assert Image.open(BytesIO(q.content)).size == (90, 70)        # cropped to the bbox
    assert client.get("/query/99").status_code == 404
    assert client.get("/thumb/424242").status_code == 404
    assert client.get("/").status_code == 200
    assert client.get("/static/app.js").status_code == 200


ATTACKS = ["..", "../..", "../secret", "../../secret", "..%2F..%2Fetc%2Fpasswd", "%2E%2E%2F%2E%2E%2Fetc%2Fpasswd", "%2Fetc%2Fpasswd",
           "/etc/passwd", "1%2F..%2F..%2Fsecret", "1/../../secret", "..\\..\\secret", "1%00", "-1", "1.5",
           "99999999999999999999999999"]


def test_no_path_traversal_on_any_image_endpoint(served_world):
    """Raw request lines against the real server (http.client sends paths unnormalised)."""
    import http.client

    from mining.stages.review.hosting import running

    (served_world["images"].parent / "secret").write_text("top secret")
    app = create_app(db_path=served_world["db"], images=served_world["images"], landmarks=served_world["landmarks"])
    bad = []
    with running(app) as url:
        host, port = url.rsplit("/", 1)[1].split(":")
        ok = http.client.HTTPConnection(host, int(port), timeout=10)
        ok.request("GET", "/thumb/1")
        assert ok.getresponse().status == 200        # the harness reaches real images
        ok.close()
        for endpoint in ("/thumb/", "/image/", "/query/", "/static/", "/"):
            for attack in ATTACKS:
                conn = http.client.HTTPConnection(host, int(port), timeout=10)
                conn.request("GET", endpoint + attack)
                r = conn.getresponse()
                body = r.read()
                conn.close()
                if r.status not in (400, 404, 422) or b"top secret" in body or b"root:" in body:
                    bad.append((endpoint + attack, r.status))
    assert bad == []


def test_symlink_out_of_root_is_not_served(client, served_world, tmp_path):
    outside = tmp_path / "outside.jpg"
    outside.write_bytes((served_world["images"] / image_relpath(10001)).read_bytes())
    target = served_world["images"] / image_relpath(10001)
    target.unlink()
    os.symlink(outside, target)
    assert client.get("/image/2").status_code == 404
    assert client.get("/thumb/2").status_code == 404
    # a symlink that stays inside the root is fine
    target.unlink()
    os.symlink(served_world["images"] / image_relpath(10000), target)
    assert client.get("/image/2").status_code == 200


def test_token_is_required_on_every_request(served_world):
    app = create_app(db_path=served_world["db"], images=served_world["images"], landmarks=served_world["landmarks"], token="s3cret-token")
    c = TestClient(app, base_url="http://192.0.2.10:8765")
    for path in ("/", "/api/landmarks", "/thumb/1", "/image/1", "/query/0", "/static/app.js"):
        assert c.get(path).status_code == 401, path
        assert c.get(path, headers={"x-review-token": "wrong-token!"}).status_code == 401
    # a person following a stale or mistyped link reads a page, not JSON; nothing of the app leaks
    stale = c.get("/", params={"token": "old-token"}, headers={"accept": "text/html,application/xhtml+xml"})
    assert stale.status_code == 401 and stale.headers["content-type"].startswith("text/html")
    assert "This review link is not valid" in stale.text and "s3cret" not in stale.text and "/api/" not in stale.text
    before = snapshot(served_world["db"])
    assert c.post("/api/votes", json={"item_id": 1, "vote": "y", "reviewer": "a"}).status_code == 401
    assert snapshot(served_world["db"]) == before
    assert c.get("/api/landmarks", headers={"x-review-token": "s3cret-token"}).status_code == 200
    assert c.get("/api/landmarks", headers={"authorization": "Bearer s3cret-token"}).status_code == 200
    page = c.get("/", params={"token": "s3cret-token"})         # the URL printed by `serve`
    assert page.status_code == 200 and "review_token" in page.headers["set-cookie"]
    assert c.get("/thumb/1").status_code == 200                  # the cookie now authorises


def test_without_token_only_loopback_host_headers(served_world):
    app = create_app(db_path=served_world["db"], images=served_world["images"], landmarks=served_world["landmarks"])
    assert TestClient(app, base_url="http://evil.example:8765").get("/api/landmarks").status_code == 403
    assert TestClient(app, base_url="http://localhost:8765").get("/api/landmarks").status_code == 200
    assert TestClient(app, base_url="http://[::1]:8765").get("/api/landmarks").status_code == 200


def test_host_policy(monkeypatch):
    monkeypatch.delenv("MINING_REVIEW_TOKEN", raising=False)
    assert resolve_token("127.0.0.1", None) is None
    assert resolve_token("::1", None) is None
    with pytest.raises(UserError, match="token"):
        resolve_token("0.0.0.0", None)
    with pytest.raises(UserError, match="token"):
        resolve_token("192.168.1.5", None)
    assert resolve_token("0.0.0.0", "long-enough") == "long-enough"
    with pytest.raises(UserError):
        resolve_token("0.0.0.0", "short")
    monkeypatch.setenv("MINING_REVIEW_TOKEN", "from-the-env")
    assert resolve_token("0.0.0.0", None) == "from-the-env"


def test_serve_refuses_public_host_without_token(served_world, monkeypatch):
    from mining.cli import main
    monkeypatch.delenv("MINING_REVIEW_TOKEN", raising=False)
    assert main(["review", "serve", "--db", str(served_world["db"]), "--images", str(served_world["images"]),
                 "--landmarks", str(served_world["landmarks"]), "--host", "0.0.0.0"]) == 2
    assert main(["review", "serve", "--db", str(served_world["db"]) + ".missing", "--images",
                 str(served_world["images"]), "--landmarks", str(served_world["landmarks"])]) == 2


def test_deeply_nested_or_huge_json_is_a_client_error(client, served_world):
    """Nesting past the parser's stack is bad input (400), never a 500; too large stays 413."""
    before = snapshot(served_world["db"])
    strict = TestClient(client.app, base_url="http://127.0.0.1:8765", raise_server_exceptions=False)
    json_type = {"content-type": "application/json"}
    for path in ("/api/votes", "/api/undo"):
        for body in (b"[" * 4000, b'{"reviewer": "ann", "x": ' + b"[" * 3000, b'{"a":' * 800):
            r = strict.post(path, content=body, headers=json_type)
            assert r.status_code == 400, (path, body[:20], r.status_code, r.text)
        deep_but_valid = b'{"item_id": 1, "vote": "y", "x": ' + b"[" * 500 + b"]" * 500 + b"}"
        assert strict.post(path, content=deep_but_valid, headers=json_type).status_code == 422  # no name
        r = strict.post(path, content=b"[" * 100_000, headers=json_type)
        assert r.status_code == 413
    assert snapshot(served_world["db"]) == before


def _thumb_entry(served_world, pid=10000):
    from mining.settings.layout import image_key

    key = image_key(pid)
    return served_world["db"].parent / "review.thumbs" / "items" / key[:3] / f"{key}.jpg"


def test_symlink_planted_in_thumbnail_cache_is_never_followed(client, served_world, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    first = client.get("/thumb/1")
    entry = _thumb_entry(served_world)
    assert first.status_code == 200 and entry.is_file()
    # A file link (to a secret, or /etc/passwd): refused as a cache entry, replaced by a fresh thumbnail.
    for target in (secret, "/etc/passwd"):
        entry.unlink()
        os.symlink(target, entry)
        r = client.get("/thumb/1")
        assert r.status_code == 200 and r.content == first.content
        assert not entry.is_symlink() and entry.read_bytes() == first.content
    assert secret.read_text() == "top secret"
    # A hard link to a file elsewhere on the same file system: replaced too, the other file untouched.
    entry.unlink()
    os.link(secret, entry)
    assert client.get("/thumb/1").content == first.content and secret.read_text() == "top secret"
    # A directory link on the way: writing through it would write outside the cache, so refused.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / entry.name).write_text("top secret")
    shard = entry.parent
    for f in shard.iterdir():
        f.unlink()
    shard.rmdir()
    os.symlink(outside, shard)
    r = client.get("/thumb/1")
    assert r.status_code == 404 and b"top secret" not in r.content
    assert sorted(p.name for p in outside.iterdir()) == [entry.name]    # nothing written there
    queries = served_world["db"].parent / "review.thumbs" / "queries"
    assert client.get("/query/0").status_code == 200
    for f in queries.iterdir():
        f.unlink()
    queries.rmdir()
    os.symlink(outside, queries)
    assert client.get("/query/0").status_code == 404
    assert sorted(p.name for p in outside.iterdir()) == [entry.name]


def test_a_cache_folder_swapped_for_a_link_while_rendering_gets_nothing(client, served_world, tmp_path, monkeypatch):
    """The check and the write use one descriptor: swapping the entry's folder for a link to
    elsewhere while the thumbnail renders (after any check by path) writes nothing there."""
    from mining.stages.review import thumbs

    first = client.get("/thumb/1")
    entry = _thumb_entry(served_world)
    assert first.status_code == 200 and entry.is_file()
    entry.unlink()
    outside = tmp_path / "outside"
    outside.mkdir()
    shard = entry.parent
    real_render = thumbs.render

    def render_then_swap(*args, **kwargs):
        data = real_render(*args, **kwargs)
        shard.rename(shard.with_name(shard.name + ".moved"))
        os.symlink(outside, shard)
        return data

    monkeypatch.setattr(thumbs, "render", render_then_swap)
    r = client.get("/thumb/1")
    assert r.status_code == 200 and r.content == first.content  # served
    assert list(outside.iterdir()) == []  # nothing written through the link
    moved = shard.with_name(shard.name + ".moved")
    assert sorted(p.name for p in moved.iterdir()) == [entry.name]  # written where the check was made
    assert (moved / entry.name).read_bytes() == first.content


def test_a_cache_root_that_is_a_symlink_is_fine(served_world, tmp_path):
    """Only links inside the cache are refused: the cache folder itself may live elsewhere."""
    elsewhere = tmp_path / "big-disk"
    elsewhere.mkdir()
    os.symlink(elsewhere, served_world["db"].parent / "review.thumbs")
    c = TestClient(create_app(db_path=served_world["db"], images=served_world["images"], landmarks=served_world["landmarks"]),
                   base_url="http://127.0.0.1:8765")
    assert c.get("/thumb/1").status_code == 200 and c.get("/thumb/1").status_code == 200
    assert len(list(elsewhere.rglob("*.jpg"))) == 1


def test_a_token_names_its_reviewer(served_world):
    """One token per reviewer: requests act as the token's reviewer, never as a name they send."""
    from mining.stages.review.access import Access

    access = Access({"alice-token-0001": "alice", "bob-token-00002": "bob"}, personal=True)
    app = create_app(db_path=served_world["db"], images=served_world["images"], landmarks=served_world["landmarks"], access=access)
    alice = TestClient(app, base_url="http://192.0.2.10:8765", headers={"x-review-token": "alice-token-0001"})
    bob = TestClient(app, base_url="http://192.0.2.10:8765", headers={"x-review-token": "bob-token-00002"})
    assert alice.get("/api/me").json() == {"reviewer": "alice"}
    assert bob.get("/api/me").json() == {"reviewer": "bob"}
    assert TestClient(app, base_url="http://192.0.2.10:8765").get("/api/me").status_code == 401
    assert alice.post("/api/votes", json={"item_id": 1, "vote": "y"}).status_code == 200
    assert alice.post("/api/votes", json={"item_id": 2, "vote": "y", "reviewer": " alice "}).status_code == 200
    before = snapshot(served_world["db"])
    for c, body in ((bob, {"item_id": 1, "vote": "n", "reviewer": "alice"}),     # bob as alice
                    (alice, {"item_id": 1, "vote": "n", "reviewer": "alice2"}),  # a second name
                    (alice, {"item_id": 1, "vote": "n", "reviewer": ""}),
                    (alice, {"item_id": 1, "vote": "n", "reviewer": 7})):
        r = c.post("/api/votes", json=body)
        assert r.status_code == 403, (body, r.text)
    assert bob.post("/api/undo", json={"reviewer": "alice"}).status_code == 403
    assert bob.get("/api/items", params={"landmark": "tower", "reviewer": "alice"}).status_code == 403
    assert snapshot(served_world["db"]) == before
    assert bob.post("/api/undo", json={}).json() == {"undone": None}        # bob has nothing to undo
    assert alice.get("/api/landmarks").json()["mine"] == 2                 # no name needed
    assert bob.get("/api/landmarks", params={"reviewer": "bob"}).json()["mine"] == 0
    con = database.connect(served_world["db"])
    try:
        assert con.execute("SELECT name FROM reviewers").fetchall() == [("alice",)]
    finally:
        con.close()


def test_the_one_token_mode_names_one_reviewer(served_world, monkeypatch):
    app = create_app(db_path=served_world["db"], images=served_world["images"], landmarks=served_world["landmarks"], token="s3cret-token",
                     reviewer="ann")
    c = TestClient(app, base_url="http://192.0.2.10:8765", headers={"x-review-token": "s3cret-token"})
    assert c.get("/api/me").json() == {"reviewer": "ann"}
    assert c.post("/api/votes", json={"item_id": 1, "vote": "n", "reviewer": "bob"}).status_code == 403
    assert c.post("/api/votes", json={"item_id": 1, "vote": "n", "reviewer": "ann"}).status_code == 200
    assert c.post("/api/undo", json={}).json()["undone"]["item_id"] == 1
    monkeypatch.setattr("getpass.getuser", lambda: "login-name")
    app = create_app(db_path=served_world["db"], images=served_world["images"], landmarks=served_world["landmarks"], token="s3cret-token")
    c = TestClient(app, base_url="http://192.0.2.10:8765", headers={"x-review-token": "s3cret-token"})
    assert c.get("/api/me").json() == {"reviewer": "login-name"}             # --reviewer defaults to it


def test_open_mode_lets_the_page_name_itself(client):
    assert client.get("/api/me").json() == {"reviewer": None}


def test_reviewer_lists_and_the_links_file(tmp_path, monkeypatch):
    import json
    import stat

    from mining.stages.review import access as acc

    monkeypatch.delenv("MINING_REVIEW_TOKEN", raising=False)
    names = tmp_path / "team.txt"
    names.write_text("# the team\nalice\n\n  bob   smith  # second\n")
    assert acc.parse_reviewers(None, names) == ["alice", "bob smith"]
    assert acc.parse_reviewers("carol, dan", names) == ["carol", "dan", "alice", "bob smith"]
    for bad, match in (("alice,alice", "twice"), (" , ", "no reviewer"), ("a\x00b", "printable"),
                       ("x" * 65, "printable")):
        with pytest.raises(UserError, match=match):
            acc.parse_reviewers(bad, None)
    with pytest.raises(UserError, match="missing.txt"):
        acc.parse_reviewers(None, tmp_path / "missing.txt")

    links = tmp_path / "review.links.json"
    first = acc.resolve_access("0.0.0.0", None, None, "alice,bob", None, links)
    assert sorted(first.tokens.values()) == ["alice", "bob"] and first.personal
    assert all(len(t) >= 40 for t in first.tokens)
    lines = acc.announce(first, "http://h:1", links)
    assert stat.S_IMODE(links.stat().st_mode) == 0o600
    saved = json.loads(links.read_text())["reviewers"]
    for name, entry in saved.items():
        assert first.reviewer_for(entry["token"]) == name
        assert f"  {name}: {entry['link']}" in lines and entry["link"] == f"http://h:1/?token={entry['token']}"
    again = acc.resolve_access("0.0.0.0", None, None, "alice,bob,carol", None, links)   # restart
    assert {t: n for t, n in again.tokens.items() if n != "carol"} == dict(first.tokens)
    fewer = acc.resolve_access("0.0.0.0", None, None, "alice", None, links)           # bob left
    assert list(fewer.tokens.values()) == ["alice"] and set(fewer.tokens) < set(first.tokens)
    fresh = acc.resolve_access("0.0.0.0", None, None, "alice,bob", None, links, rotate=True)
    assert not set(fresh.tokens) & set(first.tokens)
    assert first.reviewer_for("") is None and first.reviewer_for("x" * 43) is None

    os.chmod(links, 0o644)                                   # tokens others could have read
    with pytest.raises(UserError, match="readable by others"):
        acc.resolve_access("0.0.0.0", None, None, "alice", None, links)
    shared = {"reviewers": {"alice": {"token": "same-token-1234"}, "bob": {"token": "same-token-1234"}}}
    links.write_text(json.dumps(shared))
    os.chmod(links, 0o600)
    with pytest.raises(UserError, match="share a token"):   # one token, two names: refused
        acc.resolve_access("0.0.0.0", None, None, "alice,bob", None, links)
    for args, match in (((None, "ann", None, None), "--reviewer"),
                        (("long-enough", None, "alice", None), "one or the other"),
                        ((None, "ann", "alice", None), "--reviewer")):
        with pytest.raises(UserError, match=match):
            acc.resolve_access("127.0.0.1", *args, links)
    with pytest.raises(UserError, match="--new-links"):
        acc.resolve_access("127.0.0.1", None, None, None, None, links, rotate=True)
    assert acc.resolve_access("127.0.0.1", None, None, None, None, links).open
    assert acc.resolve_access("0.0.0.0", "long-enough", "ann", None, None, links).tokens == {"long-enough": "ann"}


def test_a_vote_the_database_cannot_store_is_a_503(client, served_world, monkeypatch):
    """A full disk or read-only database while serving: the reviewer is told, nothing half-saved."""
    import sqlite3

    def full(*_a, **_k):
        raise sqlite3.OperationalError("database or disk is full")
    monkeypatch.setattr(vote_log, "vote", full)
    monkeypatch.setattr(vote_log, "undo", full)
    strict = TestClient(client.app, base_url="http://127.0.0.1:8765", raise_server_exceptions=False)
    r = strict.post("/api/votes", json={"item_id": 1, "vote": "y", "reviewer": "ann"})
    assert r.status_code == 503 and "disk is full" in r.json()["detail"]
    assert strict.post("/api/undo", json={"reviewer": "ann"}).status_code == 503


def test_import_and_serve_refuse_a_database_they_cannot_write(served_world, capsys):
    """-wal taken by a folder: SQLite cannot write (root neither); one line naming the file."""
    from mining.cli import main

    (served_world["db"].parent / (served_world["db"].name + "-wal")).mkdir()
    assert main(["review", "import", str(served_world["queue"]), "--db", str(served_world["db"])]) == 2
    assert main(["review", "serve", "--db", str(served_world["db"]), "--images", str(served_world["images"]),
                 "--landmarks", str(served_world["landmarks"])]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(f"{served_world['db']}: cannot open the review database for writing" in e for e in err)
