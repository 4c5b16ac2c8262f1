"""Verdicts from run directories: run tables and pairing, statistical inference, assumption /
bound / trend checks, plots and the report (``delaybound validate``)."""
