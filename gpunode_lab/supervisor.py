"""The lab's long-lived daemon: owns every host's processes, reboots them, serves the repo.

One thread (the main loop) starts and stops hosts, so each host's `unshare` can be
tied to it with PR_SET_PDEATHSIG: if the supervisor dies, every host dies with it and
their mounts vanish with their namespaces. Requests from `gpunode lab` arrive on a
Unix socket, are queued, and are answered once the main loop has acted on them.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import queue
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import Future
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from gpunode_lab import faults, hostinit, procs
from gpunode_lab.gpumodels import MODELS, pci_devices
from gpunode_lab.latency import PORT_OFFSET, LatencyRelay
from gpunode_lab.rootfs import prepare_upper
from gpunode_lab.state import HostPaths, LabConfig, LabPaths

REBOOT_DELAY_S = 1.5
TICK_S = 0.05
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)


def _until_refused(address: str, port: int, within: float = 10.0) -> None:
    """Until the host's sshd has stopped (init stops it once signalled): `lab fault HOST
    refuse` returns with connections refused, not about to be."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            socket.create_connection((address, port), timeout=0.5).close()
        except ConnectionRefusedError:
            return
        except OSError:
            pass
        time.sleep(0.05)


class Host:
    def __init__(self, name: str, address: str, paths: HostPaths) -> None:
        self.name = name
        self.address = address
        self.paths = paths
        self.proc: subprocess.Popen[bytes] | None = None
        self.boot_at: float | None = None
        self.boot_id = ""
        self.boots = 0
        self.powered = True
        self.stall: faults.StallListener | None = None
        self.relay: LatencyRelay | None = None
        self.faults: dict[str, Any] = paths.load_faults()

    def set_faults(self, new: dict[str, Any]) -> None:
        self.faults = new
        self.paths.save_faults(new)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def init_pid(self) -> int | None:
        if not self.running or self.proc is None:
            return None
        kids = procs.children(self.proc.pid)
        return kids[0] if kids else None

    def state(self) -> str:
        if self.running:
            return "up" if self.ready() else "booting"
        if self.boot_at is not None:
            return "rebooting"
        return "off"

    def ready(self) -> bool:
        pid = self.init_pid
        return pid is not None and os.path.exists(f"/proc/{pid}/root/run/gpunode-lab-ready")


class Supervisor:
    def __init__(self, paths: LabPaths, cfg: LabConfig) -> None:
        self.paths = paths
        self.cfg = cfg
        self.hosts = {
            name: Host(name, cfg.address(i), paths.host(name)) for i, name in enumerate(cfg.names)
        }
        self.requests: queue.Queue[tuple[dict[str, Any], Future[dict[str, Any]]]] = queue.Queue()
        self.stopping = False
        self.pci = pci_devices(MODELS[cfg.model], cfg.gpus)

    # -- host lifecycle (main thread only) --

    def boot(self, host: Host) -> None:
        host.boot_at = None
        host.boot_id = str(uuid.uuid4())
        host.boots += 1
        f = host.faults
        spec = {
            "name": host.name,
            "address": host.address,
            "port": self.cfg.port,
            "merged": str(host.paths.merged),
            "upper": str(host.paths.upper),
            "work": str(host.paths.work),
            "lowers": [str(self.paths.base), "/"],
            "mask": [str(self.paths.root)],
            "ctl": str(host.paths.ctl),
            "boot_id": host.boot_id,
            "pci": self.pci,
            "secure_boot": "secure-boot" in f,
            "mok_enrolled": faults.mok_enrolled(f),
            "nouveau": "nouveau" in f,
            "disk_full": "disk-full" in f,
        }
        self.sync_listeners(host, signal_init=False)
        spec_path = host.paths.ctl / "spec.json"
        spec_path.write_text(json.dumps(spec, indent=2) + "\n")
        logf = open(host.paths.log, "ab")  # noqa: SIM115 -- handed to the child
        host.proc = subprocess.Popen(
            [
                "unshare",
                "--mount",
                "--pid",
                "--uts",
                "--ipc",
                "--fork",
                "--kill-child",
                "--propagation",
                "private",
                sys.executable,
                "-I",
                hostinit.__file__,
                str(spec_path),
            ],
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=logf,
            close_fds=True,
            preexec_fn=_die_with_parent,
        )
        logf.close()
        host.powered = True

    def sync_listeners(self, host: Host, signal_init: bool = True) -> None:
        """Who answers on the host's SSH port: sshd, nobody (refuse), a staller, a relay."""
        f = host.faults
        port = self.cfg.port
        stall = "stall" in f
        delay = int(f["latency"]) if "latency" in f and not stall and "refuse" not in f else 0
        if host.stall is not None and not stall:
            host.stall.close()
            host.stall = None
        if host.relay is not None and host.relay.delay != delay / 2000.0:
            host.relay.close()
            host.relay = None
        want = {
            "run": not (stall or "refuse" in f),
            "listen": f"{host.address}:{port + PORT_OFFSET if delay else port}",
        }
        (host.paths.ctl / "sshd.json").write_text(json.dumps(want) + "\n")
        pid = host.init_pid
        if signal_init and pid is not None:
            os.kill(pid, signal.SIGUSR1)
            if not want["run"] and not stall:
                _until_refused(host.address, port)
        if stall and host.stall is None:
            host.stall = faults.bind_retry(lambda: faults.StallListener(host.address, port))
        if delay and host.relay is None:
            host.relay = faults.bind_retry(lambda: LatencyRelay(host.address, port, delay))

    def after_boot(self, host: Host) -> None:
        """Faults that are processes in the host start again after each boot."""
        f = host.faults
        pid = host.init_pid
        if pid is None:
            return
        if "dpkg-lock" in f:
            faults.start_dpkg_lock(pid)

    def kill(self, host: Host) -> None:
        if host.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                host.proc.kill()  # --kill-child takes init, and with it the whole host
            host.proc.wait()
            host.proc = None
        host.boot_at = None

    def tick(self) -> None:
        now = time.monotonic()
        for host in self.hosts.values():
            if host.proc is not None and host.proc.poll() is not None:
                code = host.proc.returncode
                host.proc = None
                if code == hostinit.EXIT_POWEROFF:
                    log(f"{host.name}: powered off")
                    host.powered = False
                else:
                    what = "reboot" if code == hostinit.EXIT_REBOOT else f"crash (exit {code})"
                    log(f"{host.name}: {what}; back in {REBOOT_DELAY_S}s")
                    host.boot_at = now + REBOOT_DELAY_S
            if host.boot_at is not None and now >= host.boot_at:
                self.boot(host)
            drop = host.faults.get("drop")
            if drop is not None and host.running:
                faults.drop_sessions(host.init_pid, float(drop))

    # -- requests --

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req.get("op")
        if op == "ping":
            return {"ok": True, "pid": os.getpid()}
        if op == "status":
            return {"ok": True, "hosts": [self.host_status(h) for h in self.hosts.values()]}
        if op == "shutdown":
            self.stopping = True
            return {"ok": True}
        host = self.hosts.get(str(req.get("host")))
        if host is None:
            return {"ok": False, "error": f"no lab host named {req.get('host')!r}"}
        if op == "reboot":
            pid = host.init_pid
            if pid is not None:
                os.kill(pid, signal.SIGINT)
            elif host.boot_at is None:
                self.boot(host)
            return {"ok": True}
        if op == "reset":
            self.kill(host)
            host.set_faults({})
            self.sync_listeners(host, signal_init=False)
            prepare_upper(host.paths, host.name, self.cfg)
            self.boot(host)
            return {"ok": True}
        if op == "fault":
            knob, value, off = str(req["knob"]), req.get("value"), bool(req["off"])
            return faults.apply(host, knob, value, off, lambda: self.sync_listeners(host))
        return {"ok": False, "error": f"unknown request {op!r}"}

    def host_status(self, host: Host) -> dict[str, Any]:
        return {
            "name": host.name,
            "address": host.address,
            "port": self.cfg.port,
            "state": host.state(),
            "boot_id": host.boot_id,
            "boots": host.boots,
            "init_pid": host.init_pid,
            "faults": host.faults,
        }

    def run(self) -> None:
        for host in self.hosts.values():
            self.boot(host)
        log(f"started {len(self.hosts)} hosts")
        pending_after_boot: set[str] = set(self.hosts)
        while not self.stopping:
            try:
                while True:
                    req, fut = self.requests.get_nowait()
                    try:
                        fut.set_result(self.handle(req))
                    except Exception as exc:  # reported to the caller, the lab stays up
                        log(f"request {req.get('op')} failed: {exc!r}")
                        fut.set_result({"ok": False, "error": str(exc)})
            except queue.Empty:
                pass
            self.tick()
            for host in self.hosts.values():
                if host.boot_at is not None:
                    pending_after_boot.add(host.name)
                elif host.name in pending_after_boot and host.ready():
                    pending_after_boot.discard(host.name)
                    self.after_boot(host)
            time.sleep(TICK_S)
        self.shutdown()

    def shutdown(self) -> None:
        log("shutting down")
        for host in self.hosts.values():
            if host.proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    host.proc.kill()
        for host in self.hosts.values():
            self.kill(host)
            for listener in (host.stall, host.relay):
                if listener is not None:
                    listener.close()


class _Handler(socketserver.StreamRequestHandler):
    supervisor: Supervisor

    def handle(self) -> None:
        line = self.rfile.readline()
        try:
            req = json.loads(line)
        except ValueError:
            self.wfile.write(b'{"ok": false, "error": "bad request"}\n')
            return
        fut: Future[dict[str, Any]] = Future()
        self.supervisor.requests.put((req, fut))
        reply = fut.result(timeout=300)
        self.wfile.write(json.dumps(reply).encode() + b"\n")


class _ControlServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class _LoggingHandler(SimpleHTTPRequestHandler):
    """Serves the repository and keeps an access log, as a real mirror's web server does
    (client, request line, status, body bytes sent): tests and bench/ count what a run
    fetched from it. A request's line is written once it is answered, so its bytes are
    what really went out (a transfer the client cut short counts what was sent)."""

    access_log: Path
    _status: str | None = None
    _sent = 0

    def handle_one_request(self) -> None:
        self._status, self._sent = None, 0
        try:
            super().handle_one_request()
        finally:
            if self._status is not None:
                self.log_message('"%s" %s %d', self.requestline, self._status, self._sent)

    def log_request(self, code: Any = "-", size: Any = "-") -> None:
        self._status = str(getattr(code, "value", code))  # logged with its bytes, above

    def copyfile(self, source: Any, outputfile: Any) -> None:
        while chunk := source.read(256 * 1024):
            outputfile.write(chunk)
            self._sent += len(chunk)

    def log_message(self, format: str, *args: Any) -> None:
        line = f"{self.address_string()} - - [{self.log_date_time_string()}] {format % args}\n"
        with _LOG_LOCK, open(self.access_log, "a") as fh:
            fh.write(line)


_LOG_LOCK = threading.Lock()


def serve_repo(cfg: LabConfig, access_log: Path) -> ThreadingHTTPServer:
    handler_class = type("_Handler", (_LoggingHandler,), {"access_log": access_log})
    handler = functools.partial(handler_class, directory=cfg.repo_dir)
    host, port = cfg.repo_address, cfg.repo_port
    ThreadingHTTPServer.allow_reuse_address = True
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    paths = LabPaths(Path(sys.argv[1]))
    cfg = paths.load_config()
    if cfg is None:
        sys.exit(f"no lab configuration in {paths.config}")
    sup = Supervisor(paths, cfg)
    signal.signal(signal.SIGTERM, lambda *_: setattr(sup, "stopping", True))
    httpd = serve_repo(cfg, paths.repo_access_log)
    with contextlib.suppress(FileNotFoundError):
        paths.socket.unlink()
    _Handler.supervisor = sup
    control = _ControlServer(str(paths.socket), _Handler)
    os.chmod(paths.socket, 0o600)
    threading.Thread(target=control.serve_forever, daemon=True).start()
    paths.pidfile.write_text(f"{os.getpid()}\n")
    log(f"serving {cfg.repo_dir} at {cfg.repo_url}")
    try:
        sup.run()
    finally:
        httpd.shutdown()
        control.shutdown()
        with contextlib.suppress(FileNotFoundError):
            paths.socket.unlink()
        with contextlib.suppress(FileNotFoundError):
            paths.pidfile.unlink()
        log("stopped")


if __name__ == "__main__":
    main()
