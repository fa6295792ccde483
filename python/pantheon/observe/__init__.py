"""The observatory (issue 21, docs/observatory.md): a schedule of experiments run round after round
on Dask, each result uploaded to the archive as it completes, the state in a journal."""
