"""Hostile inventories: each test performs an attack and shows it refused at load time,
with `file:line:column: field: what is wrong`, before anything reaches a host."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gpunode.inventory import InventoryError, load, loads
from gpunode.inventory.text import printable

HOST = "hosts:\n  a: {address: 192.0.2.1}\n"


def _problems(text: str) -> list[str]:
    with pytest.raises(InventoryError) as exc:
        loads(textwrap.dedent(text), "inv.yaml")
    return [str(p) for p in exc.value.problems]


def _one(text: str) -> str:
    problems = _problems(text)
    assert len(problems) == 1, problems
    return problems[0]


def _repos(key: str, value: str) -> str:
    return f"defaults:\n  repos:\n    {key}: {json.dumps(value)}\n" + HOST


# 1. URLs are URLs ----------------------------------------------------------------------


def test_newline_in_nvidia_url_cannot_add_an_apt_source() -> None:
    evil = "http://x/\ndeb [trusted=yes] http://evil.example/ ./"
    problem = _one(_repos("nvidia", evil))
    assert problem.startswith("inv.yaml:3:13: defaults.repos.nvidia: contains U+000A (LINE FEED)")


@pytest.mark.parametrize("key", ["nvidia", "conda_installer", "pytorch_index", "pypi_index"])
@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://x/ deb [trusted=yes] http://evil.example/ ./", "is not a URL: no whitespace"),
        ("https://mirror/`id`", "is not a URL"),
        ('https://mirror/"x', "is not a URL"),
        ("https://user:secret@mirror.lab/cuda", "holds credentials"),
        ("ftp://mirror.lab/cuda", "starting with https://"),
        ("file:///srv/cuda", "starting with https://"),
        ("HTTP://mirror.lab/cuda", "starting with https://"),
        ("mirror.lab/cuda", "starting with https://"),
        ("https:///cuda", "needs a valid host"),
        ("https://-oProxy/cuda", "needs a valid host"),
        ("https://mirror.lab:99999/cuda", "is not a URL"),
        ("https://[::1/cuda", "is not a URL"),
    ],
)
def test_every_repository_url_must_be_a_plain_http_url(key: str, url: str, why: str) -> None:
    problem = _one(_repos(key, url))
    assert problem.startswith(f"inv.yaml:3:{7 + len(key)}: defaults.repos.{key}: "), problem
    assert why in problem
    assert "secret" not in problem or "credentials" not in problem  # never echo a password


@pytest.mark.parametrize("url", ["https://mirror.lab/cuda?x=1", "https://mirror.lab/cuda#frag"])
def test_apt_repository_takes_no_query_or_fragment(url: str) -> None:
    assert "takes no ?query or #fragment" in _one(_repos("nvidia", url))
    loads(_repos("pypi_index", url), "inv.yaml")  # an index URL may carry one


@pytest.mark.parametrize(
    "url", ["https://mirror.lab/cuda", "https://10.0.0.5:8443/cuda/", "https://[2001:db8::5]/c"]
)
def test_ordinary_mirrors_are_accepted(url: str) -> None:
    host = loads(_repos("nvidia", url), "inv.yaml").hosts["a"]
    assert host.repos.nvidia == url


# 2. Addresses and names -----------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "-oProxyCommand=touch /tmp/pwned",
        "gpu01 -oProxyCommand=x",
        "gpu01;id",
        "gpu01|id",
        "$(id)",
        "`id`",
        "gpu%h",
        "fe80::1%eth0",
        "'gpu01'",
        '"gpu01"',
        "gpu01&",
        "a" * 64 + ".lab",
        "x" * 254,
        "192.0.2.300",
        "gpu..01",
        "[192.0.2.1]",
        "１９２.０.２.１",
    ],
)
def test_address_is_a_hostname_or_ip_and_nothing_else(address: str) -> None:
    problem = _one(f"hosts:\n  a: {{address: {json.dumps(address)}}}\n")
    assert problem.startswith("inv.yaml:2:16: hosts.a.address: "), problem
    assert "is not a hostname, IPv4 or IPv6 address" in problem


@pytest.mark.parametrize(
    ("address", "kept"),
    [
        ("gpu-01.lab.example", "gpu-01.lab.example"),
        ("gpu-01.lab.example.", "gpu-01.lab.example."),
        ("192.0.2.1", "192.0.2.1"),
        ("2001:db8::1", "2001:db8::1"),
        ("[2001:db8::1]", "2001:db8::1"),  # brackets are URL syntax, not part of the address
    ],
)
def test_ordinary_addresses_are_accepted(address: str, kept: str) -> None:
    host = loads(f"hosts:\n  a: {{address: {json.dumps(address)}}}\n", "inv.yaml").hosts["a"]
    assert host.address == kept


def test_ipv6_target_is_bracketed() -> None:
    host = loads('hosts:\n  a: {address: "2001:db8::1", ssh: {port: 2222}}\n').hosts["a"]
    assert host.target == "[2001:db8::1]:2222"


@pytest.mark.parametrize("name", ["-oProxyCommand=x", "a b", "a$b", "a;b", "a`b`", "a%h", ".a"])
def test_host_and_group_names_refuse_shell_and_option_syntax(name: str) -> None:
    quoted = json.dumps(name)
    problem = _one(f"hosts:\n  {quoted}: {{address: 192.0.2.1}}\n")
    assert problem.startswith(f"inv.yaml:2:3: hosts.{name}: {name!r} is not a name: "), problem
    problem = _one(f"groups:\n  {quoted}: {{hosts: {{a: {{address: 192.0.2.1}}}}}}\n")
    assert problem.startswith(f"inv.yaml:2:3: groups.{name}: {name!r} is not a name"), problem


# 3. Digits are ASCII, patterns anchored -------------------------------------------------


@pytest.mark.parametrize(
    ("stack", "field"),
    [
        ('{cuda: {toolkits: ["１２.４"]}}', "stack.cuda.toolkits[0]"),
        ('{driver: {branch: "５５０"}}', "stack.driver.branch"),
        ('{driver: {version: "550.１63.01"}}', "stack.driver.version"),
        ('{cudnn: "９"}', "stack.cudnn"),
        ('{conda: {envs: {t: {python: "３.１１"}}}}', "stack.conda.envs.t.python"),
        ('{conda: {envs: {t: {packages: {numpy: "1.２6.4"}}}}}', "stack.conda.envs.t.packages"),
    ],
)
def test_unicode_digits_are_not_versions(stack: str, field: str) -> None:
    problem = _one(f"defaults:\n  stack: {stack}\n" + HOST)
    assert f"defaults.{field}" in problem and problem.startswith("inv.yaml:2:"), problem


def _patterns(schema: Any) -> list[str]:
    if isinstance(schema, dict):
        found = [schema["pattern"]] if isinstance(schema.get("pattern"), str) else []
        return found + [p for v in schema.values() for p in _patterns(v)]
    if isinstance(schema, list):
        return [p for v in schema for p in _patterns(v)]
    return []


def test_every_pattern_is_ascii_and_anchored_at_both_ends() -> None:
    from gpunode.inventory.model import Document, Host

    patterns = set(_patterns(Document.__pydantic_core_schema__))
    patterns |= set(_patterns(Host.__pydantic_core_schema__))
    assert len(patterns) >= 7, patterns
    for pattern in patterns:
        assert pattern.startswith(r"\A") and pattern.endswith(r"\Z"), pattern
        assert r"\d" not in pattern and r"\w" not in pattern, pattern
    assert Document.model_config.get("regex_engine") == "python-re"  # \A, \Z mean that
    version = next(p for p in patterns if p.startswith(r"\A[0-9]+(\.[0-9]+)*\Z"))
    assert re.search(version, "12.4") and not re.search(version, "12.4\n")


def test_schema_for_editors_uses_ecma_anchors() -> None:
    from gpunode.inventory.model import Document

    patterns = _patterns(Document.model_json_schema())
    assert patterns and all(p.startswith("^") and p.endswith("$") for p in patterns)


# 4. No control characters; login names, env names, install prefix ---------------------


@pytest.mark.parametrize(
    ("yaml", "where"),
    [
        ('ssh: {user: "ubuntu\\e[2J"}', "2:39: hosts.a.ssh.user"),
        ('ssh: {identity_file: "/k\\ey"}', "2:48: hosts.a.ssh.identity_file"),
        ('ssh: {known_hosts_file: "/k\\nx"}', "2:51: hosts.a.ssh.known_hosts_file"),
        ('gpus: {model: "A100\\e]0;pwned\\a"}', "2:41: hosts.a.gpus.model"),
        ('stack: {vars: {motd: "hi\\e[2J"}}', "2:48: hosts.a.stack.vars.motd"),
        ('stack: {vars: {motd: ["ok", "\\u202Eevil"]}}', "2:55: hosts.a.stack.vars.motd[1]"),
        ('stack: {vars: {"\\e[2J": x}}', "2:42: hosts.a.stack.vars.\\x1b[2J"),
        ('stack: {conda: {prefix: "/opt/conda\\n"}}', "2:51: hosts.a.stack.conda.prefix"),
        ('become_password_env: "PW\\r"', "2:48: hosts.a.become_password_env"),
    ],
)
def test_control_characters_are_refused_everywhere(yaml: str, where: str) -> None:
    problem = _one(f"hosts:\n  a: {{address: 192.0.2.1, {yaml}}}\n")
    assert problem.startswith(f"inv.yaml:{where}: contains U+"), problem
    assert "write plain text" in problem
    assert "\x1b" not in problem and "\n" not in problem


def test_models_built_in_code_refuse_control_characters_too() -> None:
    from pydantic import ValidationError

    from gpunode.inventory.model import Gpus, SshSettings

    with pytest.raises(ValidationError, match="U\\+001B"):
        SshSettings(identity_file="/k\x1b[2J")
    with pytest.raises(ValidationError, match="U\\+0007"):
        Gpus(model="A100\x07")


@pytest.mark.parametrize("user", ["-oProxyCommand=x", "root;id", "a b", "$(id)", "x" * 33, "1x"])
def test_ssh_user_is_a_login_name(user: str) -> None:
    problem = _one(f"hosts:\n  a: {{address: 192.0.2.1, ssh: {{user: {json.dumps(user)}}}}}\n")
    assert problem.startswith("inv.yaml:2:39: hosts.a.ssh.user: "), problem
    assert "is not a login name" in problem


@pytest.mark.parametrize("name", ["SUDO PASS", "1PW", "PW;rm -rf /", "PW$X", "-PW"])
def test_become_password_env_is_a_variable_name(name: str) -> None:
    problem = _one(f"defaults: {{become_password_env: {json.dumps(name)}}}\n" + HOST)
    assert problem.startswith("inv.yaml:1:33: defaults.become_password_env: "), problem
    assert "is not an environment variable name" in problem


def test_good_user_and_env_names() -> None:
    text = "defaults: {become_password_env: GPU_SUDO_PW, ssh: {user: svc_gpu.ops}}\n" + HOST
    host = loads(text).hosts["a"]
    assert (host.ssh.user, host.become_password_env) == ("svc_gpu.ops", "GPU_SUDO_PW")


@pytest.mark.parametrize(
    ("prefix", "why"),
    [
        ("/", "system directory"),
        ("/usr", "system directory"),
        ("/etc", "system directory"),
        ("/var", "system directory"),
        ("/boot", "system directory"),
        ("/lib", "system directory"),
        ("/usr/local", "system directory"),
        ("/proc/conda", "system directory"),
        ("/usr/", "normalized"),
        ("/opt/../usr", "normalized"),
        ("/opt//conda", "normalized"),
        ("opt/conda", "absolute"),
        ("~/conda", "absolute"),
        ("/opt/my conda", "letters, digits"),
        ("/opt/$(id)", "letters, digits"),
    ],
)
def test_conda_prefix_is_an_absolute_path_outside_the_system(prefix: str, why: str) -> None:
    problem = _one(f"defaults: {{stack: {{conda: {{prefix: {json.dumps(prefix)}}}}}}}\n" + HOST)
    assert problem.startswith("inv.yaml:1:36: defaults.stack.conda.prefix: "), problem
    assert why in problem


def test_printable_escapes_what_a_terminal_would_obey() -> None:
    assert printable("gpu\x1b]0;pwned\x07\u202e\n") == "gpu\\x1b]0;pwned\\x07\\u202e\\n"
    assert printable("naïve gpu-01") == "naïve gpu-01"


# 5. YAML bombs ---------------------------------------------------------------------------

# Nine levels of nine aliases: 9**9 strings once expanded, from a few hundred bytes.
BILLION_LAUGHS = (
    'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n'
    + "".join(
        f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n"
        for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
    )
)


def _load_in_child(path: Path, timeout: float = 20) -> dict[str, Any]:
    """Load in a fresh process; report the CPU time it spent (not wall time: the machine may
    be busy with other work), peak memory and the first problem."""
    code = textwrap.dedent(
        """
        import json, sys, time
        from gpunode.inventory import InventoryError, load
        start = time.process_time()
        try:
            load(sys.argv[1])
            problem = None
        except InventoryError as exc:
            problem = str(exc.problems[0])
        # VmHWM: this process image's own peak (ru_maxrss would carry the forking
        # parent's peak across exec)
        hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
        print(json.dumps({
            "seconds": time.process_time() - start,
            "rss_mb": int(hwm.split()[1]) / 1024,
            "problem": problem,
        }))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=timeout
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def test_billion_laughs_is_refused_fast_and_small(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BILLION_LAUGHS)
    assert len(BILLION_LAUGHS) < 700  # the 610-byte kind that took >2 GiB
    got = _load_in_child(bomb)
    assert got["problem"] is not None
    assert got["problem"].startswith(f"{bomb}:6:4: more than 100000 values once aliases")
    assert got["seconds"] < 1.0, got
    assert got["rss_mb"] < 200, got


