"""The soak's count of tracebacks (bench/soak): the suite's own are
problems, ReFrame's output the suite quotes is not, and a KeyboardInterrupt
of Python's own start-up (before the command's first line) is told apart."""

from bench.soak.__main__ import own_traceback

SUITE = """hpc-health: something
Traceback (most recent call last):
  File "/work/x/hpc_health/cli/push.py", line 12, in push
    _push()
OSError: boom
"""

STARTUP = """Fatal Python error: init_import_site: Failed to import the site module
Traceback (most recent call last):
  File "<frozen site>", line 186, in addpackage
  File "/v/site-packages/__editable___hpc_health_0_1_0_finder.py", line 7, in <module>
    from pathlib import Path
  File "<frozen importlib._bootstrap_external>", line 729, in _compile_bytecode
KeyboardInterrupt
"""

# The line that installs the suite's handler, and runpy's standard library.
HANDLER_IMPORT = """Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "/usr/lib/python3.11/contextlib.py", line 6, in <module>
    from collections import deque
  File "/work/x/hpc_health/__main__.py", line 1, in <module>
    from hpc_health.cli import quiet_stops
KeyboardInterrupt
"""

QUOTED = """hpc-health: ReFrame exited with 1
ReFrame's last lines:
Traceback (most recent call last):
  File "/r/reframe/frontend/cli.py", line 3, in main
ValueError: x
"""


def test_the_suites_traceback_is_counted_and_pythons_start_up_told_apart():
    assert own_traceback("all well\n") == ""
    assert own_traceback(SUITE).endswith("OSError: boom")
    assert not own_traceback(SUITE).startswith("python start-up: ")
    assert own_traceback(STARTUP).startswith("python start-up: ")
    assert own_traceback(HANDLER_IMPORT).startswith("python start-up: ")
    assert own_traceback(QUOTED) == ""
    # A KeyboardInterrupt inside the suite's own modules is the suite's.
    ours = SUITE.replace("OSError: boom", "KeyboardInterrupt")
    assert not own_traceback(ours).startswith("python start-up: ")
