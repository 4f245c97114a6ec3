"""Where a grade is decided, and kept: the rubric (read strictly, and the one scorer of outcomes), the
fingerprint of what a grade depends on, one file graded (`grade`), the result model and its stored form
(`result`, `results_json`: the one writer and validated reader of results.json), a folder graded (`batch`, on
Dask `cluster`) and the history a regrade keeps (`regrades`).  Below the reports and the front ends, above the
judging: nothing here imports a writer of another format or a command."""
