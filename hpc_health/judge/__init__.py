"""The judgement: figures, statistics, verdicts, per-node outliers, change
points, history and the comparison of run sets.  Imports no ReFrame and
renders no text."""
