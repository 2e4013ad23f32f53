"""Bundled real pass matrices (see README.md in this folder for provenance and licenses)."""
