"""Tier: cli."""
