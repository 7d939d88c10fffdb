"""HiveQL text: validated values, ``${hivevar:...}`` rendering, statements.

Nothing reaches a HiveQL statement unchecked.  Every variable of a script has
a *kind*, and a value is rendered only after it has been validated for that
kind:

* ``identifier``: a table or database name, ``[A-Za-z_][A-Za-z0-9_]*`` (at
  most 128 characters), optionally qualified once (``db.table``);
* ``int`` / ``float``: formatted from Python numbers (``bool`` refused,
  floats must be finite);
* ``path``: an absolute path or a ``scheme:`` URI made of a conservative
  character set (no quotes, backslashes, whitespace, ``;``, ``$``, ``..`` or
  control characters), so it is safe inside a single-quoted literal *and* as
  one word of a TRANSFORM command line;
* ``word``: one word of a TRANSFORM command line (a UDF name, ``key=value``
  parameters), from the same set, not starting with ``-`` or ``~`` (no
  option to the script, no tilde expansion by Spark's ``bash -c``);
* ``program``: the interpreter's name or path (no ``=``, ``,`` or ``:``);
* ``columns`` / ``typed_columns``: backquoted column names (identifiers),
  comma-separated, the latter each with a type of letters, digits and
  ``_ < > , : ( )`` (``array<int>``, ``decimal(10,2)``);
* ``position``: a key's position, exactly as :func:`jobs.keys.sql_position`
  writes it for a backquoted identifier.

The scripts in ``hive/*.hql`` are plain HiveQL with ``${hivevar:NAME}``
placeholders: beeline substitutes them from ``--hivevar NAME=VALUE`` on the
server side; :func:`render` substitutes validated values on the client side
(what ``--runner hive`` and ``samplegen hive`` send through pyhive).
"""
import math
import os
import re

from samplegen.jobs import keys
from samplegen.udfs.errors import ParameterError

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_QUALIFIED = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]{0,127}\.)?[A-Za-z_][A-Za-z0-9_]{0,127}")
# URIs and paths: letters, digits and  _ . / : @ + = , % ~ -
_PATH = re.compile(r"(?:/|[A-Za-z][A-Za-z0-9+.-]*:)[A-Za-z0-9_./:@+=,%~-]{0,4096}")
_WORD = re.compile(r"[A-Za-z0-9_./][A-Za-z0-9_./:@+=,%~-]{0,1023}")
_PROGRAM = re.compile(r"[A-Za-z0-9_./][A-Za-z0-9_./+-]{0,1023}")
_VAR = re.compile(r"\$\{hivevar:([A-Za-z_][A-Za-z0-9_]*)\}")

SCRIPT_DIR = os.path.dirname(os.path.abspath(__file__))


class UnsafeValue(ParameterError):
    """A value that cannot be placed into HiveQL safely."""


def identifier(value, what="table name", qualified=True):
    """A validated (optionally ``db.``-qualified) identifier."""
    pattern = _QUALIFIED if qualified else IDENTIFIER
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise UnsafeValue(f"invalid {what} {value!r}: use letters, digits and _ "
                          f"(not starting with a digit)"
                          f"{', optionally db.name' if qualified else ''}")
    return value


