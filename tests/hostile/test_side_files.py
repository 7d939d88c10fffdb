"""Hostile tests of a run's side files (:mod:`samplegen.jobs.strata`): the
classes of a stratified run (``_strata.json``, ``.codes``, ``.table``), the
groups of a grouped one (``_groups.json``, ``.codes``), the weights of a
weighted one (``_weights.json``, ``.weights``, ``.chunks``), written by the
driver for its tasks, and the classes ``import --label`` records in a matrix
(``_label.json``, ``.codes``, ``.table``) for later runs.  Each is flipped,
truncated, lengthened, edited or deleted between the run's preparation and its
tasks (or, recorded, before the run that reads it), and must be refused with
one line naming the file (command line: status 2, nothing written; API:
InputError) -- never a sample drawn from changed classes or weights.  Also:
classes recorded before side files were checksummed are not trusted, and a
task reads and verifies only the pieces of a file that hold its rows."""
import json
import os

import numpy as np
import pytest

from samplegen.jobs import driver
from samplegen.jobs import strata as side_files
from samplegen.udfs.errors import InputError
from samplegen.udfs.strata import Strata
from samplegen.udfs.weighted import RowWeights

from ..conftest import NO_CONF, run_cli, sample_digests

ROWS = 3000
BLOCK = 256


@pytest.fixture(scope="module")
def matrices(tmp_path_factory):
    """The same rows imported twice: ``plain`` (no label recorded) and
    ``labelled`` (``--label y``: ``_label.*`` recorded).  Columns: ``a``
    (values), ``y`` (3 classes), ``g`` (10 groups), ``w`` (positive weights)."""
    base = tmp_path_factory.mktemp("side")
    rng = np.random.default_rng(11)
    X = np.column_stack([rng.normal(size=ROWS), rng.integers(0, 3, ROWS),
                         rng.integers(0, 10, ROWS), rng.random(ROWS) + 0.1])
    csv = str(base / "x.csv")
    np.savetxt(csv, X, delimiter=",", header="a,y,g,w", comments="")
    plain, labelled = str(base / "plain"), str(base / "labelled")
    driver.import_file(csv, plain, BLOCK)
    driver.import_file(csv, labelled, BLOCK, label="y")
    return {"plain": plain, "labelled": labelled, "X": X}


@pytest.fixture
def labelled(tmp_path, matrices):
    """A copy of the labelled matrix, for a test to damage."""
    import shutil
    path = str(tmp_path / "labelled")
    shutil.copytree(matrices["labelled"], path)
    return path


def _flip(path):
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0x01
    open(path, "wb").write(bytes(data))