def test_merge_key_bomb_is_refused(tmp_path: Path) -> None:
    keys = ", ".join(f"k{i}: 1" for i in range(1000))
    bomb = tmp_path / "merge.yaml"
    bomb.write_text(f"x: &a {{{keys}}}\ny: {{<<: [{', '.join(['*a'] * 500)}]}}\n")
    got = _load_in_child(bomb)
    assert got["problem"].startswith(f"{bomb}:2:9: more than 100000 values"), got
    assert got["seconds"] < 1.0 and got["rss_mb"] < 200, got


def test_alias_chains_cannot_nest_past_the_depth_limit() -> None:
    chain = "a0: &a0 [1]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 100))
    problem = _one(chain)
    assert re.match(r"inv\.yaml:\d+:\d+: nested deeper than 64 levels", problem), problem


def test_recursive_alias_is_refused() -> None:
    assert _one("hosts: &h {a: *h}\n").startswith(
        "inv.yaml:1:8: an alias refers to a node that contains it"
    )


def test_node_count_limit_counts_the_text_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpunode.inventory import yamlnodes

    monkeypatch.setattr(yamlnodes, "MAX_NODES", 50)
    problem = _one("hosts:\n  a:\n    stack: {vars: {x: [" + ", ".join(["1"] * 60) + "]}}\n")
    assert problem.startswith("inv.yaml:3:"), problem
    assert "more than 50 values" in problem


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("a: " + "[" * 1000 + "]" * 1000 + "\n", "1:68"),
        ("".join(" " * i + f"k{i}:\n" for i in range(1000)), "65:65"),
        ("a: " + "{b: " * 1000 + "1" + "}" * 1000 + "\n", "1:256"),
    ],
    ids=["flow-sequences", "block-mappings", "flow-mappings"],
)
def test_deep_nesting_is_refused_fast(text: str, where: str) -> None:
    start = time.process_time()  # the work done, not the wait for a busy machine's cores
    problem = _one(text)
    assert time.process_time() - start < 1.0
    assert problem.startswith(f"inv.yaml:{where}: nested deeper than 64 levels"), problem


