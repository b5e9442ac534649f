"""Pure math and summaries (numpy and pandas, never pyspark): metrics, bias solvers, Algorithm 1 on rows,
mergeable summaries and their finalizers, the hash split, windows and the pipeline-accuracy statistics."""
