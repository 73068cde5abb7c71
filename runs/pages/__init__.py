"""The pages of runs and hosts that show their captures: the one part of runs that reads
profiles (nothing below imports it).
"""
