from hpc_health.cli.main import main

main()
