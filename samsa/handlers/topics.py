"""Placeholder: filled in by the admin handlers work."""
