-- samplegen: any sampling-UDF (built-in or MODULE:FUNCTION shipped in the zip), in
-- one query.  Fold-mode k-fold needs kfold.hql (composition step).
--
-- Variables (beeline: --hivevar NAME=VALUE; `samplegen hive ... --print`
-- prints this script with every variable filled in):
--   table        block table (create_block_table.hql)
--   output       the run directory, as the server's tasks see it (new or
--                empty): the reducers write <output>/<sample>/part-v<v>,
--                the last stage the _matrix.json of each sample, _manifest.json
--                and _SUCCESS (samplegen info / export read it)
--   input        the matrix directory of the block table (its LOCATION), as the
--                tasks see it: its _matrix.json goes into the manifest
--   files, zip   directory holding the samplegen zip, and its file name
--                (samplegen-<hash>.zip: make hive-dist)
--   python       a Python with numpy on the nodes (python3)
--   rows, cols, block_size, kind   the matrix's shape (the table's
--                samplegen.* properties)
--   seed         random seed, 0 <= seed < 2**64
--
--   udf          holdout | kfold | bootstrap | weighted | MODULE:FUNCTION
--   params       KEY=VALUE,KEY=VALUE... (may be empty)
--   weighting    the rows' weights for a weighted run: the base path of the
--                weight files (<base>.json, .weights, .chunks:
--                samplegen.jobs.strata), as the tasks see it; none otherwise
--   bin_bits     shuffle bins per (sample, column of blocks): 0 = one bin (the
--                reducer merges a whole group in memory); n = 2**n bins;
--                one value, or one per sample separated by commas
--   records      chunks: one row per batch of rows of one input block (fast);
--                rows: one row per occurrence (the paper's UDTF form)
--
-- Output rows: (route, sample, v_index, payload); route = -1 rows carry the
-- JSON summary of one written column of blocks of a sample matrix, route = -2
-- rows an error (then no metadata is written).

-- Reducers write the block files themselves: no speculative duplicates
-- (MapReduce; Tez does not speculate unless tez.am.speculation.enabled).
-- Hive copies the job configuration into the scripts' environment; keep it short.
-- Hive 4 drops DISTRIBUTE BY / SORT BY from a subquery unless told not to.
SET mapreduce.reduce.speculative=false;
SET tez.am.speculation.enabled=false;
SET hive.script.operator.truncate.env=true;
SET hive.remove.orderby.in.subquery=false;

ADD FILE ${hivevar:files}/${hivevar:zip};

-- [finish
-- the run's metadata: one task (DISTRIBUTE BY a constant) receives every
-- summary row and writes the _matrix.json of each sample, _manifest.json and
-- _SUCCESS, as the samplegen driver does, and passes the rows through
-- (the lines between the finish markers: the samplegen driver's own query
-- leaves them out and writes the metadata itself).
SELECT TRANSFORM (route, sample, v_index, payload)
  USING '${hivevar:python} ${hivevar:zip} finish --output ${hivevar:output} --input ${hivevar:input} --udf ${hivevar:udf} --params=${hivevar:params} --seed ${hivevar:seed} --rows ${hivevar:rows} --cols ${hivevar:cols} --block-size ${hivevar:block_size} --kind ${hivevar:kind} --bin-bits ${hivevar:bin_bits} --records ${hivevar:records} --weighting ${hivevar:weighting}'
  AS (route INT, sample INT, v_index INT, payload STRING)
FROM (
  SELECT route, sample, v_index, payload, 0 AS task FROM (
-- finish]
    -- streaming-re-block: one buffer block at a time, written to <output>
    SELECT TRANSFORM (sample, v_index, relative_pos, row_id, row_partition)
      USING '${hivevar:python} ${hivevar:zip} reblock --output ${hivevar:output} --udf ${hivevar:udf} --params=${hivevar:params} --seed ${hivevar:seed} --rows ${hivevar:rows} --cols ${hivevar:cols} --block-size ${hivevar:block_size} --kind ${hivevar:kind} --bin-bits ${hivevar:bin_bits} --records ${hivevar:records} --weighting ${hivevar:weighting}'
      AS (route INT, sample INT, v_index INT, payload STRING)
    FROM (
      SELECT * FROM (
        -- local-sampling: the sampling UDTF over the blocks of the table
        SELECT TRANSFORM (h_index, v_index, block)
          USING '${hivevar:python} ${hivevar:zip} sample --udf ${hivevar:udf} --params=${hivevar:params} --seed ${hivevar:seed} --rows ${hivevar:rows} --cols ${hivevar:cols} --block-size ${hivevar:block_size} --kind ${hivevar:kind} --bin-bits ${hivevar:bin_bits} --records ${hivevar:records} --weighting ${hivevar:weighting}'
          AS (sample INT, v_index INT, relative_pos STRING, row_id BIGINT, row_partition STRING)
        FROM ${hivevar:table}
      ) occurrences
      -- block-preparation: group by (sample, column block), in sample order
      DISTRIBUTE BY sample, v_index
      SORT BY sample, v_index, relative_pos, row_id
    ) sorted_occurrences
-- [finish
  ) summaries
  DISTRIBUTE BY task
) all_summaries
-- finish]
;
