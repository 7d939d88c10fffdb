"""Keys as positions (jobs/keys.py): the published MD5 test vectors give
the hashed positions; integer types are used as they are."""
from samplegen.jobs import keys


def test_hashed_position_is_the_first_60_bits_of_md5():
    # RFC 1321, appendix A.5: MD5("abc") = 900150983cd24fb0d6963f7d28e17f72,
    # MD5("") = d41d8cd98f00b204e9800998ecf8427e
    assert keys.hashed_position("abc") == 0x900150983cd24fb
    assert keys.hashed_position("") == 0xd41d8cd98f00b20


def test_sql_expressions():
    assert keys.sql_position("`id`", "bigint") == "CAST(`id` AS BIGINT)"
    assert keys.is_integral("INT") and keys.is_integral("tinyint")
    assert not keys.is_integral("string") and not keys.is_integral("decimal(10,0)")
    assert "md5(CAST(`k` AS STRING))" in keys.sql_position("`k`", "string")


def test_row_count_reads_one_aggregate_over_the_keys():
    import pytest

    from samplegen.udfs.errors import ParameterError

    n = 5  # 0..4: sum 10, sum of squares 30
    assert keys.row_count("id", "t", (n, n, 0, 4, 10, 30)) == (5, True)
    assert keys.row_count("id", "t", (n, n, 0, 4, 10, 31)) == (5, False)   # a repeat
    assert keys.row_count("id", "t", (n, n, 1, 5, 15, 55)) == (5, False)   # shifted
    assert keys.row_count("name", "t", (n, n)) == (5, False)               # hashed keys
    for counts, words in (((0, 0), "no rows"), ((5, 4), "holds NULL"),
                          ((n, n, -2, 4, 10, 30), "negative integer")):
        with pytest.raises(ParameterError, match=words):
            keys.row_count("id", "table t", counts)