def _truncate(path):
    data = open(path, "rb").read()
    open(path, "wb").write(data[:len(data) // 2])


def _lengthen(path):
    with open(path, "ab") as f:
        f.write(b"\0" * 8)


DAMAGES = {"flipped": _flip, "truncated": _truncate, "lengthened": _lengthen, "deleted": os.remove}

#: what each kind of run writes for its tasks: (command, base name, the files its tasks read)
RUNS = {
    "strata": (["kfold", "--k", 3, "--stratify", "y"], "_strata", [".json", ".codes", ".table"]),
    "groups": (["kfold", "--k", 3, "--groups", "g"], "_groups", [".json", ".codes"]),
    "weights": (["weighted", "--weights", "w", "--size", 100], "_weights", [".json", ".weights"]),
    "bootstrap": (["weighted", "--weights", "w", "--size", 100, "--replace"], "_weights",
                  [".chunks"]),
}
CASES = [(kind, suffix, damage) for kind, (_, _, suffixes) in RUNS.items()
         for suffix in suffixes for damage in DAMAGES]


def _damage_after_writing(monkeypatch, suffix, damage):
    """Make the driver damage ``<base><suffix>`` of the side it writes, after
    writing it and before the tasks read it; returns the list that receives
    the damaged path."""
    damaged, write_side = [], driver.write_side

    def write_then_damage(base, side, label):
        out = write_side(base, side, label)
        damaged.append(base + suffix)
        damage(base + suffix)
        return out

    monkeypatch.setattr(driver, "write_side", write_then_damage)
    return damaged


def _refused(capsys, argv, dest, named):
    """The command *argv* (into *dest*) exits 2 with one line naming the
    file ``named()`` gives, no traceback and nothing written."""
    code, out, err = run_cli(capsys, *argv, "--seed", 7, "-q")
    assert code == 2, err
    assert out == "" and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and named() in err, err
    assert not os.path.exists(dest)
    assert not [f for f in os.listdir(os.path.dirname(dest)) if f.startswith(".")]
    return err


def _one_code_changed(path):
    """Give the first row of class 0 of the class file *path* the class 1:
    a file of valid codes, but not the ones written."""
    codes = np.fromfile(path, "<u2")
    codes[np.flatnonzero(codes == 0)[0]] = 1
    codes.tofile(path)


# -- a run's own side files, between its preparation and its tasks -------------------
@pytest.mark.parametrize("kind,suffix,damage", CASES, ids=["-".join(c) for c in CASES])
def test_a_run_side_file_damaged_before_the_tasks_is_refused_naming_it(
        tmp_path, capsys, monkeypatch, matrices, kind, suffix, damage):
    argv, base_name, _ = RUNS[kind]
    damaged = _damage_after_writing(monkeypatch, suffix, DAMAGES[damage])
    dest = str(tmp_path / "out")
    _refused(capsys, [argv[0], matrices["plain"], dest, *argv[1:]], dest, lambda: damaged[0])
    assert damaged[0].endswith(f"/{base_name}{suffix}")


@pytest.mark.parametrize("kind,suffix,change", [
    ("strata", ".codes", _one_code_changed),
    ("groups", ".codes", _one_code_changed),
    ("strata", ".table", lambda p: _add_to(p, "<i8", 1, 1)),
    ("weights", ".weights", lambda p: _add_to(p, "<f8", 5, 100.0)),
    ("bootstrap", ".chunks", lambda p: _add_to(p, "<f8", 0, 100.0))])
def test_a_side_file_changed_to_other_valid_values_is_refused(
        tmp_path, capsys, monkeypatch, matrices, kind, suffix, change):
    """Classes, groups, running counts and weights that are valid but not
    the ones written would draw another sample without any error."""
    argv, _, _ = RUNS[kind]
    damaged = _damage_after_writing(monkeypatch, suffix, change)
    dest = str(tmp_path / "out")
    err = _refused(capsys, [argv[0], matrices["plain"], dest, *argv[1:]], dest,
                   lambda: damaged[0])
    assert "damaged side file" in err and "run the command again" in err


def _add_to(path, dtype, index, amount):
    values = np.fromfile(path, dtype)
    values[index] += amount
    values.tofile(path)


def _edit_json(path, edit):
    doc = json.load(open(path))
    edit(doc)
    open(path, "w").write(json.dumps(doc, indent=1))


@pytest.mark.parametrize("kind,edit", [
    ("strata", lambda d: d["counts"].reverse()),
    ("groups", lambda d: d["counts"].reverse()),
    ("weights", lambda d: d.update(exponent=d["exponent"] + 3))])
def test_a_hand_edited_side_json_is_refused(tmp_path, capsys, monkeypatch, matrices, kind, edit):
    """Valid JSON with other counts or another scale is damage, not a new side."""
    argv, _, _ = RUNS[kind]
    damaged = _damage_after_writing(monkeypatch, ".json", lambda p: _edit_json(p, edit))
    dest = str(tmp_path / "out")
    err = _refused(capsys, [argv[0], matrices["plain"], dest, *argv[1:]], dest,
                   lambda: damaged[0])
    assert "does not match its checksum" in err


def test_the_api_raises_input_error_naming_the_damaged_side_file(tmp_path, monkeypatch, matrices):
    damaged = _damage_after_writing(monkeypatch, ".codes", _one_code_changed)
    with pytest.raises(InputError, match="damaged side file .*/_strata.codes"):
        driver.generate(matrices["plain"], str(tmp_path / "out"), "kfold",
                        {"k": 3, "stratify": "y"}, 7, options=dict(NO_CONF))
    assert damaged and not os.path.exists(tmp_path / "out")


@pytest.mark.mrjob
def test_tasks_in_other_processes_refuse_a_damaged_side_file(tmp_path, capsys, monkeypatch,
                                                            matrices):
    """mrjob's local runner: the tasks, separate processes, find the damage
    and the driver reports it as the same one line."""
    damaged = _damage_after_writing(monkeypatch, ".codes", _one_code_changed)
    dest = str(tmp_path / "out")
    _refused(capsys, ["kfold", matrices["plain"], dest, "--k", 3, "--stratify", "y",
                      "--runner", "local", "--mrjob-conf", "", "--num-cores", 1], dest,
             lambda: damaged[0])


# -- classes recorded at import, read by later runs ----------------------------------
RECORDED_CASES = [(suffix, damage) for suffix in (".json", ".codes", ".table")
                  for damage in DAMAGES if (suffix, damage) != (".json", "deleted")]


@pytest.mark.parametrize("suffix,damage", RECORDED_CASES, ids=["-".join(c) for c in RECORDED_CASES])
def test_damaged_recorded_classes_are_refused_naming_the_file(tmp_path, capsys, labelled,
                                                              suffix, damage):
    path = os.path.join(labelled, "_label" + suffix)
    DAMAGES[damage](path)
    dest = str(tmp_path / "out")
    err = _refused(capsys, ["kfold", labelled, dest, "--k", 3, "--stratify", "y"], dest,
                   lambda: path)
    assert "_label.* files" in err   # how to mend it


def test_a_recorded_class_changed_to_another_class_is_refused(tmp_path, capsys, labelled):
    path = os.path.join(labelled, "_label.codes")
    _one_code_changed(path)
    dest = str(tmp_path / "out")
    _refused(capsys, ["holdout", labelled, dest, "--ratio", 0.7, "--stratify", "y"], dest,
             lambda: path)


def test_recorded_classes_of_another_column_are_refused(tmp_path, capsys, labelled):
    """A ``_matrix.json`` whose label was changed to another column (g) must
    not stratify by g with the classes recorded for y (the edit made as a
    matrix written before ``_matrix.json`` carried a checksum, which is read)."""
    meta_path = os.path.join(labelled, "_matrix.json")
    meta = json.load(open(meta_path))
    del meta["checksum"]
    meta = dict(meta, label="g", format="samplegen-matrix/1")
    open(meta_path, "w").write(json.dumps(meta, indent=1))
    dest = str(tmp_path / "out")
    err = _refused(capsys, ["kfold", labelled, dest, "--k", 3, "--stratify", "g"], dest,
                   lambda: os.path.join(labelled, "_label.json"))
    assert "column 'y'" in err and "label 'g'" in err


def test_recorded_classes_of_another_matrix_are_refused(tmp_path, capsys, labelled):
    """``_label.*`` files copied from a matrix of other rows are refused."""
    import shutil
    other = str(tmp_path / "other.csv")
    np.savetxt(other, np.column_stack([np.arange(ROWS - 10), np.arange(ROWS - 10) % 3, ] * 2),
               delimiter=",", header="a,y,g,w", comments="")
    driver.import_file(other, str(tmp_path / "other"), BLOCK, label="y")
    for suffix in (".json", ".codes", ".table"):
        shutil.copy(str(tmp_path / "other" / f"_label{suffix}"),
                    os.path.join(labelled, f"_label{suffix}"))
    dest = str(tmp_path / "out")
    err = _refused(capsys, ["kfold", labelled, dest, "--k", 3, "--stratify", "y"], dest,
                   lambda: os.path.join(labelled, "_label.json"))
    assert f"over {ROWS - 10} rows" in err and f"over {ROWS} rows" in err


def _kfold(capsys, src, dest):
    code, _, err = run_cli(capsys, "kfold", src, dest, "--k", 3, "--stratify", "y", "--seed", 7,
                           "-q")
    assert code == 0, err
    return sample_digests(dest)


def test_without_the_recorded_json_the_label_column_is_read(tmp_path, capsys, matrices,
                                                             labelled):
    """A matrix whose ``_label.json`` is gone is one without recorded
    classes: the run reads the label column (the same samples as a matrix
    imported without ``--label``), whatever the other ``_label`` files hold."""
    os.remove(os.path.join(labelled, "_label.json"))
    _one_code_changed(os.path.join(labelled, "_label.codes"))
    assert _kfold(capsys, labelled, tmp_path / "a") == _kfold(capsys, matrices["plain"],
                                                              tmp_path / "b")


def test_recorded_classes_without_checksums_are_not_trusted(tmp_path, capsys, matrices, labelled):
    """Classes recorded by a samplegen without checksums (format
    ``samplegen-strata/1``) are never read: a run reads the label column, so
    a changed code in them cannot change a sample."""
    json_path = os.path.join(labelled, "_label.json")
    doc = json.load(open(json_path))
    for field in ("files", "checksum"):
        doc.pop(field, None)
    doc["format"] = "samplegen-strata/1"
    open(json_path, "w").write(json.dumps(doc, indent=1))
    _one_code_changed(os.path.join(labelled, "_label.codes"))
    assert _kfold(capsys, labelled, tmp_path / "a") == _kfold(capsys, matrices["plain"],
                                                              tmp_path / "b")
    with pytest.raises(InputError, match="_label.json was written by a samplegen without "
                                         "checksums"):
        side_files.open_side(os.path.join(labelled, "_label"))


def test_intact_recorded_classes_give_the_samples_of_the_label_column(tmp_path, capsys,
                                                                      matrices):
    """The checks change no sample: recorded classes and a pre-pass agree."""
    assert _kfold(capsys, matrices["labelled"], tmp_path / "a") == _kfold(
        capsys, matrices["plain"], tmp_path / "b")


# -- reading by pieces ----------------------------------------------------------------
N_BIG = 200_003      # codes of 400 KB, weights of 1.6 MB: many pieces, a partial last one


@pytest.fixture(scope="module")
def big_sides(tmp_path_factory):
    base = tmp_path_factory.mktemp("big")
    rng = np.random.default_rng(5)
    labels = rng.integers(0, 7, N_BIG)
    weights = rng.random(N_BIG)
    strata, row_weights = Strata.of(labels), RowWeights.of(weights, "w")
    return {"strata": strata, "weights": row_weights, "values": weights,
            "strata_base": side_files.write_side(str(base / "s"), strata, "y"),
            "weights_base": side_files.write_side(str(base / "w"), row_weights, "w")}


def test_ranges_across_pieces_read_what_was_written(big_sides):
    """Any range, within a piece or across several, and the running counts
    before any row read back as written (after the random order of a task's
    reads as well as in order)."""
    strata = side_files.open_side(big_sides["strata_base"])
    weights = side_files.open_side(big_sides["weights_base"])
    want = big_sides["strata"]
    rng = np.random.default_rng(9)
    bounds = np.sort(rng.integers(0, N_BIG + 1, (200, 2)), axis=1).tolist()
    bounds += [[0, N_BIG], [N_BIG - 1, N_BIG], [8191, 8193], [16384, 16384]]
    for a, b in bounds:
        assert np.array_equal(strata.codes(a, b), want.codes(a, b)), (a, b)
        assert np.array_equal(strata.before(a), want.before(a)), a
        assert np.array_equal(weights.weights(a, b), big_sides["values"][a:b]), (a, b)
    assert np.array_equal(weights.chunk_totals(), big_sides["weights"].chunk_totals())


def test_a_task_reads_and_verifies_only_the_pieces_holding_its_rows(big_sides, monkeypatch):
    """A range of rows costs the pieces that hold it, not the whole file: a
    task of a large run does not hash the whole side file."""
    from samplegen.jobs.fs import LocalFS
    read, real = [], LocalFS.read_range

    def counted(self, uri, start, length):
        data = real(self, uri, start, length)
        read.append(len(data))
        return data

    def counted_whole(self, uri):
        data = real_whole(self, uri)
        read.append(len(data))
        return data

    real_whole = LocalFS.read_bytes
    monkeypatch.setattr(LocalFS, "read_range", counted)
    monkeypatch.setattr(LocalFS, "read_bytes", counted_whole)
    strata = side_files.open_side(big_sides["strata_base"])
    weights = side_files.open_side(big_sides["weights_base"])
    rows = 1000
    for start in (123_456, 50_000):
        strata.ranges(start, start + rows)
        weights.weights(start, start + rows)
    # each range lies in at most two pieces of each file, and a running count in one
    piece = side_files.piece_bytes(8 * N_BIG)
    json_bytes = sum(os.path.getsize(big_sides[b] + ".json")
                     for b in ("strata_base", "weights_base"))
    assert sum(read) <= json_bytes + 2 * (2 * piece + 1) * 3, read
    assert sum(read) < (2 + 8) * N_BIG / 4, read       # a quarter of the codes and weights


def test_a_piece_away_from_the_rows_read_is_not_needed_but_the_ones_read_are(
        tmp_path, big_sides):
    """Damage is found where it is read: a task whose rows lie in intact
    pieces runs; the first read of a damaged piece is refused naming the file."""
    import shutil
    base = str(tmp_path / "s")
    for suffix in (".json", ".codes", ".table"):
        shutil.copy(big_sides["strata_base"] + suffix, base + suffix)
    codes = np.fromfile(base + ".codes", "<u2")
    codes[N_BIG - 5] = (codes[N_BIG - 5] + 1) % 7
    codes.tofile(base + ".codes")
    strata = side_files.open_side(base)
    assert np.array_equal(strata.codes(0, 1000), big_sides["strata"].codes(0, 1000))
    with pytest.raises(InputError, match=f"damaged side file {base}.codes: bytes"):
        strata.codes(N_BIG - 10, N_BIG)


def test_pieces_grow_so_that_the_record_stays_small():
    """At most MAX_PIECES CRCs per file (4 bytes each in the JSON), pieces a
    power of two of at least PIECE_BYTES."""
    for size in (0, 1, side_files.PIECE_BYTES * side_files.MAX_PIECES,
                 side_files.PIECE_BYTES * side_files.MAX_PIECES + 1, 10 ** 12):
        piece = side_files.piece_bytes(size)
        assert piece >= side_files.PIECE_BYTES and piece & (piece - 1) == 0
        assert -(-size // piece) <= side_files.MAX_PIECES
        assert piece == side_files.PIECE_BYTES or -(-size // (piece // 2)) > \
            side_files.MAX_PIECES
