"""The ctypes binding of libkiln's reader API (include/kiln/reader.h).

Only declarations live here: every rule (which version a name means, which
shards a worker reads, hash verification, decompression, the cursor state)
is libkiln's C code. The library is found through $KILN_LIBRARY (a path),
else LIBDIR/libkiln.so.1 when kiln/_config.py names the libdir it was
configured with (`make install` and `make python-wheel` write it; a
`pip install ./python` from the source tree has none), else the dynamic
linker's search for libkiln.so.1 ($LD_LIBRARY_PATH, the ldconfig cache,
/usr/lib; run ldconfig after installing under /usr/local), else
ctypes.util.find_library("kiln"). The wheel never bundles the library. At import
the library's kiln_library_version_number() must name LIBRARY_VERSION's
major and minor (the patch may differ): the declarations below are that
release's layouts, and a library of another release is an ImportError,
never a misread structure; so is one of this release that lacks a function
declared here (an older build).
"""

import ctypes
import ctypes.util
import os

SPLITS = ("train", "dev", "test")

# The libkiln release these declarations match (configure.ac's AC_INIT
# version, major and minor), and the option layouts (KILN_*_OPTIONS_VERSION).
LIBRARY_VERSION = (0, 1)
CURSOR_OPTIONS_VERSION = 1


