"""sagacity: safe real-world actions for AI agents.

Most users need two modules: this one, to declare tools and open a journal, and
`sagacity.worker`, for the Temporal side (the `Saga` a workflow opens, the plugin a worker
adds, the client that starts sagas and approves their steps). The packages below hold the
rest, each a small public `__init__` over private modules: `tools`, `journal`, `stores`,
`approval`, `audit`, `tlog`, `text`, `contrib` (framework adapters); `activities`,
`workflows` and `worker` are the Temporal layers.

Never imports temporalio (a test pins it): the core is engine-agnostic, which is what
makes another engine or framework adapter possible.
"""

from __future__ import annotations

from sagacity._data_home import default_journal_url
from sagacity._errors import (
    JournalError,
    SagacityError,
    SagaClosedError,
    StoreUnavailableError,
    ToolboxError,
    ToolInputError,
)
from sagacity.approval._policy import ApprovalPolicy, ArgRule
from sagacity.journal._entry import JournalEntry
from sagacity.journal._phases import Phase, SagaStatus
from sagacity.stores import JournalStore, open_store
from sagacity.tools._decorators import (
    CompensationContext,
    ToolContext,
    compensable,
    compensation,
    irreversible,
    tool,
)
from sagacity.tools._toolbox import Toolbox

__all__ = [
    "ApprovalPolicy",
    "ArgRule",
    "CompensationContext",
    "JournalEntry",
    "JournalError",
    "JournalStore",
    "Phase",
    "SagaClosedError",
    "SagaStatus",
    "SagacityError",
    "StoreUnavailableError",
    "ToolContext",
    "ToolInputError",
    "Toolbox",
    "ToolboxError",
    "compensable",
    "compensation",
    "default_journal_url",
    "irreversible",
    "open_store",
    "tool",
]
