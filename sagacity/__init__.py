"""sagacity core: journal, chain, phases, tools, approvals, audit. Never imports temporalio."""
