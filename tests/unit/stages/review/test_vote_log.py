"""The vote log (`mining.stages.review.vote_log`): append-only votes, bulk decisions, undo."""

import pytest
from review_world import item_id

from mining.errors import UserError
from mining.stages.review import vote_log


def test_votes_undo_walks_back_through_the_log(world):
    w, con = world
    a, b = item_id(con, "tower", 1), item_id(con, "tower", 2)
    vote_log.vote(con, a, "ann", "y")
    vote_log.vote(con, b, "ann", "n")
    vote_log.vote(con, a, "ann", "u")          # changes her mind on a
    vote_log.vote(con, a, "bob", "n")
    assert vote_log.current_votes(con) == {(a, 1): "u", (b, 1): "n", (a, 2): "n"}
    assert vote_log.undo(con, "ann") == {"item_id": a, "vote": "y", "count": 1}      # her earlier y applies again
    assert vote_log.undo(con, "ann") == {"item_id": b, "vote": None, "count": 1}
    assert vote_log.undo(con, "ann") == {"item_id": a, "vote": None, "count": 1}
    assert vote_log.undo(con, "ann") is None
    assert vote_log.undo(con, "nobody") is None
    assert vote_log.current_votes(con) == {(a, 2): "n"}
    # Append-only: 4 votes + 3 undos, and the cache equals a replay of the log.
    assert con.execute("SELECT COUNT(*) FROM votes").fetchone()[0] == 7
    assert vote_log.current_votes(con) == vote_log.replay_current(con)


def test_a_bulk_decision_skips_own_votes_and_is_undone_as_one(world):
    w, con = world
    ids = [item_id(con, "tower", r) for r in (1, 2, 3, 4, 5)]
    vote_log.vote(con, ids[1], "ann", "y")               # her own vote stays, whatever the bulk says
    vote_log.vote(con, ids[2], "bob", "y")               # another reviewer's vote does not count as hers
    r = vote_log.bulk_vote(con, ids, "ann", "n")
    assert (r["voted"], r["skipped"]) == (4, 1) and r["batch"] is not None
    assert {i: v for (i, rid), v in vote_log.current_votes(con).items() if rid == 1} == {
        ids[0]: "n", ids[1]: "y", ids[2]: "n", ids[3]: "n", ids[4]: "n"}
    assert vote_log.bulk_vote(con, ids, "ann", "u")["voted"] == 0   # nothing left undecided: an empty batch
    undone = vote_log.undo(con, "ann")                   # the whole batch, in one step
    assert undone == {"item_id": ids[0], "vote": None, "count": 4}
    assert {i: v for (i, rid), v in vote_log.current_votes(con).items() if rid == 1} == {ids[1]: "y"}
    assert vote_log.undo(con, "ann") == {"item_id": ids[1], "vote": None, "count": 1}
    assert vote_log.current_votes(con) == vote_log.replay_current(con) == {(ids[2], 2): "y"}
    with pytest.raises(vote_log.NotFound):
        vote_log.bulk_vote(con, [ids[0], 10**9], "ann", "n")
    assert con.execute("SELECT COUNT(*) FROM votes WHERE vote != 'undo'").fetchone()[0] == 6


def test_vote_validation(world):
    w, con = world
    with pytest.raises(vote_log.NotFound):
        vote_log.vote(con, 10**9, "ann", "y")
    with pytest.raises(UserError):
        vote_log.vote(con, 1, "ann", "maybe")
    for bad in ("", "   ", "x" * 65, "a\x00b", None, 5):
        with pytest.raises(UserError):
            vote_log.vote(con, 1, bad, "y")
    assert con.execute("SELECT COUNT(*) FROM votes").fetchone()[0] == 0
    assert con.execute("SELECT COUNT(*) FROM reviewers").fetchone()[0] == 0
