"""toolwire: the OpenAI Responses API in front of Chat Completions, Responses and Anthropic Messages backends.

The package is a sans-I/O core (``toolwire.protocol``, ``toolwire.tools``,
``toolwire.translate``) wrapped in a thin I/O shell (``toolwire.server``,
``toolwire.upstream``, ``toolwire.cli``).
"""

__version__ = "0.1.0"
