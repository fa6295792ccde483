"""The statistics the archive's pages show of a scheme's runs (mean, sample standard deviation,
the Student-t 95% confidence interval of the mean) and the summary table's score, ln(mean
throughput / mean p95 delay): the analysis's, which ranks the schemes of a report by the same
score (analysis/ranking.py), so both say the same of a data dir. Kept here under the archive's
names, which its modules and tests import."""
from __future__ import annotations

from pantheon.analysis.ranking import CONFIDENCE, describe, t_quantile, t_within

__all__ = ["CONFIDENCE", "describe", "t_quantile", "t_within"]
