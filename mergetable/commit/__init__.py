"""Tier: commit."""
