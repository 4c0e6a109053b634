"""mining.compute.threads.in_order: results in input order, a bounded window, a stop cancels the rest."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from mining.compute.threads import in_order


def test_results_come_in_input_order_whatever_finishes_first():
    def slow_first(x):
        time.sleep(0.02 * (5 - x % 5))
        return x * x

    with ThreadPoolExecutor(4) as pool:
        assert list(in_order(pool, slow_first, range(23), 6)) == [(x, x * x) for x in range(23)]


def test_at_most_ahead_items_are_submitted_and_a_stop_cancels_the_rest():
    started = []
    lock = threading.Lock()

    def work(x):
        with lock:
            started.append(x)
        if x == 3:
            raise KeyboardInterrupt("stop")  # as Ctrl-C or a killed detector would
        return x

    with ThreadPoolExecutor(1) as pool:
        got = []
        with pytest.raises(KeyboardInterrupt):
            for x, r in in_order(pool, work, range(1000), 3):
                got.append(r)
    assert got == [0, 1, 2]
    assert max(started) <= 3 + 2  # items 4 and 5 at most were submitted; 994 others never ran


def test_an_error_is_raised_at_its_items_turn():
    def work(x):
        if x == 2:
            raise ValueError("bad item")
        return x

    with ThreadPoolExecutor(2) as pool:
        it = in_order(pool, work, range(5), 4)
        assert next(it) == (0, 0) and next(it) == (1, 1)
        with pytest.raises(ValueError, match="bad item"):
            next(it)


def test_read_ahead_gives_a_generator_in_order_one_thread_and_stops_it_with_the_consumer():
    from mining.compute.threads import read_ahead

    produced, threads = [], set()

    def gen():
        for x in range(50):
            threads.add(threading.get_ident())
            produced.append(x)
            if x == 40:
                raise ValueError("bad batch")
            yield x

    got = []
    with pytest.raises(ValueError, match="bad batch"):
        for x in read_ahead(gen(), depth=2):
            got.append(x)
    assert got == list(range(40)) and len(threads) == 1 and threading.get_ident() not in threads
    produced.clear()
    for x in read_ahead(gen(), depth=2):
        if x == 5:
            break
    assert max(produced) <= 5 + 3  # at most depth + 1 items produced past the consumer's
    assert list(read_ahead(iter([]))) == []
