"""Model tests."""
