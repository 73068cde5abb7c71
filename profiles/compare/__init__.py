"""Before and after: two captures or two whole-job captures side by side, and a run's
shares over time (trends, sparklines).
"""
