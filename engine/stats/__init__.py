"""Layer 3, statistics on scipy: rates and intervals, paired tests and effect sizes, rater agreement."""
