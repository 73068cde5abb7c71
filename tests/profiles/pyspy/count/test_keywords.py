"""Keyword forms (substring, =name, re:, `under` a caller) and the default GPU set."""

import json

import pytest

from profiles.pyspy import GPU_KEYWORDS, AnalysisOptions, Keyword, analyze, parse_raw_lines
from profiles.pyspy.count.keywords import keyword_problem, load_keywords, parse_keyword
from profiles.pyspy.errors import ProfileError


def _samples(lines, keywords=GPU_KEYWORDS, row="categories"):
    stats = analyze(parse_raw_lines(lines), AnalysisOptions(keywords=keywords))
    key = "category" if row == "categories" else "keyword"
    return {r[key]: r["samples"] for r in stats[row] if r["samples"]}


@pytest.mark.parametrize(
    ("keyword", "frame", "matches"),
    [
        ("item", "THPVariable_getitem (libtorch_python.so)", True),
        ("=item", "item (a.py:1)", True),
        ("=item", "Foo.item (a.py:1)", False),
        ("=item", "x (item.py:1)", False),
        ("re:^take_gil$", "take_gil (libpython3.11.so.1.0)", True),
        ("re:^take_gil$", "take_gil_slow (libpython3.11.so.1.0)", False),
        (
            "re:(^|[.:]|THPVariable_)item$",
            "torch::autograd::THPVariable_item (libtorch_python.so)",
            True,
        ),
        ("re:(^|[.:]|THPVariable_)item$", "at::Tensor::item (libtorch_cpu.so)", True),
        ("re:(^|[.:]|THPVariable_)item$", "Tensor.__getitem__ (torch/_tensor.py:30)", False),
        (
            "re:(^|[.:]|THPVariable_)item$",
            "torch::autograd::THPVariable_getitem (libtorch_python.so)",
            False,
        ),
        ("re:(^|[.:]|THPVariable_)item$", "at::indexing::get_item (libtorch_python.so)", False),
        ("=pthread_cond_wait", "pthread_cond_wait (libc.so.6)", True),
        ("=main", "main", True),
    ],
)
def test_each_keyword_form_matches_what_its_doc_says(keyword, frame, matches):
    assert parse_keyword(keyword).match.matches(frame) is matches


def test_under_checks_the_direct_caller_and_python_means_a_python_or_interpreter_frame():
    lines = [
        "a (a.py:1);pthread_cond_wait (libc.so.6) 1",
        "a (a.py:1);lock_acquire (libpython3.11.so.1.0);pthread_cond_wait (libc.so.6) 2",
        "a (a.py:1);PyEval_RestoreThread (python3.12);pthread_cond_wait (libc.so.6) 4",
        "a (a.py:1);std::condition_variable::wait (libstdc++.so.6);pthread_cond_wait (libc.so.6) 8",
        "thread (3): t;pthread_cond_wait (libc.so.6) 16",
    ]
    keywords = (Keyword("=pthread_cond_wait under python", "gil"),)
    assert _samples(lines, keywords) == {"gil": 7}
    keywords = (Keyword("=pthread_cond_wait under condition_variable", "wait"),)
    assert _samples(lines, keywords) == {"wait": 8}


def test_a_frame_counts_for_the_category_of_the_first_keyword_that_matches_it():
    lines = ["a (a.py:1);pthread_cond_timedwait (libc.so.6) 3", "b (b.so);pthread_cond_wait 2"]
    keywords = (
        Keyword("re:^pthread_cond_(timed)?wait$ under python", "gil"),
        Keyword("pthread_cond", "wait"),
        Keyword("timedwait", "wait"),
    )
    assert _samples(lines, keywords) == {"gil": 3, "wait": 2}
    kw = _samples(lines, keywords, row="keywords")
    assert kw == {"re:^pthread_cond_(timed)?wait$ under python": 3, "pthread_cond": 2}


