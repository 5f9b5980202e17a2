"""Shell words for the job and build scripts ReFrame writes.

Every path or value we interpolate into a script line goes through here, so
a space or a ``$(...)`` in a site's path is data, never a command.
"""

import shlex


def quote(arg):
    return shlex.quote(str(arg))


def shell_path(path):
    """*path* as one shell word.  A dry run's placeholder prefix is a command
    substitution we made ourselves, which must stay expandable (double
    quotes)."""
    path = str(path)
    if path.startswith('$(spack ') and path.count('$(') == 1:
        return '"' + path.replace('\\', '\\\\').replace('"', '\\"') + '"'
    return shlex.quote(path)