def test_file_over_10_mib_is_refused_before_parsing(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("hosts: {}\n# " + "x" * (10 * 2**20) + "\n")
    got = _load_in_child(big)
    assert got["problem"] == f"{big}:1:1: larger than 10 MiB: an inventory is a small text file"
    assert got["seconds"] < 1.0, got


def test_layers_copied_into_many_hosts_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpunode.inventory import loader

    monkeypatch.setattr(loader, "MAX_MERGED", 1000)
    vars_ = ", ".join(f"v{i}: {i}" for i in range(100))
    hosts = "\n".join(f"  h{i}: {{connection: local}}" for i in range(20))
    problem = _one(f"defaults: {{stack: {{vars: {{{vars_}}}}}}}\nhosts:\n{hosts}\n")
    assert problem.startswith("inv.yaml:2:1: the hosts' merged settings hold more than 1000")


# 6. Bad YAML: a position, a reason, never a traceback ----------------------------------


def test_nul_byte_names_its_position(tmp_path: Path) -> None:
    bad = tmp_path / "nul.yaml"
    bad.write_bytes(b"hosts:\n  a: {address: 192.0.2.1\x00}\n")
    with pytest.raises(InventoryError) as exc:
        load(bad)
    assert str(exc.value) == (
        f"{bad}:2:25: character U+0000 is not allowed in YAML "
        "(binary data or a control character): remove it"
    )


def test_merge_keys_work_and_errors_point_where_the_value_is_written() -> None:
    text = """\
        hosts:
          a: &node
            address: 192.0.2.1
            ssh: {port: 2222, user: ops}
            gpus: {model: A100, count: 8}
          b:
            <<: *node
            address: 192.0.2.2
          c: {<<: [{gpus: {count: 4}}, *node], address: 192.0.2.3}
        """
    inv = loads(textwrap.dedent(text), "inv.yaml")
    b, c = inv.hosts["b"], inv.hosts["c"]
    assert (b.address, b.ssh.port, b.ssh.user, b.gpus.count) == ("192.0.2.2", 2222, "ops", 8)
    # Earlier mappings in a `<<` list win, whole values at a time (YAML's merge rules).
    assert (c.gpus.count, c.gpus.model, c.ssh.port) == (4, None, 2222)
    assert str(inv.where("b", ("ssh", "port"))) == "inv.yaml:4:17"
    problems = _problems(text.replace("port: 2222", "port: 0"))
    assert problems == [
        f"inv.yaml:4:17: hosts.{h}.ssh.port: Input should be greater than or equal to 1"
        for h in ("a", "b", "c")
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hosts:\n  a: {<<: 12, address: 192.0.2.1}\n", "2:11: `<<` merges mappings"),
        ("x: &x {a: 1}\nhosts: {<<: *x, <<: *x}\n", "2:17: duplicate key '<<'"),
        ("hosts:\n  ? [a, b]\n  : {}\n", "2:5: a key must be plain text"),
    ],
)
def test_malformed_merges_and_keys(text: str, message: str) -> None:
    assert _one(text).startswith(f"inv.yaml:{message}")


