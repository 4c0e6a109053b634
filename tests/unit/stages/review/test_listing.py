"""The review app's lists (`mining.stages.review.listing`): its filters and pages."""

from review_world import item_id

from mining.stages.review import listing, vote_log


def test_filters_undecided_mine_disputed_and_a_page_after_an_item(world):
    """The review app's filters list exactly: this reviewer's undecided items, her decided
    ones, the items whose reviewers' standing votes differ; `after` starts right after an item
    whatever the filter kept before it (her votes move items out of "undecided")."""
    w, con = world  # 6 items per landmark
    ids = [item_id(con, "tower", r) for r in range(1, 7)]
    for k, v in ((0, "y"), (1, "n"), (2, "y"), (3, "u")):
        vote_log.vote(con, ids[k], "ann", v)
    for k, v in ((0, "y"), (1, "y"), (2, "n"), (4, "n")):
        vote_log.vote(con, ids[k], "bob", v)
    ranks = lambda show, **kw: [x["rank"] for x in listing.items_page(con, "tower", kw.get("offset", 0), 100, "ann", show,  # noqa: E731
                                                                 kw.get("after"))["items"]]
    assert ranks("all") == [1, 2, 3, 4, 5, 6]
    assert ranks("undecided") == [5, 6]        # bob's vote on 5 is not hers
    assert ranks("mine") == [1, 2, 3, 4]
    assert ranks("disputed") == [2, 3]         # 1: both y; 4 and 5: one vote each
    page = listing.items_page(con, "tower", 0, 1, "ann", "undecided")
    assert (page["total"], page["offset"], [x["vote"] for x in page["items"]]) == (2, 0, [None])
    vote_log.vote(con, ids[4], "ann", "n")           # rank 5 decided: "undecided" is now [6]
    page = listing.items_page(con, "tower", 0, 100, "ann", "undecided", after=ids[4])
    assert (page["total"], page["offset"], [x["rank"] for x in page["items"]]) == (1, 0, [6])
    assert ranks("mine", after=ids[1]) == [3, 4, 5] and ranks("all", after=ids[5]) == []
    assert vote_log.undo(con, "ann")["item_id"] == ids[4]
    assert ranks("undecided") == [5, 6] and ranks("disputed") == [2, 3]
    nobody = listing.items_page(con, "tower", 0, 100, None, "undecided")["items"]   # no reviewer: nothing decided
    assert [x["rank"] for x in nobody] == [1, 2, 3, 4, 5, 6]
