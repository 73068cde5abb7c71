"""Which Python frames are the user's own code (not the standard library, not a package).

py-spy shortens file names by the sys.path entry they sit under, so a frame reads
`threading.py`, `torch/nn/modules/module.py` or `train.py`; speedscope files and
`--full-filenames` keep full paths. A frame is *library* when its file
- is one of py-spy's pseudo files (`<frozen runpy>`);
- on a full path, lies under `site-packages/`, `dist-packages/` or `lib/pythonX.Y/`;
- on a shortened path, starts with a standard-library module
  (`sys.stdlib_module_names`; a stdlib *package* such as `test` or `json` only as a
  folder, so a script `test.py` stays the user's) or a well-known installed package
  (`KNOWN_PACKAGES`: torch, numpy, ...);
- or starts with one of the extra library entries (AnalysisOptions.library, CLI
  `--library`, a run's library paths): a package or path prefix (`megatron`,
  `src/vendor/`) matched at the start of a shortened path or after any `/` of a full
  one, or an absolute prefix (`/opt/venv/`).
Every other Python frame is user code. Native frames never are.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable

from ..core.frames import is_python, split_location

KNOWN_PACKAGES = frozenset(
    """torch torchvision torchaudio torchtext torchdata functorch triton numpy scipy pandas
    sklearn transformers tokenizers datasets accelerate deepspeed apex megatron lightning
    pytorch_lightning lightning_fabric torchmetrics timm einops xformers flash_attn
    bitsandbytes peft trl safetensors huggingface_hub jax jaxlib flax optax tensorflow keras
    wandb tensorboard tqdm PIL cv2 h5py pyarrow omegaconf hydra ray dask numba cupy nvidia
    pybind11 six typing_extensions yaml fsspec filelock jinja2 sympy networkx mpmath
    packaging psutil requests urllib3 certifi google grpc setuptools pkg_resources
    importlib_metadata attr attrs pydantic click rich colorama sentencepiece webdataset
    composer streaming vllm mmengine mmcv detectron2 fairscale fairseq torchrec
    _pytest pytest pluggy py_spy""".split()
)
# Standard-library modules that are packages (folders): `test.py` is not one of them.
_STDLIB_PACKAGES = frozenset(
    """asyncio collections concurrent ctypes curses dbm distutils email encodings ensurepip
    html http idlelib importlib json lib2to3 logging multiprocessing pathlib pydoc_data re
    sqlite3 sysconfig test tkinter tomllib turtledemo unittest urllib venv wsgiref xml
    xmlrpc zoneinfo""".split()
)
_FULL_LIBRARY = re.compile(r"/(site-packages|dist-packages|lib(64)?/python\d+(\.\d+)?t?)/")
_LINE = re.compile(r":\d+\Z")


class UserCode:
    """The "your own code" test, with extra library entries (see the module doc)."""

    def __init__(self, library: Iterable[str] = ()) -> None:
        self.library = tuple(sorted({e.strip() for e in library if e and e.strip()}))
        self._absolute = tuple(e for e in self.library if e.startswith("/"))
        self._relative = tuple(e.rstrip("/") for e in self.library if not e.startswith("/"))
        self._seen: dict[str, bool] = {}

    def is_user(self, frame: str) -> bool:
        """True for a Python frame whose file is not library code."""
        found = self._seen.get(frame)
        if found is None:
            found = self._seen[frame] = is_python(frame) and not self.is_library_file(
                file_of(frame)
            )
        return found

    def is_library_file(self, file: str) -> bool:
        """True when `file` (a shortened or full path, no line) is library code."""
        if file.startswith("<"):
            return file.startswith("<frozen")
        full = file.startswith("/") or file[1:3] in (":\\", ":/")
        path = file.replace("\\", "/")
        if full:
            return bool(_FULL_LIBRARY.search(path)) or self._extra_full(path)
        return _default_relative(path) or any(_under(path, e) for e in self._relative)

    def _extra_full(self, path: str) -> bool:
        if any(path.startswith(e) for e in self._absolute):
            return True
        return any(f"/{e}/" in path or path.endswith(f"/{e}.py") for e in self._relative)


def _under(path: str, entry: str) -> bool:
    return path == entry or path.startswith(entry + "/") or path == entry + ".py"


def _default_relative(path: str) -> bool:
    head, sep, _ = path.partition("/")
    if sep:
        return head in sys.stdlib_module_names or head in KNOWN_PACKAGES
    module = head.removesuffix(".py")
    if module in _STDLIB_PACKAGES:
        return False
    return module in sys.stdlib_module_names or module in KNOWN_PACKAGES


def file_of(frame: str) -> str:
    """The file of `name (file.py:N)`, without the line number."""
    return _LINE.sub("", split_location(frame)[1])


_DEFAULT = UserCode()


def is_user_frame(frame: str, library: Iterable[str] = ()) -> bool:
    """True when `frame` is the user's own code under the default spec plus `library`."""
    library = tuple(library)
    return (UserCode(library) if library else _DEFAULT).is_user(frame)
