from hpc_health.cli import main

main()
