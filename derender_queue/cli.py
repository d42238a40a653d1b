"""Old path of the `derender` console script; the commands live in `derender_queue.commands`."""

from derender_queue.commands.cli import main

__all__ = ["main"]
