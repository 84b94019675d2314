"""Tier: read."""
