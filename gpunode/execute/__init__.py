"""The executor: runs each host's plan over its transport and reports through events.

No names are re-exported here: importing one small module of the executor (its lock,
its journal) must not import the planner behind `host` (see `warm`)."""
