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