class Error(Exception):
    """A libkiln error: `code` is the KILN_E* value, the message its one line."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class InvalidError(Error, ValueError):
    """KILN_EINVALID: a bad name, argument or state, a malformed manifest,
    a shard whose bytes do not match its name, or a closed version."""


class NotFoundError(Error, LookupError):
    """KILN_ENOTFOUND: no such repository, version or object."""


class RetryError(Error, OSError):
    """KILN_ERETRY: the store failed after its retries (transient)."""


_ERRORS = {-1: InvalidError, -2: NotFoundError, -5: RetryError}


class Shard(ctypes.Structure):
    _fields_ = [
        ("hash", ctypes.c_char * 65),
        ("bytes", ctypes.c_uint64),
        ("raw_bytes", ctypes.c_uint64),
        ("records", ctypes.c_uint64),
        ("key", ctypes.c_char * 96),
        ("url", ctypes.c_char_p),
    ]


class SplitStats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("records", "shards", "bytes", "raw_bytes")]


class Stats(ctypes.Structure):
    _fields_ = [
        ("records_in", ctypes.c_uint64),
        ("valid", ctypes.c_uint64),
        ("quarantined", ctypes.c_uint64),
        ("splits", SplitStats * len(SPLITS)),
        ("erased", ctypes.c_uint64),
    ]


DEFINITION_FIELDS = (
    "contract_id", "contract_version", "token_scheme", "key_id", "key_version",
    "split_scheme", "split_key", "split_salt", "shard_format", "shard_compression",
)


class Definition(ctypes.Structure):
    _fields_ = [(n, ctypes.c_char_p) for n in DEFINITION_FIELDS]


class Trust(ctypes.Structure):
    _fields_ = [
        ("signature", ctypes.c_int),
        ("trusted", ctypes.c_int),
        ("must_be_signed", ctypes.c_int),
        ("fingerprint", ctypes.c_char * 64),
        ("problems", ctypes.c_uint),
        ("shards_ok", ctypes.c_uint64),
    ]


class CursorOptions(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("split", ctypes.c_int),
        ("rank", ctypes.c_uint),
        ("world", ctypes.c_uint),
        ("seed", ctypes.c_uint64),
        ("shuffle", ctypes.c_bool),
        ("epoch", ctypes.c_uint64),
        ("shuffle_buffer", ctypes.c_size_t),
    ]


REPORT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)

_P = ctypes.c_void_p
_SIGNATURES = [
    ("kiln_error_last", ctypes.c_char_p, []),
    ("kiln_reader_open", ctypes.c_int,
     [ctypes.POINTER(_P), ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, _P]),
    ("kiln_reader_close", None, [_P]),
    ("kiln_reader_dataset", ctypes.c_char_p, [_P]),
    ("kiln_reader_commit", ctypes.c_char_p, [_P]),
    ("kiln_reader_ref", ctypes.c_char_p, [_P]),
    ("kiln_reader_shards", ctypes.c_int,
     [_P, ctypes.c_int, ctypes.POINTER(ctypes.POINTER(Shard)), ctypes.POINTER(ctypes.c_size_t)]),
    ("kiln_reader_read_stats", ctypes.c_int, [_P, ctypes.POINTER(Stats)]),
    ("kiln_reader_read_definition", ctypes.c_int, [_P, ctypes.POINTER(Definition)]),
    ("kiln_reader_verify", ctypes.c_int,
     [_P, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(Trust), REPORT, _P]),
    ("kiln_cursor_open", ctypes.c_int, [ctypes.POINTER(_P), _P, ctypes.POINTER(CursorOptions)]),
    ("kiln_cursor_close", None, [_P]),
    ("kiln_cursor_next_batch", ctypes.c_int,
     [_P, ctypes.c_size_t, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p),
      ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]),
    ("kiln_cursor_batch_format", ctypes.c_int,
     [_P, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)]),
    ("kiln_cursor_state_at", ctypes.c_int, [_P, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t]),
    ("kiln_cursor_records", ctypes.c_uint64, [_P]),
    ("kiln_cursor_yielded", ctypes.c_uint64, [_P]),
    ("kiln_cursor_restore", ctypes.c_int, [_P, ctypes.c_char_p]),
]


def _check_version(lib, path):
    want = "%d.%d" % LIBRARY_VERSION
    try:
        number = lib.kiln_library_version_number
        number.restype, number.argtypes = ctypes.c_uint, []
        name = lib.kiln_library_version
        name.restype, name.argtypes = ctypes.c_char_p, []
    except AttributeError:
        raise ImportError(
            "kiln: %s has no kiln_library_version_number (a libkiln from before the version "
            "query, or not libkiln): this binding needs libkiln %s.x" % (path, want)) from None
    got = number()
    if (got // 10000, got // 100 % 100) != LIBRARY_VERSION:
        raise ImportError(
            "kiln: %s is libkiln %s, this binding needs libkiln %s.x: install the python/kiln of "
            "the same kiln release, or point KILN_LIBRARY at its libkiln.so.1"
            % (path, (name() or b"?").decode("ascii", "replace"), want))


def _configured_libdir():
    """The libdir kiln/_config.py names (None when there is no _config.py)."""
    try:
        from ._config import LIBDIR  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None
    return LIBDIR or None


def _candidates():
    """Where libkiln is looked for, in order (see the module's docstring);
    a generator: find_library (it runs ldconfig) only when the others fail."""
    env = os.environ.get("KILN_LIBRARY")
    if env:
        yield env  # asked for: no other library is tried
        return
    libdir = _configured_libdir()
    if libdir and os.path.exists(os.path.join(libdir, "libkiln.so.1")):
        yield os.path.join(libdir, "libkiln.so.1")
    yield "libkiln.so.1"
    name = ctypes.util.find_library("kiln")
    if name and name != "libkiln.so.1":
        yield name


def _load():
    tried = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(str(e))
            continue
        _check_version(lib, path)
        break
    else:
        libdir = _configured_libdir()
        raise ImportError(
            "kiln: cannot load libkiln (%s): install kiln (make install; ldconfig), set "
            "LD_LIBRARY_PATH to the directory of libkiln.so.1, or KILN_LIBRARY to its path%s"
            % ("; ".join(tried), " (kiln/_config.py names libdir %s)" % libdir if libdir else "")) from None
    for name, restype, argtypes in _SIGNATURES:
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise ImportError(
                "kiln: %s has no %s (a libkiln of an older build of this release): install the "
                "python/kiln of the same kiln build, or point KILN_LIBRARY at its libkiln.so.1"
                % (path, name)) from None
        fn.restype = restype
        fn.argtypes = argtypes
    return lib, path


# the library, and the path (or soname) it was loaded from
lib, library_path = _load()


def check(rc):
    """rc if it is not negative, else the libkiln error as an exception."""
    if rc < 0:
        raise _ERRORS.get(rc, Error)(rc, lib.kiln_error_last().decode("utf-8", "replace"))
    return rc


def text(b):
    return b.decode("utf-8", "replace") if b is not None else None
