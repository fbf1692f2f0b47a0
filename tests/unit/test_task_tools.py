"""The tools the gateway runs as tasks exist, under these names, in the tool registry: a rename there must not
silently turn a long tool back into a request held open."""

from memento_gateway.mcp.tasks import LONG
from memento_shared.tools.registry import TOOLS


def test_every_long_tool_is_a_tool():
    assert LONG <= set(TOOLS)
    assert {TOOLS[name].profile for name in LONG} == {"fragments", "protocol", "lifecycle"}
