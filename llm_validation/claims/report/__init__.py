"""report room (map filled in below)."""

__all__: list[str] = []
