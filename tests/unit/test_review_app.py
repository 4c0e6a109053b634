"""Review API: pages, votes, input validation, image containment, token and host policy."""

import os

import pytest
from fastapi.testclient import TestClient
from review_world import make_world

from mining.errors import UserError
from mining.layout import image_relpath
from mining.review import db
from mining.review.app import create_app
from mining.review.server import resolve_token


@pytest.fixture
def world(tmp_path):
    w = make_world(tmp_path)
    con = db.connect(w["db"], create=True)
    db.import_queue(con, w["queue"])
    con.close()
    return w


@pytest.fixture
def client(world):
    app = create_app(world["db"], world["images"], world["landmarks"])
    return TestClient(app, base_url="http://127.0.0.1:8765")


def snapshot(path):
    con = db.connect(path)
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
    assert u == {"item_id": first["id"], "vote": None, "landmark": "tower", "position": 0}
    assert client.post("/api/undo", json={"reviewer": "ann"}).json() == {"undone": None}
    assert client.get("/api/items", params={"landmark": "nope"}).status_code == 404


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
def test_bad_votes_are_refused_and_change_nothing(client, world, body, headers, status):
    before = snapshot(world["db"])
    r = client.post("/api/votes", json=body, headers=headers)
    assert r.status_code == status, r.text
    assert snapshot(world["db"]) == before


def test_bad_bodies_are_refused_and_change_nothing(client, world):
    before = snapshot(world["db"])
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
    assert snapshot(world["db"]) == before


def test_images_thumbnails_and_query_crops(client, world):
    r = client.get("/thumb/1")
    assert r.status_code == 200 and r.headers["content-type"] == "image/jpeg"
    cached = list((world["db"].parent / "review.thumbs").rglob("*.jpg"))
    assert len(cached) == 1
    stamp = cached[0].stat().st_mtime_ns
    assert client.get("/thumb/1").content == r.content
    assert cached[0].stat().st_mtime_ns == stamp                  # generated once, then served
    full = client.get("/image/1")
    src = world["images"] / image_relpath(10000)
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


def test_no_path_traversal_on_any_image_endpoint(world):
    """Raw request lines against the real server (http.client sends paths unnormalised)."""
    import http.client

    from mining.review.server import running

    (world["images"].parent / "secret").write_text("top secret")
    app = create_app(world["db"], world["images"], world["landmarks"])
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


def test_symlink_out_of_root_is_not_served(client, world, tmp_path):
    outside = tmp_path / "outside.jpg"
    outside.write_bytes((world["images"] / image_relpath(10001)).read_bytes())
    target = world["images"] / image_relpath(10001)
    target.unlink()
    os.symlink(outside, target)
    assert client.get("/image/2").status_code == 404
    assert client.get("/thumb/2").status_code == 404
    # a symlink that stays inside the root is fine
    target.unlink()
    os.symlink(world["images"] / image_relpath(10000), target)
    assert client.get("/image/2").status_code == 200


def test_token_is_required_on_every_request(world):
    app = create_app(world["db"], world["images"], world["landmarks"], token="s3cret-token")
    c = TestClient(app, base_url="http://192.0.2.10:8765")
    for path in ("/", "/api/landmarks", "/thumb/1", "/image/1", "/query/0", "/static/app.js"):
        assert c.get(path).status_code == 401, path
        assert c.get(path, headers={"x-review-token": "wrong-token!"}).status_code == 401
    before = snapshot(world["db"])
    assert c.post("/api/votes", json={"item_id": 1, "vote": "y", "reviewer": "a"}).status_code == 401
    assert snapshot(world["db"]) == before
    assert c.get("/api/landmarks", headers={"x-review-token": "s3cret-token"}).status_code == 200
    assert c.get("/api/landmarks", headers={"authorization": "Bearer s3cret-token"}).status_code == 200
    page = c.get("/", params={"token": "s3cret-token"})         # the URL printed by `serve`
    assert page.status_code == 200 and "review_token" in page.headers["set-cookie"]
    assert c.get("/thumb/1").status_code == 200                  # the cookie now authorises


def test_without_token_only_loopback_host_headers(world):
    app = create_app(world["db"], world["images"], world["landmarks"])
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


def test_serve_refuses_public_host_without_token(world, monkeypatch):
    from mining.cli import main
    monkeypatch.delenv("MINING_REVIEW_TOKEN", raising=False)
    assert main(["review", "serve", "--db", str(world["db"]), "--images", str(world["images"]),
                 "--landmarks", str(world["landmarks"]), "--host", "0.0.0.0"]) == 2
    assert main(["review", "serve", "--db", str(world["db"]) + ".missing", "--images",
                 str(world["images"]), "--landmarks", str(world["landmarks"])]) == 2
