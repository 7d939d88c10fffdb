-- samplegen: the two aggregations that find the cutoffs of exact sizes for a
-- row table keyed by anything but the row ids (samplegen.udfs.ranks).
-- `samplegen hive holdout|kfold --key COLUMN --exact|--balanced` runs it;
-- it is not meant to be run alone.
--
-- Variables: table, position (the key's position expression), files, zip,
-- python, seed; stage (histogram | words), streams (purpose:index:sub/...),
-- bins (bin:bin/... per stream, for words), output (the result's columns).

SET hive.script.operator.truncate.env=true;

ADD FILE ${hivevar:files}/${hivevar:zip};

SELECT TRANSFORM (samplegen_position)
  USING '${hivevar:python} ${hivevar:zip} ranks-${hivevar:stage} --seed ${hivevar:seed} --streams=${hivevar:streams} --bins=${hivevar:bins}'
  AS (${hivevar:output})
FROM (SELECT ${hivevar:position} AS samplegen_position FROM ${hivevar:table}) keyed;
