-- samplegen: the join-based baseline (Cohen et al., as compared in section
-- V-D of the sample-generation paper), step 1: the assignments table.
--
-- One row per occurrence of an input row in a bootstrap sample:
--   sm_id   sample matrix
--   row_id  input row
--   sm_pos  the occurrence's relative position in the sample (64 bits, as
--           16 hex digits: Hive has no unsigned 64-bit integer, and fixed-
--           width hex sorts like the number)
-- The occurrences are drawn by the same sampling-UDF as bootstrap.hql, so
-- the baseline writes byte-identical samples.  Only the blocks of column 0
-- are read (one row per row-block: the assignment needs row ids only).
--
-- Variables (beeline: --hivevar NAME=VALUE):
--   table, assignments   block table to read, assignments table to (re)create
--   files, zip, python   as in bootstrap.hql
--   rows, cols, block_size, kind, seed, samples, size   as in bootstrap.hql

SET hive.script.operator.truncate.env=true;

ADD FILE ${hivevar:files}/${hivevar:zip};

DROP TABLE IF EXISTS ${hivevar:assignments};

CREATE TABLE ${hivevar:assignments} (
  sm_id  INT,
  row_id BIGINT,
  sm_pos STRING
)
ROW FORMAT DELIMITED FIELDS TERMINATED BY '\t' LINES TERMINATED BY '\n'
STORED AS TEXTFILE;

INSERT OVERWRITE TABLE ${hivevar:assignments}
SELECT TRANSFORM (h_index)
  USING '${hivevar:python} ${hivevar:zip} assign --udf bootstrap --params=samples=${hivevar:samples},size=${hivevar:size} --seed ${hivevar:seed} --rows ${hivevar:rows} --cols ${hivevar:cols} --block-size ${hivevar:block_size} --kind ${hivevar:kind}'
  AS (sm_id INT, row_id BIGINT, sm_pos STRING)
FROM ${hivevar:table}
WHERE v_index = 0;
