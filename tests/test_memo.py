"""once/Memo: each value made once, also when threads ask together."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from gpunode.memo import Memo, once


def test_threads_asking_together_share_one_computation() -> None:
    made: list[str] = []
    start = threading.Barrier(16)

    @once
    def slow(name: str) -> str:
        made.append(name)
        time.sleep(0.05)  # long enough for every thread to miss before the first is done
        return name.upper()

    def ask(i: int) -> str:
        start.wait()
        return slow("ab" if i % 2 else "cd")

    with ThreadPoolExecutor(16) as pool:
        got = list(pool.map(ask, range(16)))
    assert got == ["CD", "AB"] * 8
    assert sorted(made) == ["ab", "cd"]  # functools.cache made each up to 8 times here
    assert slow.cache_info().misses == 2 and slow.cache_info().currsize == 2
    slow.cache_clear()
    assert slow("ab") == "AB" and sorted(made) == ["ab", "ab", "cd"]


def test_a_failure_is_not_kept() -> None:
    memo: Memo[str, int] = Memo()
    calls = []

    def make() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("first try fails")
        return 7

    with pytest.raises(ValueError):
        memo.get("k", make)
    assert memo.get("k", make) == 7 and memo.get("k", make) == 7 and len(calls) == 2


def test_no_lock_is_kept_for_a_value_made() -> None:
    memo: Memo[int, int] = Memo()
    start = threading.Barrier(8)

    def ask(i: int) -> int:
        start.wait()
        return memo.get(i % 2, lambda: time.sleep(0.02) or i % 2)

    with ThreadPoolExecutor(8) as pool:
        assert sorted(pool.map(ask, range(8))) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert memo.info().misses == 2
    assert memo._locks == {}  # one lock per key for the life of the process, no more
