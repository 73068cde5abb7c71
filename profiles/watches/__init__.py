"""Regression watches: a baseline per rank, later captures judged against it, and the
notifications that say so.
"""
