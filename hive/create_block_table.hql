-- samplegen: a block table over a block-store matrix directory.
--
-- The table is EXTERNAL: dropping it leaves the files alone, and the same
-- part files serve MapReduce, Spark and Hive.  Each line of a part file is
-- one block: h_index TAB v_index TAB base64 payload (docs/ARCHITECTURE.md).
-- _matrix.json and the .tmp-* files are hidden from Hive (names starting
-- with _ or .).  The samplegen.* properties record the matrix's shape: the
-- sampling scripts need them (samplegen hive table sets them from
-- _matrix.json).
--
-- Variables (beeline: --hivevar NAME=VALUE):
--   table       name of the table to create
--   location    the matrix directory, as the server sees it (hdfs://..., /path)
--   rows, cols, block_size, kind   the matrix's shape (kind: dense | sparse)

CREATE EXTERNAL TABLE ${hivevar:table} (
  h_index INT,
  v_index INT,
  block   STRING
)
ROW FORMAT DELIMITED FIELDS TERMINATED BY '\t' LINES TERMINATED BY '\n'
STORED AS TEXTFILE
LOCATION '${hivevar:location}'
TBLPROPERTIES ('samplegen.rows' = '${hivevar:rows}', 'samplegen.cols' = '${hivevar:cols}',
               'samplegen.block_size' = '${hivevar:block_size}',
               'samplegen.kind' = '${hivevar:kind}');
