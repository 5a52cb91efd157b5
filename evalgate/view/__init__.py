"""``evalgate view``: a local, read-only results browser and its static export (docs/viewer.md)."""
