"""Benchmark adapters, one package per benchmark (importable as ``rubricgym.adapters.*``)."""