@pytest.mark.parametrize(
    ("text", "tag"),
    [
        ('hosts: !!python/object/apply:os.system ["touch /tmp/pwned"]\n', "!!python/object/apply"),
        ("hosts:\n  a: !!python/object:os.system {address: x}\n", "!!python/object:os.system"),
        ("hosts:\n  a: {address: !vault abc}\n", "!vault"),
        ("defaults: {gpus: {model: !!binary QTEwMA==}}\n", "!!binary"),
        ("hosts: !!set {a}\n", "!!set"),
        ("hosts: !!seq {a: 1}\n", "!!seq"),
        ("%TAG !e! tag:example.com,2000:\n---\nhosts: !e!thing {}\n", "tag:example.com,2000:thing"),
    ],
)
def test_unknown_tags_are_refused_by_name(text: str, tag: str) -> None:
    problem = _one(text)
    assert re.match(r"inv\.yaml:\d+:\d+: tag ", problem), problem
    assert f"tag {tag}" in problem and "is not supported" in problem


def test_yaml_core_tags_are_fine() -> None:
    inv = loads('hosts: !!map\n  a: {address: !!str 192.0.2.1, ssh: {port: !!int "22"}}\n')
    assert inv.hosts["a"].address == "192.0.2.1"


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "---\n", "--- # c\n...\n"])
def test_empty_inventory_is_an_error(text: str) -> None:
    assert _one(text) == "inv.yaml:1:1: the inventory is empty: declare `hosts:` in it"


def test_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="not a regular file \\(a directory\\)"):
        load(tmp_path)


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_fifo_and_devices_are_refused_without_reading(tmp_path: Path, kind: str) -> None:
    path = Path(kind)
    if kind == "fifo":
        path = tmp_path / "inv.yaml"
        os.mkfifo(path)
    result: list[BaseException | None] = []

    def attempt() -> None:
        try:
            load(path)
            result.append(None)
        except BaseException as exc:  # a hang or a MemoryError is the bug
            result.append(exc)

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(5)
    if thread.is_alive() and kind == "fifo":
        with open(path, "w"):  # unblock the reader so the thread can end
            pass
    assert result, f"loading {path} hung"
    assert isinstance(result[0], InventoryError), result
    assert str(result[0]) == (
        f"{path}:1:1: not a regular file (a FIFO, device or socket): give the inventory as a file"
    )


def test_url_errors_never_echo_a_password() -> None:
    problem = _one(_repos("pypi_index", "https://ops:hunter2@pypi.lab/simple with space"))
    assert "hunter2" not in problem and "'https://***@pypi.lab/simple with space'" in problem
