"""What a spec admits, checked against an oracle that knows nothing of gpunode.versions:
versions are built from integer tuples, so tuple order is the truth."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gpunode.resolve.specs import build_cuda, fits_toolkit, pick, satisfies

Release = tuple[int, int, int]
Build = tuple[int, int]

releases = st.tuples(st.integers(1, 3), st.integers(0, 30), st.integers(0, 12))
builds = st.tuples(st.integers(11, 13), st.integers(0, 9))


def text(r: Release, b: Build) -> str:
    return f"{r[0]}.{r[1]}.{r[2]}-1+cuda{b[0]}.{b[1]}"


@given(
    catalog=st.lists(st.tuples(releases, builds), max_size=25, unique=True),
    prefix=st.lists(st.integers(0, 30), min_size=1, max_size=3),
    toolkit=builds,
)
def test_pick_is_the_newest_match_and_never_a_wrong_one(
    catalog: list[tuple[Release, Build]], prefix: list[int], toolkit: Build
) -> None:
    spec = ".".join(map(str, prefix))
    tk = f"{toolkit[0]}.{toolkit[1]}"
    fitting = [
        (r, b)
        for r, b in catalog
        if list(r[: len(prefix)]) == prefix and b[0] == toolkit[0] and b[1] <= toolkit[1]
    ]
    want = text(*max(fitting)) if fitting else None
    assert pick([text(r, b) for r, b in catalog], spec, tk) == want


@given(r=releases, b=builds, other=releases)
def test_exact_specs_admit_only_themselves(r: Release, b: Build, other: Release) -> None:
    assert satisfies(text(r, b), text(r, b))
    assert satisfies(text(other, b), text(r, b)) == (other == r)


def test_series_is_a_prefix_of_whole_parts() -> None:
    assert satisfies("9.10.2.21-1", "9.10") and not satisfies("9.14.0.64-1", "9.10")
    assert not satisfies("9.100.0-1", "9.10") and satisfies("9.14.0.64-1", "9")
    assert satisfies("550.127.05-0ubuntu1", "550") and not satisfies("5500.1-1", "550")
    assert satisfies("1:550.163.01-0ubuntu1", "550.163.01")


def test_builds_fit_a_toolkit_of_their_major_not_older_than_them() -> None:
    assert build_cuda("2.26.2-1+cuda12.8") == "12.8" and build_cuda("9.14.0.64-1") is None
    assert fits_toolkit("2.26.2-1+cuda12.8", "12.8") and fits_toolkit("2.26.2-1+cuda12.4", "12.9")
    assert not fits_toolkit("2.26.5-1+cuda12.9", "12.8")
    assert not fits_toolkit("2.27.7-1+cuda13.0", "12.9")
    assert fits_toolkit("9.14.0.64-1", "13.0")  # unmarked: the package name carries the CUDA