def integer(value, what="value", lo=None, hi=None):
    if isinstance(value, bool) or not isinstance(value, int):
        raise UnsafeValue(f"{what} must be an integer, got {value!r}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise UnsafeValue(f"{what} out of range: {value}")
    return str(int(value))


def number(value, what="value"):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UnsafeValue(f"{what} must be a number, got {value!r}")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise UnsafeValue(f"{what} must be finite, got {value!r}")
        return repr(value)
    return str(value)


def path(value, what="path"):
    """A path or URI that is safe in a quoted literal and as a command word."""
    if not isinstance(value, str) or not _PATH.fullmatch(value) or ".." in value.split("/"):
        raise UnsafeValue(f"{what} {value!r} cannot be used in HiveQL: give an absolute path "
                          "or a scheme: URI of letters, digits and _ . / : @ + = , % ~ - "
                          "(no spaces, quotes, '..' or $)")
    return value


def word(value, what="argument"):
    if not isinstance(value, str) or not _WORD.fullmatch(value):
        raise UnsafeValue(f"{what} {value!r} cannot be passed to a TRANSFORM script: use only "
                          "letters, digits and _ . / : @ + = , % ~ -")
    return value


def program(value, what="python"):
    if not isinstance(value, str) or not _PROGRAM.fullmatch(value):
        raise UnsafeValue(f"{what} {value!r} must be a program name or path (letters, digits, "
                          "_ . / + -)")
    return value


def params(value, what="params"):
    """``KEY=VALUE,...`` for a TRANSFORM command line; may be empty."""
    return value if value == "" else word(value, what)


_COLUMN = r"`[A-Za-z_][A-Za-z0-9_]{0,127}`"
_COLUMNS = re.compile(rf"{_COLUMN}(?:,{_COLUMN}){{0,4095}}")
_TYPE = r"[A-Za-z][A-Za-z0-9_<>,:() ]{0,4095}"
_TYPED = re.compile(rf"{_COLUMN} {_TYPE}")


def columns(value, what="columns"):
    if not isinstance(value, str) or not _COLUMNS.fullmatch(value):
        raise UnsafeValue(f"{what} {value!r} must be backquoted column names (letters, digits, "
                          "_), comma-separated")
    return value


def typed_columns(value, what="typed columns"):
    """Backquoted names, each with its type, comma-separated; split where a
    comma is followed by a backquote (types may hold commas:
    ``decimal(10,2)``, ``struct<a:int,b:int>``)."""
    items = value.split(",`") if isinstance(value, str) else None
    if not items or not all(_TYPED.fullmatch(item if i == 0 else "`" + item)
                            for i, item in enumerate(items)):
        raise UnsafeValue(f"{what} {value!r} must be backquoted column names, each with a type "
                          "of letters, digits and _ < > , : ( )")
    return value


def position(value, what="position"):
    column = re.search(r"`[^`]*`", value) if isinstance(value, str) else None
    if column is None or value not in (keys.sql_position(column.group(0), "bigint"),
                                       keys.sql_position(column.group(0), "string")):
        raise UnsafeValue(f"{what} {value!r} is not a key position of samplegen.jobs.keys")
    columns(column.group(0), what)
    return value


CHECKS = {"identifier": identifier, "int": integer, "number": number, "path": path,
          "word": word, "params": params, "program": program, "columns": columns,
          "typed_columns": typed_columns, "position": position}


def variables(text):
    """Names of the ``${hivevar:...}`` placeholders in *text*, in order."""
    seen = []
    for name in _VAR.findall(text):
        if name not in seen:
            seen.append(name)
    return seen


def render(text, values, kinds):
    """Substitute validated *values* for the placeholders of *text*.

    *kinds* maps every variable to its kind (see :data:`CHECKS`); a
    placeholder without a value or a kind is an error, and so is a value
    for a variable the text does not use.
    """
    names = variables(text)
    missing = [n for n in names if n not in values]
    if missing:
        raise ParameterError(f"HiveQL script needs variable(s) {', '.join(missing)}")
    unused = sorted(set(values) - set(names))
    if unused:
        raise ParameterError(f"HiveQL script does not use variable(s) {', '.join(unused)}")
    rendered = {}
    for name in names:
        kind = kinds.get(name)
        if kind not in CHECKS:
            raise ParameterError(f"HiveQL variable {name!r} has no declared kind")
        rendered[name] = CHECKS[kind](values[name], what=name.replace("_", " "))
    return _VAR.sub(lambda m: rendered[m.group(1)], text)


def load_script(name):
    """The text of ``hive/<name>.hql``."""
    with open(os.path.join(SCRIPT_DIR, name + ".hql"), encoding="utf-8") as f:
        return f.read()


def statements(text):
    """Split a script into statements at ``;`` outside quotes and comments;
    comment-only statements are dropped, comments inside statements kept
    out of the result."""
    out, current, i, n = [], [], 0, len(text)
    quote = None
    while i < n:
        c = text[i]
        if quote:
            current.append(c)
            if c == "\\" and i + 1 < n:
                current.append(text[i + 1])
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"`":
            quote = c
            current.append(c)
        elif c == "-" and text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif c == ";":
            stmt = "".join(current).strip()
            if stmt:
                out.append(stmt)
            current = []
        else:
            current.append(c)
        i += 1
    stmt = "".join(current).strip()
    if stmt:
        out.append(stmt)
    return out


def quoted(value):
    """A single-quoted HiveQL string literal of an already validated value."""
    if "'" in value or "\\" in value:
        raise UnsafeValue(f"value {value!r} cannot be quoted safely")
    return "'" + value + "'"
