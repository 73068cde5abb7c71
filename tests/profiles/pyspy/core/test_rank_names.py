"""Rank names as people read them (core/rank_names.py): natural order and short labels for
lists of ranks."""

import pytest

from profiles.pyspy.core.rank_names import SHOWN_RANGES, natural, ranks_label


def test_numbered_names_sort_by_their_number_not_their_text():
    names = ["rank-10", "rank-2", "rank-1", "rank-0"]
    assert sorted(names, key=natural) == ["rank-0", "rank-1", "rank-2", "rank-10"]


def test_names_sort_by_prefix_first_and_an_unnumbered_name_before_its_numbered_kin():
    names = ["worker-3", "node1-gpu10", "rank", "node1-gpu2", "rank-1", "launcher"]
    assert sorted(names, key=natural) == [
        "launcher",
        "node1-gpu2",
        "node1-gpu10",
        "rank",
        "rank-1",
        "worker-3",
    ]


def test_the_sort_key_keeps_names_with_equal_numbers_apart():
    assert natural("rank-007") != natural("rank-7")
    assert natural("rank-7") == ("rank-", 7, "rank-7")


@pytest.mark.parametrize(
    ("names", "label"),
    [
        (["rank-3"], "rank 3"),
        (["rank-0", "rank-1"], "ranks 0-1"),
        (["rank-5", "rank-0", "rank-2", "rank-1"], "ranks 0-2, 5"),
        (["gpu7", "gpu9", "gpu8", "gpu3"], "ranks 3, 7-9"),
    ],
)
def test_numbered_names_with_one_prefix_read_as_runs_of_numbers(names, label):
    assert ranks_label(names) == label


def test_past_the_shown_runs_the_label_counts_the_ranks_and_elides_the_middle():
    names = [f"rank-{n}" for n in range(1, 62, 3)]  # 21 runs of one
    assert ranks_label(names) == "21 ranks: 1, 4, 7, 10, 13, …, 61"
    within = [f"rank-{n}" for n in range(0, 2 * SHOWN_RANGES, 2)]  # SHOWN_RANGES runs
    assert ranks_label(within) == "ranks 0, 2, 4, 6, 8, 10"


def test_names_of_several_prefixes_or_without_numbers_are_listed_as_given_up_to_eight():
    assert ranks_label(["rank-1", "worker-2"]) == "rank-1, worker-2"
    assert ranks_label(["alpha", "beta"]) == "alpha, beta"
    many = [f"host-{c}" for c in "abcdefghij"]
    assert ranks_label(many) == ", ".join(many[:8]) + " and 2 more"
