"""Where and how work runs: Dask clusters and tasks in order, thread pools, each rule's resources."""
