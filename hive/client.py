"""pyhive connections: ``hive://`` URLs, statements, one-line errors.

URL: ``hive://[USER@]HOST[:PORT][/DATABASE][?KEY=VALUE&...]`` (port 10000
and database ``default`` by default).  A password (LDAP, CUSTOM) comes from
``$SAMPLEGEN_HIVE_PASSWORD``, never from the URL: URLs end up in run
manifests and shell histories.  Query keys:

* ``auth``: pyhive's authentication mechanism (NONE, NOSASL, LDAP, KERBEROS,
  CUSTOM); ``kerberos_service_name`` for KERBEROS;
* ``files``: a directory the *server* can read where samplegen puts the zip
  its TRANSFORM scripts run from (default ``$SAMPLEGEN_HIVE_FILES``, else
  ``~/.cache/samplegen/hive``, which only a server on this machine sees);
* ``python``: the Python the scripts run with on the nodes (default
  ``python3``);
* ``records``: ``chunks`` (default) or ``rows`` (one row per occurrence).

Errors are :class:`HiveError` with one line: what failed and the server's own
message (its first line); a samplegen error raised inside a TRANSFORM script
(bad input) comes back as that error's message.
"""
import logging
import os
import re
import urllib.parse

from samplegen.jobs.engines.task_errors import error_in
from samplegen.udfs.errors import ParameterError, SamplegenError

from . import sql

DEFAULT_PORT = 10000
_HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,253})?")
_AUTH = ("NONE", "NOSASL", "LDAP", "KERBEROS", "CUSTOM")
_OPTIONS = ("auth", "kerberos_service_name", "files", "python", "records")


class HiveError(SamplegenError):
    """Connection or query failure, reported in one line."""


def parse_url(url):
    """``dict(host, port, database, username)`` plus the query options."""
    if not url:
        raise ParameterError("runner 'hive' needs --hive-url hive://HOST:PORT/DB")
    if not isinstance(url, str) or any(c.isspace() or not c.isprintable() for c in url):
        # urlsplit would drop tabs and newlines silently: another database, another option
        raise ParameterError(f"--hive-url {url!r} holds whitespace or control characters; "
                             "write it as hive://HOST:PORT/DB (percent-encode a space)")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "hive":
        raise ParameterError(f"--hive-url must look like hive://HOST:PORT/DB, got {url!r}")
    host = parts.hostname or ""
    if not _HOST.fullmatch(host):
        raise ParameterError(f"invalid host in --hive-url {url!r}")
    try:
        port = parts.port or DEFAULT_PORT
    except ValueError:
        raise ParameterError(f"invalid port in --hive-url {url!r}") from None
    database = parts.path.strip("/") or "default"
    sql.identifier(database, "database name in --hive-url", qualified=False)
    out = {"host": host, "port": port, "database": database,
           "username": urllib.parse.unquote(parts.username) if parts.username else None}
    if parts.password:
        raise ParameterError("put the HiveServer2 password in $SAMPLEGEN_HIVE_PASSWORD, "
                             "not in --hive-url")
    for key, values in urllib.parse.parse_qs(parts.query, keep_blank_values=True).items():
        if key not in _OPTIONS:
            raise ParameterError(f"unknown option {key!r} in --hive-url (known: "
                                 f"{', '.join(_OPTIONS)})")
        out[key] = values[-1]
    if "auth" in out and out["auth"].upper() not in _AUTH:
        raise ParameterError(f"auth must be one of {', '.join(_AUTH)}, got {out['auth']!r}")
    if "records" in out and out["records"] not in ("chunks", "rows"):
        raise ParameterError(f"records must be chunks or rows, got {out['records']!r}")
    return out


def server_message(exc):
    """The server's message in a pyhive / thrift exception (may be multi-line)."""
    for arg in getattr(exc, "args", ()):
        status = getattr(arg, "status", None)
        message = getattr(status, "errorMessage", None) or getattr(arg, "errorMessage", None)
        if message:
            return message
    return str(exc) or type(exc).__name__


