"""The benchmarks: one entry point per question (``engine``, ``service``, ``composition``), each
writing one result file, and ``run_all``, which runs them all; ``RESULTS.md`` reports the results."""
