"""GPU smoke tests: the suite that runs on hosts, its expectations, and the runner."""