def _first_line(text, limit=500):
    text = text.strip()
    for prefix in ("Error running query: ", "org.apache.spark.SparkException: "):
        if text.startswith(prefix):
            text = text[len(prefix):]
    line = text.splitlines()[0] if text else ""
    line = line.replace("\\n", " ").strip()
    return line if len(line) <= limit else line[:limit - 3] + "..."


def query_error(exc, what):
    """The error to raise for a failed statement."""
    message = server_message(exc)
    # a TRANSFORM script's error, by the engines' protocol (the server may
    # quote the script's stderr with escaped line ends)
    reported = error_in(message.replace("\\n", "\n"),
                        lambda cause: HiveError(f"{what} failed on HiveServer2: {cause}"))
    if reported is not None:
        return reported
    return HiveError(f"{what} failed on HiveServer2: {_first_line(message)}")


class Client:
    """One pyhive connection (one HiveServer2 session)."""

    def __init__(self, url):
        self.url = url
        self.config = parse_url(url)
        self.conn = None
        self.cursor = None

    def __enter__(self):
        self.connect()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def connect(self):
        try:
            from pyhive import hive
        except ImportError as exc:
            raise ParameterError(f"runner 'hive' needs pyhive: pip install "
                                 f"'pyhive[hive_pure_sasl]' ({exc})") from None
        c = self.config
        kwargs = {"host": c["host"], "port": c["port"], "database": c["database"],
                  "username": c["username"] or "samplegen"}
        if c.get("auth"):
            kwargs["auth"] = c["auth"].upper()
        if os.environ.get("SAMPLEGEN_HIVE_PASSWORD"):
            kwargs["password"] = os.environ["SAMPLEGEN_HIVE_PASSWORD"]
        if c.get("kerberos_service_name"):
            kwargs["kerberos_service_name"] = c["kerberos_service_name"]
        thrift_log = logging.getLogger("thrift")
        level = thrift_log.level
        if not logging.getLogger().isEnabledFor(logging.INFO):
            thrift_log.setLevel(logging.CRITICAL + 1)  # we report the failure ourselves
        try:
            self.conn = hive.connect(**kwargs)
            self.cursor = self.conn.cursor()
        except Exception as exc:  # thrift / socket / sasl errors
            raise HiveError(f"cannot connect to HiveServer2 at {c['host']}:{c['port']}: "
                            f"{_first_line(server_message(exc))}") from None
        finally:
            thrift_log.setLevel(level)
        return self

    def close(self):
        for obj in (self.cursor, self.conn):
            try:
                if obj is not None:
                    obj.close()
            except Exception:
                pass
        self.cursor = self.conn = None

    def execute(self, statement, fetch=True):
        """Run one statement; returns its rows (a list) when it has any."""
        what = statement.split(None, 2)
        what = " ".join(what[:2]).upper() if what else "statement"
        try:
            self.cursor.execute(statement)
            if not fetch or self.cursor.description is None:
                return []
            return self.cursor.fetchall()
        except SamplegenError:
            raise
        except Exception as exc:
            raise query_error(exc, what) from None

    def run_script(self, text):
        """Run every statement of a rendered script; returns the last one's rows."""
        rows = []
        for statement in sql.statements(text):
            rows = self.execute(statement)
        return rows

    def table_exists(self, name):
        sql.identifier(name)
        db, _, table = name.rpartition(".")
        rows = self.execute(f"SHOW TABLES IN {db} LIKE '{table}'" if db
                            else f"SHOW TABLES LIKE '{table}'")
        return any(table.lower() in (str(v).lower() for v in row) for row in rows)

    def table_location(self, name):
        """The table's storage location, as the server reports it."""
        sql.identifier(name)
        for row in self.execute(f"DESCRIBE FORMATTED {name}"):
            key = str(row[0] or "").strip().rstrip(":")
            if key == "Location" and row[1]:
                return str(row[1]).strip()
        raise HiveError(f"table {name} has no storage location (is it a view?)")
