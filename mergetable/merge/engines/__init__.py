"""The merge engines: deduplicate, partial-update, aggregation, first-row and Fluss's versioned."""
