"""Grids of run configurations and the resumable runner that trains them (``delaybound sweep``)."""
