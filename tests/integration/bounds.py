"""Count-aware bounds for the integration tests' checks of sample counts
and shares (imported by the tests' Python: sys.path gets this folder).

A run on a shared, busy host takes fewer samples than on an idle one (the
sampler throttles its ticks, TCG runs slower): a minimum or a tolerance
is derived from what the run actually sampled, never fixed.  Three sigma
of the binomial count: a check that fails is a verdict, not chance.  For
few samples or a share near 0 or 1 the normal approximation's tails are
too thin (4 of 93 samples at a true 1 % is a 1.5 % chance, "3 sigma" by
it), so counts use the binomial distribution itself, cut at the normal
three sigma's one-sided chance (0.135 %).
"""
import math

Z = 3.0
ALPHA = 0.5 * math.erfc(Z / math.sqrt(2))	# one-sided, 0.00135


def _exact(n, p):
    """Whether the binomial(n, p) is summed exactly (the normal
    approximation is good past about a thousand expected of each kind)."""
    return n < 200000 and min(n * p, n * (1 - p)) < 1000


def _quantile(n, p, alpha, upper):
    """upper: the smallest k with P(X > k) <= alpha; otherwise the largest
    k with P(X < k) <= alpha, for X binomial(n, p)."""
    if p <= 0:
        return 0
    if p >= 1:
        return n
    if not upper:
        return n - _quantile(n, 1 - p, alpha, True)
    logp, logq = math.log(p), math.log1p(-p)
    lp, cdf = n * logq, 0.0
    for k in range(n + 1):
        cdf += math.exp(lp)
        if 1 - cdf <= alpha:
            return k
        if k < n:
            lp += math.log(n - k) - math.log(k + 1) + logp - logq
    return n


def count_lo(n, p, z=Z):
    """The fewest of n samples expected in a part whose true share is at
    least p: n*p less z sigma of the binomial count (0 when n is small)."""
    n = int(n)
    if z == Z and _exact(n, p):
        return float(_quantile(n, p, ALPHA, False))
    return max(0.0, n * p - z * math.sqrt(n * p * (1 - p)))


def count_hi(n, p, z=Z):
    """The most of n samples expected in a part whose true share is at most p."""
    n = int(n)
    if z == Z and _exact(n, p):
        return float(_quantile(n, p, ALPHA, True))
    return n * p + z * math.sqrt(n * p * (1 - p))


def share_tol(p, n, floor):
    """The tolerance (a fraction) of a share measured over n samples whose
    truth is p: floor, or the binomial's three sigma when n is too small."""
    n = max(int(n), 1)
    return max(floor, (count_hi(n, p) - n * p) / n, (n * p - count_lo(n, p)) / n)


def allowed_misses(n, rate):
    """Misses allowed among n for a true miss rate of at most rate: the
    rate's share plus 3 sigma (a handful of samples is not a verdict)."""
    return count_hi(n, rate)


def tol(bound_pp, p1, n1, p2, n2):
    """The tolerance (percentage points) of the difference of two shares
    p1 of n1 and p2 of n2 samples: bound_pp, or 3 sigma of the difference
    of the two binomial estimates when the samples are too few for it."""
    if n2 >= 10**6:		# p2 is a truth, not a measurement
        return max(bound_pp, 100 * share_tol(p2, n1, 0))
    p = (p1 + p2) / 2
    sigma = math.sqrt(max(p * (1 - p), 1e-9) * (1.0 / max(n1, 1) + 1.0 / max(n2, 1)))
    return max(bound_pp, 100 * Z * sigma)


def shares_agree(k1, n1, k2, n2, bound_pp):
    """Whether k1 of n1 and k2 of n2 are the same share within bound_pp
    (widened to 3 sigma for few samples); (ok, difference pp, tolerance pp)."""
    p1, p2 = k1 / max(n1, 1), k2 / max(n2, 1)
    t = tol(bound_pp, p1, n1, p2, n2)
    return abs(p1 - p2) * 100 <= t, (p1 - p2) * 100, t
