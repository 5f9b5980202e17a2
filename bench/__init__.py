"""Benchmarks and proofs that live beside the product, not in it."""
