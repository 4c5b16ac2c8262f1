"""delaybound: theory-verification toolkit for one-step-delayed pipeline-parallel pretraining.

The package itself is thin orchestration (CLI and the demo); the work lives in
``theory`` (symbolic bounds and proofs), ``numerics`` (synthetic verification) and
``llm_validation`` (real training under PipeDream-2BW delay).
"""

__all__ = ["__version__"]
__version__ = "0.1.0"
