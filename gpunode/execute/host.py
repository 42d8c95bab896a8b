"""Converge one host over its transport: read, plan, run the changes, reboot, re-check.

Emits events only (never prints). A failed change stops this host, never others.
"""

from __future__ import annotations

import difflib
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from gpunode.changes import RELOAD_REFUSED, Change, HostPlan
from gpunode.events import (
    Bus,
    ChangeFinished,
    ChangeStarted,
    CommandOutput,
    DoctorFinding,
    FactsGathered,
    HookFinished,
    HostStatusChanged,
    PlannedChange,
    PlanReady,
    RebootFinished,
    RebootPending,
    RebootStarted,
)
from gpunode.execute import aptmessages, firstask, hostlock, warm
from gpunode.execute.machine import Machine
from gpunode.execute.output import StepOutput
from gpunode.execute.result import ChangeResult, HostResult
from gpunode.hostpool import Stop
from gpunode.transport.base import (
    BecomeError,
    CommandTimeoutError,
    HostKeyError,
    HostUnreachableError,
    Transport,
    TransportError,
)
from gpunode.transport.counting import Counting

# What a host's read and changes need (the planner, the roles, the facts' model, the
# resolver) is imported where it is used, not here: connecting and taking the host's lock
# need none of it, and `warm` imports it meanwhile, while the controller waits on the network.
if TYPE_CHECKING:
    from gpunode.execute.undo import Undo
    from gpunode.facts.model import HostFacts
    from gpunode.inventory.model import Host
    from gpunode.resolve.index import RepoVersions
    from gpunode.resolve.resolver import CatalogFor

    _Catalogs = tuple[CatalogFor | None, CatalogFor | None]
    """Where versions come from: NVIDIA's repository, and libnvidia-container's."""

T = TypeVar("T")
BOOT_ID = "cat /proc/sys/kernel/random/boot_id"
# Detached, so the command returns before the connection drops.
REBOOT_TIMEOUT = 600.0
REBOOT = "nohup sh -c 'sleep 1; systemctl reboot || reboot' >/dev/null 2>&1 &"


@dataclass
class Options:
    check: bool = False
    diff: bool = False
    tags: Collection[str] = ()
    skip_tags: Collection[str] = ()
    reboot_timeout: float | None = None
    """Wins over the inventory's reboot.timeout (default REBOOT_TIMEOUT)."""
    no_reboot: bool = False
    """Make every change but the reboots; a host that still needs one is "reboot-pending"."""
    allow_busy: bool = False
    """Plan and make disruptive changes even while processes use the GPUs."""
    search: tuple[Path, ...] | None = None
    smoke: bool = True
    facts_timeout: float = 120.0
    poll_interval: float = 2.0
    extra_files: tuple[str, ...] = field(default=())
    versions: RepoVersions | None = None
    """Reads the repository index a host uses when its specs need one (shared by hosts)."""
    allow_change_held: bool = False
    """A change may move a package whose hold the admin set (--allow-change-held)."""
    confirmed: dict[str, tuple[tuple[str, ...], ...]] | None = None
    """Each host's plan as the admin confirmed it at the prompt (HostPlan.fingerprint): a
    host whose plan differs when the run reads it is stopped before any change."""
    saved_plan: str = ""
    """`apply FILE`: `confirmed` comes from this saved plan, and binds exactly (a host
    whose plan is not the saved one, to the change, is stopped)."""
    stop: Stop | None = None
    """The run's stop (Ctrl-C, SIGTERM...): read between changes and phases, never mid-command."""
    run_id: str = ""
    """The run record's id: the owner named in each host's lock (execute/hostlock.py)."""
    inventory: str = ""
    """The inventory's path as the command was given it: the fixes doctor's findings suggest
    after failed smoke tests name it (`gpunode apply PATH --limit HOST`)."""


