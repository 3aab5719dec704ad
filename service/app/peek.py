"""What `pgcdc peek` decodes with: test_decoding's text, without pgcdc's own messages.

Receives: the decoding driver's plugin callbacks, as `TestDecodingPlugin` does. Hands
on: the same lines, except for logical messages whose prefix is pgcdc's
(`service.schema.history.DDL_PREFIXES`, the DDL capture's table definitions of about
1 kB each, or anything under `INTERNAL_PREFIX`, `__pgcdc.`: snapshot watermarks and
signals). The worker publishes none of these as messages (connectors.avro.plugin:
kafka.publish_ddl_messages aside), so peek hides them too; `peek --show-internal`
uses the plain `TestDecodingPlugin`. A hidden transactional message opens no
transaction either: with skip-empty-xacts, a transaction holding only such a message
prints nothing, as one holding no change at all.
"""

from __future__ import annotations

from service.output.api import Message, PluginContext, TxnInfo
from service.output.text import TestDecodingPlugin
from service.schema.history import DDL_PREFIXES, INTERNAL_PREFIX


def is_internal(prefix: str) -> bool:
    """A logical message pgcdc itself wrote (see the module docstring)."""
    return prefix in DDL_PREFIXES or prefix.startswith(INTERNAL_PREFIX)


class PeekPlugin(TestDecodingPlugin):
    """TestDecodingPlugin without pgcdc's own logical messages."""

    __test__ = False

    def message(self, ctx: PluginContext, txn: TxnInfo | None, message: Message) -> None:
        if not is_internal(message.prefix):
            super().message(ctx, txn, message)

    def stream_message(self, ctx: PluginContext, txn: TxnInfo, message: Message) -> None:
        if not is_internal(message.prefix):
            super().stream_message(ctx, txn, message)
