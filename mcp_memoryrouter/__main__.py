from mcp_memoryrouter.commands import main

main()
