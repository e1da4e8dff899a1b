"""The memory tools: plain functions, each thin (arguments → one client call → a result
shaped to the result budget), listed with the copy a model reads in their module's
``TOOLS``. Each receives its vault binding by injection (``mcp_server/binding.py``), which is where
the scope ``scopes.yaml`` gives it is enforced; no tool names a scope."""
