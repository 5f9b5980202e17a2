from hpc_health.cli import quiet_stops

# The first thing, before the command's imports: see quiet_stops.
restore = quiet_stops()
from hpc_health.cli.main import main  # noqa: E402

restore()
main()
