"""The renderers: what people and other tools read, made from judged runs
(the health table, CI summaries, the HTML page and its plots, Prometheus'
text format).  Both the commands (``cli/``) and the run (``run/``) use
them; they import neither, and never judge (DESIGN.md)."""
