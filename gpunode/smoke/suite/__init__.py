"""The smoke suite: standalone scripts that run on the host (stdlib + the framework tested)."""
