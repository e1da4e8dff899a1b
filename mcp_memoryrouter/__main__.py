from mcp_memoryrouter.cli import main

main()
