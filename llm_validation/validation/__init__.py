"""Verdicts from run directories: run tables and pairing, statistical inference, assumption /
bound / trend checks, figures and the report (``delaybound validate``)."""
