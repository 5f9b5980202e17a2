"""Errors the command line turns into exit code 2 (usage or configuration)."""


class ConfigError(Exception):
    """A configuration or data file is wrong.

    The message names the file, the key path and, where known, the line, so
    an engineer can fix it without reading our code.
    """

    def __init__(self, path, message, line=None, keypath=None):
        self.path = str(path)
        self.line = line
        self.keypath = keypath
        where = self.path if line is None else f"{self.path}:{line}"
        if keypath:
            where += f": {keypath}"
        super().__init__(f"{where}: {message}")
