"""Local server processes, for the development servers that make targets
start (the single-node Hadoop of :mod:`jobs.cluster`, the HiveServer2s of
``hive/server.py``): the Java they need, their jars (resolved by Maven from a
pinned pom, linked into a directory), whether a recorded process is alive,
stopping it, and ports on 127.0.0.1."""
import contextlib
import hashlib
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


def check_maven(what, error):
    """The ``mvn`` command; *error* (an exception class) naming *what* needs
    it when Maven is missing."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise error(f"Maven is missing: {what} resolves its jars with mvn; "
                    "run 'make maven' or install the maven package")
    return mvn


def _sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def maven_classpath(pom, cache, what, error, log=print, size=""):
    """The artifacts of *pom* (a list of paths in ~/.m2), resolved with
    Maven (``dependency:build-classpath``) the first time and whenever the
    pom changes; cached in the directory *cache* (``classpath.txt`` and the
    pom's digest ``classpath.pom-sha256``).  *what* names the jars in
    messages ("the Hadoop jars"); *error*: the exception class of a failure;
    *size*: what the first resolution downloads, for the progress message."""
    if not os.path.exists(pom):
        raise error(f"{pom} is missing: {what} are listed there")
    listing = os.path.join(cache, "classpath.txt")
    key_file = os.path.join(cache, "classpath.pom-sha256")
    key = _sha256(pom)
    try:
        with open(key_file) as f:
            cached = f.read().strip() == key
        with open(listing) as f:
            jars = [j for j in f.read().strip().split(os.pathsep) if j]
        if cached and jars and all(os.path.exists(j) for j in jars):
            return jars
    except OSError:
        pass
    mvn = check_maven(what, error)
    os.makedirs(cache, exist_ok=True)
    out = listing + ".tmp"
    log(f"resolving {what} of {pom} with Maven"
        + (f" (the first time downloads about {size} into ~/.m2)" if size else ""))
    start = time.time()
    proc = subprocess.run([mvn, "-q", "-B", "-f", pom, "dependency:build-classpath",
                           f"-Dmdep.outputFile={out}"], capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "ERROR" in ln]
        raise error(f"Maven could not resolve {what}: "
                    + (lines[0] if lines else proc.stderr.strip()[-500:]))
    os.replace(out, listing)
    with open(key_file, "w") as f:
        f.write(key + "\n")
    log(f"resolved in {time.time() - start:.0f} s")
    with open(listing) as f:
        return [j for j in f.read().strip().split(os.pathsep) if j]


def link_jars(directory, jars):
    """*directory* holds one link per jar of *jars* and nothing else (a JVM's
    classpath ``directory/*``); a jar whose file name another jar already
    has is linked under its whole path.  Left alone when it already links
    exactly these jars (a running JVM may have it open); returns whether it
    changed."""
    wanted = sorted(os.path.realpath(j) for j in jars)
    if os.path.isdir(directory) and sorted(
            os.path.realpath(os.path.join(directory, n)) for n in os.listdir(directory)) \
            == wanted:
        return False
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    for jar in jars:
        name = os.path.basename(jar)
        if os.path.lexists(os.path.join(directory, name)):  # same file name, another group
            name = jar.replace(os.sep, "_")
        os.symlink(jar, os.path.join(directory, name))
    return True


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


@contextlib.contextmanager
def one_at_a_time(directory):
    """While the block runs, no other process holds the same work directory:
    two ``up`` of one server at a time take turns (a lock file in it)."""
    import fcntl
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "up.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def stop_recorded(state, files, name, where, log):
    """Stop the server whose ``(pid, port)`` *state* its work directory
    records (None: not running) and remove the *files* that record it."""
    if state is None:
        log(f"{name} is not running" + (f" (from {where})" if os.path.isdir(where) else ""))
    else:
        stop(state[0])
        log(f"stopped {name} (pid {state[0]})")
    for path in files:
        if os.path.exists(path):
            os.remove(path)
