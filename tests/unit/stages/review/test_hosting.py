"""Against a real uvicorn server: concurrent reviewers lose no vote; the simulated reviewer;
per-reviewer links on a `mining review serve` process."""

import contextlib
import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time

import httpx
import pyarrow.parquet as pq
import pytest
from review_world import make_world

from mining.cli import main
from mining.stages.review import database, queue_import
from mining.stages.review.app import create_app
from mining.stages.review.hosting import running

THREADS, VOTES = 16, 50


def test_concurrent_reviewers_lose_no_vote(tmp_path):
    w = make_world(tmp_path, per_landmark=VOTES // 2)          # 50 items
    con = database.connect(w["db"], create=True)
    queue_import.import_queue(con, w["queue"], scores_fingerprint=None)
    ids = [r[0] for r in con.execute("SELECT id FROM items ORDER BY id")]
    con.close()
    expected = {(t, i): "ynu"[(t + k) % 3] for t in range(THREADS) for k, i in enumerate(ids)}
    errors: list[str] = []
    barrier = threading.Barrier(THREADS)

    def reviewer(t: int, url: str) -> None:
        with httpx.Client(base_url=url, timeout=60) as c:
            barrier.wait()
            for i in ids:
                r = c.post("/api/votes", json={"item_id": i, "vote": expected[(t, i)], "reviewer": f"r{t:02d}"})
                if r.status_code != 200:
                    errors.append(r.text)

    with running(create_app(db_path=w["db"], images=w["images"], landmarks=w["landmarks"])) as url:
        threads = [threading.Thread(target=reviewer, args=(t, url)) for t in range(THREADS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert errors == []
    out = tmp_path / "decisions.parquet"
    assert main(["review", "export", "--db", str(w["db"]), "--out", str(out), "--complete"]) == 0
    rows = pq.read_table(out).to_pylist()
    assert len(rows) == len(ids) and sum(r["n_votes"] for r in rows) == THREADS * VOTES
    con = database.connect(w["db"])
    by_photo = {pid: i for i, pid in con.execute("SELECT id, photo_id FROM items")}
    assert con.execute("SELECT COUNT(*) FROM votes").fetchone()[0] == THREADS * VOTES
    con.close()
    for r in rows:
        got = json.loads(r["votes"])
        item = by_photo[r["photo_id"]]
        assert got == {f"r{t:02d}": expected[(t, item)] for t in range(THREADS)}


def decisions(path):
    return {(r["landmark"], r["photo_id"]): r["decision"] for r in pq.read_table(path).to_pylist()}


@pytest.mark.parametrize("match,landmark_ranks", [("any", {1, 2}), ("same", {1})])
def test_simulated_reviewers_answer_from_truth(tmp_path, match, landmark_ranks, capsys):
    w = make_world(tmp_path)
    assert main(["review", "import", str(w["queue"]), "--db", str(w["db"])]) == 0
    args = ["review", "simulate", "--db", str(w["db"]), "--truth", str(w["truth"]), "--match", match]
    assert main(args) == 0
    capsys.readouterr()
    assert main(args) == 0                                      # resumable: nothing left to do
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["votes_posted"] == 0
    out = tmp_path / "d.parquet"
    assert main(["review", "export", "--db", str(w["db"]), "--out", str(out), "--complete"]) == 0
    rows = pq.read_table(out).to_pylist()
    assert len(rows) == 12 and all(r["n_votes"] == 3 for r in rows)
    queue = {(r["landmark"], r["photo_id"]): r["rank"] for r in pq.read_table(w["queue"]).to_pylist()}
    for key, decision in decisions(out).items():
        assert decision == ("landmark" if queue[key] in landmark_ranks else "not_landmark"), key


def test_simulated_errors_are_seeded(tmp_path):
    w = make_world(tmp_path)
    outs = []
    for run in range(2):
        dbp = tmp_path / f"r{run}.sqlite"
        con = database.connect(dbp, create=True)
        queue_import.import_queue(con, w["queue"], scores_fingerprint=None)
        con.close()
        assert main(["review", "simulate", "--db", str(dbp), "--truth", str(w["truth"]),
                     "--reviewers", "1", "--error-rate", "1.0", "--demo-seed", "7"]) == 0
        out = tmp_path / f"d{run}.parquet"
        assert main(["review", "export", "--db", str(dbp), "--out", str(out)]) == 0
        outs.append(decisions(out))
    assert outs[0] == outs[1]
    queue = {(r["landmark"], r["photo_id"]): r["rank"] for r in pq.read_table(w["queue"]).to_pylist()}
    for key, decision in outs[0].items():                      # every answer is wrong
        assert decision != ("landmark" if queue[key] in (1, 2) else "not_landmark")
    assert main(["review", "simulate", "--db", str(tmp_path / "r0.sqlite"), "--truth",
                 str(tmp_path / "missing.parquet")]) == 2


@contextlib.contextmanager
def serve_process(w, *args):
    """`mining review serve` as its own process on a free loopback port; yields its URL and stderr file."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    err = open(w["db"].parent / f"serve-{port}.err", "w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mining", "review", "serve", "--db", str(w["db"]), "--images",
         str(w["images"]), "--landmarks", str(w["landmarks"]), "--port", str(port), *args],
        stdout=subprocess.DEVNULL, stderr=err, env={**os.environ, "MINING_REVIEW_TOKEN": ""})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, open(err.name).read()
            try:
                if httpx.get(url + "/api/me", timeout=2).status_code in (200, 401):
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.1)
        yield url, err.name
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        err.close()


def test_per_reviewer_links_on_a_real_server(tmp_path):
    w = make_world(tmp_path)
    assert main(["review", "import", str(w["queue"]), "--db", str(w["db"])]) == 0
    links_file = tmp_path / "review.links.json"
    with serve_process(w, "--reviewers", "alice,bob") as (url, err):
        assert stat.S_IMODE(links_file.stat().st_mode) == 0o600
        saved = json.loads(links_file.read_text())["reviewers"]
        assert sorted(saved) == ["alice", "bob"] and saved["alice"]["token"] != saved["bob"]["token"]
        printed = open(err).read()
        for name, entry in saved.items():
            assert f"{name}: {url}/?token={entry['token']}" in printed
        tok = {n: e["token"] for n, e in saved.items()}
        with httpx.Client(base_url=url, headers={"x-review-token": tok["alice"]}) as alice, \
                httpx.Client(base_url=url, headers={"x-review-token": tok["bob"]}) as bob:
            assert httpx.get(url + "/api/landmarks").status_code == 401
            assert alice.get("/api/me").json() == {"reviewer": "alice"}
            assert alice.post("/api/votes", json={"item_id": 1, "vote": "y"}).status_code == 200
            assert bob.post("/api/votes", json={"item_id": 1, "vote": "n"}).status_code == 200
            assert bob.post("/api/votes", json={"item_id": 2, "vote": "n"}).status_code == 200
            # bob cannot vote as alice; alice's token cannot vote under a second name
            assert bob.post("/api/votes", json={"item_id": 2, "vote": "y", "reviewer": "alice"}).status_code == 403
            assert alice.post("/api/votes", json={"item_id": 2, "vote": "y", "reviewer": "mallory"}).status_code == 403
            # alice cannot undo bob's vote: her undo is hers, whatever name she sends
            assert alice.post("/api/undo", json={"reviewer": "bob"}).status_code == 403
            assert alice.post("/api/undo", json={}).json()["undone"]["item_id"] == 1
            assert alice.post("/api/undo", json={}).json() == {"undone": None}
            assert alice.post("/api/votes", json={"item_id": 1, "vote": "y"}).status_code == 200
        with httpx.Client(base_url=url) as page:                 # the printed link: token → cookie
            assert page.get(f"/?token={tok['bob']}").status_code == 200
            assert page.get("/api/me").json() == {"reviewer": "bob"}
    con = database.connect(w["db"])
    rows = con.execute("""SELECT r.name, v.item_id, v.vote FROM votes v JOIN reviewers r ON r.id = v.reviewer_id
                          ORDER BY v.id""").fetchall()
    con.close()
    assert rows == [("alice", 1, "y"), ("bob", 1, "n"), ("bob", 2, "n"), ("alice", 1, "undo"), ("alice", 1, "y")]
    out = tmp_path / "decisions.parquet"
    assert main(["review", "export", "--db", str(w["db"]), "--out", str(out)]) == 0
    got = {r["photo_id"]: r for r in pq.read_table(out).to_pylist()}
    assert got[10000]["voters"] == ["alice", "bob"] and json.loads(got[10000]["votes"]) == {"alice": "y", "bob": "n"}
    assert got[10001]["voters"] == ["bob"] and got[10001]["decision"] == "not_landmark"

    # Restarts: the links file keeps every listed reviewer's link valid; a reviewer left out loses it.
    with serve_process(w, "--reviewers", "alice", "--link-base", "http://review.example:9/") as (url, err):
        assert f"alice: http://review.example:9/?token={tok['alice']}" in open(err).read()
        assert httpx.get(url + "/api/me", headers={"x-review-token": tok["alice"]}).json() == {"reviewer": "alice"}
        assert httpx.get(url + "/api/me", headers={"x-review-token": tok["bob"]}).status_code == 401
    team = tmp_path / "team.txt"
    team.write_text("alice\nbob\n")
    with serve_process(w, "--reviewers-file", str(team), "--new-links") as (url, _):
        new = {n: e["token"] for n, e in json.loads(links_file.read_text())["reviewers"].items()}
        assert httpx.get(url + "/api/me", headers={"x-review-token": tok["alice"]}).status_code == 401
        assert httpx.get(url + "/api/me", headers={"x-review-token": new["bob"]}).json() == {"reviewer": "bob"}
