"""Real multi-process pipelines on torch.distributed: PipeDream-2BW (ours) and the synchronous
GPipe / 1F1B baselines (torch.distributed.pipelining), sharing one stage runtime."""
