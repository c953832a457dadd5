"""The config file is read as a file an operator may get wrong: a FIFO with no writer, a device,
a huge file, one not UTF-8, or one nested deeper than the TOML parser's stack is refused in one
line naming it (exit 2 through ``fairdeck serve``), never a hang or a RecursionError traceback."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from fairdeck_server.run import config


def refusal(path: Path) -> str:
    with pytest.raises(config.ConfigError) as refused:
        config.load({}, {}, str(path))
    return str(refused.value)


def test_a_config_nested_too_deep_is_refused_not_a_recursion_error(tmp_path: Path) -> None:
    """tomllib recurses per level: 100,000 nested arrays ended in a RecursionError traceback."""
    for body in (
        "listen = " + "[" * 100_000 + "]" * 100_000,
        "listen = " + "{a=" * 50_000 + "1" + "}" * 50_000,
    ):
        path = tmp_path / "deep.toml"
        path.write_text(body + "\n")
        assert refusal(path) == f"config file {path}: not valid TOML: nested too deep"


def test_a_device_or_a_huge_file_is_not_read_whole(tmp_path: Path) -> None:
    assert refusal(Path("/dev/zero")) == "config file /dev/zero: not a regular file"
    huge = tmp_path / "huge.toml"
    huge.write_bytes(b"# " + b"x" * config.MAX_CONFIG_BYTES + b"\n")
    assert "larger than 1,048,576 bytes" in refusal(huge)
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\x7fELF\xd0\xff")
    assert refusal(binary) == f"config file {binary}: not valid TOML: it is not UTF-8"


def test_a_fifo_with_no_writer_reads_as_empty_and_does_not_hang(tmp_path: Path) -> None:
    """open() of a FIFO waits for a writer: FAIRDECK_CONFIG naming one hung the dealer at start.
    A pipe that has a writer (``--config <(...)``) is read as any file."""
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    loaded: list[config.Settings] = []
    reader = threading.Thread(target=lambda: loaded.append(config.load({}, {}, str(fifo))), daemon=True)
    reader.start()
    reader.join(timeout=20)  # a bound, not a wait: it returns at once, or hangs for ever
    assert not reader.is_alive(), "reading the config file hangs on a FIFO with no writer"
    assert loaded[0].sources["listen"] == "default"
