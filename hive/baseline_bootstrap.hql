-- samplegen: the join-based baseline, step 2: bootstrap samples by joining
-- the rows of the blocks with the assignments table
-- (baseline_assignments.hql), then grouping by (sample, column block) in
-- order and re-blocking -- the query our bootstrap.hql replaces by one
-- sampling UDTF, without an assignments table and without a join.
--
-- The blocks are exploded into rows by a TRANSFORM script (our blocks are
-- base64 text, not ARRAY<ARRAY<DOUBLE>>); the re-blocking is the same
-- reblock script as bootstrap.hql's with one row per occurrence.
--
-- Variables (beeline: --hivevar NAME=VALUE):
--   table, assignments   block table, assignments table
--   output               directory receiving the sample matrices
--   files, zip, python   as in bootstrap.hql
--   rows, cols, block_size, kind, seed, samples, size   as in bootstrap.hql
--
-- Output rows: as bootstrap.hql's.

SET mapreduce.reduce.speculative=false;
SET tez.am.speculation.enabled=false;
SET hive.script.operator.truncate.env=true;
SET hive.remove.orderby.in.subquery=false;

ADD FILE ${hivevar:files}/${hivevar:zip};

SELECT TRANSFORM (sample, v_index, relative_pos, row_id, row_partition)
  USING '${hivevar:python} ${hivevar:zip} reblock --output ${hivevar:output} --udf bootstrap --params=samples=${hivevar:samples},size=${hivevar:size} --seed ${hivevar:seed} --rows ${hivevar:rows} --cols ${hivevar:cols} --block-size ${hivevar:block_size} --kind ${hivevar:kind} --bin-bits 0 --records rows'
  AS (route INT, sample INT, v_index INT, payload STRING)
FROM (
  SELECT * FROM (
    SELECT a.sm_id AS sample, r.v_index AS v_index, a.sm_pos AS relative_pos,
           r.row_id AS row_id, r.row_partition AS row_partition
    FROM (
      -- row partitions of every block
      SELECT TRANSFORM (h_index, v_index, block)
        USING '${hivevar:python} ${hivevar:zip} explode --udf bootstrap --params=samples=${hivevar:samples},size=${hivevar:size} --seed ${hivevar:seed} --rows ${hivevar:rows} --cols ${hivevar:cols} --block-size ${hivevar:block_size} --kind ${hivevar:kind}'
        AS (row_id BIGINT, v_index INT, row_partition STRING)
      FROM ${hivevar:table}
    ) r
    JOIN ${hivevar:assignments} a ON (r.row_id = a.row_id)
  ) joined
  DISTRIBUTE BY sample, v_index
  SORT BY sample, v_index, relative_pos, row_id
) sorted_rows;
