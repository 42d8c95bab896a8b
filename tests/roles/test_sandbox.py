"""Roles render in Jinja's sandbox: a template, a task argument or a defaults.yaml expression
that reaches for Python's internals fails the plan with a RoleError naming the file and the
task, and nothing it asked for happens on the controller."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from gpunode.facts.model import HostFacts, OsRelease
from gpunode.inventory import Host, load
from gpunode.plan.planner import managed_paths, plan_host, probes_for
from gpunode.roles import search_path
from gpunode.roles.loader import RoleError
from gpunode.roles.render import _expression, _template, render

SECRET_ENV = "GPUNODE_TEST_SUDO_PASSWORD"
SECRET = "hunter2-sandbox-test"
FACTS = HostFacts(os=OsRelease(id="ubuntu", version_id="22.04", codename="jammy"))


def site(
    tmp: Path, tasks: str, defaults: str = "", templates: dict[str, str] | None = None
) -> tuple[Host, tuple[Path, ...]]:
    """An inventory with one host and the site role `evil` next to it."""
    role = tmp / "roles" / "evil"
    (role / "templates").mkdir(parents=True)
    (role / "tasks.yaml").write_text(textwrap.dedent(tasks))
    if defaults:
        (role / "defaults.yaml").write_text(textwrap.dedent(defaults))
    for name, text in (templates or {}).items():
        (role / "templates" / name).write_text(text)
    inv = tmp / "inventory.yaml"
    inv.write_text(
        "hosts:\n  gpu1:\n    connection: local\n"
        f"    become_password_env: {SECRET_ENV}\n"
        "    stack: {roles: [evil], vars: {motd: hello}}\n"
    )
    return load(inv).hosts["gpu1"], search_path(inv)


@pytest.fixture(autouse=True)
def secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)


def refused(
    tmp: Path, tasks: str, defaults: str = "", templates: dict[str, str] | None = None
) -> str:
    host, search = site(tmp, tasks, defaults, templates)
    plan = plan_host(host, FACTS, search=search)
    assert plan.refused is not None and not plan.changes
    assert SECRET not in plan.refused
    # the walks that run before the facts are known skip it silently, running nothing
    assert probes_for(host, None, search) == []
    assert probes_for(host, FACTS, search, role_shell=True) == []
    # the files' walk renders no content (the path alone); an escape in the role's defaults,
    # which it renders, is refused there as in the plan
    if defaults:
        with pytest.raises(RoleError, match="refused: ") as exc:
            managed_paths(host, search)
        assert SECRET not in str(exc.value)
    else:
        assert managed_paths(host, search) == ["/etc/motd"]
    return str(plan.refused)


MARK_EXPRS = [
    # the classic escapes: a global's function to its module's globals, and to `os`
    "cycler.__init__.__globals__.os.popen('touch {mark}').read()",
    "lipsum.__globals__['os'].popen('touch {mark}').read()",
    "joiner.__init__.__globals__.os.system('touch {mark}')",
    # through a str method to object's subclasses
    "''.__class__.__mro__[1].__subclasses__()",
    # str.format reaching attributes the sandbox would refuse
    "'{{0.__init__.__globals__[os].system}}'.format(cycler)",
    # a method of an object in the context
    "facts.model_dump.__globals__",
]


@pytest.mark.parametrize("expr", MARK_EXPRS)
def test_escape_in_a_task_argument_is_refused_naming_file_and_task(
    tmp_path: Path, expr: str
) -> None:
    mark = tmp_path / "pwned"
    why = refused(
        tmp_path,
        f"""\
        - name: innocent file
          op: file
          path: /etc/motd
          content: "{{{{ {expr.format(mark=mark)} }}}}"
        """,
    )
    tasks = tmp_path / "roles" / "evil" / "tasks.yaml"
    assert why.startswith(f"{tasks}:1:3 (task 'innocent file'): refused: ")
    assert "unsafe" in why and "sandbox" in why
    assert not mark.exists()


def test_escape_in_a_template_file_is_refused_naming_file_and_task(tmp_path: Path) -> None:
    mark = tmp_path / "pwned"
    evil = "# motd\n{{ cycler.__init__.__globals__.os.popen('touch " + str(mark) + "').read() }}\n"
    why = refused(
        tmp_path,
        """\
        - name: motd from a template
          op: template
          src: motd.j2
          path: /etc/motd
        """,
        templates={"motd.j2": evil},
    )
    role = tmp_path / "roles" / "evil"
    assert why.startswith(
        f"{role / 'templates' / 'motd.j2'} ({role / 'tasks.yaml'}:1:3 (task 'motd from a "
        "template'): template 'motd.j2'): refused: access to attribute '__init__'"
    )
    assert not mark.exists()


ESCAPE_DEFAULT = "banner: \"{{ cycler.__init__.__globals__.os.popen('touch MARK').read() }}\"\n"


def test_escape_in_defaults_is_refused_naming_file_and_key(tmp_path: Path) -> None:
    mark = tmp_path / "pwned"
    why = refused(
        tmp_path,
        """\
        - name: motd
          op: file
          path: /etc/motd
          content: "{{ banner }}"
        """,
        defaults=ESCAPE_DEFAULT.replace("MARK", str(mark)),
    )
    assert why.startswith(f"{tmp_path / 'roles' / 'evil' / 'defaults.yaml'}: banner: refused: ")
    assert not mark.exists()


def test_the_controllers_environment_cannot_be_read(tmp_path: Path) -> None:
    for expr in (
        f"cycler.__init__.__globals__.os.environ['{SECRET_ENV}']",
        f"lipsum.__globals__.os.getenv('{SECRET_ENV}')",
        "self._TemplateReference__context",
    ):
        why = refused(
            tmp_path / expr[:6],
            f"""\
            - name: leak
              op: file
              path: /etc/motd
              content: "{{{{ {expr} }}}}"
            """,
        )
        assert "refused" in why or "undefined" in why, why


@pytest.mark.parametrize(
    "expr",
    [
        "stack.roles.append('driver')",  # the host's stack is read-only
        "vars.update({'motd': 'x'})",
        "range(10 ** 9) | list",  # memory for the controller
        "'x' * 10 ** 9",
        "2 ** 99999999",
    ],
)
def test_no_mutation_and_no_runaway_sizes(tmp_path: Path, expr: str) -> None:
    start = time.monotonic()
    why = refused(
        tmp_path,
        f"""\
        - name: big
          op: file
          path: /etc/motd
          content: "{{{{ {expr} }}}}"
        """,
    )
    assert "refused" in why and time.monotonic() - start < 5


def test_what_roles_need_still_renders() -> None:
    ctx = {
        "names": ["libnccl2", "libnccl-dev"],
        "url": "http://mirror/cuda/repos/",
        "facts": FACTS,
        "toolkits": [{"version": "12.4", "nvcc": True}],
        "line": "=",
    }
    assert render("{{ names | pin('2.21.5-1+cuda12.4') }}", ctx) == [
        "libnccl2=2.21.5-1+cuda12.4",
        "libnccl-dev=2.21.5-1+cuda12.4",
    ]
    assert render("{{ url.rstrip('/') }}/x", ctx) == "http://mirror/cuda/repos/x"
    assert render("{{ facts.os.version_id | replace('.', '') | int }}", ctx) == 2204
    assert render('{{ "it\'s" | q }}', ctx) == "'it'\"'\"'s'"
    assert render("{{ toolkits | selectattr('nvcc') | list | length }}", ctx) == 1
    assert render("{{ line * 8 }}\n", ctx) == "========\n"
    assert render("{{ facts.package('x') is none }}", ctx) is True


def test_a_second_plan_compiles_nothing(tmp_path: Path) -> None:
    """The compiled-expression cache still serves the sandbox: planning is benchmarked."""
    host, search = site(
        tmp_path,
        """\
        - name: "motd {{ vars.motd }}"
          op: file
          path: /etc/motd
          content: "{{ vars.motd }} from {{ host.name }}\\n"
        """,
    )
    first = plan_host(host, FACTS, search=search)
    assert first.refused is None and first.changes[0].after == "hello from gpu1\n"
    misses = (_expression.cache_info().misses, _template.cache_info().misses)
    for _ in range(3):
        assert plan_host(host, FACTS, search=search).changes == first.changes
    assert (_expression.cache_info().misses, _template.cache_info().misses) == misses


def test_errors_name_the_task_and_point_at_vars(tmp_path: Path) -> None:
    why = refused(
        tmp_path,
        """\
        - name: motd
          op: file
          path: /etc/motd
          content: "{{ motd }}"
        """,
    )
    assert why.endswith(
        "(task 'motd'): 'motd' is undefined: the inventory's stack.vars are read as vars.motd"
    )


@pytest.mark.parametrize(
    "template",
    [
        # loops over loops: time the size limits do not count (83 s before the cap)
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        # a string doubled in a loop, `~` and `+`: memory (546 MB before)
        "{% set s = namespace(v='x' * 1000000) %}{% for i in range(40) %}"
        "{% set s.v = s.v ~ s.v %}{% endfor %}{{ s.v | length }}",
        "{% set s = namespace(v='x' * 1000000) %}{% for i in range(40) %}"
        "{% set s.v = s.v + s.v %}{% endfor %}",
        # a list of fresh 1 MB strings: the memory budget itself
        "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}"
        "{% set ns.l = ns.l + ['x' * 1000000] %}{% endfor %}",
        # one call asked for a payload
        "{{ 'x'.ljust(10 ** 9) }}",
        "{{ 'x' | center(999999999) }}",
        "{{ '%999999999d' % 1 }}",
        "{{ '%999999999d' | format(1) }}",
        "{{ '{:>999999999}'.format(1) }}",
        "{{ ('x' * 1000000).replace('', 'yy') }}",
        # a filter chain whose generator makes 1 MB per item: memory, checked per item
        "{{ ('x' * 1000000) | list | map('center', 999999) | join | length }}",
        "{{ ('x' * 1000000) | list | map('center', 999999) | list | length }}",
    ],
)
def test_a_render_stops_fast_at_its_time_and_memory_caps(tmp_path: Path, template: str) -> None:
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.monotonic()
    why = refused(
        tmp_path,
        """\
        - name: big
          op: template
          src: motd.j2
          path: /etc/motd
        """,
        templates={"motd.j2": template},
    )
    assert "motd.j2" in why and "is refused" in why, why
    assert time.monotonic() - start < 10  # the probes' walks render it again
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) / 1024
    assert grown_mib < 300, grown_mib


def test_ordinary_templates_still_render_under_the_caps() -> None:
    text = (
        "{{ 'ok %s' | format(3) }} {{ 12345678901 | string }} {{ [1, 2] + [3] }} "
        "{{ 'a-b'.replace('-', '_') }} {{ 'x' ~ 'y' }} {{ 'line' | indent(4) }}"
    )
    assert render(text, {}) == "ok 3 12345678901 [1, 2, 3] a_b xy line"
