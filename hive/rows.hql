-- samplegen: samples of an ordinary table (one row per row, any columns),
-- every decision keyed by a column, into a result table: the source's columns
-- PARTITIONED BY (sample STRING), one partition per sample.
--
-- Variables (beeline: --hivevar NAME=VALUE; `samplegen hive holdout TABLE
-- RESULT --key COL ... --print` prints this script with every variable filled
-- in, and the views of the samples after it):
--   table          the source table
--   result         the result table to create (it must not exist)
--   columns        the source's columns, backquoted, comma-separated:
--                  `id`,`name`,`tags`
--   typed_columns  the same with their types: `id` bigint,`name` string,`tags` array<int>
--   position       the key's position (samplegen's jobs/keys.py): CAST(`id` AS BIGINT)
--                  for an integer key, else
--                  CAST(conv(substr(md5(CAST(`name` AS STRING)), 1, 15), 16, 10) AS BIGINT)
--   files, zip     directory holding the samplegen zip, and its file name
--   python         a Python with numpy on the nodes (python3)
--   udf, params    the sampling-UDF (holdout, kfold, bootstrap, module:function)
--                  and its parameters (ratio=0.8,repeats=10)
--   seed           random seed, 0 <= seed < 2**64
--   n_rows         the UDF's number of rows: the table's row count (bootstrap:
--                  the keys must then be the row ids 0..n_rows-1; user UDFs),
--                  or 9223372036854775807 (holdout, kfold)
--   strata         the rows' classes for a stratified run (keys: the row ids): the
--                  base path of the class files (samplegen.jobs.strata), as the
--                  tasks see it; none: not stratified
--   grouping       the rows' groups for a grouped run (files as for strata);
--                  none: not grouped
--   weighting      the rows' weights for a weighted run (keys: the row ids):
--                  the base path of the weight files (samplegen.jobs.strata);
--                  none: not weighted
--
-- The rows pass through the TRANSFORM script as LazySimpleSerDe writes them
-- (named on both sides: Hive's default for scripts writes nested types as
-- JSON, which it cannot read back): tab-separated fields, \N for NULL, nested
-- types with Hive's collection delimiters, tabs, newlines and backslashes
-- inside strings escaped with a backslash; they come back parsed with the
-- same types.

SET hive.script.operator.truncate.env=true;
SET hive.exec.dynamic.partition=true;
SET hive.exec.dynamic.partition.mode=nonstrict;

ADD FILE ${hivevar:files}/${hivevar:zip};

CREATE TABLE ${hivevar:result} (${hivevar:typed_columns})
PARTITIONED BY (sample STRING);

INSERT OVERWRITE TABLE ${hivevar:result} PARTITION (sample)
SELECT TRANSFORM (samplegen_position, ${hivevar:columns})
  ROW FORMAT SERDE 'org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe'
    WITH SERDEPROPERTIES ('escape.delim' = '\\', 'serialization.escape.crlf' = 'true')
  USING '${hivevar:python} ${hivevar:zip} rows --udf ${hivevar:udf} --params=${hivevar:params} --seed ${hivevar:seed} --n-rows ${hivevar:n_rows} --strata ${hivevar:strata} --grouping ${hivevar:grouping} --weighting ${hivevar:weighting}'
  AS (${hivevar:typed_columns}, sample STRING)
  ROW FORMAT SERDE 'org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe'
    WITH SERDEPROPERTIES ('escape.delim' = '\\', 'serialization.escape.crlf' = 'true')
FROM (
  SELECT ${hivevar:position} AS samplegen_position, ${hivevar:columns}
  FROM ${hivevar:table}
) keyed;
