"""The ops-by-path table in csrc/backend/README.md is the one the code generates."""

from __future__ import annotations

import subprocess
import sys

import pytest

from torch_openreg import ops


def test_readme_table_is_generated_from_the_registered_kernels():
    table = ops.classify()
    documented = ops.readme_section(ops.README.read_text())
    assert documented == ops.markdown(table), (
        "csrc/backend/README.md's ops table is stale: run python -m torch_openreg.ops --update-readme"
    )


def test_the_command_prints_the_same_table():
    printed = subprocess.run(
        [sys.executable, "-m", "torch_openreg.ops", "--markdown"],
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    ).stdout
    assert printed == ops.markdown(ops.classify())


@pytest.mark.parametrize(
    "op, kernel",
    [
        ("aten::convolution_overrideable", "conv{1,2,3}d_fwd / conv_transpose{1,2,3}d_fwd"),
        (
            "aten::convolution_backward_overrideable",
            "conv*_bwd_data + conv*_bwd_filter + conv_bwd_bias_reduce",
        ),
        ("aten::_thnn_fused_lstm_cell", "lstm_cell_fwd_fused"),
        ("aten::_thnn_fused_lstm_cell_backward_impl", "lstm_cell_bwd_fused"),
        ("aten::_thnn_fused_gru_cell", "gru_cell_fwd_fused"),
        ("aten::_thnn_fused_gru_cell_backward", "gru_cell_bwd_fused"),
        ("aten::native_batch_norm_backward", "batch_norm_bwd"),
    ],
)
def test_network_ops_are_device_ops(op, kernel):
    assert ops.classify()[op] == ("device", kernel)


def test_update_rewrites_only_the_generated_section(tmp_path):
    table = ops.classify()
    readme = tmp_path / "README.md"
    readme.write_text(f"# title\n\nbefore\n{ops.BEGIN_MARKER}\n| stale |\n{ops.END_MARKER}\nafter\n")
    assert ops.update_readme(readme, table)
    text = readme.read_text()
    assert text.startswith("# title\n\nbefore\n") and text.endswith(f"{ops.END_MARKER}\nafter\n")
    assert ops.readme_section(text) == ops.markdown(table)
    assert not ops.update_readme(readme, table)  # already current
    readme.write_text("no markers\n")
    with pytest.raises(ValueError, match="markers"):
        ops.update_readme(readme, table)
