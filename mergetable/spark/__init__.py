"""Tier: spark."""
