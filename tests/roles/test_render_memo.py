"""A role's template file renders once for the same plain values (fifty hosts of one
stack): the same text without reading the file again; any other value, a value of another
type, or a value that is not plain data (a host's facts) renders it again."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from jinja2.exceptions import SecurityError

from gpunode.roles.render import render_template


def _folder(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / "t.j2").write_text(text)
    (folder / "t.j2").chmod(0o644)
    return folder


def test_the_same_plain_values_give_the_kept_text_others_read_the_file(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "{{ x }}:{% for c in items %}{{ c }},{% endfor %}\n")
    ctx = {"x": "1", "items": [("a", 1), ("b", 2)], "unread": object()}
    assert render_template(folder, "t.j2", ctx) == "1:('a', 1),('b', 2),\n"
    # the file may no longer be sent (not world-readable): only a render that reads it fails
    (folder / "t.j2").chmod(0o600)
    again = {"x": "1", "items": [("a", 1), ("b", 2)], "unread": object()}  # equal, not the same
    assert render_template(folder, "t.j2", again) == "1:('a', 1),('b', 2),\n"
    for other in (
        {"x": "2", "items": [("a", 1), ("b", 2)]},  # another value
        {"x": 1, "items": [("a", 1), ("b", 2)]},  # the same text, another type
        {"x": "1", "items": [("a", 1), ("b", True)]},  # True == 1, but not the same data
        {"x": "1", "items": (("a", 1), ("b", 2))},  # a tuple, not a list
    ):
        with pytest.raises(SecurityError, match="not world-readable"):
            render_template(folder, "t.j2", other)


def test_a_value_that_is_not_plain_data_renders_each_time(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "{{ facts.kernel }}\n")
    facts = SimpleNamespace(kernel="6.8.0")
    assert render_template(folder, "t.j2", {"facts": facts}) == "6.8.0\n"
    (folder / "t.j2").chmod(0o600)
    with pytest.raises(SecurityError, match="not world-readable"):
        render_template(folder, "t.j2", {"facts": facts})


def test_a_template_including_another_is_never_kept(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "{% include 'part.j2' %}")
    (folder / "part.j2").write_text("{{ x }}\n")
    (folder / "part.j2").chmod(0o644)
    assert render_template(folder, "t.j2", {"x": "1"}) == "1\n"
    (folder / "t.j2").chmod(0o600)
    with pytest.raises(SecurityError, match="not world-readable"):
        render_template(folder, "t.j2", {"x": "1"})
