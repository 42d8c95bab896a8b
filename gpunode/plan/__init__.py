"""The planner: desired state (inventory + roles) minus facts -> typed changes
(`planner`). No names are re-exported here: `saved` and `simulate` are read without the
planner and the roles it walks."""
