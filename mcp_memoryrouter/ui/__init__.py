"""The memory explorer: web pages at ``/ui`` to see, trust and tidy a vault."""
