"""A warm interpreter that runs ``scalify-hlo`` for shell pipelines without re-importing it.

Each golden RUN line is a ``bash`` pipeline, and each ``scalify-hlo`` in it paid ~1.3 s of
imports (JAX, jaxlib's MLIR) for a rewrite of a few milliseconds: 150 of them were most of
the golden tests' time. ``CliZygote`` starts one interpreter that has imported the CLI and
listens on a Unix socket; a shim named ``scalify-hlo`` (standard library only, started with
``-S``) sends it its arguments, working directory and its own stdin, stdout and stderr
(``SCM_RIGHTS``), and the zygote forks a child that runs the CLI on those descriptors. The
shim exits with the child's status, so pipes, redirections and ``not`` behave as with the
installed console script. Several shims of one pipeline run at once: the zygote never waits
on one child before accepting the next (a child blocked writing into the next one's pipe
would deadlock it). The fuzz harness's fork mode does the same per case (``fuzz_cases.py``);
``tests/test_process_exit.py`` still runs the real console script.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.helpers import REPO_ROOT

_SHIM = r"""import json, os, socket, sys
connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
connection.connect(os.environ["SCALIFY_HLO_ZYGOTE"])
request = json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd()}).encode() + b"\n"
socket.send_fds(connection, [request], [0, 1, 2])
reply = b""
while not reply.endswith(b"\n"):
    chunk = connection.recv(64)
    if not chunk:
        sys.exit(70)  # the zygote went away: EX_SOFTWARE, no CLI status
    reply += chunk
sys.exit(int(reply))
"""

_ZYGOTE = r"""import json, os, select, socket, sys
import scalify_hlo.cli.main as cli_main

def child(request, fds):
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    sys.stdin = open(0, "r", closefd=False)
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False)
    sys.argv = ["scalify-hlo", *request["argv"]]
    try:
        code = cli_main.main()
    except SystemExit as end:
        code = end.code
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code if isinstance(code, int) else (0 if code is None else 1))

listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(sys.argv[1])
listener.listen(16)
print("ready", flush=True)
waiting = {}  # pidfd -> (pid, connection)
while True:
    ready, _, _ = select.select([listener, sys.stdin, *waiting], [], [])
    if sys.stdin in ready and not sys.stdin.readline():
        break  # the test session closed our stdin
    for fd in ready:
        if fd is listener:
            connection, _ = listener.accept()
            message, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
            while not message.endswith(b"\n"):
                more = connection.recv(1 << 16)
                if not more:
                    break
                message += more
            pid = os.fork()
            if pid == 0:
                listener.close()
                connection.close()
                child(json.loads(message), fds)
            for received in fds:
                os.close(received)
            waiting[os.pidfd_open(pid)] = (pid, connection)
        elif fd in waiting:
            pid, connection = waiting.pop(fd)
            _, status = os.waitpid(pid, 0)
            os.close(fd)
            code = os.waitstatus_to_exitcode(status)
            # a signal's death reads as the shell's 128 + N, as for the console script
            connection.sendall(b"%d\n" % (code if code >= 0 else 128 - code))
            connection.close()
"""


class CliZygote:
    """The zygote process and the directory whose ``scalify-hlo`` reaches it."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="scalify-zygote-"))
        self.socket_path = self.directory / "socket"
        shim = self.directory / "scalify-hlo"
        shim.write_text(f"#!{sys.executable} -S\n{_SHIM}")
        shim.chmod(0o755)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _ZYGOTE, str(self.socket_path)], cwd=REPO_ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the scalify-hlo zygote did not start")

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` with the shim first on ``PATH`` and the zygote's socket named."""
        return {**env, "PATH": os.pathsep.join([str(self.directory), env.get("PATH", "")]),
                "SCALIFY_HLO_ZYGOTE": str(self.socket_path)}

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        for path in self.directory.iterdir():
            path.unlink()
        self.directory.rmdir()
