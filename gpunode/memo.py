"""Values computed once per process, also when many threads ask for them at once.

`functools.cache` lets every thread that misses compute the value: fifty hosts starting
together parse the same role files, compile the same expressions and walk the same roles
fifty times over. `once` computes each key once; threads asking for it meanwhile wait for
that value. A call that raises caches nothing, as with `functools.cache`.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Hashable
from typing import Generic, NamedTuple, ParamSpec, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
P = ParamSpec("P")


class CacheInfo(NamedTuple):
    """As `functools.cache`'s: misses are the values made."""

    hits: int
    misses: int
    maxsize: None
    currsize: int


class Memo(Generic[K, V]):
    """key -> value, each made once (`get(key, make)`)."""

    def __init__(self) -> None:
        self._values: dict[K, V] = {}
        self._locks: dict[K, threading.Lock] = {}
        self._guard = threading.Lock()
        self._hits = self._misses = 0

    def get(self, key: K, make: Callable[[], V]) -> V:
        try:
            value = self._values[key]
        except KeyError:
            pass
        else:
            self._hits += 1
            return value
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._values:
                self._values[key] = make()
                self._misses += 1
            value = self._values[key]
        # made: later callers read it without a lock, and those waiting hold theirs
        with self._guard:
            if self._locks.get(key) is lock:
                del self._locks[key]
        return value

    def info(self) -> CacheInfo:
        return CacheInfo(self._hits, self._misses, None, len(self._values))

    def clear(self) -> None:
        with self._guard:
            self._values.clear()
            self._locks.clear()
            self._hits = self._misses = 0


class _Once(Generic[P, V]):
    def __init__(self, fn: Callable[P, V]) -> None:
        self._fn = fn
        self._memo: Memo[Hashable, V] = Memo()
        functools.update_wrapper(self, fn)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> V:
        key = (args, tuple(sorted(kwargs.items())))
        return self._memo.get(key, lambda: self._fn(*args, **kwargs))

    def cache_info(self) -> CacheInfo:
        return self._memo.info()

    def cache_clear(self) -> None:
        self._memo.clear()


def once(fn: Callable[P, V]) -> _Once[P, V]:
    """`functools.cache` for functions that threads call together: each value made once."""
    return _Once(fn)
