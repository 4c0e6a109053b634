"""Against a real uvicorn server: concurrent reviewers lose no vote; the simulated reviewer."""

import json
import threading

import httpx
import pyarrow.parquet as pq
import pytest
from review_world import make_world

from mining.cli import main
from mining.review import db
from mining.review.app import create_app
from mining.review.server import running

THREADS, VOTES = 16, 50


def test_concurrent_reviewers_lose_no_vote(tmp_path):
    w = make_world(tmp_path, per_landmark=VOTES // 2)          # 50 items
    con = db.connect(w["db"], create=True)
    db.import_queue(con, w["queue"])
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

    with running(create_app(w["db"], w["images"], w["landmarks"])) as url:
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
    con = db.connect(w["db"])
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
        con = db.connect(dbp, create=True)
        db.import_queue(con, w["queue"])
        con.close()
        assert main(["review", "simulate", "--db", str(dbp), "--truth", str(w["truth"]),
                     "--reviewers", "1", "--error-rate", "1.0", "--seed", "7"]) == 0
        out = tmp_path / f"d{run}.parquet"
        assert main(["review", "export", "--db", str(dbp), "--out", str(out)]) == 0
        outs.append(decisions(out))
    assert outs[0] == outs[1]
    queue = {(r["landmark"], r["photo_id"]): r["rank"] for r in pq.read_table(w["queue"]).to_pylist()}
    for key, decision in outs[0].items():                      # every answer is wrong
        assert decision != ("landmark" if queue[key] in (1, 2) else "not_landmark")
    assert main(["review", "simulate", "--db", str(tmp_path / "r0.sqlite"), "--truth",
                 str(tmp_path / "missing.parquet")]) == 2
