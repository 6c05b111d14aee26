"""Benchmarks of c10d_func against torch's own collectives.

`python -m benchmarks.collectives --help` is the entry point; `benchmarks.smoke.run_smoke` is the
smoke-test body the test suite calls.
"""