CAPTURED = [
    # Stacks as py-spy 0.4 wrote them on this machine (bench/targets/torch_target.py).
    "t (t.py:1);Queue.put (queue.py:149);Condition.notify (threading.py:369);"
    "pthread_cond_signal (libc.so.6) 1",
    "t (t.py:2);time_sleep (libpython3.11.so.1.0);pthread_cond_timedwait (libc.so.6);"
    "0x7fa2e3ea3f16 (libc.so.6) 2",
    "t (t.py:3);torch::autograd::THPVariable_relu (libtorch_python.so);"
    "pybind11::gil_scoped_release::~gil_scoped_release (libtorch_python.so);"
    "pthread_cond_timedwait (libc.so.6) 4",
    "t (t.py:4);Tensor.__getitem__ (torch/_tensor.py:30);"
    "torch::autograd::THPVariable_getitem (libtorch_python.so) 8",
    "t (t.py:5);torch::autograd::THPVariable_item (libtorch_python.so);"
    "at::_ops::_local_scalar_dense::call (libtorch_cpu.so) 16",
    "t (t.py:6);c10::ThreadPool::main_loop (libc10.so);pthread_cond_wait (libc.so.6) 32",
    "t (t.py:7);take_gil (libpython3.11.so.1.0);pthread_cond_timedwait (libc.so.6) 64",
]


def test_the_default_set_tells_gil_waits_host_syncs_and_real_waits_apart():
    expected = {"gil": 2 + 4 + 64, "host sync": 16, "wait": 32, "python queue": 1}
    assert _samples(CAPTURED) == expected


GLOO_WAIT = (
    # A 4-rank gloo job (DESIGN.md): the wrapper's *template argument* names the GIL guard.
    "train_step (train.py:77);all_reduce (torch/distributed/distributed_c10d.py:3252);"
    "pybind11::cpp_function::initialize<c10::intrusive_ptr<c10d::Work> (*)(c10d::Work&), "
    "pybind11::call_guard<pybind11::gil_scoped_release>>::{lambda(pybind11::detail::"
    "function_call&)#3}::operator() (libtorch_python.so);c10d::Work::wait (libtorch_cpu.so);"
    "std::condition_variable::wait (libstdc++.so.6);pthread_cond_wait (libc.so.6);"
    "0x7f00 (libc.so.6) 10"
)


def test_a_collective_wait_is_comm_and_wait_never_gil_through_a_template_argument():
    assert _samples([GLOO_WAIT]) == {"comm": 10, "wait": 10}
    gloo = "t (t.py:1);gloo::transport::tcp::UnboundBuffer::waitRecv (libtorch_cpu.so) 3"
    group = "t (t.py:1);c10d::ProcessGroupGloo::allreduce (libtorch_cpu.so) 2"
    nccl = "t (t.py:1);ncclAllReduce (libnccl.so.2) 1"
    assert _samples([gloo, group, nccl]) == {"comm": 6}


def test_malloc_and_free_match_whole_names_not_paths_or_other_symbols():
    lines = [
        "load (data/freelist.py:3) 1",
        "mallocator_stats (libjemalloc.so.2) 2",
        "mkl_blas_def_sgemm_freebufs_bdz (libtorch_cpu.so) 4",
        "x (a.py:1);malloc (libc.so.6) 8",
        "x (a.py:1);free (libc.so.6) 16",
        "x (a.py:1);cudaMallocAsync (libcudart.so.12) 32",
        "x (a.py:1);posix_memalign (libc.so.6) 64",
    ]
    assert _samples(lines) == {"alloc": 8 + 16 + 32 + 64}


def test_matching_stays_case_sensitive():
    assert _samples(["x (a.py:1);NCCLUtils::x (a.so) 1", "x (a.py:1);FREE (libc.so.6) 2"]) == {}


def test_keyword_problems_are_named():
    assert "bad regular expression" in keyword_problem("re:(")
    assert "matches every name" in keyword_problem("re:x*")
    assert "needs a function name" in keyword_problem("=")
    assert "empty keyword" in keyword_problem("a under ")
    assert keyword_problem("gil_scoped_ under python") is None
    assert keyword_problem("=take_gil") is None
    assert all(keyword_problem(k.keyword) is None for k in GPU_KEYWORDS)


def test_keyword_files_accept_every_form_and_refuse_bad_patterns(tmp_path):
    text = tmp_path / "k.txt"
    text.write_text("gil: =take_gil\ngil: re:^pthread_cond_wait$ under python\nq: queue\n")
    assert load_keywords(str(text)) == (
        Keyword("=take_gil", "gil"),
        Keyword("re:^pthread_cond_wait$ under python", "gil"),
        Keyword("queue", "q"),
    )
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"keyword": "re:[", "category": "x"}]))
    with pytest.raises(ProfileError, match="bad regular expression"):
        load_keywords(str(bad))
