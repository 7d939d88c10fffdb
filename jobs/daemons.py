"""Local server processes, for the development servers that make targets
start (the single-node Hadoop of :mod:`jobs.cluster`, the HiveServer2 of
``hive/server.py``): the Java they need, whether a recorded process is
alive, stopping it, and ports on 127.0.0.1."""
import os
import re
import shutil
import signal
import socket
import subprocess
import time


def check_java(what, error):
    """The real path of a Java 17+ ``java`` (PATH, else $JAVA_HOME); *error*
    (an exception class) naming *what* needs it otherwise."""
    java = shutil.which("java")
    if java is None and os.environ.get("JAVA_HOME"):
        candidate = os.path.join(os.environ["JAVA_HOME"], "bin", "java")
        java = candidate if os.access(candidate, os.X_OK) else None
    if java is None:
        raise error(f"Java is missing: {what} needs Java 17+; run 'make java' or install "
                    "openjdk-17-jre-headless")
    out = subprocess.run([java, "-version"], capture_output=True, text=True)
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    major = int(match.group(1)) if match else 0
    if major == 1 and match.group(2):
        major = int(match.group(2))
    if major < 17:
        raise error(f"Java {major or '?'} found at {java}, but {what} needs Java 17+; "
                    "run 'make java'")
    return os.path.realpath(java)


def alive(pid):
    """Whether process *pid* exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited child not yet reaped) is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return True


def stop(pid, grace=30):
    """SIGTERM, then after *grace* seconds SIGKILL; returns once *pid* is gone."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.time() + wait
        while time.time() < deadline:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    return
            except ChildProcessError:
                pass
            if not alive(pid):
                return
            time.sleep(0.2)


def tail(path, n=15):
    """The last *n* lines of a log file."""
    try:
        with open(path, "rb") as f:
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-n:])


def port_answers(port, host="127.0.0.1", timeout=1.0):
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
