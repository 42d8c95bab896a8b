"""What a failed apt or dpkg command said, in one line: the lines that tell why.

apt ends most failures with an `E:` line that says little on its own ("Unable to correct
problems, you have held broken packages", "Sub-process /usr/bin/dpkg returned an error
code (1)"), and puts the reason elsewhere: the unmet `Depends:` lines on stdout, dpkg's
`error processing` line with its cause below it. The last lines of the output are often
the least useful ("- Filesize:16690 [weak]" under a hash mismatch). The data tests
(tests/execute/test_aptmessages.py) hold real outputs of apt 2.6.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpunode.changes import LOG_TAIL

OURS = "gpunode: "
"""A line a gpunode step printed to say why it failed (dpkg's recovery): kept whole."""

# "Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)";
# "dpkg frontend lock was locked by another process with pid 4242" (dpkg's own)
_LOCK_HELD = re.compile(
    r"Could not get lock (/\S+?)\.? It is held by process (\d+) \(([^)]*)\)"
    r"|Could not get lock (/\S+?)(?: - |\.|$)"
    r"|Unable to acquire the dpkg frontend lock \((/\S+)\)"
    r"|Unable to lock directory (/\S+)"
    r"|dpkg (?:frontend )?(?:lock )?(?:was|is) locked by another process(?: with pid (\d+))?",
    re.M,
)
_HOLDER = re.compile(r"(?:held by process|is held by) (\d+) \(([^)]*)\)")
_DEPENDS = re.compile(r"^\s*(?:(\S+) : )?(?:Pre-)?Depends: .*$")
_DPKG_ERROR = re.compile(r"^dpkg: (?:error|dependency problems)\b.*$")
_SUBPROCESS = "Sub-process /usr/bin/dpkg returned an error code"
_SIGNATURE = re.compile(r"\b(?:NO_PUBKEY|EXPKEYSIG|REVKEYSIG|BADSIG)\b")
MAX_LINES = 4
_CURL = re.compile(r"^curl: \(\d+\)", re.M)
_URL = re.compile(r"https?://[^\s'\"]+")
# apt's (gpgv's) status words for an index it refused, and what the admin can do about each
_SIG = re.compile(r"\b(NO_PUBKEY|EXPKEYSIG|REVKEYSIG|BADSIG) ([0-9A-F]{8,40})\b")
_SIG_HINTS = {
    "NO_PUBKEY": "the repository is signed by key {key}, which the host's keyring does not "
    "hold: the repository's key changed, so pin the current keyring package "
    "(repos.cuda_keyring_sha256) or re-sign the mirror with the key the hosts trust",
    "EXPKEYSIG": "the repository's signing key {key} has expired: install its renewed "
    "keyring package (repos.cuda_keyring_sha256), or re-sign the mirror with a valid key",
    "REVKEYSIG": "the repository's signing key {key} is revoked: do not use this "
    "repository until it is signed by a valid key",
    "BADSIG": "the index's signature does not match its content (key {key}): a proxy or "
    "a broken mirror altered it; nothing from it was used",
}


@dataclass(frozen=True)
class Lock:
    """A lock apt or dpkg could not take: which one, and who held it when it was named."""

    name: str
    path: str
    holder: str | None = None

    def shown(self) -> str:
        return f"{self.name} ({self.path})" if self.path else self.name


def lock_name(path: str) -> str:
    if "/lists" in path:
        return "apt's list lock"
    if "/archives" in path:
        return "apt's archive lock"
    return "dpkg lock"


def lock(stdout: str, stderr: str) -> Lock | None:
    """The lock a command failed on, when it failed on one; its holder when apt named it
    (a dpkg lock's is named in apt's "Waiting for cache lock" lines)."""
    text = _lines(stderr)
    said = [line for line in _lines(stdout) if line.startswith(("E: ", "dpkg: error"))]
    m = _LOCK_HELD.search("\n".join(text)) or _LOCK_HELD.search("\n".join(said))
    if m is None:
        return None
    path = next((g for g in (m.group(1), m.group(4), m.group(5), m.group(6)) if g), "")
    path = path.rstrip("/")
    if path.endswith("/lists"):
        path += "/lock"
    name = lock_name(path) if path else "dpkg lock"
    if m.group(2):
        return Lock(name, path, f"pid {m.group(2)} ({m.group(3)})")
    if m.group(7):
        return Lock(name, path, f"pid {m.group(7)}")
    # the holder, from any line that names one for this same lock
    for line in _lines(stdout) + text:
        h = _HOLDER.search(line)
        if h and (not path or path in line):
            return Lock(name, path, f"pid {h.group(1)} ({h.group(2)})")
    return Lock(name, path)


def summary(stdout: str, stderr: str) -> str | None:
    """The most informative lines of a failed apt or dpkg run, joined with " | "; None when
    it printed nothing apt or dpkg says on failure (another command's output)."""
    out, err = _lines(stdout), _lines(stderr)
    both = out + err
    ours: list[str] = []
    for line in both:
        if not line.startswith(OURS):
            continue
        line = line[len(OURS) :]
        if line.startswith(" ") and ours:  # an item of the list the line before opened
            ours[-1] += (" " if ours[-1].endswith(":") else ", ") + line.strip()
        else:
            ours.append(line.strip())
    errors = [line for line in err if line.startswith("E: ")] or [
        line for line in out if line.startswith("E: ")
    ]
    depends = _depends(out) or _depends(err)
    if ours:  # the verdict, then why apt could not do it
        return " | ".join(["; ".join(ours), *depends[:MAX_LINES], *_dedup(errors)[:MAX_LINES]])
    picked: list[str] = []
    if depends:
        picked += depends
    dpkg = _dpkg_errors(both)
    if dpkg and (not errors or any(_SUBPROCESS in e for e in errors)):
        picked += dpkg  # dpkg's own reason, not apt's "returned an error code (1)"
        errors = [e for e in errors if _SUBPROCESS not in e]
    if errors:
        picked += [w for w in both if w.startswith("W: ") and _SIGNATURE.search(w)]
        picked += errors
    if not picked:
        return None
    return " | ".join(_dedup(picked)[: MAX_LINES if not depends else MAX_LINES * 2])


def _lines(text: str) -> list[str]:
    """Lines as a terminal shows them: a progress line's carriage returns keep its last
    state; trailing spaces go."""
    out = []
    for line in text.splitlines():
        line = line.rstrip().rsplit("\r", 1)[-1]
        if line:
            out.append(line)
    return out


def _depends(lines: list[str]) -> list[str]:
    """The lines under "have unmet dependencies:", each naming its package."""
    try:
        start = next(i for i, line in enumerate(lines) if "have unmet dependencies" in line)
    except StopIteration:
        return []
    out: list[str] = []
    package = ""
    for line in lines[start + 1 :]:
        m = _DEPENDS.match(line)
        if not m:
            break
        package = m.group(1) or package
        said = line.split(" : ", 1)[1] if m.group(1) else line.strip()
        out.append(f"{package}: {said.strip()}")
    return out


def _dpkg_errors(lines: list[str]) -> list[str]:
    """dpkg's error lines, each with the indented lines below it (its cause)."""
    out: list[str] = []
    for i, line in enumerate(lines):
        if not _DPKG_ERROR.match(line):
            continue
        cause = []
        for more in lines[i + 1 :]:
            if not more.startswith(" "):
                break
            cause.append(more.strip())
        out.append(" ".join([line, *cause]))
    return out


def _dedup(lines: list[str]) -> list[str]:
    return list(dict.fromkeys(lines))


def failure(
    code: int, stderr: str, stdout: str, dpkg_lock_holder: str = "", command: str = ""
) -> str:
    """Why a command failed, for the host's message: who holds a lock apt wanted, apt's own
    reason (else the last lines), a log's tail whole, what to do about a signature apt
    refused, and the URL curl was fetching (`command`: the shell that ran)."""
    held = lock(stdout, stderr)
    if held is not None:
        holder = held.holder or (held.name == "dpkg lock" and dpkg_lock_holder) or "unknown"
        return f"{held.name} held by {holder}; try again when it finishes (exit {code})"
    # apt's reason (its E: lines, the unmet Depends:, dpkg's error), else the last lines
    text = (stderr.strip() or stdout.strip()).splitlines()
    tail = summary(stdout, stderr) or (" | ".join(text[-3:]) if text else "")
    why = f"exit {code}: {tail}" if tail else f"exit {code}"
    mark = stderr.rfind("\n" + LOG_TAIL)
    if mark >= 0 or stderr.startswith(LOG_TAIL):  # a log's tail: keep all of it
        why = f"exit {code}:\n{stderr[mark + 1 :].strip()}"
    if sig := _SIG.search(stderr + stdout):
        why += "; " + _SIG_HINTS[sig.group(1)].format(key=sig.group(2))
    if _CURL.search(stderr):  # curl names the host and port, not the URL it was fetching
        url = next(iter(_URL.findall(command)), "")
        if url and url not in why:
            why += f" (fetching {url})"
    return why
