"""Matrix directories: writing, reading, completeness, atomic outputs."""
import os

import numpy as np
import pytest

from samplegen.jobs import driver
from samplegen.jobs.store import Matrix, MatrixWriter, StagedOutput, block_list, scan_part
from samplegen.udfs.errors import InputError, OutputError


@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_written_matrix_reads_back(tmp_path, kind):
    data = np.random.default_rng(1).standard_normal((257, 30))
    data[data < 0.3] = 0
    writer = MatrixWriter(str(tmp_path / "m"), 30, 16, kind, part_bytes=20000)
    for a in range(0, 257, 50):          # rows arrive in arbitrary chunks
        writer.add_rows(data[a:a + 50])
    meta = writer.close()
    assert (meta["rows"], meta["cols"], meta["nnz"]) == (257, 30, np.count_nonzero(data))
    assert len([f for f in os.listdir(tmp_path / "m") if f.startswith("part-")]) > 1
    matrix = Matrix.open(str(tmp_path / "m"))
    ids, back = matrix.to_numpy()
    assert np.array_equal(back, data) and np.array_equal(ids, np.arange(257))
    assert matrix.blocks() == block_list(257, 30, 16)


def test_block_list_shapes():
    blocks = block_list(10, 5, 4)
    assert blocks[0] == [0, 0, 4, 4] and blocks[1] == [0, 1, 4, 1] and blocks[-1] == [2, 1, 2, 1]


def test_fingerprint_depends_on_content(tmp_path):
    a = driver.make_matrix(str(tmp_path / "a"), 100, 3, 10, seed=1)
    b = driver.make_matrix(str(tmp_path / "b"), 100, 3, 10, seed=1)
    c = driver.make_matrix(str(tmp_path / "c"), 100, 3, 10, seed=2)
    assert a["fingerprint"] == b["fingerprint"] != c["fingerprint"]


def test_missing_block_is_reported(tmp_path):
    path = str(tmp_path / "m")
    driver.make_matrix(path, 100, 3, 10)
    part = os.path.join(path, "part-00000")
    lines = open(part, "rb").readlines()
    open(part, "wb").writelines(lines[:-1])
    with pytest.raises(InputError, match="incomplete"):
        Matrix.open(path).to_numpy()


@pytest.mark.parametrize("content,match", [(None, "has no _matrix.json"),
                                           (b"{not json", "corrupt"),
                                           (b'{"rows": 1}', "missing")])
def test_bad_metadata(tmp_path, content, match):
    path = tmp_path / "m"
    path.mkdir()
    if content is not None:
        (path / "_matrix.json").write_bytes(content)
    with pytest.raises(InputError, match=match):
        Matrix.open(str(path))


def test_staged_output_is_all_or_nothing(tmp_path):
    dest = str(tmp_path / "out")
    with pytest.raises(RuntimeError):
        with StagedOutput(dest) as staging:
            open(os.path.join(staging, "x"), "w").write("partial")
            raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []
    with StagedOutput(dest) as staging:
        open(os.path.join(staging, "x"), "w").write("one")
    assert sorted(os.listdir(dest)) == ["_SUCCESS", "x"]
    with pytest.raises(OutputError, match="not empty"):
        StagedOutput(dest)
    with StagedOutput(dest, overwrite=True) as staging:
        open(os.path.join(staging, "y"), "w").write("two")
    assert sorted(os.listdir(dest)) == ["_SUCCESS", "y"]
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_output_inside_input_is_refused(tmp_path):
    with pytest.raises(OutputError, match="overlaps"):
        StagedOutput(str(tmp_path / "m" / "sub"), inputs=[str(tmp_path / "m")])


@pytest.mark.parametrize("direct", ["1", "0"])
def test_direct_writer_writes_exactly_the_bytes(tmp_path, monkeypatch, direct):
    """Part files bypass the page cache (O_DIRECT, aligned pieces, buffered
    tail) unless SAMPLEGEN_DIRECT_IO=0; either way the file holds exactly the
    bytes written, whatever the sizes of the pieces, and appears only on close."""
    from samplegen.jobs import fs
    monkeypatch.setenv("SAMPLEGEN_DIRECT_IO", direct)
    rng = np.random.default_rng(5)
    sizes = [[], [0], [1], [4095], [4096], [4097], [fs._DirectLocalWriter.CHUNK - 1, 2, 3],
             [fs._DirectLocalWriter.CHUNK, 1], list(rng.integers(0, 3 << 20, 9))]
    for i, lens in enumerate(sizes):
        pieces = [rng.bytes(int(n)) for n in lens]
        path = str(tmp_path / f"part-{i}")
        writer = fs.LOCAL.open_atomic(path, direct=True)
        assert (isinstance(writer, fs._DirectLocalWriter)
                == (direct == "1" and hasattr(os, "O_DIRECT")))
        for piece in pieces:
            writer.write(piece)
        assert not os.path.exists(path)
        writer.close()
        with open(path, "rb") as f:
            assert f.read() == b"".join(pieces), lens
    writer = fs.LOCAL.open_atomic(str(tmp_path / "aborted"), direct=True)
    writer.write(rng.bytes(10000))
    writer.abort()
    assert sorted(os.listdir(tmp_path)) == sorted(f"part-{i}" for i in range(len(sizes)))


