-- samplegen: the two aggregations of a bootstrap of a row table whose keys are
-- not the row ids 0..N-1 (samplegen's udfs/arrivals.py: the first `size`
-- arrivals of Poisson processes keyed by the rows).  `samplegen hive bootstrap
-- TABLE RESULT --key COL` runs both, then rows.hql with their cut.
--
-- Variables:
--   stage      histogram: per sample and window, the arrivals per bin of time
--              (output `sample` int,`window` int,`hist` string);
--              boundary: the arrivals in each sample's boundary bin
--              (output `sample` int,`word` string,`position` bigint)
--   targets    boundary only: window:bin/... per sample (empty for histogram)
--   table, position, files, zip, python, seed: as in rows.hql
--   n_rows     the table's row count;  size, samples: the bootstrap's
--   bits       bins of time: 2**bits per window;  windows: windows of time

SET hive.script.operator.truncate.env=true;

ADD FILE ${hivevar:files}/${hivevar:zip};

SELECT TRANSFORM (samplegen_position)
  USING '${hivevar:python} ${hivevar:zip} arrivals-${hivevar:stage} --seed ${hivevar:seed} --n-rows ${hivevar:n_rows} --size ${hivevar:size} --samples ${hivevar:samples} --bits ${hivevar:bits} --windows ${hivevar:windows} --targets=${hivevar:targets}'
  AS (${hivevar:output})
FROM (SELECT ${hivevar:position} AS samplegen_position FROM ${hivevar:table}) keyed;
