"""Aggregate functions of the aggregation engine (and of partial-update's sequence groups), by family."""
