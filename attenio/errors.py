"""The one exception type a user's bad input turns into.

The CLI prints its message as one line on stderr and exits with status 2; the
library raises it wherever a configuration cannot be honoured.
"""


class ConfigError(ValueError):
    """A workload, budget, format or file the generator cannot work with."""
