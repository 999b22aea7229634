"""Count-aware bounds for the integration tests' checks of sample counts
and shares (imported by the tests' Python: sys.path gets this folder).

A run on a shared, busy host takes fewer samples than on an idle one (the
sampler throttles its ticks, TCG runs slower): a minimum or a tolerance
is derived from what the run actually sampled, never fixed.  Three sigma
of the binomial count: a check that fails is a verdict, not chance.
"""
import math

Z = 3.0


def count_lo(n, p, z=Z):
    """The fewest of n samples expected in a part whose true share is at
    least p: n*p less z sigma of the binomial count (0 when n is small)."""
    return max(0.0, n * p - z * math.sqrt(n * p * (1 - p)))


def count_hi(n, p, z=Z):
    """The most of n samples expected in a part whose true share is at most p."""
    return n * p + z * math.sqrt(n * p * (1 - p))


def allowed_misses(n, rate):
    """Misses allowed among n for a true miss rate of at most rate: the
    rate's share plus 3 sigma (a handful of samples is not a verdict)."""
    return count_hi(n, rate)


def tol(bound_pp, p1, n1, p2, n2):
    """The tolerance (percentage points) of the difference of two shares
    p1 of n1 and p2 of n2 samples: bound_pp, or 3 sigma of the difference
    of the two binomial estimates when the samples are too few for it."""
    p = (p1 + p2) / 2
    sigma = math.sqrt(max(p * (1 - p), 1e-9) * (1.0 / max(n1, 1) + 1.0 / max(n2, 1)))
    return max(bound_pp, 100 * Z * sigma)


def shares_agree(k1, n1, k2, n2, bound_pp):
    """Whether k1 of n1 and k2 of n2 are the same share within bound_pp
    (widened to 3 sigma for few samples); (ok, difference pp, tolerance pp)."""
    p1, p2 = k1 / max(n1, 1), k2 / max(n2, 1)
    t = tol(bound_pp, p1, n1, p2, n2)
    return abs(p1 - p2) * 100 <= t, (p1 - p2) * 100, t
