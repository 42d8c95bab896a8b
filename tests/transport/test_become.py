"""The sudo prompt exchange against the words of sudo 1.9 and sudo-rs (its source:
src/pam/converse.rs frames prompts as "[sudo: PROMPT] Password: ", and before 0.2.5
ignored -p, always asking "[sudo: authenticate] Password: "; src/sudo/pam.rs and
src/common/error.rs word its refusals)."""

from __future__ import annotations

import base64

import pytest

from gpunode.transport.base import BecomeError
from gpunode.transport.become import Become
from gpunode.transport.secret import Secret

PW = "s3cret pw"


def become(pty: bool = False) -> Become:
    return Become("ubuntu@h1", Secret(PW), pty=pty)


@pytest.mark.parametrize(
    "prompt",
    [
        "{ours}",  # sudo
        "[sudo: {ours}] Password: ",  # sudo-rs 0.2.5 and later
        "[sudo: authenticate] Password: ",  # sudo-rs before 0.2.5, whatever -p said
    ],
)
def test_each_prompt_gets_the_password_once_then_the_command_runs(prompt: str) -> None:
    b = become()
    text = prompt.format(ours=b.prompt)
    # the prompt may come in two pieces
    assert b.feed_stderr(text[:7]) == ("", None)
    assert b.feed_stderr(text[7:]) == ("", (PW + "\n").encode())
    assert b.feed_stderr(f"\n{b.marker}\nfirst line\n") == ("first line\n", None)
    assert b.started


@pytest.mark.parametrize(
    "second",
    ["{ours}", "[sudo: {ours}] Password: ", "[sudo: authenticate] Password: "],
)
def test_a_second_prompt_is_a_wrong_password(second: str) -> None:
    b = become()
    b.feed_stderr(b.prompt)
    with pytest.raises(BecomeError, match=r"^sudo: incorrect password for ubuntu@h1$"):
        b.feed_stderr("\nsudo: Authentication failed, try again.\n" + second.format(ours=b.prompt))


@pytest.mark.parametrize(
    ("said", "message"),
    [
        ("sudo: a password is required\n", "sudo: a password is required for ubuntu@h1: "),
        ("sudo: interactive authentication is required\n",
         "sudo: a password is required for ubuntu@h1: "),
        ("sudo: 1 incorrect password attempt\n", "sudo: incorrect password for ubuntu@h1"),
        ("sudo: Maximum 3 incorrect authentication attempts\n",
         "sudo: incorrect password for ubuntu@h1"),
        ("sudo: sorry, you must have a tty to run sudo\n",
         "sudo failed for ubuntu@h1: sudo: sorry, you must have a tty to run sudo"),
    ],
)  # fmt: skip
def test_refusals_of_sudo_and_sudo_rs(said: str, message: str) -> None:
    b = become()
    b.feed_stderr(said)
    err = b.failure(1)
    assert str(err).startswith(message)
    assert b.needs_tty == ("tty" in said)


def test_an_echoed_password_never_reaches_a_message() -> None:
    b = become(pty=True)
    b.feed_stderr(b.prompt)
    b.feed_stderr(PW + "\r\nsudo: something else went wrong\r\n")
    assert PW not in str(b.failure(1)) and "***" in str(b.failure(1))


def test_on_a_terminal_stdin_goes_base64_then_eof_and_the_prompt_is_on_stdout() -> None:
    b = become(pty=True)
    data = bytes(range(256))
    sent = b.stdin_bytes(data)
    assert sent.endswith(b"\x04") and base64.b64decode(sent[:-1]) == data
    alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=\n"
    assert set(sent[:-1]) <= set(alphabet)  # nothing a terminal's line editing acts on
    assert b.stream == "stdout" and become().stream == "stderr"
    assert b.wrap("true").startswith("stty sane -echo -onlcr 2>/dev/null; sudo -H -S -p ")
    assert become().stdin_bytes(data) == data
