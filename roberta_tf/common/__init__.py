"""Helpers every stage shares: atomic file and directory writes."""