def test_direct_writers_sharing_threads_and_buffers_keep_their_own_bytes(tmp_path, monkeypatch):
    """Writers share the process's writing threads and spare buffers: eight
    at once in four threads, some aborted half-way (their buffers go back
    to be reused), each file holds exactly its own bytes, and a forked
    child writes with threads of its own."""
    import threading

    from samplegen.jobs import fs
    monkeypatch.setenv("SAMPLEGEN_DIRECT_IO", "1")
    chunk = fs._DirectLocalWriter.CHUNK
    expected, failures = {}, []

    def write(t):
        rng = np.random.default_rng(t)
        try:
            for i in range(4):
                pieces = [rng.bytes(int(n)) for n in rng.integers(1, chunk, 5)]
                path = str(tmp_path / f"part-{t}-{i}")
                writer = fs.LOCAL.open_atomic(path, direct=True)
                for piece in pieces:
                    writer.write(piece)
                if i == 1:
                    writer.abort()
                    continue
                writer.close()
                expected[path] = b"".join(pieces)
        except BaseException as exc:     # pragma: no cover - the assertion below names it
            failures.append(exc)
    threads = [threading.Thread(target=write, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(p) for p in expected)
    for path, data in expected.items():
        with open(path, "rb") as f:
            assert f.read() == data, path
    if not hasattr(os, "fork"):
        return
    child_path = str(tmp_path / "child")
    pid = os.fork()
    if pid == 0:     # the child: no thread of the parent's is there to write
        status = 1
        try:
            writer = fs.LOCAL.open_atomic(child_path, direct=True)
            writer.write(b"c" * (3 * chunk + 5))
            writer.close()
            status = 0
        finally:
            os._exit(status)
    import signal
    import time
    deadline = time.monotonic() + 60
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child's direct write did not finish in 60 s")
    assert done[1] == 0
    with open(child_path, "rb") as f:
        assert f.read() == b"c" * (3 * chunk + 5)


def test_direct_writer_falls_back_where_refused(tmp_path, monkeypatch):
    """A filesystem that refuses O_DIRECT writes (EINVAL) gets ordinary writes."""
    import errno

    from samplegen.jobs import fs
    if not hasattr(os, "O_DIRECT"):
        pytest.skip("no O_DIRECT on this platform")
    real_write = os.write

    def refuse_direct(fd, data):
        import fcntl
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_write(fd, data)
    monkeypatch.setattr(os, "write", refuse_direct)
    data = np.random.default_rng(6).bytes(20 << 20)
    writer = fs.LOCAL.open_atomic(str(tmp_path / "part"), direct=True)
    writer.write(data)
    writer.close()
    assert not writer.direct
    with open(tmp_path / "part", "rb") as f:
        assert f.read() == data


def test_local_index_reads_headers_only_and_matches_the_lines(tmp_path):
    """Local part files are indexed by hopping from header to header; the
    index equals the one read line by line (dense and sparse), and a line
    that is not a block line is reported with its byte offset."""
    for name, density in [("d", None), ("s", 0.2)]:
        path = str(tmp_path / name)
        driver.make_matrix(path, 300, 70, 32, density=density, seed=3)
        m = Matrix.open(path)
        by_lines = {}
        for part in m.part_uris():
            streamed = list(m._stream_lines(part))
            assert streamed == list(scan_part(part))
            for h, v, offset, length, *_ in streamed:
                by_lines[(h, v)] = (part, offset, length)
        assert m.index() == by_lines and len(by_lines) == len(m.blocks())
    part = Matrix.open(path).part_uris()[0]
    data = open(part, "rb").read()
    second = data.index(b"\n") + 1
    open(part, "wb").write(data[:second] + b"not a block line\n" + data[second:])
    with pytest.raises(InputError, match=f"bad line at byte {second}$"):
        Matrix.open(path).index()
