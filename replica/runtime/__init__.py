"""Where work runs: executors (this process, local processes, Dask), worker processes that
die with their parent, and progress reporting."""
