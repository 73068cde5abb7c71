"""stats: statistics with no py-spy knowledge; numbers in, numbers out. Imports only
the top leaves (thresholds).

- `intervals`: Wilson and Newcombe intervals, the pooled two-proportion test, the
  effective sample size (samples over a design effect).
- `t_distribution`: Student's t (tail and quantiles) from the standard library.
- `multiple_testing`: Holm, Bonferroni's simultaneous level, Benjamini-Hochberg.
- `batch_means`: intervals and differences over time blocks of autocorrelated samples.
- `change_points`: where a share shifted in a series of captures.
"""

from .change_points import SeriesShift, series_shifts

__all__ = ["SeriesShift", "series_shifts"]
