"""Tier 0: errors, options, schema, storage access, hashing, predicates and the merge engines."""