class HostRun:
    def __init__(self, transport: Transport, host: Host, bus: Bus, opts: Options) -> None:
        self.t = Counting(transport)  # counts every round trip the run makes
        self.host = host
        self.bus = bus
        self.opts = opts
        self.result = HostResult(host.name)
        self.index = 0
        self.after_disrupt: str | None = None
        """Set once before_disrupt has run (or would have): the hook the end of a good run
        owes the host."""
        self.reboot_instead: str | None = None
        """Why the host reboots after all: a module reload whose unload was refused."""
        self._undo: Undo | None = None
        self._asking: Callable[[], tuple[firstask.Asked, bool] | str] | None = None
        """The first read's ask (`_ask`), started beside the lock's round trip (`run`)."""
        self.installed = False
        """A package transaction of this run has started: the host is no longer as it was."""
        self.lock_owner: hostlock.Owner | None = None
        """This run as the host's lock names it, while it holds that lock."""

    @property
    def undo(self) -> Undo:
        """What a failing package change puts back (preferences, lifted holds)."""
        if self._undo is None:
            from gpunode.execute.undo import Undo

            self._undo = Undo()
        return self._undo

    # -- reading -------------------------------------------------------------------------------

    def read(self, *, apply: bool = False, verify: bool = False) -> tuple[HostFacts, HostPlan]:
        """`apply`: the host is being converged, so a role's own shell checks (a command's
        `unless:`) run too, once the facts show it is not refused; plan and --check run none.
        `verify`: the read after a run's changes; its plan reaches the views only when it
        still has changes (or is refused)."""
        # the facts command's modules first; no import of this thread runs beside warm's
        warm.wait("gpunode.execute.readhost")
        from gpunode.execute.readhost import read_host
        from gpunode.facts.gather import apt_queries

        self.bus.emit(HostStatusChanged(self.host.name, status="gathering"))
        asking, self._asking = self._asking, None
        first = asking() if asking is not None else self._ask(recall=True)
        if isinstance(first, str):  # a role that cannot render: its file:line refuses the host
            return self._refused(first)
        (files, guess), recalled = first
        conda = [self.host.stack.conda.prefix] if self.host.stack.conda else []
        # the roles' templates compile while the facts are read: the plan then only renders
        compiled = _beside(self._precompile)
        facts, probes = read_host(
            self.t,
            files=files,
            conda_prefixes=conda,
            probes=guess,
            timeout=self.opts.facts_timeout,
            apt=apt_queries(self.host),
        )
        compiled()
        warm.wait()
        from gpunode.plan.planner import probes_for

        self.result.facts_seconds.append(facts.gather_seconds)
        self.bus.emit(
            FactsGathered(
                self.host.name, facts=facts.model_dump(mode="json"), seconds=facts.gather_seconds
            )
        )
        wanted = probes_for(self.host, facts, self.opts.search, role_shell=apply)
        asked_as = {p.key: p.command for p in guess}
        for p in wanted:  # a remembered probe of another command: asked again, below
            if asked_as.get(p.key, p.command) != p.command:
                probes.pop(p.key, None)
        self.bus.emit(HostStatusChanged(self.host.name, status="planning"))
        versions, repos = self.opts.versions, self.host.repos
        catalogs = (
            (versions.catalog_for(repos.nvidia, facts),
             versions.container_catalog_for(repos.nvidia_container))
            if versions else (None, None)
        )  # fmt: skip
        plan = self._plan(facts, probes, catalogs)
        if plan.versions_on_host and not plan.changes:
            # The repositories are configured here: the host's apt says what they offer.
            catalogs = self._host_catalogs(plan.versions_on_host, facts)
            plan = self._plan(facts, probes, catalogs)
        # Probes and files that only the facts could name: a second, rare, round trip, then
        # the plan again (what it walks does not depend on them).
        # a plan that refuses the host already runs no role shell there (an `unless:`)
        missing = [p for p in wanted if p.key not in probes and not (plan.refused and p.role_shell)]
        unhashed = [f for f in plan.reads if f not in facts.files]
        if recalled and (unhashed or any(not p.role_shell for p in missing)):
            self._ask(recall=False)  # a stale ask: the roles' own, remembered for the next run
        if missing or unhashed:
            more, found = read_host(self.t, files=unhashed, probes=missing, only_files=True,
                                    timeout=self.opts.facts_timeout)  # fmt: skip
            probes.update(found)
            facts.files.update(more.files)
            facts.file_attrs.update(more.file_attrs)
            plan = self._plan(facts, probes, catalogs)
        private = [f for f in plan.reads if facts.files.get(f) == "unreadable"] if apply else []
        if private:  # only root may read them: hashed as root rather than written to be sure
            more, _ = read_host(self.t, files=private, only_files=True, sudo=True,
                                timeout=self.opts.facts_timeout)  # fmt: skip
            facts.files.update(more.files)
            facts.file_attrs.update(more.file_attrs)
            plan = self._plan(facts, probes, catalogs)
        plan = self._simulated(plan, update=apply)
        self.result.plans.append(plan.to_json())
        if verify and plan.empty:
            return facts, plan
        self.bus.emit(
            PlanReady(
                self.host.name,
                changes=tuple(planned(c) for c in plan.changes),
                refused=plan.refused,
            )
        )
        return facts, plan

    def _refused(self, why: str) -> tuple[HostFacts, HostPlan]:
        from gpunode.facts.model import HostFacts

        plan = HostPlan(self.host.name, refused=why)
        self.bus.emit(PlanReady(self.host.name, changes=(), refused=plan.refused))
        return HostFacts(), plan

    def _precompile(self) -> None:
        warm.wait()
        from gpunode.roles.walk import precompile

        precompile(self.host, self.opts.search)

    def _ask(self, *, recall: bool) -> tuple[firstask.Asked, bool] | str:
        """What a first read asks of the host besides its facts (the files the roles manage,
        their probes, rendered against the inventory alone), and whether it was remembered
        (`firstask`) rather than walked; or why a role cannot render (its file:line). A
        walked ask is remembered for the next run."""
        extra = self.opts.extra_files
        if recall and (asked := firstask.recall(self.host, self.opts.search, extra)):
            return asked, True
        warm.wait()
        from gpunode.plan.planner import managed_paths, probes_for
        from gpunode.roles.loader import RoleError

        try:
            files = [*managed_paths(self.host, self.opts.search), *extra]
        except RoleError as exc:
            return str(exc)
        walked = files, probes_for(self.host, None, self.opts.search)
        firstask.remember(self.host, self.opts.search, extra, walked)
        return walked, False

    def _plan(self, facts: HostFacts, probes: dict[str, bool], catalogs: _Catalogs) -> HostPlan:
        """`catalogs`: NVIDIA's repository's and libnvidia-container's."""
        from gpunode.plan.planner import plan_host

        return plan_host(
            self.host,
            facts,
            probes=probes,
            tags=self.opts.tags,
            search=self.opts.search,
            catalog=catalogs[0],
            containers=catalogs[1],
            skip_tags=self.opts.skip_tags,
            allow_busy=self.opts.allow_busy,
            allow_change_held=self.opts.allow_change_held,
            mirror_files=self.opts.versions.mirror_files if self.opts.versions else None,
        )

    def _simulated(self, plan: HostPlan, *, update: bool) -> HostPlan:
        """apt's own resolver on the plan's packages, under the preferences the plan will
        write, before anything changes (gpunode.plan.simulate); a refusal refuses the host.
        `update` (apply): the lists are read first, as the transaction will. Without it
        (plan, --check) the host's lists may predate a release: apt not finding a version
        or package is a note (apply reads the lists first); anything else refuses."""
        from gpunode.plan import simulate

        if plan.refused or simulate.configures_sources(plan.changes):
            return plan  # the transaction itself asks apt, once the sources are there
        cmd = simulate.command(plan.changes, self.host.apt.lock_timeout, update=update)
        if cmd is None:
            return plan
        with self._idle(update):
            res = self.t.run(["sh", "-c", cmd], sudo=update, timeout=self.host.ssh.command_timeout)
        if res.ok:
            return plan
        lines = simulate.reasons(res.stdout, res.stderr)
        said = " | ".join(lines) or f"exit {res.exit_code}"
        if update or not simulate.stale_lists(lines):
            why = f"apt's resolver refuses the plan, nothing was changed (apt-get -s): {said}"
            return replace(plan, changes=(), hooks=(), refused=why)
        note = f"apt-get -s on the host's current lists: {said}; apply reads them again first"
        return replace(plan, notes=(*plan.notes, note))

    def _host_catalogs(self, names: tuple[str, ...], facts: HostFacts) -> _Catalogs:
        """What the host's apt offers from each repository configured here: one question
        for every repository, each reading its own folder of the answer."""
        from gpunode.resolve.hostapt import HostCatalog, madison_command
        from gpunode.resolve.index import container_folder, repo_folder

        res = self.t.run(madison_command(names), timeout=self.opts.facts_timeout)
        said = res.whole_stdout if res.ok else ""

        def folder(url: str | None) -> CatalogFor | None:
            if not url:
                return None
            cat = HostCatalog(said, url)
            return lambda: cat

        repos = self.host.repos
        nvidia = repo_folder(repos.nvidia, facts) if repos.nvidia else None
        containers = container_folder(repos.nvidia_container) if repos.nvidia_container else None
        return folder(nvidia), folder(containers)

    # -- the run -------------------------------------------------------------------------------

    def run(self) -> HostResult:
        start = time.monotonic()
        # The first read's ask needs no lock and no facts: it is recalled (or the roles are
        # walked) while the lock's round trip, the connection's first session (sshd's PAM
        # and motd included), waits on the host.
        self._asking = _beside(lambda: self._ask(recall=True))
        warm.idle()
        try:
            if self._lock():
                try:
                    smoke = self.opts.smoke and bool(self.host.stack.smoke)
                    Machine(self, check=self.opts.check, no_reboot=self.opts.no_reboot,
                            smoke=smoke).run()  # fmt: skip
                except HostUnreachableError:
                    self.lock_owner = None  # no waiting on a dead host: its lock goes stale
                    raise
                finally:
                    self._unlock()
        finally:
            self.result.seconds = round(time.monotonic() - start, 3)
            self.result.round_trips = self.t.round_trips
        return self.result

    def _lock(self) -> bool:
        """An apply holds the host's lock from before its plan to its end; a lock another
        run holds refuses the host (exit 11). --check changes nothing and takes none."""
        if self.opts.check:
            return True
        me = self.lock_owner or hostlock.this_run(self.opts.run_id)
        try:
            got = hostlock.take(self.t, me)
        except BecomeError as exc:  # sudo needs a password: no change could run either
            got = hostlock.Outcome(False, note=f"not locked: {exc}")
        if got.locked:
            self.lock_owner = me
        if got.note:
            self.bus.emit(HostStatusChanged(self.host.name, status="gathering", detail=got.note))
        if got.refused:
            self.fail(got.refused)
            self.result.locked = not self.result.rebooted  # after its reboot: this run's own
        return not got.refused

    def _unlock(self) -> None:
        if self.lock_owner is not None:
            hostlock.release(self.t, self.lock_owner.run)

    def reboot_pending(self, reason: str) -> None:
        self.result.status = "reboot-pending"
        self.result.message = f"reboot pending: {reason}"
        self.bus.emit(RebootPending(self.host.name, reason=reason))
        self.bus.emit(HostStatusChanged(self.host.name, status="reboot-pending", detail=reason))

    def unconfirmed(self, plan: HostPlan) -> bool:
        """The plan now asks for something the admin did not confirm at the prompt (the
        host changed while it waited): stop the host before any change. Doing less than
        was confirmed (a change no longer needed) goes on."""
        confirmed = (self.opts.confirmed or {}).get(self.host.name)
        if confirmed is None:
            return False
        now = plan.fingerprint()
        new = [k for k in now if k not in confirmed and k != ("refused", "")]
        saved = self.opts.saved_plan
        if not new and not (saved and now != confirmed):
            return False
        titles = ", ".join(k[0] if k[0] != "hook" else f"hook {k[1]}" for k in new)
        if saved:
            gone = [k[0] for k in confirmed if k not in now and k[0] not in ("refused", "hook")]
            self.fail(
                f"the host's plan is no longer the one saved in {saved}"
                + (f"; not in it: {titles}" if titles else "")
                + (f"; no longer needed: {', '.join(gone)}" if gone else "")
                + "; nothing was changed: plan again (plan --out) and apply the new file"
            )
        else:
            self.fail(
                f"the plan changed since you confirmed it: now {len(plan.changes)} change(s),"
                f" not confirmed: {titles}; nothing was changed: apply again to see and"
                " confirm the new plan"
            )
        self.result.refused = True
        return True

    def check_only(self, plan: HostPlan) -> None:
        for c in plan.changes:
            self.index += 1
            diff = self._diff(c) if self.opts.diff else ""
            self.result.changes.append(
                ChangeResult(c.title, c.role, c.op, c.reason, "skipped", 0.0, diff=diff)
            )
            self.bus.emit(
                ChangeFinished(
                    self.host.name,
                    index=self.index,
                    title=c.title,
                    status="skipped",
                    seconds=0.0,
                    message=f"would change: {c.reason}",
                    diff=diff,
                )
            )
        self.result.status = "changed" if plan.changes else "ok"

    def apply(self, plan: HostPlan, facts: HostFacts) -> bool:
        todo = [c for c in plan.changes if not c.only_reboot]
        if todo and self.stopped(f"change {self.index + 1}/{self.index + len(todo)}"):
            return False  # before the hooks and the first change
        if todo and not self._may_act_as_root(todo):
            return False
        if plan.hooks and self.after_disrupt is None:
            before = plan.hook("before_disrupt")
            if before is not None and not self.hook("before_disrupt", before):
                return False
            self.after_disrupt = plan.hook("after_disrupt") or ""
        if todo:
            self.bus.emit(HostStatusChanged(self.host.name, status="applying"))
        total = self.index + len(todo)
        for c in todo:
            if self.stopped(f"change {self.index + 1}/{total} ({c.title})"):
                return False
            self.index += 1
            if not self._change(c, total, facts):
                return False
        return True

    def _may_act_as_root(self, todo: list[Change]) -> bool:
        """With `become: none` changes run as the login user: fine when it is root, else
        refuse them all before the first one (never half of a host's changes)."""
        if self.host.become != "none" or not any(c.sudo for c in todo):
            return True
        res = self.t.run("id -u")
        if res.ok and res.stdout.strip() == "0":
            return True
        user = self.host.ssh.user if self.host.connection == "ssh" else "this user"
        self.fail(
            f"become: none, and {user} is not root: {len(todo)} change(s) need root "
            f"({todo[0].title}, ...); log in as root, or set become: sudo"
        )
        return False

    def _change(self, c: Change, total: int, facts: HostFacts) -> bool:
        from gpunode.execute import journal

        name, i = self.host.name, self.index
        shown = tuple(s.shown() for s in c.steps)
        self.bus.emit(
            ChangeStarted(name, index=i, total=total, title=c.title, role=c.role, commands=shown)
        )
        diff = self._diff(c) if self.opts.diff else ""
        start = time.monotonic()
        done: list[str] = []
        self.undo.before(c, self.t)
        # the step journal's writes ride on the change's own commands (execute/journal.py)
        runs = journal.commands(c, self.opts.run_id or journal.unrecorded_run())
        for step, (command, stdin) in zip(c.steps, runs, strict=True):
            said: dict[str, list[str]] = {"stdout": [], "stderr": []}

            def out(stream: str, text: str, i: int = i, said: dict[str, list[str]] = said) -> None:
                said[stream].append(text)
                self.bus.emit(CommandOutput(name, index=i, stream=stream, text=text))  # type: ignore[arg-type]

            try:
                with self._idle(c.apt or c.long_running):
                    res = self.t.run(
                        command,
                        sudo=c.sudo,
                        stdin=stdin,
                        on_output=out,
                        timeout=self.host.ssh.command_timeout,
                    )
            except (BecomeError, HostUnreachableError):
                raise  # sudo refused, or a host gone silent: the host's own outcome
            except (TransportError, EOFError, OSError) as exc:
                if isinstance(exc, CommandTimeoutError):
                    why = f"timed out: {exc}"
                else:  # the session cut under it
                    why = f"the SSH connection was lost while it ran ({exc or type(exc).__name__})"
                    if c.apt:
                        why += "; an interrupted dpkg run is finished by the next apply"
                said_out, said_err = "".join(said["stdout"]), "".join(said["stderr"])
                output = StepOutput.capped(step.shown(), None, said_out, said_err)
                return self._change_failed(c, i, start, done, why, diff, output)
            done.append(step.shown())
            if not res.ok and c.reload is not None and res.exit_code == RELOAD_REFUSED:
                self._journal_end(c)  # the reboot does its work: nothing to run again
                return self._reload_refused(c, i, start, done, res.stderr, diff)
            if not res.ok:
                holder = facts.dpkg_lock_holder or ""
                why = aptmessages.failure(res.exit_code, res.stderr, res.stdout, holder,
                                          str(step.command))  # fmt: skip
                if res.exit_code == 255 and self._connection_lost():
                    why = "the SSH connection was lost while it ran (" + why + ")"
                    if c.apt:
                        why += "; an interrupted dpkg run is finished by the next apply"
                else:
                    # it ended, failing, and says so: no cut to run again. The next apply
                    # plans from the facts, and never replays a task the inventory dropped
                    self._journal_end(c)
                output = StepOutput.capped(step.shown(), res.exit_code, res.stdout, res.stderr,
                                           cut=(res.stdout_cut, res.stderr_cut))  # fmt: skip
                return self._change_failed(c, i, start, done, why, diff, output)
        if any(s.installs for s in c.steps):
            self.installed = True
            self.undo.settled()
        secs = round(time.monotonic() - start, 3)
        self.result.changes.append(
            ChangeResult(c.title, c.role, c.op, c.reason, "changed", secs, done, diff=diff)
        )
        self.bus.emit(
            ChangeFinished(
                name,
                index=i,
                title=c.title,
                status="changed",
                seconds=secs,
                message=c.reason,
                diff=diff,
            )
        )
        return True

    def _journal_end(self, c: Change) -> None:
        """End a change's journal entry on its own (one round trip; rare)."""
        from gpunode.execute import journal

        if not journal.journaled(c):
            return
        try:
            self.t.run(journal.end_command(c), sudo=True, timeout=30)
        except TransportError:
            return  # left begun: the next apply runs the reload again, harmlessly

    def _reload_refused(
        self, c: Change, i: int, start: float, done: list[str], stderr: str, diff: str
    ) -> bool:
        """The kernel kept the old module (a process took the GPUs since the facts were
        read): the reload's work is undone, and the host reboots instead."""
        said = stderr.strip().splitlines()[-1:]
        why = "the module could not be unloaded" + (f" ({said[0]})" if said else "")
        self.reboot_instead = f"{c.reload}: reboot: {why}"
        secs = round(time.monotonic() - start, 3)
        message = f"{why}: reboot instead"
        self.result.changes.append(
            ChangeResult(c.title, c.role, c.op, c.reason, "skipped", secs, done, message, diff)
        )
        self.bus.emit(
            ChangeFinished(self.host.name, index=i, title=c.title, status="skipped",
                           seconds=secs, message=message, diff=diff)
        )  # fmt: skip
        return True

    def _connection_lost(self) -> bool:
        """Exit 255 is also what a session cut mid-command reads as: whether the
        connection survived it (a probe that cannot run, or had to reconnect, says not)."""
        before = self.t.connections_opened
        try:
            probe = self.t.run(["true"], timeout=15)
        except Exception:  # TransportError, or paramiko's EOFError/SSHException: gone
            return True
        return not probe.ok or self.t.connections_opened != before

    def _change_failed(
        self,
        c: Change,
        i: int,
        start: float,
        done: list[str],
        why: str,
        diff: str,
        output: StepOutput,
    ) -> bool:
        why += self._put_back(c, done)
        secs = round(time.monotonic() - start, 3)
        self.result.changes.append(
            ChangeResult(c.title, c.role, c.op, c.reason, "failed", secs, done, why, diff, output)
        )
        self.bus.emit(
            ChangeFinished(
                self.host.name,
                index=i,
                title=c.title,
                status="failed",
                seconds=secs,
                message=why,
                diff=diff,
            )
        )
        self.fail(f"{c.title}: {why}")
        return False

    def _put_back(self, c: Change, done: list[str]) -> str:
        """After a failed change: restore what the run's unfinished transaction rewrote, and
        release a drained host whose packages were never touched. What it says is appended
        to the failure, so the record names what could not be restored."""
        said = ""
        if self.undo.pending:
            restored, failed = self.undo.restore(self.t)
            if restored:
                said += f"; restored {', '.join(restored)}"
            if failed:
                said += f"; could NOT restore {', '.join(failed)}"
        at = next((n for n, s in enumerate(c.steps) if s.installs), None)
        if at is not None and len(done) >= at:
            self.installed = True  # the failing step is (or follows) the transaction
        if not self.installed and self.after_disrupt:
            hook, self.after_disrupt = self.after_disrupt, None
            if self.hook("after_disrupt", hook):
                said += "; packages untouched, so after_disrupt ran (the host is not left drained)"
        return said

    def _diff(self, c: Change) -> str:
        if c.path is None or c.after is None:
            return ""
        from gpunode.records import private_file_note

        # never the content of a file that is not world-readable, before or after
        try:
            st = self.t.run(["stat", "-c", "%a", "--", c.path], sudo=True, timeout=30).stdout
        except TransportError:
            st = ""
        mode = int(st.strip(), 8) if st.strip().isdigit() else None
        note = private_file_note(mode, c.commands)
        if note:
            return note
        try:
            before = self.t.get(c.path, sudo=True).decode(errors="replace")
        except (TransportError, OSError):
            before = ""
        lines = difflib.unified_diff(
            before.splitlines(keepends=True),
            c.after.splitlines(keepends=True),
            fromfile=f"{c.path} (before)",
            tofile=f"{c.path} (after)",
        )
        return "".join(lines)

    def apt_update(self, facts: HostFacts) -> bool:
        from gpunode.roles.ops.apt import apt_update

        with self._idle(True):
            res = self.t.run(
                apt_update(self.host.apt.lock_timeout),
                sudo=True,
                timeout=self.host.ssh.command_timeout,
            )
        if not res.ok:
            holder = facts.dpkg_lock_holder or ""
            why = aptmessages.failure(res.exit_code, res.stderr, res.stdout, holder)
            self.fail(f"apt-get update: {why}")
        return res.ok

    @contextmanager
    def _idle(self, long: bool) -> Iterator[None]:
        """A long step may stay silent for apt.inactivity_timeout rather than the ssh one:
        as written, shorter too (`check` refuses values that cannot hold: compat/check.py)."""
        was = self.t.inactivity_timeout
        if long and was is not None:
            self.t.inactivity_timeout = self.host.apt.inactivity_timeout
        try:
            yield
        finally:
            if long and was is not None:
                self.t.inactivity_timeout = was

    def hook(self, name: str, shell: str) -> bool:
        """Run an inventory hook on the host as root; a failure fails the host."""
        if not shell:
            return True
        start = time.monotonic()
        try:
            res = self.t.run(["sh", "-c", shell], sudo=True, timeout=self.host.ssh.command_timeout)
            ok = res.ok
            why = "" if ok else aptmessages.failure(res.exit_code, res.stderr, res.stdout)
        except CommandTimeoutError as exc:
            ok, why = False, f"timed out: {exc}"
        secs = round(time.monotonic() - start, 3)
        status: Literal["ok", "failed"] = "ok" if ok else "failed"
        self.bus.emit(HookFinished(self.host.name, hook=name, status=status, seconds=secs,
                                   message=why))  # fmt: skip
        if not ok:
            self.fail(f"hook {name} failed ({why})")
        return ok

    # -- reboot --------------------------------------------------------------------------------

    def reboot(self, reason: str, facts: HostFacts) -> bool:
        name = self.host.name
        self.bus.emit(RebootStarted(name, reason=reason))
        self.bus.emit(HostStatusChanged(name, status="rebooting", detail=reason))
        start = time.monotonic()
        old = facts.boot_id
        try:
            res = self.t.run(REBOOT, sudo=True, timeout=30)
            if not res.ok:
                self.fail(f"reboot refused (exit {res.exit_code}): {res.stderr.strip()}")
                return False
        except TransportError:
            pass  # the connection dropping is what a reboot does
        timeout = self.opts.reboot_timeout or self.host.reboot.timeout or REBOOT_TIMEOUT
        deadline = start + timeout
        new = ""
        while time.monotonic() < deadline:
            time.sleep(self.opts.poll_interval)
            try:
                self.t.connect()
                res = self.t.run(BOOT_ID, timeout=10)
            except HostKeyError:
                raise  # a new key after the reboot is no "still rebooting": exit 6, at once
            except TransportError:
                self.t.close()
                continue
            new = res.stdout.strip()
            if res.ok and new and new != old:
                break
            new = ""
        if not new:
            self.fail(f"no new boot within {timeout:g} s (the reboot timeout) after the reboot")
            return False
        secs = round(time.monotonic() - start, 3)
        self.result.rebooted, self.result.reboot_seconds, self.result.boot_id = True, secs, new
        self.bus.emit(RebootFinished(name, seconds=secs, boot_id=new))
        return self._lock()  # the host's lock, kept: now with the new boot id

    # -- smoke ---------------------------------------------------------------------------------

    def smoke(self) -> None:
        try:
            from gpunode.smoke.runner import smoke_host
        except ImportError:
            return
        with self._idle(True):
            smoke = smoke_host(self.host, self.t, self.bus)  # it emits SmokeResult events
        self.result.smoke = smoke.to_json()
        if smoke.failed:
            self.result.status = "failed"
            self.result.message = "smoke tests failed"
            self._doctor()

    def _doctor(self) -> None:
        """Why the smoke tests may have failed: doctor's findings, as events (reads only)."""
        from gpunode.doctor.gather import probe
        from gpunode.doctor.rules import diagnose

        try:
            findings = diagnose(probe(self.t, self.host), inventory=self.opts.inventory or None)
        except TransportError:
            return  # the smoke failure stands on its own
        for f in findings:
            self.bus.emit(DoctorFinding(self.host.name, f.rule, f.severity, f.title,
                                        f.evidence, f.fix))  # fmt: skip

    def stopped(self, before: str) -> bool:
        """The run was asked to stop: start nothing more on this host ("interrupted")."""
        stop = self.opts.stop
        if stop is None or not stop.requested:
            return False
        self.result.status = "interrupted"
        self.result.message = f"stopped before {before}, {self.result.changed} change(s) made"
        if self.after_disrupt:  # drained, and not converged: not for the run to undrain
            self.result.message += "; before_disrupt ran, after_disrupt did not"
        self.bus.emit(HostStatusChanged(self.host.name, status="interrupted",
                                        detail=self.result.message))  # fmt: skip
        return True

    def fail(self, message: str) -> None:
        self.result.status = "failed"
        self.result.message = message
        self.bus.emit(HostStatusChanged(self.host.name, status="failed", detail=message))


def _beside(work: Callable[[], T]) -> Callable[[], T]:
    """Start `work` in a thread of its own; the call returned waits for it and gives what
    it returned, or raises what it raised."""
    box: list[tuple[bool, Any]] = []

    def target() -> None:
        try:
            box.append((True, work()))
        except BaseException as exc:  # re-raised in the thread that asks
            box.append((False, exc))

    thread = threading.Thread(target=target, name=f"{threading.current_thread().name}-beside")
    thread.daemon = True
    thread.start()

    def result() -> T:
        thread.join()
        ok, value = box[0]
        if not ok:
            raise value
        return cast(T, value)

    return result


def planned(c: Change) -> PlannedChange:
    """A planned change as PlanReady carries it to the views: `Change.to_json`'s fields."""
    return PlannedChange(
        role=c.role,
        task=c.task,
        op=c.op,
        reason=c.reason,
        commands=tuple(s.shown() for s in c.steps),
        sudo=c.sudo,
        reboot=c.reboot,
        path=c.path,
        tags=tuple(c.tags),
    )
