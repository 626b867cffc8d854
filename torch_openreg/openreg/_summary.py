"""The table of ``memory_summary``: CUDA's layout, openreg's names.

Reads the flattened statistics dict only, so it can format any allocator's
``memory_stats()`` (every key of CUDA's must be present).
"""

from __future__ import annotations

from collections.abc import Mapping

_WIDTH = 75  # between the outer bars

_SIZE_UNITS = ("B  ", "KiB", "MiB", "GiB", "TiB", "PiB")
_COUNT_UNITS = (" ", "K", "M")

# (label, stats family, is a size, shows pools) in CUDA's order.
_ROWS = (
    ("Allocated memory", "allocated_bytes", True, True),
    ("Active memory", "active_bytes", True, True),
    ("Requested memory", "requested_bytes", True, True),
    ("Reserved memory", "reserved_bytes", True, True),
    ("Non-releasable memory", "inactive_split_bytes", True, True),
    ("Allocations", "allocation", False, True),
    ("Active allocs", "active", False, True),
    ("Reserved segments", "segment", False, True),
    ("Non-releasable allocs", "inactive_split", False, True),
    ("Oversize allocations", "oversize_allocations", False, False),
    ("Oversize segments", "oversize_segments", False, False),
)
_COLUMNS = ("current", "peak", "allocated", "freed")


def _scaled(value: int, reference: int, units: tuple[str, ...], step: int, limit: int) -> tuple[int, str]:
    # The unit is chosen by the row's peak, so a row's cells share one unit.
    unit = 0
    while unit + 1 < len(units) and reference >= limit:
        value //= step
        reference //= step
        unit += 1
    return value, units[unit]


def _format_size(value: int, reference: int) -> str:
    number, unit = _scaled(value, reference, _SIZE_UNITS, 1024, 768 * 1024)
    return f"{number:6d} {unit}"


def _format_count(value: int, reference: int) -> str:
    number, unit = _scaled(value, reference, _COUNT_UNITS, 1000, 750 * 1000)
    return f"{number:7d} {unit} "


def _line(text: str = "", fill: str = " ", center: bool = False) -> str:
    return "|" + (text.center(_WIDTH, fill) if center else text.ljust(_WIDTH, fill)) + "|"


def _row(label: str, stats: Mapping[str, int], prefix: str, is_size: bool) -> str:
    values = [int(stats[f"{prefix}.{column}"]) for column in _COLUMNS]
    reference = values[1]
    cells = [(_format_size if is_size else _format_count)(v, reference) for v in values]
    return "|" + f" {label:<22}" + "".join(f"| {cell} " for cell in cells) + "|"


def format_memory_summary(stats: Mapping[str, int], device: int, abbreviated: bool = False) -> str:
    """``stats`` is a flattened ``memory_stats()`` dict; raises KeyError naming a missing key."""
    separator = _line(fill="-")
    heavy = _line(fill="=")
    lines = [
        heavy,
        _line(f"PyTorch openreg memory summary, device ID {device}", center=True),
        separator,
        "|"
        + f"openreg OOMs: {stats['num_ooms']}".center(37)
        + "|"
        + f"orMalloc retries: {stats['num_alloc_retries']}".center(37)
        + "|",
        heavy,
        "|"
        + f" {'Metric':^22}"
        + "".join(f"| {name:^11}" for name in ("Cur Usage", "Peak Usage", "Tot Alloc", "Tot Freed"))
        + "|",
    ]
    for label, family, is_size, pooled in _ROWS:
        lines.append(separator)
        if pooled:
            lines.append(_row(label, stats, f"{family}.all", is_size))
            if not abbreviated:
                lines.append(_row("      from large pool", stats, f"{family}.large_pool", is_size))
                lines.append(_row("      from small pool", stats, f"{family}.small_pool", is_size))
        else:
            lines.append(_row(label, stats, family, is_size))
    lines.append(heavy)
    return "\n".join(lines) + "\n"
