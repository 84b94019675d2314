"""Tier: compaction."""
