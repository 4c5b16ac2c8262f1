"""Parameter domains: how each theorem parameter is validated (and reparametrised for sympy).

A :class:`Domain` is an interval of the real line, open or closed at each end, optionally
restricted to integers. ``Domain.validate(name, value)`` is the single place where user input
is checked, so the Python API and the CLI reject exactly the same values with the same message:

- ``TypeError`` for anything that is not a real number (strings, ``None``, complex numbers,
  and ``bool``, which Python would otherwise treat as 0/1);
- ``ValueError`` for NaN/inf, a value outside the interval, or a non-integer where an integer is
  required; the message names the parameter, its value and the allowed domain.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

__all__ = [
    "Domain",
    "POSITIVE",
    "NONNEGATIVE",
    "UNIT_OPEN",
    "UNIT_HALF_OPEN",
    "AT_LEAST_ONE",
    "POSITIVE_INTEGER",
    "NONNEGATIVE_INTEGER",
    "fixed",
]


@dataclass(frozen=True, kw_only=True)
class Domain:
    """An interval ``lower .. upper`` (ends open or closed), optionally integers only."""

    lower: float = -math.inf
    """Lower end of the interval (``-inf`` for none)."""
    upper: float = math.inf
    """Upper end of the interval (``inf`` for none)."""
    lower_open: bool = False
    """True when ``lower`` itself is excluded."""
    upper_open: bool = False
    """True when ``upper`` itself is excluded."""
    integer: bool = False
    """True when only integers are allowed."""

    def __post_init__(self) -> None:
        for field in ("lower", "upper"):
            value = getattr(self, field)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value != value:
                raise TypeError(f"Domain.{field}={value!r} must be a real number")
        if self.lower > self.upper:
            raise ValueError(f"Domain.lower={self.lower} exceeds Domain.upper={self.upper}")
        if self.lower == self.upper and (self.lower_open or self.upper_open):
            raise ValueError(f"Domain at the single point {self.lower} cannot have an open end")

    @property
    def fixed_value(self) -> float | int | None:
        """The only allowed value when the domain is a single point, else None."""
        if self.lower == self.upper:
            return int(self.lower) if self.integer else float(self.lower)
        return None

    def describe(self) -> str:
        """Human-readable domain, e.g. ``(0, 1]``, ``integer >= 0``, ``{1}``."""
        if self.fixed_value is not None:
            return f"{{{_fmt(self.fixed_value)}}}"
        if self.integer:
            if self.upper == math.inf:
                low = self.lower + (1 if self.lower_open else 0)
                return f"integer >= {_fmt(low)}"
            return f"integer in [{_fmt(self.lower)}, {_fmt(self.upper)}]"
        left = "(" if self.lower_open or self.lower == -math.inf else "["
        right = ")" if self.upper_open or self.upper == math.inf else "]"
        return f"{left}{_fmt(self.lower)}, {_fmt(self.upper)}{right}"

    def contains(self, value: float) -> bool:
        """Whether a finite real ``value`` lies in the domain (integrality included)."""
        if self.integer and value != math.floor(value):
            return False
        above = value > self.lower if self.lower_open else value >= self.lower
        below = value < self.upper if self.upper_open else value <= self.upper
        return above and below

    def validate(self, name: str, value: object) -> float | int:
        """Return ``value`` as a Python float (int for integer domains) or raise.

        Raises ``TypeError`` when ``value`` is not a real number and ``ValueError`` when it is
        NaN/inf or outside the domain; both messages name ``name``, the value and the domain.
        """
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(
                f"{name}={value!r} must be a real number ({type(value).__name__} given); "
                f"allowed: {self.describe()}"
            )
        as_float = float(value)
        if not math.isfinite(as_float):
            raise ValueError(f"{name}={value!r} is not finite; allowed: {self.describe()}")
        if not self.contains(as_float):
            kind = "not an integer" if self.integer and as_float != math.floor(as_float) else (
                "outside the domain")
            raise ValueError(f"{name}={value!r} is {kind}; allowed: {self.describe()}")
        return int(as_float) if self.integer else as_float


def _fmt(x: float) -> str:
    if x == math.inf:
        return "inf"
    if x == -math.inf:
        return "-inf"
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def fixed(value: int | float, *, integer: bool = True) -> Domain:
    """The single-point domain ``{value}`` (a parameter a theorem fixes, e.g. tau = 1)."""
    return Domain(lower=value, upper=value, integer=integer)


#: (0, inf): eta, L, gamma, mu, D, eps.
POSITIVE = Domain(lower=0.0, lower_open=True)
#: [0, inf): sigma, r0, Delta0, omega_bar, lam, s.
NONNEGATIVE = Domain(lower=0.0)
#: (0, 1): beta.
UNIT_OPEN = Domain(lower=0.0, upper=1.0, lower_open=True, upper_open=True)
#: (0, 1]: alpha.
UNIT_HALF_OPEN = Domain(lower=0.0, upper=1.0, lower_open=True)
#: [1, inf): rho.
AT_LEAST_ONE = Domain(lower=1.0)
#: integers >= 1: K.
POSITIVE_INTEGER = Domain(lower=1.0, integer=True)
#: integers >= 0: tau, k.
NONNEGATIVE_INTEGER = Domain(lower=0.0, integer=True)
