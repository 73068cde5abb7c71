"""count: one capture's figures from its trie, no time needed. A `core.Profile` in;
shares, tables and trees out.

- `analysis`: the capture's stats (keywords, categories, states, threads, top frames),
  every figure counting a sample at most once per item.
- `keywords` (keyword sets and categories) and `keyword_matching` (which nodes match).
- `activity`: sampling rounds and each thread's active share.
- `thread_tables`: per-thread count tables, so any thread subset's figures come without
  the samples; `functions`: the user's functions per thread.
- `flamegraph` (pruned d3 trees) and `sandwich` (one frame's callers and callees).
"""
