"""A cheaper stack walk for ReFrame's deprecation warnings (ReFrame 4.10).

ReFrame copies every loggable attribute of a check into every log record
(``_update_check_extras`` in ``reframe.core.logging``), the deprecated alias
``variables`` among them.  Reading a deprecated field calls
``reframe.core.warnings.user_deprecation_warning``, which builds
``inspect.stack()`` -- the source lines of every frame, and a scan of
``sys.modules`` per frame -- only to find the stack level of a warning that
the logger suppresses anyway.  On this project's checks that was half the
CPU time of a dry run of the ``local`` site (15 s, 7 s without it), and in a
real run the ReFrame process spinning on a core beside the benchmarks.

The replacement finds the same stack level (the first frame outside the
``reframe`` package) by walking the frames and reading their module names,
and warns under the same version rule.  It is applied when the check library
is imported, that is inside the ReFrame process only.
"""

import functools
import sys
import warnings

import reframe
import semver
from reframe.core import warnings as rfm_warnings

_ORIGINAL = rfm_warnings.user_deprecation_warning


def _release(version):
    # ReFrame promotes a prerelease to its release, so that a 4.11-dev
    # warns as 4.11 does.
    info = semver.VersionInfo.parse(version)
    return semver.VersionInfo(info.major, info.minor, info.patch)


_RUNNING = _release(reframe.VERSION)
# Called on every log record: each scheduled version is parsed once.
_since = functools.lru_cache(maxsize=None)(semver.VersionInfo.parse)


def user_deprecation_warning(message, from_version='0.0.0'):
    """``reframe.core.warnings.user_deprecation_warning`` without
    ``inspect.stack()``: the warning points at the first frame outside
    ReFrame, as ReFrame's own does."""
    level = 2   # warnings.warn's stacklevel 1 is this frame, 2 its caller
    frame = sys._getframe(1)
    while frame is not None and str(frame.f_globals.get('__name__', '')).startswith('reframe'):
        level += 1
        frame = frame.f_back
    if (rfm_warnings._RAISE_DEPRECATION_ALWAYS or
            _RUNNING >= _since(from_version)):
        warnings.warn(message, rfm_warnings.ReframeDeprecationWarning, stacklevel=level)


def apply():
    """Bind the cheaper function wherever ReFrame imported the original
    (``from reframe.core.warnings import user_deprecation_warning``)."""
    for name, module in list(sys.modules.items()):
        if (name == 'reframe' or name.startswith('reframe.')) and \
                getattr(module, 'user_deprecation_warning', None) is _ORIGINAL:
            module.user_deprecation_warning = user_deprecation_warning
