"""Benchmarks: our engine against CTranslate2 and PyTorch, and a load test of the HTTP service."""
