"""A run: ReFrame started over the checks, its output shown, the session
stopped on a signal, provenance collected, the result judged and stored."""
