from coordinator.cli import run

run()
