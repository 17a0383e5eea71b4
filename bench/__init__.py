"""Benchmarks (docs/benchmarks.md): `python -m bench` (see bench/README.md). Never run by pytest."""
