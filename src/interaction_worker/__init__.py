"""interaction-worker."""
