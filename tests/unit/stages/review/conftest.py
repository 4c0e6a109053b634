"""What the review stage's tests share: a review database with the tiny world's queue imported."""

import pytest
from review_world import make_world

from mining.stages.review import database, queue_import


@pytest.fixture
def world(tmp_path):
    w = make_world(tmp_path)
    con = database.connect(w["db"], create=True)
    queue_import.import_queue(con, w["queue"], scores_fingerprint=None)
    yield w, con
    con.close()
