"""A text progress bar on stderr (no dependencies).

On a terminal it redraws one line in place. Elsewhere (a log, a pipe) it
writes a line at most once a second, and the last state when closed, so logs
stay short but still show progress.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    def __init__(
        self, total: int, label: str, stream: TextIO | None = None, width: int = 28, min_interval_s: float = 1.0
    ):
        self.total = max(total, 1)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.done = 0
        self.note = ""
        self._interactive = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._min_interval_s = min_interval_s
        self._last_write = float("-inf")
        self._started = time.monotonic()
        self._last_length = 0

    def update(self, done: int | None = None, note: str | None = None) -> None:
        if done is not None:
            self.done = min(done, self.total)
        if note is not None:
            self.note = note
        now = time.monotonic()
        if self._interactive:
            self._write(self.render())
        elif self.done < self.total and now - self._last_write >= self._min_interval_s:
            self._write(self.render())  # the final state is written once, by close()
            self._last_write = now

    def render(self) -> str:
        filled = self.width * self.done // self.total
        bar = "#" * filled + "." * (self.width - filled)
        elapsed = time.monotonic() - self._started
        line = f"{self.label} [{bar}] {self.done}/{self.total} {elapsed:5.1f}s"
        return f"{line}  {self.note}" if self.note else line

    def _write(self, line: str) -> None:
        if self._interactive:
            padding = " " * max(0, self._last_length - len(line))
            self.stream.write("\r" + line + padding)
            self._last_length = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def clear(self) -> None:
        """Blanks the bar's line on a terminal, so that others' output starts on a clean line; update() redraws."""
        if self._interactive and self._last_length:
            self.stream.write("\r" + " " * self._last_length + "\r")
            self.stream.flush()
            self._last_length = 0

    def close(self) -> None:
        """Writes the last state and ends the line."""
        if self._interactive:
            self.stream.write("\n")
        else:
            self.stream.write(self.render() + "\n")
        self.stream.flush()

    def __enter__(self) -> ProgressBar:
        self.update()
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False
