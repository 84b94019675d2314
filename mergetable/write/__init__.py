"""Tier: write."""
