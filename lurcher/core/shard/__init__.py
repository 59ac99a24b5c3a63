"""A shard: owns partitions, executes commands, answers through the dispatcher."""
