"""``delaybound advise``: time to target of 2BW vs the synchronous schedules (docs/advise.md)."""

__all__: list[str] = []
